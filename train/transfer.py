"""Transfer without downloaded weights: pretrain on procedural tasks, then fine-tune on the paper's rows.

``gencoord train transfer`` runs, for every seed and both learned backends (Direct Short DSL and
Factor-Code + Rule), three arms of one small Qwen3 architecture built from scratch, all sharing one
offline tokenizer:

=======================  ======================================================================================
arm                      training
=======================  ======================================================================================
``protocol_only``        random weights -> the paper's rows only (``forward`` or ``factor_code``, 1,920 rows),
                         at :data:`~gencoord_env.train.sft.SCRATCH_LR` for ``protocol_epochs``
``procedural_only``      random weights -> procedural rows only (``procedural`` or ``procedural_factor_code``:
                         generated templates, never a held-out template or crossproduct combination)
``pretrained_protocol``  the ``procedural_only`` checkpoint -> the paper's rows with the paper's schedule
                         (2 epochs, 240 updates at effective batch 16), at
                         :data:`~gencoord_env.train.sft.CONTINUE_LR`
=======================  ======================================================================================

Each checkpoint plays every episode of ``train``, ``heldout``, ``request``, ``horizon``, ``crossproduct`` and
``visibility`` (full view) on the forward route (greedy, sim backend), and each held-out pool again with the
model in one role beside the rule agent in the other (``by_role``). Results: success with a 95%
cluster-bootstrap interval (clusters are the unit; role permutations, and seeds when pooled, are averaged
within a cluster), strict clusters (every observation succeeded) with their Clopper-Pearson interval,
success per template, and the targets: train and heldout every cluster, horizon at least 95%, crossproduct
at least 58 of 60 clusters.

Fit first (:mod:`gencoord_env.train.fit`). A model that does not fit its own training rows cannot be read
for transfer, and the mean loss cannot tell: one decision token in ~60 target tokens carries the binding.
Every run records its decision token's teacher-forced accuracy, loss and margin per stage x template
(and a curve every ``monitor_every`` updates); each arm trained on the paper's rows gets a ``fit``
verdict from that and from its closed-loop play of the train pool per template x binding x role; the
summary's ``fit`` lists every seed, and a lane that does not fit says so in the log and as a warning.
``decode_check`` replays heldout with ``transformers``' ``generate`` and counts the decisions that differ
from the evaluation decoder's. The recipe's levers are in the budget and reported with it:
``code_renaming`` (the share of samples whose binding codes are renamed, :mod:`gencoord_env.train.renaming`)
and ``decision_weight`` (the decision token's loss weight).

Coverage of codes: the procedural pool names every code of the public codebook (every even-numbered pair
is named by two of them), and before anything trains the run checks that the pretraining rows name every
binding code the evaluated pools use (:func:`code_coverage`; fine-tuning rows do not count), and stops
with the missing codes otherwise.

Shared inputs, built once: the paper's sets (pool seed 0), the procedural sets (``pretrain_rows``
rows, procedural pool seed 0), and a byte-level BPE tokenizer trained on the paper's rows and the first
``tokenizer_rows`` procedural rows. Every row and every prompt of the forward route's pools must fit
``max_length``; the summary records the longest. Pretraining encodes a seeded fraction of its prompts
with BPE-dropout, and the summary's ``coverage`` lists, per model, the tokens of each pool's prompts
(reference play) that its training inputs never contained: ``pretrained_protocol`` must list none.

This module is the experiment as specs (:mod:`gencoord_env.train.pipeline`): :func:`lanes_for` gives one lane per
(seed, backend, chain), the ``protocol`` chain one run (``protocol_only``), the ``pretrained`` chain two
(``procedural_only``, then ``pretrained_protocol`` after it), each run playing every pool (:func:`plays`);
:mod:`gencoord_env.train.transfer_report` runs them and writes the outputs. ``jobs`` lanes run at once, each in
its own process (spawned, so CUDA works), sharing the device: small models leave a GPU mostly idle, so
concurrent lanes fill it. A lane whose result file exists with the same settings is reused, and a lane cut
short after pretraining continues from its checkpoint, so an interrupted run continues.

Outputs (``out``; bulky checkpoints go to ``work``, default ``out/work``):

- ``inputs.json`` (hashes, lengths, each pool's token ids, versions) and ``lanes/<seed>-<backend>-<chain>.json``
  (one per finished lane): everything the summary is built from, so ``--summarize-only`` rebuilds it, also
  from a run cut short (a provisional summary is also rewritten every minute while lanes run);
- ``summary.json``: per backend, arm and pool: pooled and per-seed results, targets, coverage, model
  size, tokens seen in pretraining and fine-tuning, seconds per phase, data and tokenizer hashes, seeds,
  library versions, the command;
- ``summary.png``: one panel per backend, the arms side by side per pool, with intervals and targets;
- ``summary.csv``: the same numbers flat; ``seeds/<seed>.json``: each seed's lanes, with every episode's
  outcome as a bit string in pool order (episode ``k`` is cluster ``k // 2``, role permutation ``k % 2``).

Budgets: ``tiny`` checks the whole pipeline on a CPU in about a minute (a 1-layer model, a few steps,
4 episodes a pool); ``full`` is sized for one H100 with 16 cores in about 8 minutes with ``--jobs 12``
(see :data:`BUDGETS`).

Example::

    gencoord train transfer --out runs/transfer --seeds 2026073101 2026073102 2026073103 --budget full --device cuda
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gencoord_env.commands.experiments.specs import Condition
from gencoord_env.errors import UsageError
from gencoord_env.train.lanes import lane_device, threads_per_lane
from gencoord_env.train.pipeline import After, Corpus, Inputs, Lane, Play, Recipe, RunSpec, Scratch

__all__ = [
    "ARMS", "BACKENDS", "BUDGETS", "CHAINS", "COVERAGE_POOLS", "PAPER_SEEDS", "POOLS", "ROLES", "TARGETS", "Budget",
    "TransferConfig", "corpus", "lanes_for", "plays", "runs",
]

#: The arms, in the order the summary lists them.
ARMS: tuple[str, ...] = ("protocol_only", "procedural_only", "pretrained_protocol")
#: backend -> (the paper's set, the procedural set) it trains on.
BACKENDS: dict[str, tuple[str, str]] = {
    "direct": ("forward", "procedural"),
    "factor_code": ("factor_code", "procedural_factor_code"),
}
#: Pools every checkpoint plays (forward route, full view): the train pool first (does the model fit its own rows?);
#: visibility holds the paper's familiar post-handoff motif and two new transformation orders.
POOLS: tuple[str, ...] = ("train", "heldout", "request", "horizon", "crossproduct", "visibility")
#: Pools whose prompts the token coverage check reads: every pool the forward route serves.
COVERAGE_POOLS: tuple[str, ...] = ("train", "heldout", "request", "horizon", "crossproduct", "visibility")
#: The issue's targets: the fraction of clusters solved under every observation, or the success rate.
TARGETS: dict[str, dict[str, float]] = {
    "train": {"strict_fraction": 1.0},
    "heldout": {"strict_fraction": 1.0},
    "horizon": {"success_rate": 0.95},
    "crossproduct": {"strict_fraction": 58 / 60},
}
#: The paper's seeds (supplement, "Training and Checkpoint Provenance").
PAPER_SEEDS: tuple[int, ...] = (2026073101, 2026073102, 2026073103)


@dataclass(frozen=True)
class Budget:
    """Sizes and schedules of one transfer run. ``*_steps`` (when set) override the matching epochs."""

    name: str
    hidden_size: int
    num_layers: int
    pretrain_rows: int
    pretrain_epochs: float
    protocol_epochs: float
    finetune_epochs: float = 2.0  # the paper's schedule: 1,920 rows -> 240 updates at batch 16
    arch: str = "qwen3"
    vocab_size: int = 2048
    micro_batch: int = 16  # the paper's effective batch (16) for the protocol and fine-tuning runs
    grad_accum: int = 1
    pretrain_micro_batch: int = 32  # pretraining: half the updates of batch 16, each twice as wide
    pretrain_steps: int | None = None
    protocol_steps: int | None = None
    finetune_steps: int | None = None
    finetune_lr: float | None = None  # None: sft.default_lr (CONTINUE_LR for a scratch-pretrained checkpoint)
    subword_dropout: float = 0.1
    subword_dropout_rows: float = 0.03
    tokenizer_rows: int = 8000
    eval_episodes: int | None = None  # per pool; None: every episode
    eval_batch: int = 128
    max_new_tokens: int = 256
    max_length: int = 2048
    # the recipe's levers on the decision token (gencoord_env.train.sft): its loss weight, and the share of
    # samples whose codes are renamed, on the paper's rows (protocol-only and fine-tuning) and in pretraining
    decision_weight: float = 1.0
    code_renaming: float = 0.0
    pretrain_code_renaming: float = 0.0
    monitor_every: int = 100  # decision-token accuracy on a fixed sample every this many updates
    decode_check: bool = True  # replay heldout with transformers' generate and count differing decisions
    resume_every: int = 0  # each run's resumable state every this many updates (sft; 0: none)
    deterministic: bool = True  # deterministic kernels in every run (False: --nondeterministic, faster on a GPU)


#: ``full``: hidden 256 x 6 layers (about 6M parameters with the ~2k-token vocabulary): deep enough to
#: find a branch's nodes and copy them in order over a ~800-token context, small enough that twelve
#: runs share one GPU. Pretraining reads 32,000 procedural rows (4,000 generated matched pairs, so 4,000
#: distinct templates) once: 1,000 updates at batch 32, about 26M tokens. The protocol-only arm gets the
#: scratch recipe that reached 100% heldout before (1,920 rows x 16 epochs = 1,920 updates at batch 16);
#: the fine-tune is the paper's 240 updates. The protocol-only arm trains 32 epochs (3,840 updates) and half
#: the samples of every run on the paper's rows have their codes renamed (``code_renaming``): with these,
#: Factor-Code fits its training rows on all three seeds (decision token 1.000, train pool 960/960) and
#: reaches 128/128 heldout, 80/80 horizon and 60/60 crossproduct clusters (reports/transfer/fitted), where
#: 16 epochs without renaming fit no seed. Direct Short DSL fits one seed of three from the paper's rows once
#: binding codes are single tokens (reports/transfer/whole-codes-direct), none after 240 fine-tuning updates.
#: On one H100 with 16 cores the protocol chain of 3 seeds x 2 backends takes about 540 s with ``--jobs 6``,
#: the pretrained chain about 510 s: ``--chains`` runs them as two calls.
BUDGETS: dict[str, Budget] = {
    "tiny": Budget(name="tiny", hidden_size=32, num_layers=1, pretrain_rows=208, pretrain_epochs=1.0,
                   protocol_epochs=2.0, micro_batch=4, pretrain_micro_batch=4, pretrain_steps=8, protocol_steps=4, finetune_steps=4,
                   subword_dropout_rows=1.0, tokenizer_rows=80, eval_episodes=4, eval_batch=4, max_new_tokens=24),
    "full": Budget(name="full", hidden_size=256, num_layers=6, pretrain_rows=32_000, pretrain_epochs=1.0,
                   protocol_epochs=32.0, code_renaming=0.5, resume_every=500),
}


@dataclass(frozen=True)
class TransferConfig:
    out: str
    seeds: tuple[int, ...] = PAPER_SEEDS
    budget: Budget = BUDGETS["tiny"]
    backends: tuple[str, ...] = tuple(BACKENDS)
    pools: tuple[str, ...] = POOLS
    work: str | None = None  # checkpoints and lane files; default out/work
    device: str | None = None
    jobs: int = 1
    data_seed: int = 0  # pool seed of the paper's sets and of the procedural pool
    data_workers: int = 1
    progress: bool = True
    chains: tuple[str, ...] = ("pretrained", "protocol")  # which lanes run: a run may split them over calls

    def __post_init__(self) -> None:
        if not self.chains or set(self.chains) - {"pretrained", "protocol"}:
            raise UsageError(f"chains must be some of ['pretrained', 'protocol'], got {list(self.chains)}")
        missing = [b for b in self.backends if b not in BACKENDS]
        if missing:
            raise UsageError(f"unknown backends {missing}; expected some of {sorted(BACKENDS)}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise UsageError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        if self.jobs < 1 or self.data_workers < 1:
            raise UsageError(f"jobs and data_workers must be >= 1, got {self.jobs} and {self.data_workers}")

    @property
    def out_dir(self) -> Path:
        return Path(self.out)

    @property
    def work_dir(self) -> Path:
        return Path(self.work) if self.work else Path(self.out) / "work"


#: The chains of runs a lane trains, longest first: each arm is the run of that name.
CHAINS: dict[str, tuple[str, ...]] = {"pretrained": ("procedural_only", "pretrained_protocol"), "protocol": ("protocol_only",)}
#: The roles a held-out pool is played in beside the rule agent (``by_role``).
ROLES: tuple[str, ...] = ("sender", "receiver")
#: The arms trained on the paper's rows: their fit is judged, and their heldout play checked against ``generate``.
PAPER_ARMS: tuple[str, ...] = ("protocol_only", "pretrained_protocol")


def corpus(config: TransferConfig) -> Corpus:
    """The shared tokenizer: every prompt of the paper's rows and the first ``tokenizer_rows`` procedural ones, and
    every target (so the Factor-Code field names are in it), of both backends' sets whichever are asked for: the
    tokenizer, and so each model, does not depend on the other backends of the command."""
    b = config.budget
    sets = tuple(sorted({s for pair in BACKENDS.values() for s in pair}))
    return Corpus(sets, vocab_size=b.vocab_size, max_length=b.max_length, all_targets=True,
                  rows={s: b.tokenizer_rows for s in sets if s.startswith("procedural")})


def plays(config: TransferConfig, arm: str) -> tuple[Play, ...]:
    """What each checkpoint plays: every pool (forward route, full view), each held-out pool again by role beside the
    rule agent, and for an arm trained on the paper's rows heldout again with ``generate`` (``decode_check``)."""
    b = config.budget
    check = b.decode_check and arm in PAPER_ARMS
    out: list[Play] = []
    for pool in config.pools:
        condition = Condition(pool, pool, "model")
        out.append(Play(pool, condition, b.eval_episodes, b.eval_batch, actions=check and pool == "heldout"))
        if pool != "train":
            out += [Play(f"{pool}/{role}", condition, b.eval_episodes, b.eval_batch, role=role) for role in ROLES]
        if check and pool == "heldout":
            out.append(Play(f"{pool}/generate", condition, b.eval_episodes, b.eval_batch, decode="generate", actions=True))
    return tuple(out)


def runs(config: TransferConfig, backend: str, chain: str) -> tuple[RunSpec, ...]:
    """The runs of one chain for one backend, each the whole recipe of its arm."""
    b = config.budget
    paper, procedural = BACKENDS[backend]
    scratch = Scratch(b.arch, b.vocab_size, b.hidden_size, b.num_layers)  # type: ignore[arg-type]
    common: dict[str, Any] = dict(max_length=b.max_length, decision_weight=b.decision_weight, monitor_every=b.monitor_every,
                  resume_every=b.resume_every, deterministic=b.deterministic)
    paper_rows: dict[str, Any] = dict(micro_batch=b.micro_batch, grad_accum=b.grad_accum, code_renaming=b.code_renaming, **common)
    spec = {
        "protocol_only": RunSpec("protocol_only", paper, scratch, Recipe(
            epochs=b.protocol_epochs, steps=b.protocol_steps, **paper_rows), plays(config, "protocol_only"), b.max_new_tokens),
        "procedural_only": RunSpec("procedural_only", procedural, scratch, Recipe(
            epochs=b.pretrain_epochs, steps=b.pretrain_steps, micro_batch=b.pretrain_micro_batch, grad_accum=1,
            subword_dropout=b.subword_dropout, subword_dropout_rows=b.subword_dropout_rows,
            code_renaming=b.pretrain_code_renaming, **common), plays(config, "procedural_only"), b.max_new_tokens),
        "pretrained_protocol": RunSpec("pretrained_protocol", paper, After("procedural_only"), Recipe(
            epochs=b.finetune_epochs, steps=b.finetune_steps, lr=b.finetune_lr, **paper_rows),
            plays(config, "pretrained_protocol"), b.max_new_tokens),
    }
    return tuple(spec[arm] for arm in CHAINS[chain])


def lanes_for(config: TransferConfig, inputs: Inputs) -> list[Lane]:
    """One lane per (chain, seed, backend), the longest chains first so the slowest lanes are not left for last."""
    threads = threads_per_lane(config.jobs)
    order = [(chain, seed, backend) for chain in CHAINS if chain in config.chains
             for seed in config.seeds for backend in config.backends]
    return [Lane(f"{seed}/{backend}/{chain}", seed, runs(config, backend, chain), inputs, str(config.work_dir),
                 str(config.out_dir / "lanes"), lane_device(config.device, k), threads)
            for k, (chain, seed, backend) in enumerate(order)]
