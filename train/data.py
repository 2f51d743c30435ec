"""Programmatic SFT data: local contexts paired with canonical targets, written as JSONL plus a manifest.

Rows come from playing the environment itself: the builder drives the same session the env runs (on
the sim backend) with reference records (``reference``: the canonical targets of
``gencoord_env.tasks.references``; for free-form, the rule agent's utterances), and each row pairs the
observation the env showed the deciding agent with the record it played. Prompts therefore equal the
env's observations by construction. No language-model teacher and no hand-written requests: targets
come from the executable template contract; the builder checks that each target maps back to the
intended binding, and every episode it plays must end in ``SUCCESS``.

Each set is a row of :data:`DATASETS`: the episodes it plays, the route, and the output format of its
targets (:mod:`gencoord_env.agents.formats`). Its row count follows from those (:func:`expected_rows`: the
route's decisions per episode times the episodes, plus the clarifying turns of free-form), so the counts
below are what the package's ``tasks.json`` gives, and a template added there adds its rows to every set:

| set | pool | rows | stages |
| --- | --- | --- | --- |
| ``forward`` | train | 1,920 | 960 sender_initial + 960 receiver_after_request |
| ``forward_json`` | train | 1,920 | the same records on the GenCoord-JSON surface |
| ``single_step`` | train | 2,880 | 960 sender_initial (one task) + 960 sender_after_obtain + 960 receiver_after_request |
| ``factor_code`` | train | 1,920 | 960 sender code (``active_binding_id``) + 960 receiver code (``accepted_binding_id``) |
| ``gc_requester`` | gc_train | 640 | 320 requester_initial + 320 requester_after_response |
| ``gc_centralized`` | gc_train | 320 | 320 centralized joint plans from the merged views |
| ``freeform`` | train | 2,400 | 960 sender_initial + 240 receiver_question + 240 sender_answer + 960 receiver_after_request |

Procedural sets (pretraining; their size is a parameter, ``rows``, default :data:`PROCEDURAL_ROWS`):

| set | pool | rows | stages |
| --- | --- | --- | --- |
| ``procedural`` | procedural | ``rows`` | ``rows/2`` sender_initial + ``rows/2`` receiver_after_request |
| ``procedural_factor_code`` | procedural | ``rows`` | the same episodes, Factor-Code targets |

They are played like ``forward`` over the first ``rows/2`` episodes of ``pool="procedural"`` with
``pool_seed=seed`` (``gencoord_env.tasks.procedural``: generated templates, never a held-out template or
a crossproduct combination), so ``rows`` is a multiple of 8 (one matched pair: 2 bindings x 2 role
permutations x 2 stages). Item ``k`` of the pool is a pure function of ``(seed, k)``, so the rows are the
same whatever ``workers`` builds them.

``gc_train`` is the training side of the Goal x Capability suite. The evaluation pool crosses two goals,
two workcell modes and the prior's ten world variants (40 clusters); the paper's 320 rows per stage need
160 training clusters, so the training side crosses the same goals and modes with 40 further world
variants (``training_variants``): the 40 (shift, mirror) layouts the ten evaluation variants do not use,
so every training context differs from every evaluation context. These episodes carry an
extended prior and can be run in the env as a custom pool (``gc_train_episodes``).

``freeform`` is the controlled free-form dialogue (``surface="freeform"``): one row per utterance, the
prompt being the observation the env shows at that turn (the conversation so far in its messages), the
target the utterance in the surface's wording (``gencoord_env.freeform.say_*``) over the canonical
reference paths. Episodes whose family clarifies (``freeform.clarifies``: recipe, two of the eight
templates) have four turns (opening, the receiver's question, the sender's answer, the receiver's
commitment), the others two: 960 episodes x 2.5 turns = 1,200 sender + 1,200 receiver rows, the paper's
count.

Example::

    manifest = build_all("runs/data")          # writes forward.jsonl, ..., manifest.json
    rows = load_rows("runs/data/forward.jsonl")
    build_all("runs/pre", ["procedural"], rows=32_000, workers=8)
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import os
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gencoord_env import FailureCode, dsl, freeform
from gencoord_env.agents.formats import OutputFormat, output_format
from gencoord_env.agents.freeform import FreeformRule
from gencoord_env.envs.gencoord.gencoord import raw_env
from gencoord_env.envs.gencoord.routes import ROUTES
from gencoord_env.caches import cache
from gencoord_env.errors import DataError, UnknownName, UsageError
from gencoord_env.lifecycle import DecisionStage
from gencoord_env.tasks import Cluster, Episode, pool as load_pool
from gencoord_env.tasks import references as ref
from gencoord_env.tasks.contexts import Context
from gencoord_env.tasks.prior import GOAL_CAPABILITY, Prior, WorldVariant, prior
from gencoord_env.tasks.procedural import procedural_episodes
from gencoord_env.types import Proposal

__all__ = [
    "DATASETS",
    "PROCEDURAL",
    "PROCEDURAL_ROWS",
    "DataSet",
    "Row",
    "as_factor_code",
    "build_all",
    "build_set",
    "data_set",
    "expected_rows",
    "factor_code_target",
    "file_sha256",
    "gc_train_episodes",
    "load_rows",
    "procedural_rows",
    "reference",
    "rows_format",
    "training_variants",
]

#: Default size of a procedural set: 4,000 matched pairs of generated templates.
PROCEDURAL_ROWS = 32_000
#: Rows of one matched pair on the forward route: 2 bindings x 2 role permutations x 2 stages.
ROWS_PER_PAIR = 8

#: Extra world variants for Goal x Capability training (2 goals x 2 modes x 40 = 160 clusters).
GC_TRAIN_VARIANTS = 40


@dataclass(frozen=True)
class Row:
    """One supervised record: what the deciding agent sees, and what it should answer."""

    id: str
    set: str
    stage: str
    route: str
    surface: str
    episode: str
    agent: str
    binding: str
    prompt: str
    target: str

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False, sort_keys=True)


# --------------------------------------------------------------------------- reference play


def factor_code_target(stage: str, binding: str) -> str:
    """The Factor-Code target of a forward stage: the one binding code, named by its field."""
    target = output_format("factor_code").target
    assert target is not None
    return target(stage, binding, "")


def _checked(target: Proposal, binding: str, where: str) -> Proposal:
    got = ref.binding_of(target)
    if got is not None and got != binding:
        raise AssertionError(f"{where}: the target selects binding {got!r}, expected {binding!r}")
    return target


def reference(episode: Episode, context: Context) -> Proposal | None:
    """The canonical record for ``context``'s decision in ``episode`` (an oracle: it reads the episode).

    The receiver realizes the request it was actually delivered; the requester revises by the response
    it actually received. None where the protocol leaves nothing to decide (a REJECT).
    """
    stage = context.stage
    if stage == DecisionStage.SENDER_INITIAL:
        return ref.sender_single_step(episode) if context.route == "single_step" else ref.sender_initial(episode)
    if stage == DecisionStage.SENDER_AFTER_OBTAIN:
        return ref.sender_after_obtain(episode)
    if stage == DecisionStage.RECEIVER_AFTER_REQUEST:
        if context.request is None:
            raise AssertionError(f"{episode.id}: the receiver decides without a delivered request")
        return ref.receiver_after_request(context.request)
    if stage == DecisionStage.REQUESTER_INITIAL:
        return ref.requester_initial(episode)
    if stage == DecisionStage.REQUESTER_AFTER_RESPONSE:
        r = context.response
        if r is None:
            raise AssertionError(f"{episode.id}: the requester revises without a response")
        return ref.requester_after_response(episode, r.decision, r.counter_offer_id)
    if stage == DecisionStage.CENTRALIZED:
        return ref.centralized(episode)
    raise UsageError(f"no reference record for stage {stage!r}")


def _play(episodes: Sequence[Episode], route: str, surface: str = "dsl") -> Iterator[tuple[Episode, str, Context, str, str]]:
    """Drive the env over ``episodes`` with reference records; yield (episode, prompt, context, action, stage label).

    The prompt is exactly the observation the env showed the deciding agent. Every episode must end in
    ``SUCCESS``: a reference that does not execute is a bug in the data, not a row.
    """
    env = raw_env(pool=list(episodes), backend="sim", route=route, surface=surface, seed=None)
    speak = None
    if surface == "freeform":
        speak = FreeformRule()
    for k, episode in enumerate(episodes):
        obs, infos = env.reset(options={"index": k})
        turns = 0
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            ctx: Context = infos[turn]["context"]
            if speak is not None:
                action = speak.act(obs[turn], infos[turn])
                label = _dialogue_label(turns, turn == episode.first, action)
            else:
                q = reference(episode, ctx)
                assert q is not None
                if ctx.stage != DecisionStage.REQUESTER_INITIAL:  # the initial request precedes the capability response
                    _checked(q, episode.binding, f"{episode.id}/{ctx.stage}")
                action = dsl.format(q) if surface == "dsl" else dsl.to_json(q)
                label = ctx.stage
            yield episode, obs[turn], ctx, action, label
            obs, _, _, _, infos = env.step({turn: action})
            turns += 1
        info = infos[episode.first]
        if info["outcome"] is not FailureCode.SUCCESS:
            raise DataError(f"{episode.id}: reference play ended in {info['outcome']}: {info['reason']}")
    env.close()


def _dialogue_label(turn: int, first: bool, utterance: str) -> str:
    """A free-form row's label: the decision stage it stands for, or the dialogue's own turns (an answer, a question)."""
    if turn == 0:
        return DecisionStage.SENDER_INITIAL.value
    if first:
        return "sender_answer"
    return "receiver_question" if freeform.is_question(utterance) else DecisionStage.RECEIVER_AFTER_REQUEST.value


def _row(set_name: str, stage: str, route: str, surface: str, ep: Episode, agent: str, prompt: str, target: str) -> Row:
    return Row(f"{set_name}/{ep.id}/{stage}", set_name, stage, route, surface, ep.id, agent, ep.binding, prompt, target)


def _rows(set_name: str, episodes: Sequence[Episode], route: str, fmt: OutputFormat | None = None) -> Iterator[Row]:
    """The rows of ``episodes`` played on ``route`` in ``fmt``'s surface (default: the set's format), each target
    written by ``fmt``."""
    fmt = fmt or data_set(set_name).output_format
    if fmt.target is None:
        raise UsageError(f"the {fmt.name} format ({fmt.title}) has no target builder of its own; its rows are "
                         "built from another set's")
    for ep, prompt, ctx, action, label in _play(episodes, route, fmt.surface):
        yield _row(set_name, label, route, fmt.surface, ep, ctx.agent, prompt, fmt.target(label, ep.binding, action))


# --------------------------------------------------------------------------- Goal x Capability training side


def training_variants(n: int = GC_TRAIN_VARIANTS, seed: int = 0) -> tuple[WorldVariant, ...]:
    """``n`` world variants whose layouts differ from every one of the prior's, drawn deterministically.

    Same ranges as the prior's variants (shifts within +-2 blocks, mirrored or not, cook time 20/30/40
    ticks), so layouts stay inside the arena. The cook time is not visible in any context, so a variant
    counts as new only when its (shift, mirror) geometry is: the 5 x 5 shifts x 2 mirrorings leave
    exactly 40 geometries unused by the ten evaluation variants.
    """
    taken = {(v.shift, v.mirror) for v in prior().variants}
    geometries = [((dx, dz), mirror) for dx in range(-2, 3) for dz in range(-2, 3) for mirror in (False, True)
                  if ((dx, dz), mirror) not in taken]
    rng = random.Random(f"gc_train:{seed}")
    rng.shuffle(geometries)
    if n > len(geometries):
        raise UsageError(f"only {len(geometries)} unused world geometries exist, asked for {n}")
    return tuple(WorldVariant(f"T{i:02d}", shift, mirror, rng.choice((20, 30, 40)))
                 for i, (shift, mirror) in enumerate(geometries[:n]))


@cache(maxsize=4)
def _gc_train_prior(seed: int) -> Prior:
    base = prior()
    return dataclasses.replace(base, variants=base.variants + training_variants(seed=seed))


def gc_train_episodes(seed: int = 0) -> tuple[Episode, ...]:
    """The Goal x Capability training episodes: 2 goals x 2 modes x 40 training variants x 2 roles."""
    p = _gc_train_prior(seed)
    gc = p.goal_capability
    clusters = [
        Cluster("gc_train", GOAL_CAPABILITY, gc.modes[mode], goal.q, v.id, p.decoys[0].id, goal=goal.id, mode=mode)
        for goal in gc.goals
        for v in training_variants(seed=seed)
        for mode in gc.modes
    ]
    return tuple(Episode(c, perm, p) for c in clusters for perm in (0, 1))


# --------------------------------------------------------------------------- sets, files, manifest


def _pool_episodes(name: str, seed: int) -> list[Episode]:
    return [Episode(c, perm) for c in load_pool(name, seed) for perm in (0, 1)]


#: Where a set's episodes come from: ``name -> pool seed -> episodes`` (the procedural pool is sized by its rows).
EPISODES: dict[str, Callable[[int], Sequence[Episode]]] = {
    "train": lambda seed: _pool_episodes("train", seed),
    "gc_train": gc_train_episodes,
}


@dataclass(frozen=True)
class DataSet:
    """One SFT set: the episodes it plays, the route, and the output format its targets are written in."""

    name: str
    episodes: str  # a key of EPISODES, or "procedural" (the generated pool, as many episodes as rows need)
    route: str
    format: str  # a gencoord_env.agents.formats.FORMATS name
    #: its prompts list every code they use (``codebook=``), so code renaming can swap them all (Goal x
    #: Capability rows also carry response codes)
    renamable: bool

    @property
    def output_format(self) -> OutputFormat:
        return output_format(self.format)

    @property
    def code_renaming(self) -> bool:
        """Whether ``code_renaming`` applies to this set's rows: its prompts and its format's targets."""
        return self.renamable and self.output_format.renames

    def __call__(self, seed: int) -> Iterator[Row]:
        """Every row of the set for pool seed ``seed`` (a fixed-size set; :func:`procedural_rows` sizes the others)."""
        return _rows(self.name, EPISODES[self.episodes](seed), self.route, self.output_format)


#: The paper's sets (supplement, "Training and Checkpoint Provenance"; E1/E2), fixed in size by the pools.
DATASETS: dict[str, DataSet] = {s.name: s for s in (
    DataSet("forward", "train", "forward", "direct", renamable=True),
    DataSet("forward_json", "train", "forward", "json", renamable=True),
    DataSet("single_step", "train", "single_step", "direct", renamable=True),
    DataSet("factor_code", "train", "forward", "factor_code", renamable=True),
    DataSet("gc_requester", "gc_train", "feedback", "direct", renamable=False),
    DataSet("gc_centralized", "gc_train", "centralized", "direct", renamable=False),
    DataSet("freeform", "train", "forward", "freeform", renamable=False),
)}


def expected_rows(name: str, seed: int = 0) -> int:
    """How many rows the fixed-size set ``name`` has: per episode its route's decisions (``ROUTES``), and on the
    free-form surface two turns more where the receiver asks first (``freeform.clarifies``)."""
    spec = data_set(name)
    if spec.episodes not in EPISODES:
        raise UsageError(f"set {name!r} is sized by its rows argument; expected one of the fixed sets {sorted(DATASETS)}")
    episodes = EPISODES[spec.episodes](seed)
    if spec.output_format.surface == "freeform":
        return sum(4 if freeform.clarifies(ep.template.family) else 2 for ep in episodes)
    return len(ROUTES[spec.route]) * len(episodes)


def as_factor_code(rows: Sequence[Row], set_name: str) -> list[Row]:
    """The Factor-Code rows of forward rows: the same prompts, each target the stage's binding code."""
    return [dataclasses.replace(r, id=f"{set_name}/{r.episode}/{r.stage}", set=set_name,
                                target=factor_code_target(r.stage, r.binding)) for r in rows]


def _procedural_chunk(set_name: str, seed: int, start: int, stop: int) -> list[Row]:
    spec = PROCEDURAL[set_name]
    return list(_rows(set_name, procedural_episodes(seed)[start:stop], spec.route, spec.output_format))


def procedural_rows(rows: int = PROCEDURAL_ROWS, seed: int = 0, codes: bool = False, workers: int = 1) -> list[Row]:
    """``rows`` forward rows played over ``pool="procedural"`` (``pool_seed=seed``) with reference records.

    ``codes`` gives the Factor-Code targets of the same episodes. ``workers`` > 1 plays contiguous runs of
    matched pairs in that many processes; the rows (and their order) do not depend on it.
    """
    if rows < ROWS_PER_PAIR or rows % ROWS_PER_PAIR:
        raise UsageError(f"rows must be a positive multiple of {ROWS_PER_PAIR} (one matched pair: 2 bindings x "
                         f"2 role permutations x 2 stages), got {rows}")
    if workers < 1:
        raise UsageError(f"workers must be >= 1, got {workers}")
    if codes:  # the same episodes and prompts: play once, name the code
        return as_factor_code(procedural_rows(rows, seed, codes=False, workers=workers), "procedural_factor_code")
    name = "procedural"
    episodes = rows // 2
    pairs = rows // ROWS_PER_PAIR
    per = -(-pairs // workers) * 4  # whole pairs per chunk, as episodes
    bounds = [(a, min(a + per, episodes)) for a in range(0, episodes, per)]
    if len(bounds) == 1:
        return _procedural_chunk(name, seed, 0, episodes)
    with ProcessPoolExecutor(len(bounds), mp_context=multiprocessing.get_context("spawn")) as pool_:
        parts = pool_.map(_procedural_chunk, *zip(*[(name, seed, a, b) for a, b in bounds]))
        return [r for part in parts for r in part]


#: Procedural sets (pretraining), sized by their ``rows`` argument.
PROCEDURAL: dict[str, DataSet] = {s.name: s for s in (
    DataSet("procedural", "procedural", "forward", "direct", renamable=True),
    DataSet("procedural_factor_code", "procedural", "forward", "factor_code", renamable=True),
)}


def data_set(name: str) -> DataSet:
    """The set of that name, fixed-size or procedural; an unknown name raises with the closest one."""
    found = DATASETS.get(name) or PROCEDURAL.get(name)
    if found is None:
        raise UnknownName("data set", name, sorted([*DATASETS, *PROCEDURAL]))
    return found


def rows_format(rows: Iterable[Row]) -> OutputFormat:
    """The one output format of ``rows``' sets; raises when they mix formats (a model answers in one)."""
    names = sorted({r.set for r in rows})
    found = {data_set(n).format for n in names}
    if len(found) != 1:
        raise UsageError(f"rows of sets {names} are in {len(found) or 'no'} output formats {sorted(found)}; a model is "
                         "trained in one (train the sets of each format separately)")
    return output_format(found.pop())


def build_set(name: str, seed: int = 0, rows: int | None = None, workers: int = 1) -> list[Row]:
    """Every row of set ``name``; raises when the count differs from :func:`expected_rows`.

    ``rows`` sizes a procedural set (default :data:`PROCEDURAL_ROWS`); the paper's sets have fixed sizes.
    """
    spec = data_set(name)
    if name in PROCEDURAL:
        out = procedural_rows(PROCEDURAL_ROWS if rows is None else rows, seed, codes=spec.format == "factor_code",
                              workers=workers)
    else:
        expected = expected_rows(name, seed)
        if rows is not None and rows != expected:
            raise UsageError(f"set {name!r} has a fixed size, {expected} rows (its pool's episodes); "
                             f"rows={rows} applies to the procedural sets {sorted(PROCEDURAL)} only")
        out = list(spec(seed))
        if len(out) != expected:
            raise DataError(f"set {name!r} has {len(out)} rows; its episodes and route make {expected}")
    ids = Counter(r.id for r in out)
    dup = [i for i, n in ids.items() if n > 1]
    if dup:
        raise DataError(f"set {name!r} repeats row ids, e.g. {dup[:3]}")
    return out


def file_sha256(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_rows(rows: Iterable[Row], path: str | os.PathLike[str]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(r.to_json() + "\n")


def load_rows(path: str | os.PathLike[str]) -> list[Row]:
    """Rows of one JSONL file written by :func:`build_all`."""
    names = {f.name for f in dataclasses.fields(Row)}
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            raw = json.loads(line)
            missing = names - set(raw)
            if missing:
                raise DataError(f"{path}:{n}: row lacks fields {sorted(missing)}; rebuild the data with build_all")
            out.append(Row(**{k: raw[k] for k in names}))
    return out


def build_all(out_dir: str | os.PathLike[str], sets: Sequence[str] | None = None, seed: int = 0,
              rows: int | None = None, workers: int = 1) -> dict[str, Any]:
    """Write ``<set>.jsonl`` for each set and ``manifest.json`` with row counts and SHA-256 hashes.

    ``sets`` defaults to the paper's sets (:data:`DATASETS`); ``rows`` and ``workers`` apply to the
    procedural ones (:data:`PROCEDURAL`).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Any] = {}
    played: dict[str, list[Row]] = {}
    for name in sets or list(DATASETS):
        if name == "procedural_factor_code" and "procedural" in played:
            built = as_factor_code(played["procedural"], name)
        else:
            built = build_set(name, seed, rows if name in PROCEDURAL else None, workers)
        played[name] = built
        path = out / f"{name}.jsonl"
        write_rows(built, path)
        files[name] = {
            "file": path.name,
            "rows": len(built),
            "stages": dict(sorted(Counter(r.stage for r in built).items())),
            "sha256": file_sha256(path),
        }
    manifest = {"pool_seed": seed, "files": files}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return manifest
