"""One training pipeline: a typed run spec, shared inputs built once, and one lane runner for every study.

CleanRL keeps a whole recipe in one typed ``Args`` at the top of a file. A study here has more to share (data
sets, one tokenizer, lanes over the GPUs, the experiment harness), so the same virtue sits one level up: one
:class:`RunSpec` shows the whole recipe of one model, :func:`run_lane` executes any of them, and a study is a
short function from its config to a list of :class:`Lane` values (``gencoord train tables``:
:mod:`gencoord_env.train.tables`; ``gencoord train transfer``: :mod:`gencoord_env.train.transfer`; ``gencoord train
grpo``: :mod:`gencoord_env.train.grpo`; ``gencoord train selfplay``: :mod:`gencoord_env.train.selfplay`).

=================  ===============================================================================================
spec               what it holds
=================  ===============================================================================================
:class:`RunSpec`   one model: the data set it trains on (and so its output format,
                   :mod:`gencoord_env.agents.formats`), where its weights start (:class:`Scratch`, a
                   :class:`Checkpoint`, or :class:`After` an earlier run of its lane), the SFT :class:`Recipe`,
                   and what it plays afterwards
:class:`Play`      one thing a trained model plays: a condition of the experiment harness (pool, route, view,
                   surface, intervention, filter), how many episodes (the harness's selection), batched in
                   lockstep or one batch-1 call at a time (the timing path), every role or one beside the rule
                   agent, the evaluation decoder or ``transformers``' ``generate``
:class:`Lane`      the runs of one seed, trained in order in one process on one device (a later run may start
                   from an earlier one's checkpoint): the unit :func:`gencoord_env.train.lanes.run_lanes` spreads
                   over processes and GPUs
:class:`Inputs`    what every lane reads, built once by :func:`prepare`: the data sets of one pool seed and one
                   offline tokenizer (:class:`Corpus`) that every scratch model shares
=================  ===============================================================================================

:func:`run_lane` trains each run (:func:`gencoord_env.train.sft.train`), plays each of its plays, and writes the
lane's result file: per run its training summary (:func:`run_summary`) and per play one row per episode (the
harness's :class:`~gencoord_env.commands.experiments.runner.EpisodeRow`). What was done before is not done again:
a run whose checkpoint is still there, trained with the same key, is not retrained (a lane cut short after its
first run continues from it), and a play whose result is in the lane's earlier file with the same settings is
not replayed (a table added later plays the trained model on the new conditions only). Greedy decoding runs on
the static decoder; if it fails on a stack, the lane plays on with ``model.generate`` and says so.

Example::

    spec = RunSpec("direct", data="forward", init=Scratch(hidden_size=32, num_layers=1), recipe=Recipe(steps=4),
                   plays=(Play("heldout", Condition("heldout", "heldout", "model"), episodes=4, batch=4),))
    inputs = prepare(work, ["forward"], Corpus(("forward",), vocab_size=512), log=print)
    result = run_lane(Lane("2026073101/direct", 2026073101, (spec,), inputs, str(work), str(work / "lanes")))
    result["runs"]["direct"]["plays"]["heldout"]["rows"][0]["outcome"]
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import torch
from transformers import AutoTokenizer
from transformers.utils import logging as hf_logging

from gencoord_env.agents.by_role import ByRole
from gencoord_env.agents.formats import OutputFormat, output_format, resolve_format
from gencoord_env.agents.lm.generate import Backend, GenerationConfig
from gencoord_env.agents.lm.loading import binding_codes, load_model, train_tokenizer, world_names
from gencoord_env.agents.lm.policy import LMPolicy, make_policy
from gencoord_env.agents.registry import make_policy as rule_agent
from gencoord_env.commands.experiments import stats
from gencoord_env.commands.experiments.analysis import analyze, success_by_cluster
from gencoord_env.commands.experiments.runner import EpisodeRow, episode_indices, make_env, run_condition
from gencoord_env.commands.experiments.specs import DECISIONS, SUCCESS, WIRE, Condition, Experiment
from gencoord_env.errors import UsageError
from gencoord_env.tasks.episode import parse_episode_id
from gencoord_env.train.data import PROCEDURAL, build_all, data_set, load_rows
from gencoord_env.train.evaluate import run_lockstep
from gencoord_env.train.lanes import device_name, run_lanes
from gencoord_env.train.sft import SFTConfig, ScratchConfig, read_record, train, tree_sha256

__all__ = [
    "ROLES_FILE", "After", "Checkpoint", "Corpus", "Inputs", "Lane", "Play", "Player", "Recipe", "RunSpec", "Scratch",
    "Trainer", "batched_rows", "cluster_success", "digest", "evaluation", "execute", "logger", "outcomes", "paired_change",
    "prepare", "role_checkpoints", "rows_of", "run_lane", "run_summary", "setup_of", "sft_config", "shared_tokenizer",
    "success_record", "write_roles",
]


def digest(value: Any) -> str:
    """SHA-256 of a JSON-able value (dataclasses as their fields), keys sorted."""
    def plain(x: Any) -> Any:
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
        if isinstance(x, Mapping):
            return {str(k): plain(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        return x

    return hashlib.sha256(json.dumps(plain(value), sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class Scratch:
    """Random weights: a small architecture built in code, reading the lane's shared tokenizer."""

    arch: Literal["qwen3", "qwen3_5", "qwen3_5_08b"] = "qwen3"
    vocab_size: int = 2048
    hidden_size: int = 256
    num_layers: int = 4


@dataclass(frozen=True)
class Checkpoint:
    """A saved checkpoint directory, with its own tokenizer (e.g. a procedural-pretrained model)."""

    path: str


@dataclass(frozen=True)
class After:
    """The checkpoint an earlier run of the same lane ends with (pretraining, then fine-tuning)."""

    run: str


Init = Scratch | Checkpoint | After


@dataclass(frozen=True)
class Recipe:
    """The SFT knobs a run sets; the rest are :class:`gencoord_env.train.sft.SFTConfig`'s (the paper's) defaults."""

    epochs: float = 2.0
    steps: int | None = None  # optimizer steps; overrides epochs
    lr: float | None = None  # None: sft.default_lr of the init (scratch 1e-3, a scratch-lineage checkpoint 1e-4, else 1e-5)
    micro_batch: int = 16
    grad_accum: int = 1
    max_length: int = 2048
    subword_dropout: float = 0.0  # BPE-dropout on the prompts of a fraction of the rows: merge drop probability
    subword_dropout_rows: float = 0.0  # ... and the fraction
    decision_weight: float = 1.0  # the loss weight of each row's decision tokens
    code_renaming: float = 0.0  # the share of samples whose binding codes are renamed
    request_removal: float = 0.0  # the share of receiver samples shown without their request (train.removal)
    monitor_every: int = 0  # decision-token accuracy on a fixed sample every this many updates (0: at the end)
    resume_every: int = 0  # the run's resumable state every this many updates (not part of any key)
    deterministic: bool = True  # deterministic kernels (sft.SFTConfig.deterministic); part of the key only when off
    fit_rows: int = 4096  # rows the fit measures after training (sft.SFTConfig.fit_rows; 0: none; not part of any key)

    #: fields that change how a run goes, not what it learns: not part of its key
    UNKEYED: ClassVar[tuple[str, ...]] = ("resume_every", "fit_rows")


@dataclass(frozen=True)
class Play:
    """One thing a trained model plays, through the experiment harness's conditions and episode selection.

    ``batch``: envs in lockstep, one batched model call answering every deciding agent (no time to
    commitment); 0: the harness's serial path, one episode and one batch-1 call at a time (the paper's timing).
    ``role``: the model plays this role only, the rule agent every other. ``decode``: a generation backend for
    this play only (``generate``: ``transformers``' reference decoder). ``temperature``: sample at this
    temperature (the decoder's seeded sampler, seeded with the lane's seed) instead of decoding greedily, e.g.
    a start's success as GRPO's sampled groups see it. ``actions``: keep each episode's actions (batched
    plays). ``warm_up``: the lane's first such play is played once unrecorded before, so the decoder's one-off
    graph captures are not in its times.
    """

    name: str
    condition: Condition
    episodes: int | None = None
    batch: int = 128
    role: str | None = None
    decode: Backend | None = None
    actions: bool = False
    warm_up: bool = False
    temperature: float | None = None  # None: greedy

    def __post_init__(self) -> None:
        if self.temperature is not None and self.temperature <= 0:
            raise UsageError(f"play {self.name!r}: temperature must be > 0 (None decodes greedily), got {self.temperature}")

    def cache_key(self, max_new_tokens: int) -> str:
        """What decides this play's rows (not its name): equal keys play alike, so a lane plays each once."""
        sampling = [] if self.temperature is None else [{"temperature": self.temperature}]  # greedy keys stay as they were
        return digest([setup_of(self.condition), self.episodes, self.batch > 0, self.role, self.decode, self.actions,
                       max_new_tokens, *sampling])


def setup_of(c: Condition) -> list[Any]:
    """What decides a condition's episodes (not its name, policy or paper figures): equal setups play alike."""
    return [c.pool, c.route, c.view, c.surface, c.private_fact, c.intervention, dict(c.intervention_args), dict(c.where)]


class Trainer(Protocol):
    """A training step other than SFT (a frozen dataclass, so that it is part of the run's key, less the fields
    its class names in ``UNKEYED``): trains from the checkpoint ``base`` into the folder ``out`` with the lane's
    seed and device; returns the saved checkpoint and a summary of the run (GRPO on decisions:
    :class:`gencoord_env.train.grpo.GRPORecipe`; self-play GRPO on episodes:
    :class:`gencoord_env.train.selfplay.SelfPlayRecipe`). The checkpoint may be one model per role
    (:data:`ROLES_FILE`)."""

    def train(self, lane: Lane, run: RunSpec, base: str, out: Path) -> tuple[Path, dict[str, Any]]: ...


@dataclass(frozen=True)
class RunSpec:
    """One model's whole recipe: the data set it trains on, where it starts, how it trains, what it plays.

    ``recipe``: SFT on ``data`` (:class:`Recipe`), another :class:`Trainer`, or None (the init's checkpoint plays
    as it is). ``format``: the output format when ``data`` names none (a :class:`Trainer`'s run, an untrained
    one). ``folder``: where its checkpoint and records go, relative to the lane's work folder (default
    ``runs/<lane>/<run>``). ``dtype``: the weights' dtype while it plays (default: bfloat16 on a GPU).
    """

    name: str
    data: str | None  # a gencoord_env.train.data set; its output format is the model's
    init: Init
    recipe: Recipe | Trainer | None = Recipe()
    plays: tuple[Play, ...] = ()
    max_new_tokens: int = 256  # the generation cap of its plays
    output_format: str | None = None
    folder: str | None = None
    dtype: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.recipe, Recipe) and self.data is None:
            raise UsageError(f"run {self.name!r}: an SFT recipe needs a data set")
        if self.recipe is None and isinstance(self.init, Scratch):
            raise UsageError(f"run {self.name!r}: random weights with no training have nothing to play")
        if self.data is None and self.output_format is None:
            raise UsageError(f"run {self.name!r}: name its output format (it has no data set to take it from)")

    @property
    def format(self) -> OutputFormat:
        return output_format(self.output_format) if self.output_format else data_set(str(self.data)).output_format

    def training(self) -> dict[str, Any]:
        """The fields its weights depend on."""
        d = dataclasses.asdict(self)
        d["init"] = {"kind": type(self.init).__name__, **d["init"]}
        for name in getattr(type(self.recipe), "UNKEYED", ()):
            d["recipe"].pop(name)
        if isinstance(self.recipe, Recipe):
            if d["recipe"]["deterministic"]:  # the default since keys existed: a run's key stays what it was
                d["recipe"].pop("deterministic")
        elif self.recipe is not None:  # another Trainer: its kind is part of the key
            d["recipe"]["kind"] = type(self.recipe).__name__
        if self.output_format is None:  # the fields added for other trainers leave an SFT run's key as it was
            d.pop("output_format")
        for k in ("plays", "max_new_tokens", "name", "folder", "dtype"):
            d.pop(k)
        return d


@dataclass(frozen=True)
class Corpus:
    """The shared offline tokenizer's corpus: the prompts of the first ``rows[set]`` rows of each set (all where
    ``rows`` does not name it) and the targets of those rows, or of every row with ``all_targets``."""

    sets: tuple[str, ...]
    vocab_size: int = 2048
    max_length: int = 2048
    rows: Mapping[str, int | None] = dataclasses.field(default_factory=dict)
    all_targets: bool = False


@dataclass(frozen=True)
class Inputs:
    """What every lane reads: the data sets' folder (``manifest.json``), the shared tokenizer's folder (None
    when no run starts from scratch), their hashes, and the pool seed."""

    data: str
    tokenizer: str | None
    sets: Mapping[str, str]  # set -> sha256 of its file
    tokenizer_sha256: str | None
    pool_seed: int = 0


@dataclass(frozen=True)
class Lane:
    """The runs of one seed, in order, in one process on one device."""

    name: str  # e.g. "2026073101/direct/pretrained"
    seed: int
    runs: tuple[RunSpec, ...]
    inputs: Inputs
    work: str  # checkpoints go to work/runs/<lane>/<run>
    results: str  # the folder of the lane result files
    device: str | None = None
    threads: int = 1

    def __post_init__(self) -> None:
        names = [r.name for r in self.runs]
        for k, run in enumerate(self.runs):
            if isinstance(run.init, After) and run.init.run not in names[:k]:
                raise UsageError(f"lane {self.name}: run {run.name!r} starts after {run.init.run!r}, which is not an "
                                 f"earlier run of the lane ({names[:k]})")
        if len(set(names)) != len(names):
            raise UsageError(f"lane {self.name}: run names repeat: {names}")

    @property
    def file_name(self) -> str:
        return self.name.replace("/", "-")

    @property
    def result_path(self) -> Path:
        return Path(self.results) / f"{self.file_name}.json"

    def run_dir(self, run: RunSpec) -> Path:
        return Path(self.work) / (run.folder if run.folder is not None else Path("runs") / self.file_name / run.name)

    def run_key(self, run: RunSpec) -> str:
        """What a run's weights depend on: seed, its spec, what it reads, and the runs it continues."""
        chain: list[Any] = []
        current: RunSpec | None = run
        while current is not None:
            inputs: dict[str, Any] = {"data": self.inputs.sets.get(current.data) if current.data else None,
                                      "pool_seed": self.inputs.pool_seed}
            if isinstance(current.init, Scratch):
                inputs["tokenizer"] = self.inputs.tokenizer_sha256
            elif isinstance(current.init, Checkpoint):
                inputs["checkpoint"] = tree_sha256(current.init.path)[0]
            chain.append([current.training(), inputs])
            after = current.init.run if isinstance(current.init, After) else None
            current = next(r for r in self.runs if r.name == after) if after else None
        return digest([self.seed, chain])

    def key(self) -> str:
        """What the lane's results depend on (not where or how fast it runs, nor which plays it was asked for)."""
        return digest([self.run_key(r) for r in self.runs])


# --------------------------------------------------------------------------- shared inputs


def prepare(work: Path, sets: Sequence[str], corpus: Corpus | None, *, pool_seed: int = 0,
            procedural_rows: int | None = None, data_workers: int = 1,
            log: Callable[[str], None] = lambda _: None) -> Inputs:
    """Build (or reuse) the data sets under ``work/data`` and the shared tokenizer under ``work/tokenizer``.

    A set is rebuilt unless ``work/data`` holds it for the same pool seed (a procedural one with the same rows);
    the tokenizer is retrained unless its folder holds one of the same corpus (``corpus.json``).
    """
    data = work / "data"
    t0 = time.perf_counter()
    manifest = _data(data, sets, pool_seed, procedural_rows, data_workers, log)
    log("data: " + ", ".join(f"{s} {manifest['files'][s]['rows']}" for s in sets)
        + f" rows ({time.perf_counter() - t0:.1f} s)")
    hashes = {s: manifest["files"][s]["sha256"] for s in sets}
    tokenizer = None
    if corpus is not None:
        tokenizer = work / "tokenizer"
        shared_tokenizer(tokenizer, {s: load_rows(data / f"{s}.jsonl") for s in corpus.sets}, corpus, hashes, log)
    return Inputs(str(data), str(tokenizer) if tokenizer else None, hashes,
                  tree_sha256(tokenizer)[0] if tokenizer else None, pool_seed)


def _data(data: Path, sets: Sequence[str], pool_seed: int, procedural_rows: int | None, workers: int,
          log: Callable[[str], None]) -> dict[str, Any]:
    path = data / "manifest.json"
    previous: dict[str, Any] | None = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def held(name: str) -> bool:
        f = (previous or {}).get("files", {}).get(name)
        return (f is not None and (data / f["file"]).is_file()
                and (name not in PROCEDURAL or procedural_rows is None or f["rows"] == procedural_rows))

    if previous and previous.get("pool_seed") == pool_seed and all(held(s) for s in sets):
        log(f"data: reused {data}")
        return previous
    manifest = build_all(data, list(sets), pool_seed, rows=procedural_rows, workers=workers)
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return manifest


def shared_tokenizer(out: Path, rows: Mapping[str, Sequence[Any]], corpus: Corpus, hashes: Mapping[str, str],
                     log: Callable[[str], None] = lambda _: None) -> Any:
    """One byte-level BPE on ``corpus`` (sets in name order; prompts once each), saved to ``out`` and reused
    when ``out`` holds one trained on the same corpus (``corpus.json``)."""
    stamp = {**dataclasses.asdict(corpus), "sets": {s: hashes[s] for s in corpus.sets},
             "whole_words": [*binding_codes(), *world_names()]}
    path = out / "corpus.json"
    if (out / "tokenizer.json").is_file() and path.is_file() and json.loads(path.read_text(encoding="utf-8")) == stamp:
        return AutoTokenizer.from_pretrained(out, local_files_only=True)
    prompts: dict[str, None] = {}  # insertion-ordered set: sets of one pool share their prompts
    targets: list[str] = []
    for name in sorted(corpus.sets):
        head = rows[name][: corpus.rows.get(name)]
        prompts.update((r.prompt, None) for r in head)
        targets += [r.target for r in (rows[name] if corpus.all_targets else head)]
    tokenizer = train_tokenizer([*prompts, *targets], vocab_size=corpus.vocab_size, model_max_length=corpus.max_length)
    tokenizer.save_pretrained(out)
    path.write_text(json.dumps(stamp, sort_keys=True) + "\n", encoding="utf-8")
    log(f"tokenizer: vocabulary {len(tokenizer)} from {len(prompts)} prompts and {len(targets)} targets")
    return tokenizer


# --------------------------------------------------------------------------- the lane runner


def sft_config(lane: Lane, run: RunSpec, base: str | None) -> SFTConfig:
    """The SFT run of ``run``: the spec's recipe, the lane's seed and device, from scratch or from ``base``."""
    r = run.recipe
    if not isinstance(r, Recipe):
        raise TypeError(f"run {run.name!r}: sft_config reads an SFT Recipe, got {type(r).__name__}")
    scratch = None
    if isinstance(run.init, Scratch):
        i = run.init
        scratch = ScratchConfig(i.arch, i.vocab_size, i.hidden_size, i.num_layers, tokenizer=lane.inputs.tokenizer)
    return SFTConfig(
        data=(str(Path(lane.inputs.data) / f"{run.data}.jsonl"),), out_dir=str(lane.run_dir(run)), base_model=base,
        scratch=scratch, lr=r.lr, epochs=r.epochs, max_steps=r.steps, micro_batch=r.micro_batch, grad_accum=r.grad_accum,
        max_length=r.max_length, seed=lane.seed, device=lane.device, progress=False, log_every=50,
        subword_dropout=r.subword_dropout, subword_dropout_rows=r.subword_dropout_rows, decision_weight=r.decision_weight,
        code_renaming=r.code_renaming, request_removal=r.request_removal, monitor_every=r.monitor_every,
        resume_every=r.resume_every, deterministic=r.deterministic, fit_rows=r.fit_rows, format=run.output_format,
    )


def run_summary(result: Any, work: Path) -> dict[str, Any]:
    """What a lane keeps of one SFT run (:class:`gencoord_env.train.sft.RunResult`): its checkpoint and hash,
    data, schedule, tokens, losses, fit, and every input token its checkpoint's lineage trained on."""
    p = result.provenance
    record = read_record(result.checkpoint) if result.checkpoint else None
    fit = p.get("fit") or {}
    return {
        "checkpoint": str(Path(result.checkpoint).relative_to(work)) if result.checkpoint else None,
        "checkpoint_sha256": p.get("checkpoint", {}).get("tree_sha256"),
        "format": p.get("format"),
        "parameters": p["base_model"]["parameters"],
        "base": {k: v for k, v in p["base_model"].items() if k in ("kind", "source", "tree_sha256", "arch", "hidden_size", "num_layers")},
        "data_sha256": p["data"]["sha256"],
        "data_files": [{k: f[k] for k in ("file", "rows", "sha256")} for f in p["data"]["files"]],
        "config_sha256": p["config_sha256"],
        "lr": p["config"]["lr"],
        "optimizer_steps": p["optimizer_steps"],
        "epochs": p["epochs"],
        "token_exposure": p["token_exposure"],
        "renamed_samples": p["token_exposure"].get("renamed_samples", 0),
        "seen_tokens": p["seen_tokens"],
        "seen_token_ids": record["seen_token_ids"] if record else None,
        "loss_first": p["loss_first"],
        "loss_final": p["loss_final"],
        "train_seconds": p["train_seconds"],
        "precision": p["precision"],
        "libraries": p["libraries"],
        "fit": fit.get("teacher_forced"),  # the decision token on the rows it trained on
        "fits": fit.get("fits"),
        "decision_curve": p.get("decision_curve"),
    }


#: A checkpoint folder holding this file is one model per role: ``{role: checkpoint folder}``, each path relative
#: to the folder (two policies trained side by side, or two seeds' models paired for cross-play).
ROLES_FILE = "roles.json"


def role_checkpoints(checkpoint: str | Path) -> dict[str, Path] | None:
    """The models of a one-model-per-role checkpoint (:data:`ROLES_FILE`), by role; None for one model."""
    path = Path(checkpoint) / ROLES_FILE
    if not path.is_file():
        return None
    return {role: (Path(checkpoint) / p).resolve() for role, p in json.loads(path.read_text(encoding="utf-8")).items()}


def write_roles(folder: Path, roles: Mapping[str, str | Path]) -> Path:
    """``folder`` as a one-model-per-role checkpoint of ``roles`` (role -> checkpoint folder); returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    relative = {role: os.path.relpath(Path(p).resolve(), folder.resolve()) for role, p in sorted(roles.items())}
    (folder / ROLES_FILE).write_text(json.dumps(relative, sort_keys=True) + "\n", encoding="utf-8")
    return folder


class Player:
    """A run's loaded checkpoint as a policy in its format (a one-model-per-role checkpoint as each role's model,
    :data:`ROLES_FILE`); falls back to ``model.generate`` once if the static decoder fails on this stack."""

    def __init__(self, checkpoint: Path, fmt: OutputFormat, max_new_tokens: int, device: str | None,
                 dtype: str | None = None, seed: int = 0) -> None:
        roles = role_checkpoints(checkpoint)
        paths = roles or {"": Path(checkpoint)}
        loaded: dict[Path, Any] = {}
        for path in paths.values():
            if path not in loaded:  # a checkpoint trained in another format is refused, naming both
                self.format = resolve_format(path, fmt)
                loaded[path] = load_model(path, device=device, dtype=getattr(torch, dtype) if dtype else None)
        self.lms = {role: loaded[path] for role, path in paths.items()}
        self.roles = roles is not None
        # No torch.compile: a compile per decode shape would cost more than these small models' whole evaluation.
        self.generation = GenerationConfig(max_new_tokens=max_new_tokens, compile_decode=False, compile_prefill=False,
                                           stop_at_record_end=self.format.stops_at_record_end, seed=seed)
        self.fallback: str | None = None
        self.policy = self.make()

    def make(self, backend: Backend | None = None, temperature: float | None = None) -> Any:
        """The policy (an ``LMPolicy``; :class:`ByRole` of them for a one-model-per-role checkpoint)."""
        config = self.generation if backend is None else dataclasses.replace(self.generation, backend=backend)
        if temperature is not None:
            config = dataclasses.replace(config, do_sample=True, temperature=temperature)
        made: list[tuple[Any, LMPolicy]] = []  # one policy per loaded model, however many roles it plays

        def policy_of(lm: Any) -> LMPolicy:
            for seen, policy in made:
                if seen is lm:
                    return policy
            made.append((lm, make_policy(lm.model, lm.tokenizer, self.format, config)))
            return made[-1][1]

        if not self.roles:
            return policy_of(self.lms[""])
        return ByRole({role: policy_of(lm) for role, lm in self.lms.items()})

    @property
    def backend(self) -> str:
        first = self.policy if not self.roles else next(iter(self.policy.policies.values()))
        return str(first.generator.backend)

    def play(self, fn: Callable[[Any], Any]) -> Any:
        try:
            return fn(self.policy)
        except Exception as exc:  # noqa: BLE001 - the static decoder failed on this stack: the reference path
            if self.fallback is not None or self.generation.backend == "generate":
                raise
            self.fallback = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            warnings.warn(f"static decoding failed ({self.fallback}); playing with model.generate", RuntimeWarning, stacklevel=2)
            self.generation = dataclasses.replace(self.generation, backend="generate")
            self.policy = self.make()
            return fn(self.policy)


def batched_rows(condition: Condition, policy: Any, episodes: int | None, batch_size: int,
                 pool_seed: int = 0, actions: bool = False) -> list[dict[str, Any]]:
    """The harness's rows of ``condition`` (as JSON) played with a learned policy ``batch_size`` envs at a time.

    Same envs (intervention included) and episode selection as ``run_condition``; each episode's model
    calls and tokens are its own (``run_lockstep`` attributes the batch's call records). No time to
    commitment: an episode's clock would hold the waits for the other envs' decisions. ``actions``: each row
    also keeps the episode's actions (``stage``, ``agent``, ``action``).
    """
    order = episode_indices(condition, episodes, pool_seed)
    envs = [make_env(condition, "sim", None, pool_seed) for _ in range(max(1, min(batch_size, len(order))))]
    try:
        finals = run_lockstep(envs, policy, order)
        pool = envs[0].unwrapped.episodes
    finally:
        for env in envs:
            env.close()
    rows = []
    for k, info in zip(order, finals):
        ep = pool[k]
        metrics = {**info["metrics"], "model_calls": info["calls"], "model_input_tokens": info["input_tokens"],
                   "model_output_tokens": info["output_tokens"]}
        row = EpisodeRow(condition=condition.name, episode_id=str(info["episode_id"]), cluster=ep.cluster.id,
                         perm=ep.perm, family=ep.template.family, motif=ep.template.motif,
                         outcome=str(info["outcome"]), metrics=metrics, model_calls=int(info["calls"])).to_json()
        if actions:
            row["actions"] = info["actions"]
        rows.append(row)
    return rows


#: The columns of an evaluation table: success (its cluster-bootstrap interval comes with it), decisions, the
#: model's tokens, bytes on the wire.
EVALUATION_COLUMNS: tuple[tuple[str, str], ...] = (
    SUCCESS, DECISIONS, ("input_tokens_per_episode", "input tok."), ("output_tokens_per_episode", "output tok."), WIRE)


def evaluation(policy: Any, name: str, conditions: Sequence[Condition], *, episodes: int | None = None,
               batch: int = 64, backend: str = "sim", pool_seed: int = 0,
               actions: bool = False) -> tuple[Experiment, list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """``policy`` played on each condition through the harness, analysed as an experiment of its own: the
    experiment, one record per condition (success with its 95% cluster-bootstrap interval, strict clusters
    with their exact interval, decisions, tokens, bytes) and the rows. Batched on the sim (``batch`` envs in
    lockstep), one episode at a time on another backend or with ``batch=0`` (then with times to commitment)."""
    experiment = Experiment(name=name, title=f"{name}: closed loop", conditions=tuple(conditions),
                            columns=EVALUATION_COLUMNS, paper_source="none (an evaluation of a checkpoint)")
    rows: dict[str, list[dict[str, Any]]] = {}
    for c in conditions:
        if backend == "sim" and batch > 0:
            rows[c.name] = batched_rows(c, policy, episodes, batch, pool_seed, actions)
        else:
            rows[c.name] = [r.to_json() for r in run_condition(c, policy, backend=backend, episodes=episodes,
                                                               pool_seed=pool_seed)]
    values = {n: rows_of(rs) for n, rs in rows.items()}
    records = analyze(experiment, values, {c.name: c.policy for c in conditions})
    return experiment, records, rows


def _play(player: Player, play: Play, pool_seed: int) -> list[dict[str, Any]]:
    def rows(policy: Any) -> list[dict[str, Any]]:
        if play.temperature is not None or (play.decode is not None and play.decode != player.generation.backend):
            policy = player.make(play.decode, play.temperature)  # a sampler of its own: its stream starts at the seed
        agent: Any = policy if play.role is None else ByRole({play.role: policy}, default=rule_agent("rule"))
        if play.batch > 0:
            return batched_rows(play.condition, agent, play.episodes, play.batch, pool_seed, play.actions)
        return [r.to_json() for r in run_condition(play.condition, agent, backend="sim", episodes=play.episodes,
                                                   pool_seed=pool_seed)]

    return player.play(rows)  # type: ignore[no-any-return]


def _trained(lane: Lane, run: RunSpec, checkpoints: Mapping[str, Path], key: str) -> tuple[Path, dict[str, Any], float, bool]:
    """The run's checkpoint, summary and training seconds: its earlier training when its folder holds one of the
    same key with the checkpoint unchanged, else a new one."""
    folder = lane.run_dir(run)
    marker = folder / "run.json"
    if marker.is_file():
        done = json.loads(marker.read_text(encoding="utf-8"))
        checkpoint = Path(lane.work) / (done["summary"]["checkpoint"] or "")
        if (done.get("key") == key and (checkpoint / "config.json").is_file()
                and tree_sha256(checkpoint)[0] == done["summary"]["checkpoint_sha256"]):
            return checkpoint, done["summary"], float(done["seconds"]), True
    base = None
    if isinstance(run.init, Checkpoint):
        base = run.init.path
    elif isinstance(run.init, After):
        base = str(checkpoints[run.init.run])
    if run.recipe is None:  # the init plays as it is
        assert base is not None
        return Path(base), {"checkpoint": base, "trained": False}, 0.0, True
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if isinstance(run.recipe, Recipe):
        result = train(sft_config(lane, run, base))
        if result.checkpoint is None:
            raise RuntimeError(f"lane {lane.name}: run {run.name!r} saved no checkpoint")
        checkpoint, summary = Path(result.checkpoint), run_summary(result, Path(lane.work))
    else:
        assert base is not None, f"run {run.name!r}: a {type(run.recipe).__name__} starts from a checkpoint"
        checkpoint, summary = run.recipe.train(lane, run, base, folder)
        summary = {**summary, "checkpoint": str(checkpoint.relative_to(lane.work)),
                   "checkpoint_sha256": tree_sha256(checkpoint)[0]}
    seconds = time.perf_counter() - t0
    marker.write_text(json.dumps({"key": key, "seconds": seconds, "summary": summary}, sort_keys=True) + "\n",
                      encoding="utf-8")
    return checkpoint, summary, seconds, False


def run_lane(lane: Lane) -> dict[str, Any]:
    """Train every run of ``lane`` and play its plays; writes and returns the lane's result (see the module
    docstring for what is reused)."""
    key = lane.key()
    previous: dict[str, Any] | None = None
    if lane.result_path.is_file():
        previous = json.loads(lane.result_path.read_text(encoding="utf-8"))
        if previous.get("key") != key:
            previous = None
        elif all(previous["runs"].get(run.name, {}).get("plays", {}).get(n, {}).get("key") == k
                 for run in lane.runs for n, k in _wanted(run).items()):
            previous["reused"] = True
            return previous
    hf_logging.disable_progress_bar()  # loading and saving bars of a dozen checkpoints say nothing
    before = torch.get_num_threads()
    torch.set_num_threads(lane.threads)
    try:
        result = _run(lane, key, previous)
    finally:  # a lane run in the calling process (jobs 1) leaves its thread count as it was
        torch.set_num_threads(before)
    lane.result_path.parent.mkdir(parents=True, exist_ok=True)
    lane.result_path.write_text(json.dumps(result, sort_keys=True) + "\n", encoding="utf-8")
    return result


def _wanted(run: RunSpec) -> dict[str, str]:
    return {p.name: p.cache_key(run.max_new_tokens) for p in run.plays}


def _run(lane: Lane, key: str, previous: Mapping[str, Any] | None) -> dict[str, Any]:
    checkpoints: dict[str, Path] = {}
    runs: dict[str, Any] = {}
    warmed: list[str] = []  # the lane's first warm-up play, played once unrecorded before its timed pass
    for run in lane.runs:
        run_key = lane.run_key(run)
        checkpoint, summary, train_seconds, reused = _trained(lane, run, checkpoints, run_key)
        checkpoints[run.name] = checkpoint
        earlier = (previous or {}).get("runs", {}).get(run.name, {})
        # every earlier play of these weights (one asked now with other settings plays again; a retrained
        # checkpoint plays everything again), kept so that studies asked for in separate commands summarize together
        wanted = _wanted(run)
        kept = {n: p for n, p in earlier.get("plays", {}).items()
                if reused and earlier.get("run_key") == run_key and wanted.get(n, p.get("key")) == p.get("key")}
        entry: dict[str, Any] = {"run_key": run_key, "format": run.format.name, "summary": summary,
                                 "seconds": {"train": train_seconds, "play": 0.0}, "retrained": not reused,
                                 "plays": dict(kept), "decode": earlier.get("decode"),
                                 "static_decode_failure": earlier.get("static_decode_failure"),
                                 "timing_warm_up": earlier.get("timing_warm_up")}
        todo = [p for p in run.plays if p.name not in kept]
        if todo:
            player = Player(checkpoint, run.format, run.max_new_tokens, lane.device, run.dtype, lane.seed)
            played: dict[str, list[dict[str, Any]]] = {}  # cache key -> rows: a setup asked twice plays once
            for play in todo:
                cache = play.cache_key(run.max_new_tokens)
                t0 = time.perf_counter()
                if cache not in played:
                    if play.warm_up and not warmed:  # the decoder's graphs are captured on first use of each shape
                        _play(player, play, lane.inputs.pool_seed)
                        warmed.append(play.name)
                        entry["timing_warm_up"] = play.name
                    played[cache] = _play(player, play, lane.inputs.pool_seed)
                seconds = time.perf_counter() - t0
                entry["seconds"]["play"] += seconds
                rows = [{**r, "condition": play.condition.name} for r in played[cache]]
                entry["plays"][play.name] = {"key": cache, "rows": rows, "seconds": seconds}
            entry.update(decode=player.backend, static_decode_failure=player.fallback)
        runs[run.name] = entry
    return {"key": key, "lane": lane.name, "seed": lane.seed, "device": device_name(lane.device), "runs": runs}


def execute(lanes: Sequence[Lane], jobs: int, log: Callable[[str], None], describe: Callable[[dict[str, Any]], str],
            every: Callable[[], object] | None = None) -> list[str]:
    """Run every lane, ``jobs`` at a time; log each one as it ends (``describe`` its result), call ``every`` (a
    provisional summary) at most once a minute; returns one line per failed lane."""
    last = [time.perf_counter()]

    def done(lane: Lane, result: dict[str, Any] | None, error: str | None) -> None:
        if error is not None:
            log(f"lane {lane.name} FAILED: {error.strip().splitlines()[-1]}")
            return
        assert result is not None
        log(f"lane {lane.name}{' (reused)' if result.get('reused') else ''}: {describe(result)}")
        if every is not None and time.perf_counter() - last[0] >= 60:  # a run cut short leaves what finished
            every()
            last[0] = time.perf_counter()

    if not lanes:
        return []
    return run_lanes(run_lane, lanes, jobs, lanes[0].threads, done)


def success_record(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A play's success as a run's record keeps it: episodes, success rate, outcomes, per-episode success, and the
    95% cluster-bootstrap interval (the two role permutations of a public instance are one draw), computed as
    ``gencoord train evaluate`` and the experiment harness compute a condition's (:func:`success_by_cluster`)."""
    counted = Counter(str(r["outcome"]) for r in rows)
    per_cluster = success_by_cluster(rows_of(rows))
    ci = stats.bootstrap_ci(per_cluster.values())
    return {"episodes": len(rows), "success_rate": counted.get("SUCCESS", 0) / max(1, len(rows)),
            "outcomes": dict(sorted(counted.items())),
            "success_by_episode": {str(r["episode_id"]): str(r["outcome"]) == "SUCCESS" for r in rows},
            "clusters": len(per_cluster), "ci95": list(ci) if ci else None}


def cluster_success(success_by_episode: Mapping[str, bool], tag: str = "") -> dict[str, float]:
    """Per-cluster success of a record's ``success_by_episode`` (``tag`` prefixes each cluster, e.g. a seed's, so
    records of several seeds pool without pairing across them)."""
    return {tag + str(c): v for c, v in stats.cluster_means(
        (parse_episode_id(e).cluster, float(ok)) for e, ok in success_by_episode.items()).items()}


def paired_change(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """After minus before (two :func:`success_record` values, or ``{"success_by_episode": ...}``), paired by
    cluster: ``{"diff", "ci95", "clusters"}`` with the 95% paired cluster-bootstrap interval; None when either is
    missing or they share no cluster."""
    if not before or not after:
        return None
    return stats.paired_bootstrap_ci(cluster_success(after["success_by_episode"]),
                                     cluster_success(before["success_by_episode"]))


def rows_of(raw: Iterable[Mapping[str, Any]]) -> list[EpisodeRow]:
    """Rows kept as JSON (a lane result's play, an evaluation's) as the harness's values."""
    return [EpisodeRow(**{k: v for k, v in r.items() if k != "actions"}) for r in raw]


def logger(enabled: bool, start: float | None = None) -> Callable[[str], None]:
    """``log(message)``: a line with the seconds since ``start`` (default: now), or nothing when not ``enabled``."""
    t0 = time.perf_counter() if start is None else start

    def log(message: str) -> None:
        if enabled:
            print(f"[{time.perf_counter() - t0:7.1f} s] {message}", flush=True)

    return log


def outcomes(rows: Iterable[Mapping[str, Any]]) -> str:
    """One character per episode, in order: 1 for a success, 0 for any other outcome."""
    return "".join("1" if str(r["outcome"]) == "SUCCESS" else "0" for r in rows)
