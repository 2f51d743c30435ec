"""Programmatic SFT data: local contexts paired with canonical targets, written as JSONL plus a manifest.

Every row pairs the exact observation text the environment shows the deciding agent at one decision
stage (``contexts.observation(...)`` with the history and messages the env would give at that point)
with the canonical reference target of ``gencoord_env.tasks.references``. No language-model teacher and
no hand-written requests: targets come from the executable template contract, and the builder checks
that each target maps back to the intended binding before writing it.

| set | pool | rows | stages |
| --- | --- | --- | --- |
| ``forward`` | train | 1,920 | 960 sender_initial + 960 receiver_after_request |
| ``forward_json`` | train | 1,920 | the same records on the GenCoord-JSON surface |
| ``single_step`` | train | 2,880 | 960 sender_initial (one task) + 960 sender_after_obtain + 960 receiver_after_request |
| ``factor_code`` | train | 1,920 | 960 sender code (``active_binding_id``) + 960 receiver code (``accepted_binding_id``) |
| ``gc_requester`` | gc_train | 640 | 320 requester_initial + 320 requester_after_response |
| ``gc_centralized`` | gc_train | 320 | 320 centralized joint plans from the merged views |
| ``freeform`` | train | 2,400 | 960 sender_initial + 240 receiver_question + 240 sender_answer + 960 receiver_after_request |

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
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from gencoord_env import dsl, freeform
from gencoord_env.dsl.model import PeerRequest, Proposal
from gencoord_env.pipeline.response import respond
from gencoord_env.tasks import Cluster, Episode, pool as load_pool
from gencoord_env.tasks import references as ref
from gencoord_env.tasks import contexts
from gencoord_env.tasks.contexts import request_message
from gencoord_env.tasks.prior import GOAL_CAPABILITY, Prior, WorldVariant, prior

__all__ = [
    "DATASETS",
    "EXPECTED_ROWS",
    "Row",
    "build_all",
    "build_set",
    "factor_code_target",
    "file_sha256",
    "gc_train_episodes",
    "load_rows",
    "observation",
    "training_variants",
]

#: The paper's row count of each set (supplement, "Training and Checkpoint Provenance"; E1/E2).
EXPECTED_ROWS: dict[str, int] = {
    "forward": 1920,
    "forward_json": 1920,
    "single_step": 2880,
    "factor_code": 1920,
    "gc_requester": 640,
    "gc_centralized": 320,
    "freeform": 2400,
}

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


# --------------------------------------------------------------------------- observations


def observation(
    episode: Episode,
    agent: str,
    stage: str,
    *,
    route: str,
    view: str = "full",
    history: Sequence[str] = (),
    messages: Sequence[str] = (),
) -> str:
    """The observation text the env shows ``agent`` at ``stage`` (see ``EpisodeSession.observation``)."""
    text, _ = contexts.observation(episode, agent, stage, route=route, view=view, history=history, messages=messages)
    return text


def _request_shown(request: PeerRequest, surface: str) -> str:
    """The delivered REQ as the receiver's context shows it on ``surface``."""
    if surface == "dsl":
        return request_message("", request.requested_plan, request.target).split(": ", 1)[1]
    return dsl.to_json(Proposal((), (request,)))


def _show(proposal: Proposal, surface: str) -> str:
    return dsl.format(proposal) if surface == "dsl" else dsl.to_json(proposal)


def factor_code_target(stage: str, binding: str) -> str:
    """The Factor-Code target of a forward stage: the one binding code, named by its field."""
    field = {"sender_initial": "active_binding_id", "receiver_after_request": "accepted_binding_id"}[stage]
    return f"{field}={binding}"


# --------------------------------------------------------------------------- row generators


def _row(set_name: str, stage: str, route: str, surface: str, ep: Episode, agent: str, prompt: str, target: str) -> Row:
    return Row(f"{set_name}/{ep.id}/{stage}", set_name, stage, route, surface, ep.id, agent, ep.binding, prompt, target)


def _checked(target: Proposal, binding: str, where: str) -> Proposal:
    got = ref.binding_of(target)
    if got is not None and got != binding:
        raise AssertionError(f"{where}: the target selects binding {got!r}, expected {binding!r}")
    return target


def _forward_rows(episodes: Iterable[Episode], set_name: str, surface: str = "dsl", codes: bool = False) -> Iterator[Row]:
    for ep in episodes:
        sender = _checked(ref.sender_initial(ep), ep.binding, ep.id)
        request = sender.peer_requests[0]
        receiver = _checked(ref.receiver_after_request(request), ep.binding, ep.id)
        msg = f"REQ from {ep.first}: {_request_shown(request, surface)}"
        stages = (
            ("sender_initial", ep.first, (), sender),
            ("receiver_after_request", ep.second, (msg,), receiver),
        )
        for stage, agent, messages, target in stages:
            prompt = observation(ep, agent, stage, route="forward", messages=messages)
            text = factor_code_target(stage, ep.binding) if codes else _show(target, surface)
            yield _row(set_name, stage, "forward", surface, ep, agent, prompt, text)


def _single_step_rows(episodes: Iterable[Episode]) -> Iterator[Row]:
    from gencoord_env.dsl.serializer import format_task

    for ep in episodes:
        first = _checked(ref.sender_single_step(ep), ep.binding, ep.id)
        rest = _checked(ref.sender_after_obtain(ep), ep.binding, ep.id)
        request = rest.peer_requests[0]
        receiver = ref.receiver_after_request(request)
        done = (f"DONE {format_task(first.self_plan[0])} ok",)
        msg = (f"REQ from {ep.first}: {_request_shown(request, 'dsl')}",)
        for stage, agent, history, messages, target in (
            ("sender_initial", ep.first, (), (), first),
            ("sender_after_obtain", ep.first, done, (), rest),
            ("receiver_after_request", ep.second, (), msg, receiver),
        ):
            prompt = observation(ep, agent, stage, route="single_step", history=history, messages=messages)
            yield _row("single_step", stage, "single_step", "dsl", ep, agent, prompt, dsl.format(target))


def _gc_requester_rows(episodes: Iterable[Episode]) -> Iterator[Row]:
    for ep in episodes:
        initial = ref.requester_initial(ep)
        response = respond(initial.peer_requests[0], ep)
        revised = ref.requester_after_response(ep, response.decision, response.counter_offer_id)
        if revised is None:
            raise AssertionError(f"{ep.id}: the bounded response {response.decision} leaves no revision to learn")
        _checked(revised, ep.binding, ep.id)
        messages = (f"PROPOSAL {dsl.format(initial).replace(chr(10), ' | ')}", f"RESPONSE {response.wire()}")
        yield _row("gc_requester", "requester_initial", "feedback", "dsl", ep, ep.first,
                   observation(ep, ep.first, "requester_initial", route="feedback"), dsl.format(initial))
        yield _row("gc_requester", "requester_after_response", "feedback", "dsl", ep, ep.first,
                   observation(ep, ep.first, "requester_after_response", route="feedback", messages=messages),
                   dsl.format(revised))


def _gc_centralized_rows(episodes: Iterable[Episode]) -> Iterator[Row]:
    for ep in episodes:
        target = _checked(ref.centralized(ep), ep.binding, ep.id)
        yield _row("gc_centralized", "centralized", "centralized", "dsl", ep, ep.first,
                   observation(ep, ep.first, "centralized", route="centralized"), dsl.format(target))


def _freeform_rows(episodes: Iterable[Episode]) -> Iterator[Row]:
    for ep in episodes:
        sender = _checked(ref.sender_initial(ep), ep.binding, ep.id)
        request = sender.peer_requests[0]
        receiver = _checked(ref.receiver_after_request(request), ep.binding, ep.id)
        first, second = ep.first, ep.second
        order = contexts.build_context(ep, first, "dialogue", route="forward")["task"]["order"]
        turns = [("sender_initial", first, freeform.say_opening(second, order, sender.self_plan, request.requested_plan))]
        if freeform.clarifies(ep.template.family):
            handoff = freeform.handoff_to(second, sender.self_plan)
            if handoff is None:
                raise AssertionError(f"{ep.id}: a clarifying episode whose sender plan hands nothing to {second}")
            turns += [("receiver_question", second, freeform.say_question(first, handoff)),
                      ("sender_answer", first, freeform.say_answer(second, request.requested_plan))]
        turns.append(("receiver_after_request", second, freeform.say_commit(first, receiver.self_plan)))
        said: list[str] = []
        for stage, agent, utterance in turns:
            prompt = observation(ep, agent, "dialogue", route="forward", messages=said)
            yield _row("freeform", stage, "forward", "freeform", ep, agent, prompt, utterance)
            said.append(f"{agent} says: {utterance}")


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
        raise ValueError(f"only {len(geometries)} unused world geometries exist, asked for {n}")
    return tuple(WorldVariant(f"T{i:02d}", shift, mirror, rng.choice((20, 30, 40)))
                 for i, (shift, mirror) in enumerate(geometries[:n]))


@lru_cache(maxsize=4)
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


DATASETS: dict[str, Callable[[int], Iterator[Row]]] = {
    "forward": lambda seed: _forward_rows(_pool_episodes("train", seed), "forward"),
    "forward_json": lambda seed: _forward_rows(_pool_episodes("train", seed), "forward_json", surface="json"),
    "single_step": lambda seed: _single_step_rows(_pool_episodes("train", seed)),
    "factor_code": lambda seed: _forward_rows(_pool_episodes("train", seed), "factor_code", codes=True),
    "gc_requester": lambda seed: _gc_requester_rows(gc_train_episodes(seed)),
    "gc_centralized": lambda seed: _gc_centralized_rows(gc_train_episodes(seed)),
    "freeform": lambda seed: _freeform_rows(_pool_episodes("train", seed)),
}


def build_set(name: str, seed: int = 0) -> list[Row]:
    """Every row of set ``name``; raises when the count differs from the paper's."""
    if name not in DATASETS:
        import difflib

        hint = difflib.get_close_matches(name, DATASETS, n=1)
        raise ValueError(f"unknown data set {name!r}; expected one of {sorted(DATASETS)}"
                         + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    rows = list(DATASETS[name](seed))
    if len(rows) != EXPECTED_ROWS[name]:
        raise AssertionError(f"set {name!r} has {len(rows)} rows; the paper's count is {EXPECTED_ROWS[name]}")
    ids = Counter(r.id for r in rows)
    dup = [i for i, n in ids.items() if n > 1]
    if dup:
        raise AssertionError(f"set {name!r} repeats row ids, e.g. {dup[:3]}")
    return rows


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
                raise ValueError(f"{path}:{n}: row lacks fields {sorted(missing)}; rebuild the data with build_all")
            out.append(Row(**{k: raw[k] for k in names}))
    return out


def build_all(out_dir: str | os.PathLike[str], sets: Sequence[str] | None = None, seed: int = 0) -> dict[str, Any]:
    """Write ``<set>.jsonl`` for each set and ``manifest.json`` with row counts and SHA-256 hashes."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Any] = {}
    for name in sets or list(DATASETS):
        rows = build_set(name, seed)
        path = out / f"{name}.jsonl"
        write_rows(rows, path)
        files[name] = {
            "file": path.name,
            "rows": len(rows),
            "stages": dict(sorted(Counter(r.stage for r in rows).items())),
            "sha256": file_sha256(path),
        }
    manifest = {"pool_seed": seed, "files": files}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return manifest
