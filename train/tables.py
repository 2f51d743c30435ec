"""Learned rows of the paper's tables, one command: ``gencoord train tables``.

For every table asked for, the command builds the row sets its learned conditions need, trains one model
per (seed, model) in parallel lanes (:mod:`gencoord_env.train.lanes`, over the GPUs of the machine), plays
every learned condition closed-loop on the sim with the experiment harness (its conditions, envs,
interventions and episode selection, :mod:`gencoord_env.commands.experiments.runner`), plays the seedless rule rows
once, and writes per table ``results.json`` (one record per condition, the harness's analysis: success
with its cluster-bootstrap interval, strict clusters, decisions, tokens, wire bytes, TTC, paired
differences; the paper's figure beside each), ``<table>.png`` and ``provenance.json``, and ``TABLES.md``
with every table (ours, the paper's figure in parentheses).

Which model plays which condition (the paper's assignment, :data:`TABLES`; :data:`MODELS` for the rows):

===============  ==========================================================================================
table            learned conditions -> model (training rows)
===============  ==========================================================================================
goal-capability  A-only, correct feedback, counterfactual feedback -> ``requester`` (gc_requester, 320 + 320);
                 centralized full info -> ``centralized`` (gc_centralized, 320)
request          true request, removed, same-template alternative -> ``direct`` (forward, 1,920)
horizon          multi-step -> ``direct``; single-step -> ``single_step`` (2,880)
representation   DSL -> ``direct``; JSON -> ``json`` (forward_json, 1,920); free-form -> ``freeform`` (2,400)
backend          Direct DSL -> ``direct``; Factor + rule -> ``factor_code`` (1,920)
visibility       learned policy, 3 views x 3 motifs -> ``direct``
naturalized      learned policy (Direct Short DSL) and learned factor + rule, C1-C3 -> ``direct``, ``factor_code``
===============  ==========================================================================================

Every other condition (the deterministic rule, the symbolic rule and factor composer of visibility, the
model-free rows of naturalized) keeps its rule agent and runs once, as the paper's seedless rows do.

Evaluation. A learned condition plays its whole selection (every cluster, both role permutations; with
``eval_episodes`` the harness's deterministic subset) with greedy decoding, ``eval_batch`` envs in
lockstep so one batched model call answers every deciding agent; each episode's calls and tokens are
its own. The representation and backend tables take their costs (calls, tokens, wire bytes, TTC) from
the paper's separate timing pool: 40 clusters x 2 roles played one at a time through the harness's
serial path (``run_condition``), so the time to commitment holds batch-1 model calls; success comes from
the whole pool. A lane plays its first timing pool once unrecorded before the timed pass, so the decoder's
one-off graph captures (one per prompt-width bucket) are not in the times: hot calls, as the paper times them. Seeds are pooled the paper's way: every role and seed observation of a cluster is
averaged within the cluster before the bootstrap resamples clusters.

Models start from random weights (``scratch``: a small Qwen3 built in code, one offline BPE tokenizer
trained on every model's set whichever tables are asked for, shared by every model) or from one
checkpoint (``init``: e.g. a procedural-pretrained model of ``gencoord train transfer``; its tokenizer is
kept). Epochs are the paper's per model (2; the centralized model 4) times the budget's ``epoch_scale``
from scratch, ``init_epoch_scale`` from a checkpoint; ``steps`` overrides both.

Outputs: ``OUT/<table>/{results.json, <table>.png, provenance.json}`` and ``OUT/TABLES.md``; checkpoints,
data, the tokenizer and each lane's episode rows go to ``work`` (default ``OUT/work``). A lane whose
result file exists with the same settings is reused, so an interrupted run continues; a table added to a
finished run plays the lane's trained model (its checkpoint still there, unchanged) on the new conditions
only. The tables are rewritten (at most once a minute) as lanes finish, so a run cut short leaves the
finished rows. Tables asked for in separate commands (as calls of limited length require) share one work
folder: every model is trained once, whichever table asked for it first, the rule rows accumulate, and
``--summarize-only --tables ...`` writes them all into one ``TABLES.md``.

Example::

    gencoord train tables --out runs/tables --budget tiny --seeds 2026073101
    gencoord train tables --out runs/tables --budget full --device cuda --jobs 21
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gencoord_env.commands.experiments.runner import EpisodeRow
from gencoord_env.commands.experiments.specs import (
    DECISIONS, GOAL_CAPABILITY, HORIZON, NATURALIZED, REPRESENTATION, REQUEST, SUCCESS, VISIBILITY, WIRE,
    Condition, Experiment,
)
from gencoord_env.train.data import DATASETS
from gencoord_env.train.lanes import device_name, git_commit, lane_device, run_lanes, threads_per_lane, versions

__all__ = [
    "BACKEND", "BUDGETS", "MODELS", "PAPER_SEEDS", "TABLES", "TIMING_CLUSTERS", "Budget", "Lane", "Model", "Table",
    "TablesConfig", "batched_rows", "lanes_for", "run", "run_lane", "summarize",
]

#: The paper's seeds (supplement, "Training and Checkpoint Provenance").
PAPER_SEEDS: tuple[int, ...] = (2026073101, 2026073102, 2026073103)
#: The paper's same-card timing pool: 40 clusters, both roles, one episode at a time.
TIMING_CLUSTERS = 40


@dataclass(frozen=True)
class Model:
    """One learned model: the row set it trains on, how its output becomes an action, the paper's epochs."""

    name: str
    data: str  # a set of gencoord_env.train.data.DATASETS
    policy: str  # a gencoord_env.agents.lm.policy.POLICY_KINDS name
    epochs: float  # the paper's (tab:training-budgets, tab:e1e2-training)
    about: str


MODELS: dict[str, Model] = {m.name: m for m in (
    Model("direct", "forward", "direct", 2.0, "Direct Short DSL, multi-step: 1,920 rows, 240 updates"),
    Model("single_step", "single_step", "direct", 2.0, "single-step: 2,880 rows, 360 updates"),
    Model("json", "forward_json", "direct", 2.0, "GenCoord-JSON surface: 1,920 rows, 240 updates"),
    Model("freeform", "freeform", "direct", 2.0, "matched-SFT controlled free-form: 2,400 rows, 300 updates"),
    Model("factor_code", "factor_code", "factor_code", 2.0, "Factor-Code + Rule: 1,920 rows, 240 updates"),
    Model("requester", "gc_requester", "direct", 2.0, "distributed requester: 320 initial + 320 after-response rows, 80 updates"),
    Model("centralized", "gc_centralized", "direct", 4.0, "centralized full information: 320 rows, 4 epochs, 80 updates"),
)}

TOKENS_IN = ("input_tokens_per_episode", "input tok.")
TOKENS_OUT = ("output_tokens_per_episode", "output tok.")
TTC = (("time_to_commitment_p50", "TTC p50 s"), ("time_to_commitment_p95", "TTC p95 s"))

#: Table tab:backend. Not in ``gencoord experiment``: its two rows need two learned policies at once, which
#: one ``--policy`` cannot give.
BACKEND = Experiment(
    name="backend",
    title="Quality-matched direct and factor-code backends (held-out pool)",
    paper_source="Table tab:backend (fresh success: 128 clusters, two roles, three seeds; tokens and TTC: a "
                 "separate 40-cluster same-card planning pool)",
    columns=(SUCCESS, TOKENS_IN, TOKENS_OUT, WIRE, *TTC),
    plot="cost",
    conditions=(
        Condition("Factor + rule", "heldout", "factor", subject=True, versus="Direct DSL",
                  paper={"success_rate": 1.0, "input_tokens_per_episode": 980.2, "output_tokens_per_episode": 19.4,
                         "wire_bytes_mean": 76.6, "time_to_commitment_p50": 0.824, "time_to_commitment_p95": 0.997}),
        Condition("Direct DSL", "heldout", "rule", subject=True,
                  paper={"success_rate": 1.0, "input_tokens_per_episode": 948.9, "output_tokens_per_episode": 79.1,
                         "wire_bytes_mean": 76.6, "time_to_commitment_p50": 2.453, "time_to_commitment_p95": 2.723}),
    ),
)

_FORMS = ("C1", "C2", "C3")
_FACTOR_NAT = {"C1": 1.0, "C2": 0.791, "C3": 0.801}
#: Table tab:naturalized-private with its second learned row (Learned factor + rule), which
#: ``gencoord experiment naturalized --policy`` has no second policy for.
NATURALIZED_LEARNED = dataclasses.replace(
    NATURALIZED,
    matrix_rows=("learned policy", "learned factor + rule", *NATURALIZED.matrix_rows[1:]),
    conditions=(*NATURALIZED.conditions, *(
        Condition(f"learned factor + rule / {form}", "heldout", "factor", private_fact=form, subject=True,
                  only_with_policy=True, versus=f"oracle factors / {form}", paper={"success_rate": _FACTOR_NAT[form]},
                  method="learned factor + rule", column=form, note="the paper's row is Learned factor + rule (0.8B)")
        for form in _FORMS)),
)


@dataclass(frozen=True)
class Table:
    """One of the paper's tables: the harness experiment it runs and the model of each learned condition."""

    name: str
    experiment: Experiment
    #: condition -> model name; conditions not named keep their rule agent (seedless, played once)
    models: Mapping[str, str]
    #: costs from the batch-1 timing pool (TIMING_CLUSTERS clusters), success from the whole pool
    timing: bool = False

    def __post_init__(self) -> None:
        names = {c.name for c in self.experiment.conditions}
        for condition, model in self.models.items():
            if condition not in names:
                raise ValueError(f"table {self.name!r}: no condition {condition!r} in experiment "
                                 f"{self.experiment.name!r}; expected one of {sorted(names)}")
            if model not in MODELS:
                raise ValueError(f"table {self.name!r}, condition {condition!r}: unknown model {model!r}; "
                                 f"expected one of {sorted(MODELS)}")

    @property
    def columns(self) -> tuple[tuple[str, str], ...]:
        return self.experiment.columns


def _learned(experiment: Experiment, model: str, method: str | None = None) -> dict[str, str]:
    return {c.name: model for c in experiment.conditions if c.only_with_policy and (method is None or c.method == method)}


TABLES: dict[str, Table] = {t.name: t for t in (
    Table("goal-capability", GOAL_CAPABILITY, {"A-only": "requester", "correct feedback": "requester",
                                               "counterfactual feedback": "requester",
                                               "centralized full info": "centralized"}),
    Table("request", REQUEST, {"true request": "direct", "removed": "direct", "same-template alternative": "direct"}),
    Table("horizon", dataclasses.replace(HORIZON, columns=(SUCCESS, DECISIONS, TOKENS_IN)),
          {"multi-step": "direct", "single-step": "single_step"}),
    Table("representation", REPRESENTATION, {"DSL": "direct", "JSON": "json", "free-form": "freeform"}, timing=True),
    Table("backend", BACKEND, {"Direct DSL": "direct", "Factor + rule": "factor_code"}, timing=True),
    Table("visibility", VISIBILITY, _learned(VISIBILITY, "direct")),
    Table("naturalized", NATURALIZED_LEARNED, {**_learned(NATURALIZED_LEARNED, "direct", "learned policy"),
                                               **_learned(NATURALIZED_LEARNED, "factor_code", "learned factor + rule")}),
)}


@dataclass(frozen=True)
class Budget:
    """Model size, schedule and evaluation sizes of one run."""

    name: str
    hidden_size: int
    num_layers: int
    epoch_scale: float  # from scratch: times each model's paper epochs
    init_epoch_scale: float = 1.0  # from --init: the paper's schedule
    steps: int | None = None  # optimizer steps of every model (overrides the epochs)
    arch_vocab: int = 2048  # the scratch tokenizer's vocabulary
    tokenizer_rows: int | None = None  # rows of each set the scratch tokenizer trains on; None: every row
    micro_batch: int = 16  # the paper's effective batch
    grad_accum: int = 1
    lr: float | None = None  # None: sft.default_lr (scratch 1e-3, a scratch-lineage checkpoint 1e-4, else 1e-5)
    eval_episodes: int | None = None  # per learned condition; None: the whole selection
    eval_batch: int = 128
    timing_episodes: int = 2 * TIMING_CLUSTERS
    rule_episodes: int | None = None  # per rule condition; None: the whole selection
    max_new_tokens: int = 256
    max_length: int = 2048
    #: CPU threads of each lane; None: the machine's cores shared by the concurrent lanes. A tiny model gains
    #: nothing from several, and on a busy machine their spin-waiting makes each step ten times slower.
    threads: int | None = None
    #: the recipe's levers on the decision token (gencoord_env.train.sft): the share of samples whose binding
    #: codes are renamed (only the sets in RENAMED_SETS, whose prompts list their codes), and its loss weight
    code_renaming: float = 0.0
    decision_weight: float = 1.0
    #: each model's resumable state every this many updates (sft ``resume_every``; 0: none): a lane cut off
    #: by a call's time limit continues, on a machine that kept ``work``, where its last state left it
    resume_every: int = 0


#: Sets whose rows name their codes where renaming can find them all (the forward route's prompts list them
#: as ``codebook=``; the free-form surface says them in words and Goal x Capability rows carry response codes).
RENAMED_SETS: frozenset[str] = frozenset(name for name, spec in DATASETS.items() if spec.code_renaming)

#: ``tiny``: the whole pipeline on a CPU in well under a minute (a 1-layer model, 4 steps, 4 episodes a
#: condition). ``full``: the 6M-parameter model of the transfer runs (hidden 256 x 6 layers), 32 epochs of
#: every set from scratch at 1e-3 (the transfer experiment's fitted protocol-only recipe: 3,840 updates for the
#: 1,920 forward rows), half the samples of the forward-route sets code-renamed, every episode. The
#: transfer runs fitted Factor-Code on every seed with this recipe and Direct Short DSL on one of three
#: (reports/transfer/fitted). About 74,000 updates for 3 seeds x 7 models, twice the earlier 16-epoch
#: recipe's, which was sized for one machine of 4 H100s with ``--jobs 21`` (estimated 6-8 minutes then; this
#: one not yet run). On one H100, run the tables a few at a time (``--tables``).
BUDGETS: dict[str, Budget] = {
    "tiny": Budget(name="tiny", hidden_size=32, num_layers=1, epoch_scale=1.0, steps=4, arch_vocab=512, tokenizer_rows=160, micro_batch=4,
                   eval_episodes=4, eval_batch=4, timing_episodes=2, rule_episodes=4, max_new_tokens=24, threads=1),
    "full": Budget(name="full", hidden_size=256, num_layers=6, epoch_scale=16.0, code_renaming=0.5, resume_every=500),
}


@dataclass(frozen=True)
class TablesConfig:
    out: str
    tables: tuple[str, ...] = tuple(TABLES)
    seeds: tuple[int, ...] = PAPER_SEEDS
    budget: Budget = BUDGETS["tiny"]
    scratch: str | None = "qwen3"  # a ScratchConfig.arch; None with init
    init: str | None = None  # a checkpoint directory every model starts from
    work: str | None = None
    device: str | None = None
    jobs: int = 1
    data_seed: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        unknown = [t for t in self.tables if t not in TABLES]
        if unknown:
            import difflib

            hint = difflib.get_close_matches(unknown[0], TABLES, n=1)
            raise ValueError(f"unknown table {unknown[0]!r}; expected some of {list(TABLES)}"
                             + (f" (did you mean {hint[0]!r}?)" if hint else ""))
        if not self.tables:
            raise ValueError(f"name at least one table; expected some of {list(TABLES)}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        if (self.scratch is None) == (self.init is None):
            raise ValueError("give exactly one of scratch (an architecture to build) and init (a checkpoint directory)")
        if self.init is not None and not (Path(self.init) / "config.json").is_file():
            raise FileNotFoundError(f"--init {self.init}: no checkpoint there (expected a directory with config.json, "
                                    "e.g. the final/ folder of a `gencoord train sft` or `transfer` run)")
        if self.jobs < 1:
            raise ValueError(f"jobs must be >= 1, got {self.jobs}")

    @property
    def work_dir(self) -> Path:
        return Path(self.work) if self.work else Path(self.out) / "work"

    def models(self) -> list[str]:
        """The models the tables need, in :data:`MODELS` order."""
        used = {m for t in self.tables for m in TABLES[t].models.values()}
        return [m for m in MODELS if m in used]


@dataclass(frozen=True)
class Lane:
    """One model of one seed: train it, then play every condition of the asked tables that it plays."""

    seed: int
    model: str
    tables: tuple[str, ...]
    work: str
    tokenizer: str | None  # the shared scratch tokenizer; None with init
    scratch: str | None
    init: str | None
    budget: Budget
    device: str | None
    threads: int
    inputs: str  # digest of the data (and tokenizer, init checkpoint) the lane reads

    @property
    def name(self) -> str:
        return f"{self.seed}/{self.model}"

    @property
    def result_path(self) -> Path:
        return Path(self.work) / "lanes" / f"{self.seed}-{self.model}.json"

    def key(self) -> str:
        """What the lane's results depend on (not where or how fast it runs)."""
        d = dataclasses.asdict(self)
        for k in ("work", "tokenizer", "device", "threads", "init", "tables"):
            d.pop(k)
        d["budget"].pop("threads")
        d["budget"].pop("resume_every")
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()

    def conditions(self) -> list[tuple[str, Condition]]:
        """``(table/condition, condition)`` of every condition of the lane's tables that its model plays."""
        return [(f"{name}/{c.name}", c) for name in self.tables for c in TABLES[name].experiment.conditions
                if TABLES[name].models.get(c.name) == self.model]


# --------------------------------------------------------------------------- evaluation


def _setup(c: Condition) -> str:
    """What decides a condition's episodes (not its name, policy or paper figures): equal setups play alike."""
    return json.dumps([c.pool, c.route, c.view, c.surface, c.private_fact, c.intervention,
                       dict(c.intervention_args), dict(c.where)], sort_keys=True)


def batched_rows(condition: Condition, policy: Any, episodes: int | None, batch_size: int,
                 pool_seed: int = 0) -> list[EpisodeRow]:
    """The harness's rows of ``condition`` played with a learned policy ``batch_size`` envs at a time.

    Same envs (intervention included) and episode selection as ``run_condition``; each episode's model
    calls and tokens are its own (``run_lockstep`` attributes the batch's call records). No time to
    commitment: an episode's clock would hold the waits for the other envs' decisions.
    """
    from gencoord_env.commands.experiments.runner import episode_indices, make_env
    from gencoord_env.train.evaluate import run_lockstep

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
        rows.append(EpisodeRow(condition=condition.name, episode_id=str(info["episode_id"]), cluster=ep.cluster.id,
                               perm=ep.perm, family=ep.template.family, motif=ep.template.motif,
                               outcome=str(info["outcome"]), metrics=metrics, model_calls=int(info["calls"])))
    return rows


def _timing_rows(condition: Condition, policy: Any, episodes: int) -> list[EpisodeRow]:
    """The timing pool through the harness's serial path: one episode, one batch-1 call at a time."""
    from gencoord_env.commands.experiments.runner import run_condition

    return run_condition(condition, policy, backend="sim", episodes=episodes)


# --------------------------------------------------------------------------- lanes


def _train(lane: Lane, model: Model, data: Path, out_dir: Path) -> Any:
    from gencoord_env.train.sft import SFTConfig, ScratchConfig, train

    b = lane.budget
    scratch = None if lane.init else ScratchConfig(lane.scratch, b.arch_vocab, b.hidden_size, b.num_layers,  # type: ignore[arg-type]
                                                   tokenizer=lane.tokenizer)
    scale = b.init_epoch_scale if lane.init else b.epoch_scale
    config = SFTConfig(
        data=(str(data / f"{model.data}.jsonl"),), out_dir=str(out_dir), base_model=lane.init, scratch=scratch,
        lr=b.lr, epochs=model.epochs * scale, max_steps=b.steps, micro_batch=b.micro_batch, grad_accum=b.grad_accum,
        max_length=b.max_length, seed=lane.seed, device=lane.device, progress=False, log_every=50,
        code_renaming=b.code_renaming if model.data in RENAMED_SETS else 0.0, decision_weight=b.decision_weight,
        resume_every=b.resume_every,
    )
    return train(config)


def _run_summary(result: Any, work: Path) -> dict[str, Any]:
    p = result.provenance
    return {
        "checkpoint": str(Path(result.checkpoint).relative_to(work)) if result.checkpoint else None,
        "checkpoint_sha256": p.get("checkpoint", {}).get("tree_sha256"),
        "parameters": p["base_model"]["parameters"],
        "base": {k: v for k, v in p["base_model"].items() if k in ("kind", "source", "tree_sha256", "arch", "hidden_size", "num_layers")},
        "data_sha256": p["data"]["sha256"],
        "data_files": [{k: f[k] for k in ("file", "rows", "sha256")} for f in p["data"]["files"]],
        "config_sha256": p["config_sha256"],
        "lr": p["config"]["lr"],
        "optimizer_steps": p["optimizer_steps"],
        "epochs": p["epochs"],
        "token_exposure": p["token_exposure"],
        "loss_first": p["loss_first"],
        "loss_final": p["loss_final"],
        "train_seconds": p["train_seconds"],
        "precision": p["precision"],
        "fit": (p.get("fit") or {}).get("teacher_forced"),  # the decision token on the rows it trained on
        "fits": (p.get("fit") or {}).get("fits"),
    }


class _Player:
    """A lane's loaded policy; falls back to ``model.generate`` once if the static decoder fails here."""

    def __init__(self, checkpoint: Path, kind: str, budget: Budget, device: str | None) -> None:
        from gencoord_env.agents.lm.generate import GenerationConfig
        from gencoord_env.agents.lm.loading import load_model

        self.lm = load_model(checkpoint, device=device)
        self.kind = kind
        # No torch.compile: a compile per decode shape would cost more than these small models' whole evaluation.
        self.generation = GenerationConfig(max_new_tokens=budget.max_new_tokens, compile_decode=False, compile_prefill=False)
        self.fallback: str | None = None
        self.policy = self._make()

    def _make(self) -> Any:
        from gencoord_env.agents.lm.policy import make_policy

        return make_policy(self.lm.model, self.lm.tokenizer, self.kind, self.generation)  # type: ignore[arg-type]

    def play(self, fn: Callable[[Any], list[EpisodeRow]]) -> list[EpisodeRow]:
        try:
            return fn(self.policy)
        except Exception as exc:  # noqa: BLE001 - the static decoder failed on this stack: the reference path
            if self.fallback is not None or self.generation.backend == "generate":
                raise
            self.fallback = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            warnings.warn(f"static decoding failed ({self.fallback}); playing with model.generate", RuntimeWarning, stacklevel=2)
            self.generation = dataclasses.replace(self.generation, backend="generate")
            self.policy = self._make()
            return fn(self.policy)


def run_lane(lane: Lane) -> dict[str, Any]:
    """Train one model of one seed and play its conditions; writes and returns the lane's result.

    A result file of the same key is reused: whole when it played every condition asked now, and for its
    trained model when tables were added since (the checkpoint it names is still there, unchanged), so
    only the new conditions are played.
    """
    key = lane.key()
    previous = None
    if lane.result_path.is_file():
        previous = json.loads(lane.result_path.read_text(encoding="utf-8"))
        if previous.get("key") != key:
            previous = None
        elif {k for k, _ in lane.conditions()} <= set(previous["conditions"]):
            previous["reused"] = True
            return previous
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    before = torch.get_num_threads()
    torch.set_num_threads(lane.threads)
    try:
        result = _train_and_play(lane, key, previous)
    finally:  # a lane run in the calling process (jobs 1) leaves its thread count as it was
        torch.set_num_threads(before)
    lane.result_path.parent.mkdir(parents=True, exist_ok=True)
    lane.result_path.write_text(json.dumps(result, sort_keys=True) + "\n", encoding="utf-8")
    return result


def _trained_before(previous: Mapping[str, Any] | None, work: Path) -> Path | None:
    """The checkpoint of an earlier result of this lane, when it is still there unchanged."""
    from gencoord_env.train.sft import tree_sha256

    run = (previous or {}).get("run") or {}
    if not run.get("checkpoint"):
        return None
    path = work / run["checkpoint"]
    if not (path / "config.json").is_file() or tree_sha256(path)[0] != run.get("checkpoint_sha256"):
        return None
    return path


def _train_and_play(lane: Lane, key: str, previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    work = Path(lane.work)
    model = MODELS[lane.model]
    b = lane.budget
    seconds: dict[str, float] = {"train": 0.0, "eval_quality": 0.0, "eval_timing": 0.0}
    checkpoint = _trained_before(previous, work)
    if checkpoint is None:
        previous = None
        t0 = time.perf_counter()
        trained = _train(lane, model, work / "data", work / "models" / str(lane.seed) / model.name)
        seconds["train"] = time.perf_counter() - t0
        checkpoint, run = Path(trained.checkpoint), _run_summary(trained, work)
    else:
        assert previous is not None
        seconds = {k: float(previous["seconds"].get(k, 0.0)) for k in seconds}
        run = previous["run"]
    player = _Player(checkpoint, model.policy, b, lane.device)
    played: dict[tuple[str, str], list[EpisodeRow]] = {}  # (kind, setup) -> rows: a setup in two tables plays once
    warmed: list[str] = []  # the condition whose timing pool was played once, unrecorded, before the timed pass
    conditions: dict[str, Any] = dict(previous["conditions"]) if previous else {}
    for name, c in lane.conditions():
        if name in conditions:
            continue
        entry: dict[str, Any] = {}
        kinds = [("quality", b.eval_episodes)] + ([("timing", b.timing_episodes)] if TABLES[name.split("/")[0]].timing else [])
        for kind, cap in kinds:
            cache_key = (kind, _setup(c) + f"|{cap}")
            if cache_key not in played:
                t0 = time.perf_counter()
                if kind == "quality":
                    played[cache_key] = player.play(lambda p, c=c, cap=cap: batched_rows(c, p, cap, b.eval_batch))
                else:
                    if not warmed:  # the decoder's graphs are captured on first use of each shape: time hot calls
                        player.play(lambda p, c=c, cap=cap: _timing_rows(c, p, cap))
                        warmed.append(name)
                    played[cache_key] = player.play(lambda p, c=c, cap=cap: _timing_rows(c, p, cap))
                seconds[f"eval_{kind}"] += time.perf_counter() - t0
            entry[kind] = [dataclasses.replace(r, condition=c.name).to_json() for r in played[cache_key]]
        conditions[name] = entry
    warm_up = warmed[0] if warmed else (previous or {}).get("timing_warm_up")
    return {"key": key, "lane": lane.name, "seed": lane.seed, "model": lane.model, "device": device_name(lane.device),
            "decode": player.policy.generator.backend, "static_decode_failure": player.fallback,
            "seconds": seconds, "timing_warm_up": warm_up, "run": run, "conditions": conditions}


# --------------------------------------------------------------------------- shared inputs


#: Every model's row set. All are built (a few seconds) and all train the scratch tokenizer, whichever tables
#: are asked for: a model's tokenizer, and so its weights and rows, do not depend on the other tables of the
#: command, and a lane trained for one table is the lane of every other table its model plays, reused from
#: the same work folder.
ALL_SETS: tuple[str, ...] = tuple(sorted({m.data for m in MODELS.values()}))


def _data(config: TablesConfig, data: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """Every model's row set (reused when ``data`` holds them for the same pool seed)."""
    from gencoord_env.train.data import build_all

    sets = ALL_SETS
    path = data / "manifest.json"
    previous = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    if (previous and previous.get("pool_seed") == config.data_seed and set(sets) <= set(previous["files"])
            and all((data / f"{s}.jsonl").is_file() for s in sets)):
        log(f"data: reused {data}")
        return previous
    t0 = time.perf_counter()
    manifest = build_all(data, sets, config.data_seed)
    log("data: " + ", ".join(f"{k} {v['rows']}" for k, v in manifest["files"].items()) + f" rows ({time.perf_counter() - t0:.1f} s)")
    return manifest


def _tokenizer(config: TablesConfig, manifest: Mapping[str, Any], data: Path, out: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """One byte-level BPE on every prompt and target of every set (:data:`ALL_SETS`), shared by every scratch
    model (reused when ``out`` holds one trained on the same corpus)."""
    from gencoord_env.agents.lm.loading import binding_codes, train_tokenizer, world_names
    from gencoord_env.train.data import load_rows
    from gencoord_env.train.sft import tree_sha256

    sets = ALL_SETS
    b = config.budget
    corpus_id = {"sets": {s: manifest["files"][s]["sha256"] for s in sets}, "vocab_size": b.arch_vocab,
                 "max_length": b.max_length, "rows_per_set": b.tokenizer_rows, "whole_words": [*binding_codes(), *world_names()]}
    stamp = out / "corpus.json"
    if not ((out / "tokenizer.json").is_file() and stamp.is_file()
            and json.loads(stamp.read_text(encoding="utf-8")) == corpus_id):
        prompts: dict[str, None] = {}
        targets: list[str] = []
        for s in sets:
            rows = load_rows(data / f"{s}.jsonl")[: b.tokenizer_rows]
            prompts.update((r.prompt, None) for r in rows)
            targets += [r.target for r in rows]
        tokenizer = train_tokenizer([*prompts, *targets], vocab_size=b.arch_vocab, model_max_length=b.max_length)
        tokenizer.save_pretrained(out)
        stamp.write_text(json.dumps(corpus_id, sort_keys=True) + "\n", encoding="utf-8")
        log(f"tokenizer: vocabulary {len(tokenizer)} from {len(prompts)} prompts and {len(targets)} targets")
    digest = tree_sha256(out)[0]
    return {"sha256": digest, "corpus": corpus_id}


def _rule_rows(config: TablesConfig, log: Callable[[str], None], previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every rule condition of the asked tables, played once (seedless) through the harness's serial path; the
    rows of ``previous`` (the work folder's earlier ``rules.json``) are kept, and reused, when they were played
    with the same episodes and pool seed, so tables asked for in separate commands summarize together."""
    from gencoord_env.agents import make_policy
    from gencoord_env.commands.experiments.runner import run_condition

    t0 = time.perf_counter()
    settings = {"episodes": config.budget.rule_episodes, "pool_seed": config.data_seed}
    out: dict[str, Any] = dict(previous["conditions"]) if previous and previous.get("settings") == settings else {}
    played = 0
    for name in config.tables:
        table = TABLES[name]
        for c in table.experiment.conditions:
            if c.name in table.models or c.only_with_policy or f"{name}/{c.name}" in out:
                continue
            rows = run_condition(c, make_policy(c.policy), backend="sim", episodes=config.budget.rule_episodes,
                                 pool_seed=config.data_seed)
            out[f"{name}/{c.name}"] = [r.to_json() for r in rows]
            played += 1
    seconds = time.perf_counter() - t0
    log(f"rule rows: {played} conditions played, {len(out) - played} kept ({seconds:.1f} s)")
    return {"seconds": seconds, "settings": settings, "conditions": out}


def _lane_inputs(config: TablesConfig, manifest: Mapping[str, Any], tokenizer: Mapping[str, Any] | None,
                 init: Mapping[str, Any] | None) -> dict[str, str]:
    """Per model of ``config``, the digest of what its lanes read: its own row set, the tokenizer, the init
    checkpoint, the pool seed."""
    return {m: hashlib.sha256(json.dumps([manifest["files"][MODELS[m].data]["sha256"], tokenizer and tokenizer["sha256"],
                                          init and init["tree_sha256"], config.data_seed]).encode()).hexdigest()
            for m in config.models()}


def lanes_for(config: TablesConfig, inputs: Mapping[str, str] | str, tokenizer: Path | None) -> list[Lane]:
    """One lane per (seed, model), the longest trainings first so they are not left for last. ``inputs``: each
    model's input digest (a run record of an earlier version holds one digest for every lane)."""
    from gencoord_env.train.data import expected_rows

    models = sorted(config.models(), key=lambda m: -expected_rows(MODELS[m].data, config.data_seed) * MODELS[m].epochs)
    threads = config.budget.threads or threads_per_lane(config.jobs)
    order = [(seed, m) for m in models for seed in config.seeds]
    return [Lane(seed, m, tuple(t for t in config.tables if m in TABLES[t].models.values()), str(config.work_dir),
                 str(tokenizer) if tokenizer else None, config.scratch, config.init, config.budget,
                 lane_device(config.device, k), threads, inputs if isinstance(inputs, str) else inputs[m])
            for k, (seed, m) in enumerate(order)]


def run(config: TablesConfig, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Every asked table: data, tokenizer, rule rows, lanes, then the outputs (see the module docstring).

    Returns what :func:`summarize` returns.
    """
    from gencoord_env.train.sft import tree_sha256

    start = time.perf_counter()
    out, work = Path(config.out), config.work_dir
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)

    def log(message: str) -> None:
        if config.progress:
            print(f"[{time.perf_counter() - start:7.1f} s] {message}", flush=True)

    manifest = _data(config, work / "data", log)
    tokenizer = _tokenizer(config, manifest, work / "data", work / "tokenizer", log) if config.scratch else None
    init = {"dir": Path(config.init).name, "tree_sha256": tree_sha256(config.init)[0]} if config.init else None
    inputs = _lane_inputs(config, manifest, tokenizer, init)
    rules_path = work / "rules.json"
    rules = _rule_rows(config, log, json.loads(rules_path.read_text(encoding="utf-8")) if rules_path.is_file() else None)
    rules_path.write_text(json.dumps(rules) + "\n", encoding="utf-8")
    run_info = {"command": " ".join(["gencoord", "train", "tables", *argv]) if argv is not None else None,
                "git_commit": git_commit(), "versions": versions(), "manifest": manifest, "tokenizer": tokenizer,
                "init": init, "inputs": inputs, "seconds": {"rules": rules["seconds"]}}
    (work / "run.json").write_text(json.dumps(run_info, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    lanes = lanes_for(config, inputs, work / "tokenizer" if config.scratch else None)
    log(f"{len(lanes)} lanes ({len(config.seeds)} seeds x {len(config.models())} models), {config.jobs} at a time, "
        f"{lanes[0].threads} threads each, device {config.device or 'auto'}")
    last = [time.perf_counter()]
    t0 = time.perf_counter()

    def done(lane: Lane, result: dict[str, Any] | None, error: str | None) -> None:
        if error is not None:
            log(f"lane {lane.name} FAILED: {error.strip().splitlines()[-1]}")
            return
        assert result is not None
        ok = {name: sum(r["outcome"] == "SUCCESS" for r in e["quality"]) for name, e in result["conditions"].items()}
        n = {name: len(e["quality"]) for name, e in result["conditions"].items()}
        log(f"lane {lane.name}{' (reused)' if result.get('reused') else ''}: loss {result['run']['loss_final']:.3f}, "
            + ", ".join(f"{k} {ok[k]}/{n[k]}" for k in list(ok)[:6]) + (" ..." if len(ok) > 6 else ""))
        if time.perf_counter() - last[0] >= 60:  # a run cut short still leaves the finished rows
            summarize(config, quiet=True)
            last[0] = time.perf_counter()

    failures = run_lanes(run_lane, lanes, config.jobs, lanes[0].threads, done)
    run_info["seconds"].update(lanes_wall=time.perf_counter() - t0, driver_wall=time.perf_counter() - start)
    run_info["failures"] = failures
    (work / "run.json").write_text(json.dumps(run_info, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    summary = summarize(config)
    log(f"wrote {out / 'TABLES.md'} and {len(config.tables)} table folders ({time.perf_counter() - start:.1f} s)")
    return summary


def summarize(config: TablesConfig, quiet: bool = False) -> dict[str, Any]:
    """Write every table's outputs and ``TABLES.md`` from ``work``'s lane files, rule rows and run record
    (the lanes that exist: a run cut short gives the rows that finished)."""
    from gencoord_env.train.table_report import write_all

    work = config.work_dir
    if not (work / "run.json").is_file():
        raise FileNotFoundError(f"{work / 'run.json'} does not exist; run `gencoord train tables --out {config.out}` first")
    run_info = json.loads((work / "run.json").read_text(encoding="utf-8"))
    rules = json.loads((work / "rules.json").read_text(encoding="utf-8"))
    results = []
    inputs = run_info["inputs"]
    if not isinstance(inputs, str):  # each model's digest, from the run record's data, tokenizer and init
        inputs = _lane_inputs(config, run_info["manifest"], run_info["tokenizer"], run_info["init"])
    for lane in lanes_for(config, inputs, work / "tokenizer" if config.scratch else None):
        if lane.result_path.is_file():
            result = json.loads(lane.result_path.read_text(encoding="utf-8"))
            if result.get("key") == lane.key():  # not a lane of other settings left in the same work folder
                results.append(result)
    return write_all(config, run_info, rules, results, quiet=quiet)
