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

Work is split into lanes, one per (seed, backend, chain): the ``protocol`` chain trains and evaluates
``protocol_only``; the ``pretrained`` chain pretrains, evaluates ``procedural_only``, fine-tunes and
evaluates ``pretrained_protocol``. ``jobs`` lanes run at once, each in its own process (spawned, so
CUDA works), sharing the device: small models leave a GPU mostly idle, so concurrent lanes fill it.
A lane whose result file exists with the same settings is reused, so an interrupted run continues.

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

import dataclasses
import hashlib
import json
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gencoord_env.caches import cache
from gencoord_env.tasks.episode import parse_episode_id
from gencoord_env.train.lanes import device_name, git_commit, lane_device, run_lanes, threads_per_lane, versions

__all__ = [
    "ARMS", "BACKENDS", "BUDGETS", "COVERAGE_POOLS", "PAPER_SEEDS", "POOLS", "TARGETS", "Budget", "Lane",
    "TransferConfig", "analyze", "coverage", "pool_prompts", "report_lines", "run", "run_lane", "summarize",
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
            raise ValueError(f"chains must be some of ['pretrained', 'protocol'], got {list(self.chains)}")
        unknown = [b for b in self.backends if b not in BACKENDS]
        if unknown:
            raise ValueError(f"unknown backends {unknown}; expected some of {sorted(BACKENDS)}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        if self.jobs < 1 or self.data_workers < 1:
            raise ValueError(f"jobs and data_workers must be >= 1, got {self.jobs} and {self.data_workers}")


@dataclass(frozen=True)
class Lane:
    """One unit of parallel work: a chain of training and evaluation for one seed and backend."""

    seed: int
    backend: str
    chain: str  # "protocol" | "pretrained"
    out: str
    work: str
    data: str
    tokenizer: str
    budget: Budget
    pools: tuple[str, ...]
    device: str | None
    threads: int

    @property
    def name(self) -> str:
        return f"{self.seed}/{self.backend}/{self.chain}"

    @property
    def result_path(self) -> Path:
        """Small and self-contained: a run cut short still leaves every finished lane's results in ``out``."""
        return Path(self.out) / "lanes" / f"{self.seed}-{self.backend}-{self.chain}.json"

    def key(self) -> str:
        """What the lane's results depend on (not where or how fast it runs)."""
        d = dataclasses.asdict(self)
        for k in ("out", "work", "data", "tokenizer", "device", "threads"):
            d.pop(k)
        d["budget"].pop("resume_every", None)
        d["inputs"] = _inputs_digest(Path(self.data), Path(self.tokenizer))
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- shared inputs


def _inputs_digest(data: Path, tokenizer: Path) -> str:
    manifest = json.loads((data / "manifest.json").read_text(encoding="utf-8"))
    hashes = {k: v["sha256"] for k, v in sorted(manifest["files"].items())}
    from gencoord_env.train.sft import tree_sha256

    return hashlib.sha256(json.dumps([hashes, tree_sha256(tokenizer)[0]]).encode()).hexdigest()


def build_inputs(config: TransferConfig, data: Path, tokenizer_dir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """The data sets, the shared tokenizer, and the lengths and pool prompts the checks need."""
    from gencoord_env.agents.lm.loading import binding_codes, world_names
    from gencoord_env.train.data import build_all, load_rows

    b = config.budget
    # every backend's sets, whichever backends are asked for: the shared tokenizer, and so each model, do not
    # depend on the other backends of the command
    sets = sorted({s for pair in BACKENDS.values() for s in pair})
    t0 = time.perf_counter()
    manifest_path = data / "manifest.json"
    wanted = {"pool_seed": config.data_seed, "procedural_rows": b.pretrain_rows, "sets": sets}
    previous = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else None
    if previous and previous.get("request") == wanted and all((data / f"{s}.jsonl").is_file() for s in sets):
        manifest = previous
        log(f"data: reused {data}")
    else:
        manifest = build_all(data, sets, config.data_seed, rows=b.pretrain_rows, workers=config.data_workers)
        manifest["request"] = wanted
        manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    data_seconds = time.perf_counter() - t0
    counts = ", ".join(f"{k} {v['rows']}" for k, v in manifest["files"].items())
    log(f"data: {counts} rows ({data_seconds:.1f} s)")

    t0 = time.perf_counter()
    rows = {s: load_rows(data / f"{s}.jsonl") for s in sets}
    codes = code_coverage(rows, config.pools, config.data_seed)
    log(f"codes: pretraining names {len(codes['pretraining'])}, the evaluated pools use {len(codes['evaluated'])}, none missing")
    corpus = {"sets": {s: manifest["files"][s]["sha256"] for s in sets}, "tokenizer_rows": b.tokenizer_rows,
              "vocab_size": b.vocab_size, "max_length": b.max_length, "whole_words": [*binding_codes(), *world_names()]}
    tokenizer = _shared_tokenizer(rows, b, tokenizer_dir, corpus)
    tokenizer_seconds = time.perf_counter() - t0

    t0 = time.perf_counter()
    lengths, pool_tokens = _lengths(tokenizer, rows, pool_prompts(COVERAGE_POOLS, config.data_seed), b.max_length)
    check_seconds = time.perf_counter() - t0
    longest_row = max(v["max_tokens"] for v in lengths["sets"].values())
    longest_prompt = max(v["max_prompt_tokens"] for v in lengths["pools"].values())
    log(f"tokenizer: vocabulary {len(tokenizer)}, longest row {longest_row} tokens, longest pool prompt "
        f"{longest_prompt} (max_length {b.max_length})")
    from gencoord_env.train.sft import tree_sha256

    return {
        "manifest": manifest,
        "codes": codes,
        "tokenizer": {"vocabulary": len(tokenizer), "sha256": tree_sha256(tokenizer_dir)[0],
                      "trained_on": {"paper_rows": sum(len(rows[s]) for s in sets if not s.startswith("procedural")),
                                     "procedural_rows": min(b.tokenizer_rows, len(rows.get("procedural", rows.get("procedural_factor_code", []))))}},
        "lengths": lengths,
        "pool_tokens": pool_tokens,
        "seconds": {"data": data_seconds, "tokenizer": tokenizer_seconds, "checks": check_seconds},
    }


def code_coverage(rows: Mapping[str, Sequence[Any]], pools: Sequence[str], seed: int = 0) -> dict[str, Any]:
    """The binding codes that pretraining rows name in their targets, against those the evaluated pools use.

    Only pretraining (procedural) rows count: a code that first appears in fine-tuning starts from a random
    embedding there. Raises when an evaluated pool uses a code pretraining never names.
    """
    from gencoord_env.tasks import pool as load_pool

    named = sorted({r.binding for name, rs in rows.items() if name.startswith("procedural") for r in rs})
    used = {name: sorted({c.binding for c in load_pool(name, seed)}) for name in pools}
    if not any(name.startswith("procedural") for name in rows):
        return {"pretraining": [], "evaluated": sorted({c for cs in used.values() for c in cs}), "by_pool": used}
    missing = {name: [c for c in cs if c not in named] for name, cs in used.items()}
    missing = {k: v for k, v in missing.items() if v}
    if missing:
        raise ValueError(f"pretraining rows never name binding codes the evaluated pools use: {missing}; "
                         "generate more procedural rows (--pretrain-rows) so that every public code appears")
    return {"pretraining": named, "evaluated": sorted({c for cs in used.values() for c in cs}), "by_pool": used}


def _shared_tokenizer(rows: Mapping[str, Sequence[Any]], b: Budget, out: Path, corpus_id: Mapping[str, Any]) -> Any:
    """A byte-level BPE on the paper's rows plus the first ``tokenizer_rows`` procedural rows (and every
    target, so the Factor-Code field names are in it); saved to ``out`` and reused when ``out`` holds one
    trained on the same corpus (``corpus.json``)."""
    from transformers import AutoTokenizer

    from gencoord_env.agents.lm.loading import train_tokenizer

    stamp = out / "corpus.json"
    if (out / "tokenizer.json").is_file() and stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")) == corpus_id:
        return AutoTokenizer.from_pretrained(out, local_files_only=True)
    prompts: dict[str, None] = {}  # insertion-ordered set: the procedural sets share their prompts
    targets: list[str] = []
    for name, rs in sorted(rows.items()):
        head = rs[: b.tokenizer_rows] if name.startswith("procedural") else rs
        prompts.update((r.prompt, None) for r in head)
        targets += [r.target for r in rs]
    corpus = [*prompts, *targets]
    tokenizer = train_tokenizer(corpus, vocab_size=b.vocab_size, model_max_length=b.max_length)
    tokenizer.save_pretrained(out)
    stamp.write_text(json.dumps(corpus_id, sort_keys=True) + "\n", encoding="utf-8")
    return tokenizer


def pool_prompts(pools: Sequence[str], seed: int = 0) -> dict[str, tuple[str, ...]]:
    """Every observation a deciding agent sees when ``pools`` are played on the forward route with the
    reference records (what a model that plays correctly reads)."""
    return {name: _pool_prompts(name, seed) for name in pools}


@cache(maxsize=8)
def _pool_prompts(name: str, seed: int) -> tuple[str, ...]:
    from gencoord_env.tasks import Episode, pool as load_pool
    from gencoord_env.train.data import _play

    episodes = [Episode(c, perm) for c in load_pool(name, seed) for perm in (0, 1)]
    return tuple(prompt for _, prompt, _, _, _ in _play(episodes, "forward"))


def _lengths(tokenizer: Any, rows: Mapping[str, Sequence[Any]], prompts: Mapping[str, Sequence[str]],
             max_length: int) -> tuple[dict[str, Any], dict[str, Counter[int]]]:
    """Token counts of every row and pool prompt (raises past ``max_length``), and each pool's token ids."""
    from gencoord_env.agents.lm.policy import prompt_text

    def encode(texts: Sequence[str]) -> dict[str, list[int]]:
        unique = list(dict.fromkeys(texts))
        return dict(zip(unique, tokenizer(unique, add_special_tokens=False)["input_ids"])) if unique else {}

    prompt_ids = encode([prompt_text(tokenizer, r.prompt) for rs in rows.values() for r in rs]
                        + [prompt_text(tokenizer, x) for texts in prompts.values() for x in texts])
    target_ids = encode([r.target for rs in rows.values() for r in rs])
    sets = {}
    for name, rs in rows.items():
        p = [len(prompt_ids[prompt_text(tokenizer, r.prompt)]) for r in rs]
        t = [len(target_ids[r.target]) for r in rs]
        sets[name] = {"max_tokens": max(a + c + 1 for a, c in zip(p, t)), "mean_prompt_tokens": sum(p) / len(p),
                      "mean_target_tokens": sum(t) / len(t)}
    pools, pool_tokens = {}, {}
    for name, texts in prompts.items():
        ids = [prompt_ids[prompt_text(tokenizer, x)] for x in texts]
        pools[name] = {"max_prompt_tokens": max(map(len, ids)), "mean_prompt_tokens": sum(map(len, ids)) / len(ids),
                       "prompts": len(texts)}
        pool_tokens[name] = Counter(t for x in ids for t in x)
    longest = max([v["max_tokens"] for v in sets.values()] + [v["max_prompt_tokens"] for v in pools.values()])
    if longest > max_length:
        raise ValueError(f"a row or pool prompt has {longest} tokens, over max_length={max_length}; raise max_length")
    return {"max_length": max_length, "sets": sets, "pools": pools}, pool_tokens


# --------------------------------------------------------------------------- lanes


def _sft(lane: Lane, data_file: str, out_dir: Path, *, steps: int | None, epochs: float, base: str | None,
         lr: float | None, dropout: bool, micro_batch: int, grad_accum: int, renaming: float) -> Any:
    from gencoord_env.train.sft import SCRATCH_LR, SFTConfig, ScratchConfig, train

    b = lane.budget
    scratch = None if base else ScratchConfig(b.arch, b.vocab_size, b.hidden_size, b.num_layers, tokenizer=lane.tokenizer)  # type: ignore[arg-type]
    config = SFTConfig(
        data=(str(Path(lane.data) / data_file),), out_dir=str(out_dir), base_model=base, scratch=scratch,
        lr=SCRATCH_LR if scratch is not None and lr is None else lr, epochs=epochs, max_steps=steps,
        micro_batch=micro_batch, grad_accum=grad_accum, max_length=b.max_length, seed=lane.seed,
        device=lane.device, progress=False, log_every=50,
        subword_dropout=b.subword_dropout if dropout else 0.0,
        subword_dropout_rows=b.subword_dropout_rows if dropout else 0.0,
        decision_weight=b.decision_weight, code_renaming=renaming, monitor_every=b.monitor_every,
        resume_every=b.resume_every,
    )
    return train(config)


def _run_summary(result: Any, work: Path) -> dict[str, Any]:
    from gencoord_env.train.sft import read_record

    p = result.provenance
    record = read_record(result.checkpoint) if result.checkpoint else None
    return {
        # Every input token the checkpoint's whole lineage trained on (the coverage check reads it).
        "seen_token_ids": record["seen_token_ids"] if record else None,
        "checkpoint": str(Path(result.checkpoint).relative_to(work)) if result.checkpoint else None,
        "checkpoint_sha256": p.get("checkpoint", {}).get("tree_sha256"),
        "parameters": p["base_model"]["parameters"],
        "data_sha256": p["data"]["sha256"],
        "data_files": [{k: f[k] for k in ("file", "rows", "sha256")} for f in p["data"]["files"]],
        "config_sha256": p["config_sha256"],
        "lr": p["config"]["lr"],
        "optimizer_steps": p["optimizer_steps"],
        "epochs": p["epochs"],
        "token_exposure": p["token_exposure"],
        "seen_tokens": p["seen_tokens"],
        "loss_first": p["loss_first"],
        "loss_final": p["loss_final"],
        "train_seconds": p["train_seconds"],
        "precision": p["precision"],
        "libraries": p["libraries"],
        # what decides success, on the rows this run trained on (gencoord_env.train.fit)
        "fit": p.get("fit", {}).get("teacher_forced"),
        "decision_curve": p.get("decision_curve"),
        "renamed_samples": p["token_exposure"].get("renamed_samples", 0),
    }


def evaluate_checkpoint(checkpoint: Path, backend: str, pools: Sequence[str], budget: Budget,
                        device: str | None, decode_check: bool = False) -> dict[str, Any]:
    """Closed-loop results of one checkpoint on each pool: every episode's outcome, in pool order.

    ``decode_check``: heldout is played a second time with ``transformers``' ``generate`` and every decision
    compared with the evaluation decoder's (``decode_check`` in the heldout entry).
    """
    from gencoord_env.agents.lm.generate import GenerationConfig
    from gencoord_env.agents.lm.loading import load_model
    from gencoord_env.agents.lm.policy import make_policy
    from gencoord_env.train.evaluate import evaluate

    lm = load_model(checkpoint, device=device)
    # No torch.compile: a compile per decode shape would cost more than these small models' whole evaluation.
    generation = GenerationConfig(max_new_tokens=budget.max_new_tokens, compile_decode=False, compile_prefill=False)
    policy = make_policy(lm.model, lm.tokenizer, backend, generation)  # type: ignore[arg-type]
    fallback = None
    out: dict[str, Any] = {}
    for name in pools:
        t0 = time.perf_counter()
        try:
            report = evaluate(policy, name, route="forward", episodes=budget.eval_episodes, batch_size=budget.eval_batch)
        except Exception as exc:  # noqa: BLE001 - the static decoder failed on this stack: the reference path
            if fallback is not None:
                raise
            fallback = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            warnings.warn(f"static decoding failed ({fallback}); evaluating with model.generate", RuntimeWarning, stacklevel=2)
            generation = dataclasses.replace(generation, backend="generate")
            policy = make_policy(lm.model, lm.tokenizer, backend, generation)  # type: ignore[arg-type]
            report = evaluate(policy, name, route="forward", episodes=budget.eval_episodes, batch_size=budget.eval_batch)
        episodes = report["episodes"]
        out[name] = {
            "episodes": len(episodes),
            "episode_ids": [e["episode_id"] for e in episodes],
            "success_bits": _success_bits(episodes),
            "outcomes": dict(sorted(Counter(str(e["outcome"]) for e in episodes).items())),
            "output_tokens": report["metrics"]["output_tokens"],
            "calls": report["metrics"]["calls"],
            "decode": policy.generator.backend,
            "static_decode_failure": fallback,
            "seconds": time.perf_counter() - t0,
        }
        if name != "train":
            out[name]["by_role"] = _by_role(policy, name, budget)
        if decode_check and name == "heldout" and policy.generator.backend != "generate":
            reference = make_policy(lm.model, lm.tokenizer, backend, dataclasses.replace(generation, backend="generate"))  # type: ignore[arg-type]
            again = evaluate(reference, name, route="forward", episodes=budget.eval_episodes, batch_size=budget.eval_batch)
            out[name]["decode_check"] = _compare_decisions(episodes, again["episodes"])
    return out


def _by_role(policy: Any, pool: str, budget: Budget) -> dict[str, Any]:
    """The pool played again with the model in one role and the rule agent in the other, per role: which side
    of the failing episodes fails."""
    from gencoord_env.agents import make_policy as rule_agent
    from gencoord_env.agents.by_role import ByRole
    from gencoord_env.train.evaluate import evaluate

    out = {}
    for role in ("sender", "receiver"):
        report = evaluate(ByRole({role: policy}, default=rule_agent("rule")), pool, route="forward",
                          episodes=budget.eval_episodes, batch_size=budget.eval_batch)
        bits = _success_bits(report["episodes"])
        out[role] = {"successes": bits.count("1"), "episodes": len(bits), "success_bits": bits}
    return out


def _success_bits(episodes: Sequence[Mapping[str, Any]]) -> str:
    """One character per episode, in order: 1 for a success, 0 for any other outcome."""
    return "".join("1" if str(e["outcome"]) == "SUCCESS" else "0" for e in episodes)


def _compare_decisions(ours: Sequence[Mapping[str, Any]], reference: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Decisions (actions) of two closed-loop passes over the same episodes: how many, how many differ."""
    decisions = differ = 0
    examples = []
    for a, b in zip(ours, reference):
        for x, y in zip(a["actions"], b["actions"]):
            decisions += 1
            if x["action"] != y["action"]:
                differ += 1
                if len(examples) < 3:
                    examples.append({"episode": a["episode_id"], "stage": x["stage"], "ours": x["action"], "generate": y["action"]})
        if len(a["actions"]) != len(b["actions"]):
            differ += abs(len(a["actions"]) - len(b["actions"]))
    return {"decisions": decisions, "differing": differ, "examples": examples}


def run_lane(lane: Lane) -> dict[str, Any]:
    """Train and evaluate one lane; writes and returns its result (reused when it exists with the same key)."""
    work = Path(lane.work)
    base = work / str(lane.seed) / lane.backend
    result_path = lane.result_path
    key = lane.key()
    if result_path.is_file():
        previous = json.loads(result_path.read_text(encoding="utf-8"))
        if previous.get("key") == key:
            previous["reused"] = True
            return previous
    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(lane.threads)
    hf_logging.disable_progress_bar()  # loading and saving bars of a dozen checkpoints say nothing
    b = lane.budget
    paper_set, procedural_set = BACKENDS[lane.backend]
    arms: dict[str, Any] = {}
    seconds: dict[str, float] = {}

    def timed(phase: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        value = fn()
        seconds[phase] = time.perf_counter() - t0
        return value

    if lane.chain == "protocol":
        run = timed("train_protocol_only", lambda: _sft(lane, f"{paper_set}.jsonl", base / "protocol_only", steps=b.protocol_steps,
                                                        epochs=b.protocol_epochs, base=None, lr=None, dropout=False,
                                                        micro_batch=b.micro_batch, grad_accum=b.grad_accum,
                                                        renaming=b.code_renaming))
        arms["protocol_only"] = {"runs": {"finetune": _run_summary(run, work)}}
        arms["protocol_only"]["eval"] = timed("eval_protocol_only", lambda: evaluate_checkpoint(
            run.checkpoint, lane.backend, lane.pools, b, lane.device, b.decode_check))
    elif lane.chain == "pretrained":
        pre = timed("pretrain", lambda: _reuse(base / "procedural_only", key) or _done(key, _sft(
            lane, f"{procedural_set}.jsonl", base / "procedural_only", steps=b.pretrain_steps, epochs=b.pretrain_epochs,
            base=None, lr=None, dropout=True, micro_batch=b.pretrain_micro_batch, grad_accum=1,
            renaming=b.pretrain_code_renaming)))
        arms["procedural_only"] = {"runs": {"pretrain": _run_summary(pre, work)}}
        arms["procedural_only"]["eval"] = timed("eval_procedural_only", lambda: evaluate_checkpoint(
            pre.checkpoint, lane.backend, lane.pools, b, lane.device))
        fine = timed("finetune", lambda: _sft(lane, f"{paper_set}.jsonl", base / "pretrained_protocol", steps=b.finetune_steps,
                                              epochs=b.finetune_epochs, base=str(pre.checkpoint), lr=b.finetune_lr, dropout=False,
                                              micro_batch=b.micro_batch, grad_accum=b.grad_accum,
                                              renaming=b.code_renaming))
        arms["pretrained_protocol"] = {"runs": {"pretrain": _run_summary(pre, work), "finetune": _run_summary(fine, work)}}
        arms["pretrained_protocol"]["eval"] = timed("eval_pretrained_protocol", lambda: evaluate_checkpoint(
            fine.checkpoint, lane.backend, lane.pools, b, lane.device, b.decode_check))
    else:
        raise ValueError(f"unknown chain {lane.chain!r}; expected 'protocol' or 'pretrained'")
    for arm in ("protocol_only", "pretrained_protocol"):  # the arms trained on the paper's rows: do they fit them?
        if arm in arms:
            arms[arm]["fit"] = _fit(arms[arm], lane)
    result = {"key": key, "lane": lane.name, "seed": lane.seed, "backend": lane.backend, "chain": lane.chain,
              "device": device_name(lane.device), "seconds": seconds, "arms": arms}
    result_path.parent.mkdir(parents=True, exist_ok=True)
    result_path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return result


_DONE = "lane_key.txt"


def _done(key: str, result: Any) -> Any:
    """Mark a finished pretraining run with its lane's key (a lane cut short later reuses it)."""
    (Path(result.checkpoint).parent / _DONE).write_text(key + "\n", encoding="utf-8")
    return result


def _reuse(run_dir: Path, key: str) -> Any:
    """The finished pretraining run of a lane with the same key, or None: a lane that was cut short after
    pretraining (a time limit) continues from its checkpoint instead of pretraining again."""
    from gencoord_env.train.sft import RunResult

    marker, prov = run_dir / _DONE, run_dir / "provenance.json"
    if not (marker.is_file() and prov.is_file() and marker.read_text(encoding="utf-8").strip() == key):
        return None
    provenance = json.loads(prov.read_text(encoding="utf-8"))
    return RunResult(run_dir / "final", provenance, provenance["loss_curve"]["values"])


def _fit(arm: Mapping[str, Any], lane: Lane) -> dict[str, Any]:
    """The fit verdict of an arm trained on the paper's rows: its decision tokens on those rows, and its
    closed-loop play of the train pool per template x binding x role (when the lane played it)."""
    from gencoord_env.train.fit import play_cells, shout, verdict

    train = arm["eval"].get("train")
    play = play_cells("train", train["episode_ids"], train["success_bits"]) if train else None
    if play is not None and train["episodes"] < 2 * len(load_train_clusters()):
        play = None  # a subset of the pool cannot show that every cell fits
    report = {**verdict(arm["runs"]["finetune"]["fit"], play), "train_pool": play}
    shout(report, lane.name)
    return report


def load_train_clusters() -> tuple[Any, ...]:
    from gencoord_env.tasks import pool as load_pool

    return tuple(load_pool("train", 0))


def _run_lanes(lanes: Sequence[Lane], jobs: int, log: Callable[[str], None], after: Callable[[], None]) -> list[str]:
    """Run every lane (``jobs`` at a time); returns the failures. Each lane writes its own result file."""

    def done(lane: Lane, result: dict[str, Any] | None, error: str | None) -> None:
        if error is not None:
            log(f"lane {lane.name} FAILED: {error.strip().splitlines()[-1]}")
            return
        assert result is not None
        summary = ", ".join(f"{arm} " + " ".join(f"{p} {v['success_bits'].count('1')}/{v['episodes']}" for p, v in a["eval"].items())
                            + ("" if "fit" not in a else " FITS" if a["fit"]["fits"] else " DOES NOT FIT")
                            for arm, a in result["arms"].items())
        log(f"lane {lane.name}{' (reused)' if result.get('reused') else ''}: {summary}")
        after()

    return run_lanes(run_lane, lanes, jobs, lanes[0].threads, done)


# --------------------------------------------------------------------------- analysis


def _cluster_of(episode_id: str) -> str:
    return parse_episode_id(episode_id).cluster


def _cluster_means(evals: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    from gencoord_env.commands.experiments import stats

    obs = [(_cluster_of(e), 1.0 if bit == "1" else 0.0) for ev in evals for e, bit in zip(ev["episode_ids"], ev["success_bits"])]
    return stats.cluster_means(obs)


def _condition(evals: Sequence[Mapping[str, Any]], pool: str, ci_seed: int) -> dict[str, Any]:
    from gencoord_env.commands.experiments import stats

    means = _cluster_means(evals)
    strict = sum(1 for v in means.values() if v == 1.0)
    episodes = sum(ev["episodes"] for ev in evals)
    successes = sum(ev["success_bits"].count("1") for ev in evals)
    ci = stats.bootstrap_ci(means.values(), ci_seed)
    exact = stats.exact_ci(strict, len(means))
    out = {
        "success_rate": successes / episodes if episodes else None,
        "ci95": list(ci) if ci else None,
        "episodes": episodes,
        "clusters": len(means),
        "strict_clusters": strict,
        "strict_exact_ci95": list(exact) if exact else None,
        "outcomes": dict(sorted(sum((Counter(ev["outcomes"]) for ev in evals), Counter()).items())),
    }
    from gencoord_env.train.fit import template_of

    templates: dict[str, list[int]] = {}
    for ev in evals:
        for e, bit in zip(ev["episode_ids"], ev["success_bits"]):
            t = templates.setdefault(template_of(e), [0, 0])
            t[0] += bit == "1"
            t[1] += 1
    out["by_template"] = {t: {"success_rate": s / n, "episodes": n} for t, (s, n) in sorted(templates.items())}
    roles = [ev["by_role"] for ev in evals if "by_role" in ev]
    if roles:  # the model in one role beside the rule agent in the other
        out["by_role"] = {role: {"success_rate": sum(r[role]["successes"] for r in roles) / sum(r[role]["episodes"] for r in roles),
                                 "seeds": len(roles)} for role in roles[0]}
    target = TARGETS.get(pool)
    if target is not None and means:
        key, bar = next(iter(target.items()))
        value = strict / len(means) if key == "strict_fraction" else out["success_rate"]
        out["target"] = {key: bar, "met": bool(value is not None and value >= bar - 1e-12)}
    return out


def analyze(lane_results: Sequence[Mapping[str, Any]], config: TransferConfig) -> dict[str, Any]:
    """Per backend, arm and pool: pooled over seeds and per seed, with intervals and targets."""
    from gencoord_env.commands.experiments import stats

    by: dict[tuple[str, str, int], Mapping[str, Any]] = {}
    for r in lane_results:
        for arm, a in r["arms"].items():
            by[(r["backend"], arm, r["seed"])] = a
    results: dict[str, Any] = {}
    for backend in config.backends:
        results[backend] = {}
        for i, arm in enumerate(ARMS):
            seeds = [s for s in config.seeds if (backend, arm, s) in by]
            if not seeds:
                continue
            pools = {}
            for pool in config.pools:
                evals = [by[(backend, arm, s)]["eval"][pool] for s in seeds]
                pools[pool] = {
                    "pooled": _condition(evals, pool, stats.CONDITION_SEED + i),
                    "per_seed": {str(s): _condition([ev], pool, stats.CONDITION_SEED + i) for s, ev in zip(seeds, evals)},
                }
                per_seed = pools[pool]["per_seed"]
                if "target" in pools[pool]["pooled"]:
                    pools[pool]["seeds_meeting_target"] = sum(v["target"]["met"] for v in per_seed.values())
            results[backend][arm] = {"seeds": seeds, "pools": pools}
        if "protocol_only" in results[backend] and "pretrained_protocol" in results[backend]:
            diffs = {}
            for j, pool in enumerate(config.pools):
                mine = _cluster_means([by[(backend, "pretrained_protocol", s)]["eval"][pool] for s in results[backend]["pretrained_protocol"]["seeds"]])
                theirs = _cluster_means([by[(backend, "protocol_only", s)]["eval"][pool] for s in results[backend]["protocol_only"]["seeds"]])
                diffs[pool] = stats.paired_bootstrap_ci(mine, theirs, stats.PAIRED_SEED + j)
            results[backend]["pretrained_minus_protocol_only"] = diffs
    return results


def coverage(lane_results: Sequence[Mapping[str, Any]], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Per backend and arm (worst seed): tokens of each pool's prompts that the model never trained on
    (its checkpoint's ``seen_token_ids``: every input token of every row its lineage sampled)."""
    pool_tokens: Mapping[str, Mapping[str, int]] = inputs["pool_tokens"]
    names: Mapping[str, str] = inputs["token_strings"]
    out: dict[str, Any] = {}
    for r in lane_results:
        for arm, a in r["arms"].items():
            run = a["runs"].get("finetune") or a["runs"]["pretrain"]
            if run.get("seen_token_ids") is None:
                continue
            seen = {str(t) for t in run["seen_token_ids"]}
            entry = out.setdefault(r["backend"], {}).setdefault(arm, {name: {} for name in pool_tokens})
            for name, counts in pool_tokens.items():
                for t, n in counts.items():
                    if t not in seen:
                        entry[name][names[t]] = max(entry[name].get(names[t], 0), n)
    for arms in out.values():
        for arm, pools in arms.items():
            arms[arm] = {"unseen": pools, "unseen_occurrences": {k: sum(v.values()) for k, v in pools.items()},
                         "none_unseen": not any(pools.values())}
    return out


# --------------------------------------------------------------------------- outputs


def _tokens_and_time(lane_results: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    tokens: dict[str, Any] = {}
    for r in lane_results:
        for arm, a in r["arms"].items():
            entry = tokens.setdefault(r["backend"], {}).setdefault(arm, {})
            for phase in ("pretrain", "finetune"):
                run = a["runs"].get(phase)
                if run is not None:
                    e = entry.setdefault(phase, {"total_tokens": {}, "target_tokens": {}, "optimizer_steps": {}, "rows": {}})
                    e["total_tokens"][str(r["seed"])] = run["token_exposure"]["total_tokens"]
                    e["target_tokens"][str(r["seed"])] = run["token_exposure"]["target_tokens"]
                    e["optimizer_steps"][str(r["seed"])] = run["optimizer_steps"]
                    e["rows"][str(r["seed"])] = sum(f["rows"] for f in run["data_files"])
    phases: dict[str, Any] = {}
    for r in lane_results:
        for phase, s in r["seconds"].items():
            p = phases.setdefault(phase, {"lanes": {}, "sum": 0.0, "max": 0.0})
            p["lanes"][f"{r['seed']}/{r['backend']}"] = s
            p["sum"] += s
            p["max"] = max(p["max"], s)
    return tokens, phases


def _csv(results: Mapping[str, Any], path: Path) -> None:
    lines = ["backend,arm,pool,seed,success_rate,ci_low,ci_high,strict_clusters,clusters,episodes,target_met,"
             "as_sender,as_receiver"]
    for backend, arms in results.items():
        for arm, a in arms.items():
            if arm not in ARMS:
                continue
            for pool, p in a["pools"].items():
                for seed, c in [("all", p["pooled"]), *p["per_seed"].items()]:
                    ci = c["ci95"] or [None, None]
                    met = c.get("target", {}).get("met")
                    roles = c.get("by_role", {})
                    lines.append(",".join(str(x) if x is not None else "" for x in (
                        backend, arm, pool, seed, c["success_rate"], ci[0], ci[1], c["strict_clusters"], c["clusters"],
                        c["episodes"], met, roles.get("sender", {}).get("success_rate"),
                        roles.get("receiver", {}).get("success_rate"))))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def plot(summary: Mapping[str, Any], path: Path) -> None:
    """One panel per backend: per pool, the arms side by side (pooled success, 95% cluster-bootstrap
    interval, each seed as a dot) and the target as a dashed mark."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    results = summary["results"]
    backends = list(results)
    colors = {"protocol_only": "#a9c4de", "procedural_only": "#7f7f7f", "pretrained_protocol": "#1f4e79"}
    labels = {"protocol_only": "paper protocol only", "procedural_only": "procedural pretraining only",
              "pretrained_protocol": "pretrained + protocol"}
    fig, axes = plt.subplots(1, len(backends), figsize=(max(8.0, 5.2 * len(backends)), 3.8), squeeze=False)
    for ax, backend in zip(axes[0], backends):
        arms = [a for a in ARMS if a in results[backend]]
        pools = list(summary["pools"])
        x = np.arange(len(pools))
        width = 0.8 / max(1, len(arms))
        for k, arm in enumerate(arms):
            pos = x - 0.4 + width * (k + 0.5)
            p = results[backend][arm]["pools"]
            ys = [100 * (p[q]["pooled"]["success_rate"] or 0.0) for q in pools]
            lo = [y - 100 * (p[q]["pooled"]["ci95"] or [y / 100, y / 100])[0] for y, q in zip(ys, pools)]
            hi = [100 * (p[q]["pooled"]["ci95"] or [y / 100, y / 100])[1] - y for y, q in zip(ys, pools)]
            ax.bar(pos, ys, width=width * 0.95, color=colors[arm], label=labels[arm])
            ax.errorbar(pos, ys, yerr=[lo, hi], fmt="none", ecolor="black", capsize=2, lw=0.8)
            for xi, q in zip(pos, pools):
                seeds = [100 * (v["success_rate"] or 0.0) for v in p[q]["per_seed"].values()]
                ax.plot([xi] * len(seeds), seeds, "o", ms=2.5, color="black", alpha=0.6)
            for xi, y in zip(pos, ys):
                ax.text(xi, min(y, 99) + 1.5, f"{y:.0f}", ha="center", fontsize=6)
        for xi, q in zip(x, pools):
            target = TARGETS.get(q)
            if target:
                bar = 100 * next(iter(target.values()))
                ax.hlines(bar, xi - 0.45, xi + 0.45, colors="#c0392b", linestyles="dashed", lw=1)
        ax.set_xticks(x, pools, fontsize=8)
        ax.set_ylim(0, 110)
        ax.set_ylabel("closed-loop success (%)", fontsize=8)
        n = summary["model"]["parameters"]
        size = f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k"
        seeds = len(summary["seeds"])
        ax.set_title(f"{backend} ({size} parameters, {seeds} seed{'s' if seeds != 1 else ''})", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        ax.spines[["top", "right"]].set_visible(False)
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"Transfer without downloaded weights (budget {summary['budget']['name']}; dashed: target)", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    fig.savefig(path, dpi=150)
    plt.close(fig)


# --------------------------------------------------------------------------- driver


def lanes_for(config: TransferConfig, out: Path, work: Path, data: Path, tokenizer: Path) -> list[Lane]:
    threads = threads_per_lane(config.jobs)
    # Longest chains first, so the slowest lanes are not left for last.
    order = [(chain, seed, backend) for chain in ("pretrained", "protocol") if chain in config.chains
             for seed in config.seeds for backend in config.backends]
    return [Lane(seed, backend, chain, str(out), str(work), str(data), str(tokenizer), config.budget,
                 tuple(config.pools), lane_device(config.device, k), threads)
            for k, (chain, seed, backend) in enumerate(order)]


def run(config: TransferConfig, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The whole transfer experiment; writes ``inputs.json``, ``lanes/``, ``summary.json``, ``summary.png``,
    ``summary.csv`` and ``seeds/<seed>.json`` under ``config.out`` and returns the summary."""
    start = time.perf_counter()
    out = Path(config.out)
    work = Path(config.work) if config.work else out / "work"
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    data, tokenizer_dir = work / "data", work / "tokenizer"

    def log(message: str) -> None:
        if config.progress:
            print(f"[{time.perf_counter() - start:7.1f} s] {message}", flush=True)

    inputs = build_inputs(config, data, tokenizer_dir, log)
    pool_tokens = inputs.pop("pool_tokens")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    ids = sorted({t for counts in pool_tokens.values() for t in counts})
    inputs.update(
        pool_tokens={name: {str(t): n for t, n in sorted(counts.items())} for name, counts in pool_tokens.items()},
        token_strings=dict(zip(map(str, ids), tokenizer.convert_ids_to_tokens(ids))),
        versions=versions(), git_commit=git_commit(),
        command=" ".join(["gencoord", "train", "transfer", *argv]) if argv is not None else None,
    )
    (out / "inputs.json").write_text(json.dumps(inputs, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    lanes = lanes_for(config, out, work, data, tokenizer_dir)
    log(f"{len(lanes)} lanes, {config.jobs} at a time, {lanes[0].threads} threads each, device {config.device or 'auto'}")
    t0 = time.perf_counter()
    last = [t0]

    def provisional() -> None:  # a run cut short by a time limit still leaves a summary of what finished
        if time.perf_counter() - last[0] >= 60:
            summarize(config, timing={"driver_wall": time.perf_counter() - start}, quiet=True)
            last[0] = time.perf_counter()

    failures = _run_lanes(lanes, config.jobs, log, provisional)
    timing = {"lanes_wall": time.perf_counter() - t0}
    summary = summarize(config, failures=failures, timing={**timing, "driver_wall": time.perf_counter() - start})
    log(f"wrote {out / 'summary.json'} ({summary['seconds']['driver_wall']:.1f} s)")
    return summary


def summarize(config: TransferConfig, failures: Sequence[str] = (), timing: Mapping[str, float] | None = None,
              quiet: bool = False) -> dict[str, Any]:
    """Build ``summary.json``, ``summary.png``, ``summary.csv`` and ``seeds/<seed>.json`` from ``inputs.json``
    and the lane files in ``config.out`` (those of ``config``'s seeds and backends that exist)."""
    t0 = time.perf_counter()
    out = Path(config.out)
    if not (out / "inputs.json").is_file():
        raise FileNotFoundError(f"{out / 'inputs.json'} does not exist; run `gencoord train transfer --out {out}` first")
    inputs = json.loads((out / "inputs.json").read_text(encoding="utf-8"))
    lane_results = []
    for seed in config.seeds:
        for backend in config.backends:
            for chain in ("protocol", "pretrained"):
                path = out / "lanes" / f"{seed}-{backend}-{chain}.json"
                if path.is_file():
                    lane_results.append(json.loads(path.read_text(encoding="utf-8")))
    results = analyze(lane_results, config)
    tokens, phases = _tokens_and_time(lane_results)
    parameters = next((run["parameters"] for r in lane_results for a in r["arms"].values() for run in a["runs"].values()), None)
    b = config.budget
    summary: dict[str, Any] = {
        "experiment": "transfer without downloaded weights: procedural pretraining, then the paper's rows",
        "seeds": list(config.seeds),
        "backends": list(config.backends),
        "pools": list(config.pools),
        "route": "forward",
        "lanes_done": len(lane_results),
        "lanes_expected": len(config.chains) * len(config.seeds) * len(config.backends),
        "arms": {"protocol_only": "random weights, the paper's rows only",
                 "procedural_only": "random weights, procedural rows only (the pretraining checkpoint)",
                 "pretrained_protocol": "the procedural checkpoint continued on the paper's rows (paper schedule)"},
        "targets": {k: dict(v) for k, v in TARGETS.items()},
        "budget": dataclasses.asdict(b),
        "model": {"arch": b.arch, "hidden_size": b.hidden_size, "layers": b.num_layers,
                  "vocabulary": inputs["tokenizer"]["vocabulary"], "parameters": parameters},
        "results": results,
        "coverage": coverage(lane_results, inputs),
        "codes": inputs.get("codes"),
        "fit": fit_summary(lane_results),
        "tokens": tokens,
        "seconds": {**{k: None for k in ("driver_wall", "lanes_wall")}, **(timing or {}), **inputs["seconds"],
                    "phases": phases,
                    "note": "phase seconds are per lane; lanes run concurrently on one device, so they overlap"},
        "devices": sorted({r["device"] for r in lane_results}),
        "jobs": config.jobs,
        "data": {"pool_seed": config.data_seed, "files": inputs["manifest"]["files"], "tokenizer": inputs["tokenizer"],
                 "lengths": inputs["lengths"]},
        "versions": inputs["versions"],
        "git_commit": inputs["git_commit"],
        "command": inputs["command"],
        "failures": list(failures),
    }
    seeds_dir = out / "seeds"
    seeds_dir.mkdir(exist_ok=True)
    for seed in config.seeds:
        # Small: no token id lists, and no episode ids (episode k of a pool is cluster k // 2, role k % 2).
        mine = [{**r, "arms": {arm: {"runs": {k: {x: y for x, y in run.items() if x != "seen_token_ids"}
                                              for k, run in a["runs"].items()},
                                     "eval": {pool: {x: y for x, y in ev.items() if x != "episode_ids"}
                                              for pool, ev in a["eval"].items()}}
                               for arm, a in r["arms"].items()}}
                for r in lane_results if r["seed"] == seed]
        (seeds_dir / f"{seed}.json").write_text(json.dumps({"seed": seed, "lanes": mine}, indent=1, sort_keys=True) + "\n",
                                                encoding="utf-8")
    summary["seconds"]["analysis"] = time.perf_counter() - t0
    if lane_results and parameters is not None:
        plot(summary, out / "summary.png")
    _csv(results, out / "summary.csv")
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return summary


def fit_summary(lane_results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per backend, arm and seed: does the model fit its training rows (teacher-forced decision token, and
    the train pool closed-loop), with the decoding check's figure."""
    out: dict[str, Any] = {}
    for r in lane_results:
        for arm, a in r["arms"].items():
            if "fit" not in a:
                continue
            fit = a["runs"]["finetune"]["fit"] or {}
            play = a["fit"].get("train_pool") or {}
            check = a["eval"].get("heldout", {}).get("decode_check")
            out.setdefault(r["backend"], {}).setdefault(arm, {})[str(r["seed"])] = {
                "fits": a["fit"]["fits"],
                "reasons": a["fit"]["reasons"],
                "decision_accuracy": fit.get("decision_accuracy"),
                "decision_loss": fit.get("decision_loss"),
                "near_ties": fit.get("near_ties"),
                "row_exact": fit.get("row_exact"),
                "failing_cells": fit.get("failing_cells"),
                "train_pool": {k: play.get(k) for k in ("successes", "episodes", "failing_cells")} if play else None,
                "decode_check": check,
            }
    return out


def report_lines(summary: Mapping[str, Any]) -> list[str]:
    """A short text table of the pooled results (printed by the CLI)."""
    lines = []
    for backend, arms in summary.get("fit", {}).items():
        for arm, seeds in arms.items():
            for seed, f in seeds.items():
                tp = f["train_pool"]
                acc = f["decision_accuracy"]
                lines.append(f"fit {backend:11s} {arm:19s} {seed}: decision token {'-' if acc is None else f'{acc:.3f}'}"
                             + (f", train pool {tp['successes']}/{tp['episodes']}" if tp else "")
                             + ("  FITS" if f["fits"] else "  DOES NOT FIT"))
    for backend, arms in summary["results"].items():
        for arm in ARMS:
            if arm not in arms:
                continue
            cells = []
            for pool, p in arms[arm]["pools"].items():
                c = p["pooled"]
                met = c.get("target", {}).get("met")
                cells.append(f"{pool} {100 * (c['success_rate'] or 0):5.1f}% ({c['strict_clusters']}/{c['clusters']})"
                             + ("" if met is None else (" ok" if met else " --")))
            lines.append(f"{backend:11s} {arm:19s} " + "  ".join(cells))
            roles = [pool + " " + " / ".join(f"{100 * r['success_rate']:.0f}%" for r in p["pooled"]["by_role"].values())
                     for pool, p in arms[arm]["pools"].items() if "by_role" in p["pooled"]]
            if roles:
                lines.append(f"{'':31s} as sender / as receiver beside the rule agent: " + "  ".join(roles))
    return lines
