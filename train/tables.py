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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gencoord_env.commands.experiments.specs import (
    DECISIONS, GOAL_CAPABILITY, HORIZON, NATURALIZED, REPRESENTATION, REQUEST, SUCCESS, VISIBILITY, WIRE,
    Condition, Experiment,
)
from gencoord_env.errors import UnknownName, UsageError
from gencoord_env.train.data import data_set, expected_rows
from gencoord_env.train.lanes import lane_device, threads_per_lane
from gencoord_env.train.pipeline import Checkpoint, Corpus, Inputs, Lane, Play, Recipe, RunSpec, Scratch

__all__ = [
    "ALL_SETS", "BACKEND", "BUDGETS", "MODELS", "PAPER_SEEDS", "TABLES", "TIMING_CLUSTERS", "Budget", "Model", "Table",
    "TablesConfig", "corpus", "lanes_for", "run_spec",
]

#: The paper's seeds (supplement, "Training and Checkpoint Provenance").
PAPER_SEEDS: tuple[int, ...] = (2026073101, 2026073102, 2026073103)
#: The paper's same-card timing pool: 40 clusters, both roles, one episode at a time.
TIMING_CLUSTERS = 40


@dataclass(frozen=True)
class Model:
    """One learned model: the row set it trains on (whose output format is the model's), the paper's epochs."""

    name: str
    data: str  # a set of gencoord_env.train.data.DATASETS
    epochs: float  # the paper's (tab:training-budgets, tab:e1e2-training)
    about: str

    @property
    def format(self) -> str:
        """Its output format (``gencoord_env.agents.formats``): its row set's."""
        return data_set(self.data).format


MODELS: dict[str, Model] = {m.name: m for m in (
    Model("direct", "forward", 2.0, "Direct Short DSL, multi-step: 1,920 rows, 240 updates"),
    Model("single_step", "single_step", 2.0, "single-step: 2,880 rows, 360 updates"),
    Model("json", "forward_json", 2.0, "GenCoord-JSON surface: 1,920 rows, 240 updates"),
    Model("freeform", "freeform", 2.0, "matched-SFT controlled free-form: 2,400 rows, 300 updates"),
    Model("factor_code", "factor_code", 2.0, "Factor-Code + Rule: 1,920 rows, 240 updates"),
    Model("requester", "gc_requester", 2.0, "distributed requester: 320 initial + 320 after-response rows, 80 updates"),
    Model("centralized", "gc_centralized", 4.0, "centralized full information: 320 rows, 4 epochs, 80 updates"),
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
                raise UsageError(f"table {self.name!r}: no condition {condition!r} in experiment "
                                 f"{self.experiment.name!r}; expected one of {sorted(names)}")
            if model not in MODELS:
                raise UsageError(f"table {self.name!r}, condition {condition!r}: unknown model {model!r}; "
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
    #: codes are renamed (only sets whose rows name every code where renaming finds it, ``DataSet.code_renaming``), and its loss weight
    code_renaming: float = 0.0
    decision_weight: float = 1.0
    #: the share of the Direct model's receiver samples drawn without their request, answering with the first
    #: branch (gencoord_env.train.removal): the rows that teach the request table's "removed" row a receiver
    #: acting on its own context (the paper's 50%) instead of a record no training row resembles (0%)
    request_removal: float = 0.0
    #: each model's resumable state every this many updates (sft ``resume_every``; 0: none): a lane cut off
    #: by a call's time limit continues, on a machine that kept ``work``, where its last state left it
    resume_every: int = 0



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
    "full": Budget(name="full", hidden_size=256, num_layers=6, epoch_scale=16.0, code_renaming=0.5, request_removal=0.2,
                   resume_every=500),
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
        missing = [t for t in self.tables if t not in TABLES]
        if missing:
            raise UnknownName("table", missing[0], TABLES)
        if not self.tables:
            raise UsageError(f"name at least one table; expected some of {list(TABLES)}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise UsageError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        if (self.scratch is None) == (self.init is None):
            raise UsageError("give exactly one of scratch (an architecture to build) and init (a checkpoint directory)")
        if self.init is not None and not (Path(self.init) / "config.json").is_file():
            raise FileNotFoundError(f"--init {self.init}: no checkpoint there (expected a directory with config.json, "
                                    "e.g. the final/ folder of a `gencoord train sft` or `transfer` run)")
        if self.jobs < 1:
            raise UsageError(f"jobs must be >= 1, got {self.jobs}")

    @property
    def work_dir(self) -> Path:
        return Path(self.work) if self.work else Path(self.out) / "work"

    def models(self) -> list[str]:
        """The models the tables need, in :data:`MODELS` order."""
        used = {m for t in self.tables for m in TABLES[t].models.values()}
        return [m for m in MODELS if m in used]


#: Every model's row set. All are built (a few seconds) and all train the scratch tokenizer, whichever tables are
#: asked for: a model's tokenizer, and so its weights and rows, do not depend on the other tables of the command,
#: and a lane trained for one table is the lane of every other table its model plays, reused from the same work folder.
ALL_SETS: tuple[str, ...] = tuple(sorted({m.data for m in MODELS.values()}))


def corpus(config: TablesConfig) -> Corpus:
    """The shared scratch tokenizer: the first ``tokenizer_rows`` rows of every model's set, prompts and targets."""
    b = config.budget
    return Corpus(ALL_SETS, vocab_size=b.arch_vocab, max_length=b.max_length, rows={s: b.tokenizer_rows for s in ALL_SETS})


def run_spec(config: TablesConfig, model: str) -> RunSpec:
    """The model's whole recipe: its set, the init, the paper's epochs times the budget's scale, and every
    condition of the asked tables that it plays (a timing table's also through the batch-1 timing pool)."""
    b, m = config.budget, MODELS[model]
    init = Checkpoint(config.init) if config.init else Scratch(config.scratch, b.arch_vocab, b.hidden_size, b.num_layers)  # type: ignore[arg-type]
    recipe = Recipe(epochs=m.epochs * (b.init_epoch_scale if config.init else b.epoch_scale), steps=b.steps, lr=b.lr,
                    micro_batch=b.micro_batch, grad_accum=b.grad_accum, max_length=b.max_length,
                    decision_weight=b.decision_weight, resume_every=b.resume_every,
                    code_renaming=b.code_renaming if data_set(m.data).code_renaming else 0.0,
                    request_removal=b.request_removal if m.data == "forward" else 0.0)
    plays: list[Play] = []
    for name in config.tables:
        table = TABLES[name]
        for c in table.experiment.conditions:
            if table.models.get(c.name) == model:
                plays.append(Play(f"{name}/{c.name}", c, b.eval_episodes, b.eval_batch))
                if table.timing:
                    plays.append(Play(f"{name}/{c.name}{TIMING}", c, b.timing_episodes, batch=0, warm_up=True))
    return RunSpec(model, m.data, init, recipe, tuple(plays), b.max_new_tokens)


#: The name of a condition's play on the timing pool: ``<table>/<condition>#timing``.
TIMING = "#timing"


def lanes_for(config: TablesConfig, inputs: Inputs) -> list[Lane]:
    """One lane per (seed, model), the longest trainings first so they are not left for last."""
    models = sorted(config.models(), key=lambda m: -expected_rows(MODELS[m].data, config.data_seed) * MODELS[m].epochs)
    threads = config.budget.threads or threads_per_lane(config.jobs)
    order = [(seed, m) for m in models for seed in config.seeds]
    work = config.work_dir
    return [Lane(f"{seed}/{m}", seed, (run_spec(config, m),), inputs, str(work), str(work / "lanes"),
                 lane_device(config.device, k), threads)
            for k, (seed, m) in enumerate(order)]
