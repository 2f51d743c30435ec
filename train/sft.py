"""Supervised fine-tuning on the programmatic rows: loss on the target and EOS only, one provenance JSON per run.

The paper's recipe (supplement, "Training and Checkpoint Provenance") is the default: AdamW, learning
rate 1e-5, weight decay 0.01, cosine schedule with 3% warm-up, gradient-norm clip 1.0, micro-batch 4 x
accumulation 4 (effective 16), bfloat16 autocast where the device supports it, maximum length 2,048,
two epochs (1,920 rows -> 240 optimizer steps), final-step checkpoint.

Where no pretrained weights exist, ``scratch`` trains a byte-level BPE tokenizer on the training rows (or
takes a saved one, ``ScratchConfig.tokenizer``, so that several runs share it) and builds a small Qwen3 /
Qwen3.5 model from a config written in code. A random-weight model does not learn at 1e-5;
:data:`SCRATCH_LR` (1e-3) does, and needs more epochs than a pretrained model.

Learning rate: ``lr=None`` picks the default for the model source (:func:`default_lr`): :data:`SCRATCH_LR`
from random weights, :data:`CONTINUE_LR` (1e-4, a tenth of the scratch peak) for a checkpoint whose
lineage began from random weights here (a scratch-pretrained model continued on other rows), and the
paper's 1e-5 for any other checkpoint (a downloaded pretrained model).

Every saved checkpoint carries ``training_record.json``: the output format it answers in (``format``, read
by :func:`gencoord_env.agents.lm.policy.load_policy`), its lineage (one entry per run that trained it:
data hash, rows, steps, learning rate, token exposure) and the token ids its training inputs contained
(``seen_token_ids``), so a later run or an evaluation can check that a pool's prompts hold no token the
model never trained on (:func:`unseen_tokens`). ``subword_dropout`` encodes the prompts of a seeded
fraction of the rows with BPE-dropout (:mod:`gencoord_env.train.subword`), which shows the model the
sub-word pieces that words it never met are segmented into.

Loss: prompt positions carry label -100. The loss is the sum of token losses over the target and EOS
tokens of the whole effective batch divided by their count, so gradient accumulation gives the same
update as one large batch. ``decision_weight`` multiplies the loss of each row's decision tokens (where
its target parts from its twin's under the other binding, and its binding code: :mod:`gencoord_env.train.fit`;
the divisor stays the token count), and ``code_renaming`` renames the binding codes of a seeded share of the
samples, prompt and target alike (:mod:`gencoord_env.train.renaming`), so that the decision must be read
rather than remembered. Both default to off (1.0 and 0.0), and the provenance records them.

What decides success is measured, not the mean loss: every ``monitor_every`` updates the decision token's
teacher-forced accuracy on a fixed sample of the rows (``decision_curve`` in the provenance), and after
training on up to ``fit_rows`` rows per stage and template cell the full :func:`gencoord_env.train.fit.teacher_forced`
report (``fit``); a run whose decision tokens are not all right says so with a loud warning. Only target positions go through the output head: with a 248k-token
vocabulary the full logits of a 1,000-token prompt would cost more than the rest of the step.
Batches are right-padded and run without an attention mask: causal attention (and the recurrent
Gated-DeltaNet layers) never let a real token see the padding after it, and padded labels are -100.

Example::

    result = train(SFTConfig(data=("runs/data/forward.jsonl",), out_dir="runs/sft",
                             scratch=ScratchConfig(), lr=SCRATCH_LR, epochs=20))
    result.checkpoint, result.provenance["checkpoint"]["tree_sha256"]
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import platform
import random
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import tokenizers
import torch
import torch.nn.functional as F  # noqa: N812
import transformers
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from transformers import (
    AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase, get_cosine_schedule_with_warmup,
)

from gencoord_env.agents.formats import RECORD, OutputFormat, output_format
from gencoord_env.agents.lm.loading import build_qwen35_08b_config, build_tiny, load_model, train_tokenizer
from gencoord_env.agents.lm.prompt import prompt_text
from gencoord_env.errors import DataError, UsageError
from gencoord_env.train.data import Row, data_set, file_sha256, load_rows, rows_format
from gencoord_env.train.encoding import Encoded, encode
from gencoord_env.train.fit import cell_of, shout, teacher_forced, twin_key, verdict
from gencoord_env.train.renaming import public_codes, rename_row, renaming_for, row_codes

__all__ = [
    "CONTINUE_LR", "PAPER_LR", "RECORD", "SCRATCH_LR", "Encoded", "RunResult", "SFTConfig", "ScratchConfig",
    "default_lr", "encode", "masked_loss", "read_record", "train", "tree_sha256", "unseen_tokens",
]

#: Learning rate that trains a randomly initialised small model on these rows (1e-5 does not).
SCRATCH_LR = 1e-3
#: Continuing a checkpoint whose lineage began from random weights here: a tenth of its peak rate.
CONTINUE_LR = 1e-4
#: The paper's rate for fine-tuning a pretrained language model.
PAPER_LR = 1e-5


@dataclass(frozen=True)
class ScratchConfig:
    """A model trained from random weights: offline BPE tokenizer plus an architecture built in code.

    ``arch``: ``qwen3`` / ``qwen3_5`` (small, sized by the fields below) or ``qwen3_5_08b`` (the
    Qwen3.5-0.8B text architecture, for timing; its vocabulary is larger than the offline tokenizer's).
    """

    arch: Literal["qwen3", "qwen3_5", "qwen3_5_08b"] = "qwen3"
    vocab_size: int = 2048
    hidden_size: int = 256
    num_layers: int = 4
    # A saved tokenizer directory (save_pretrained) to use instead of training one on the rows.
    tokenizer: str | None = None


@dataclass(frozen=True)
class SFTConfig:
    data: tuple[str, ...]
    out_dir: str
    base_model: str | None = None  # a checkpoint directory or hub id; None with ``scratch``
    scratch: ScratchConfig | None = None
    lr: float | None = None  # None: default_lr(base_model, scratch)
    weight_decay: float = 0.01
    warmup_ratio: float = 0.03
    max_grad_norm: float = 1.0
    micro_batch: int = 4
    grad_accum: int = 4
    epochs: float = 2.0
    max_steps: int | None = None  # overrides epochs when set
    max_length: int = 2048
    seed: int = 2026073101
    bf16: bool | None = None  # None: bfloat16 autocast on CUDA devices that support it
    device: str | None = None
    # BPE-dropout on the prompts of a seeded fraction of the rows: (merge drop probability, fraction).
    subword_dropout: float = 0.0
    subword_dropout_rows: float = 0.0
    save: bool = True
    log_every: int = 10
    progress: bool = True
    # The loss weight of each row's decision token (1.0: a token like any other).
    decision_weight: float = 1.0
    # The share of drawn samples whose binding codes are renamed to other codes of the codebook.
    code_renaming: float = 0.0
    # The share of drawn receiver samples shown without their request, answering with the first branch
    # (gencoord_env.train.removal): what a receiver does from its local context when no request arrives.
    request_removal: float = 0.0
    # Decision-token accuracy on a fixed sample of rows every this many updates (0: only at the end).
    monitor_every: int = 0
    # The teacher-forced fit after training reads at most this many rows (0: skip it).
    fit_rows: int = 4096
    # Every this many updates, the run's whole state goes to <out_dir>/resume.pt (0: never); a run started
    # again with the same settings continues from it, to the same weights, so a long run can span calls.
    resume_every: int = 0
    # Deterministic kernels (see _determinism): the same seed, data and commit give the same weights on a rerun.
    deterministic: bool = True
    # The output format the model learns (gencoord_env.agents.formats), recorded in the checkpoint; None: the
    # data sets' own (rows of one format; rows rebuilt around another target, the commit tool's, name theirs).
    format: str | None = None
    # Packed steps (gencoord_env.train.packed; Qwen3.5 hybrid models): each step's rows concatenated into
    # sequences of at most pack_tokens tokens, no padding, instead of micro_batch rows padded to the longest.
    packing: bool = False
    pack_tokens: int = 16384
    # Padded steps: micro-batches of rows of like length (the step's loss is the same; less padding).
    bucket: bool = True

    def __post_init__(self) -> None:
        if (self.base_model is None) == (self.scratch is None):
            raise UsageError("give exactly one of base_model (a checkpoint to fine-tune) and scratch (train from random weights)")
        if not self.data:
            raise UsageError("SFTConfig.data needs at least one JSONL file from gencoord_env.train.data.build_all")
        if self.micro_batch < 1 or self.grad_accum < 1:
            raise UsageError(f"micro_batch and grad_accum must be >= 1, got {self.micro_batch} and {self.grad_accum}")
        if not 0.0 <= self.request_removal <= 1.0:
            raise UsageError(f"request_removal must be in [0, 1], got {self.request_removal}")
        if self.decision_weight <= 0 or not 0.0 <= self.code_renaming <= 1.0:
            raise UsageError(f"decision_weight must be > 0 and code_renaming in [0, 1], got {self.decision_weight} "
                             f"and {self.code_renaming}")
        if self.pack_tokens < 1:
            raise UsageError(f"pack_tokens must be >= 1, got {self.pack_tokens}")
        if self.resume_every < 0:
            raise UsageError(f"resume_every must be >= 0 (0: no resumable state), got {self.resume_every}")
        if not (0.0 <= self.subword_dropout < 1.0 and 0.0 <= self.subword_dropout_rows <= 1.0):
            raise UsageError(f"subword_dropout must be in [0, 1) and subword_dropout_rows in [0, 1], got "
                             f"{self.subword_dropout} and {self.subword_dropout_rows}")
        if self.format is not None:
            output_format(self.format)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["data"] = [Path(p).name for p in self.data]  # hashes identify the data, not where it lies
        if self.scratch is not None and self.scratch.tokenizer is not None:
            d["scratch"]["tokenizer"] = tree_sha256(self.scratch.tokenizer)[0]  # its content, not its folder
        if self.base_model is not None and Path(self.base_model).is_dir():
            d["base_model"] = Path(self.base_model).name
        d["lr"] = default_lr(self.base_model, self.scratch) if self.lr is None else self.lr
        for key in ("out_dir", "device", "progress", "log_every", "save", "monitor_every", "fit_rows", "resume_every",
                    "deterministic"):
            d.pop(key)
        if d["format"] is None:  # the data's own, which the data's hash already fixes
            d.pop("format")
        return d

    def output_format(self, rows: Sequence[Row]) -> OutputFormat:
        """The format the run trains (``format``, else ``rows``' own); raises when code renaming is asked of
        rows whose codes it cannot all find."""
        fmt = output_format(self.format) if self.format is not None else rows_format(rows)
        if self.code_renaming > 0:
            fixed = sorted({r.set for r in rows if not data_set(r.set).code_renaming})
            if fixed or not fmt.renames:
                raise UsageError(f"code_renaming={self.code_renaming} renames binding codes, but the rows of "
                                 f"{fixed or sorted({r.set for r in rows})} ({fmt.title}) do not name every code they "
                                 "use where renaming can find it; set code_renaming=0 for them")
        return fmt


@dataclass(frozen=True)
class RunResult:
    checkpoint: Path | None
    provenance: dict[str, Any]
    losses: list[float] = field(repr=False)


def _collate(items: Sequence[Encoded], pad_id: int, device: torch.device,
             decision_weight: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Right-padded ids and labels, and (``decision_weight`` != 1) per-position loss weights."""
    width = max(len(e.input_ids) for e in items)
    ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    labels = torch.full((len(items), width), -100, dtype=torch.long)
    weights = torch.ones((len(items), width)) if decision_weight != 1.0 else None
    for i, e in enumerate(items):
        ids[i, : len(e.input_ids)] = torch.tensor(e.input_ids)
        labels[i, : len(e.labels)] = torch.tensor(e.labels)
        if weights is not None:
            for k in e.decisions:
                weights[i, e.prompt_tokens + k] = decision_weight
    return (ids.to(device, non_blocking=True), labels.to(device, non_blocking=True),
            None if weights is None else weights.to(device, non_blocking=True))


def _micro_batches(batch: Sequence[Encoded], config: SFTConfig) -> list[list[Encoded]]:
    """A step's samples as the micro-batches it runs: packed sequences (``packing``), or ``micro_batch`` rows at
    a time in order of length, so that rows of like length share their padding (the step's loss, a sum over
    its micro-batches divided by its target tokens, does not depend on how they are grouped)."""
    if config.packing:
        from gencoord_env.train.packed import pack

        return pack(batch, config.pack_tokens)
    ordered = sorted(batch, key=lambda e: len(e.input_ids)) if config.bucket and config.grad_accum > 1 else list(batch)
    return [ordered[k : k + config.micro_batch] for k in range(0, len(ordered), config.micro_batch)]


def masked_loss(model: PreTrainedModel, input_ids: torch.Tensor, labels: torch.Tensor, n_items: int | None = None,
                weights: torch.Tensor | None = None) -> torch.Tensor:
    """Summed cross-entropy of the positions whose next-token label is not -100, divided by ``n_items``.

    ``n_items`` defaults to the number of such positions in this batch (a plain mean); ``weights`` (the
    shape of ``labels``) scales each label position's loss.
    """
    shifted = labels[:, 1:]
    keep = shifted != -100
    count = int(keep.sum()) if n_items is None else n_items
    if count == 0:
        raise UsageError("no target tokens in the batch: every label is -100")
    decoder = getattr(model, "model", None)
    head = model.get_output_embeddings()
    if decoder is None or head is None:  # an architecture without the usual decoder/head split
        if weights is not None:
            raise UsageError(f"{type(model).__name__} has no decoder/head split: decision_weight needs one")
        out = model(input_ids=input_ids, labels=labels, num_items_in_batch=count)
        return out.loss
    hidden = decoder(input_ids=input_ids, use_cache=False).last_hidden_state[:, :-1]
    logits = head(hidden[keep]).float()
    losses = F.cross_entropy(logits, shifted[keep], reduction="none")
    if weights is not None:
        losses = losses * weights[:, 1:][keep]
    return losses.sum() / count


def tree_sha256(directory: str | os.PathLike[str]) -> tuple[str, dict[str, str]]:
    """A content hash of a checkpoint directory: SHA-256 over the sorted (name, file hash) lines."""
    files = {p.relative_to(directory).as_posix(): file_sha256(p) for p in sorted(Path(directory).rglob("*")) if p.is_file()}
    digest = hashlib.sha256("".join(f"{name} {h}\n" for name, h in files.items()).encode()).hexdigest()
    return digest, files


def _config_sha256(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _libraries(device: torch.device) -> dict[str, str]:
    out = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
           "tokenizers": tokenizers.__version__}
    if device.type == "cuda":
        out["cuda"] = str(torch.version.cuda)
        out["device_name"] = torch.cuda.get_device_name(device)
    else:
        out["device_name"] = platform.processor() or platform.machine()
    return out


def read_record(checkpoint: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``training_record.json`` of a checkpoint directory; None for a hub id or a folder without one."""
    path = Path(checkpoint) / RECORD
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def default_lr(base_model: str | None, scratch: ScratchConfig | None = None) -> float:
    """The learning rate a run uses when none is given (see the module docstring).

    >>> default_lr(None, ScratchConfig()), default_lr("Qwen/Qwen3.5-0.8B")
    (0.001, 1e-05)
    """
    if scratch is not None or base_model is None:
        return SCRATCH_LR
    record = read_record(base_model) if Path(base_model).is_dir() else None
    if record and record.get("lineage") and record["lineage"][0].get("from") == "scratch":
        return CONTINUE_LR
    return PAPER_LR


def unseen_tokens(seen: Sequence[int] | set[int], tokenizer: PreTrainedTokenizerBase, prompts: Sequence[str]) -> Counter[str]:
    """Tokens of ``prompts`` (as the model reads them, chat template included) whose ids are not in ``seen``.

    Keys are the token strings, values their occurrences; empty when the model trained on every token.
    """
    known = set(seen)
    out: Counter[str] = Counter()
    for text in prompts:
        for t in tokenizer(prompt_text(tokenizer, text), add_special_tokens=False)["input_ids"]:
            if t not in known:
                out[tokenizer.convert_ids_to_tokens(t)] += 1
    return out


def _build_model(config: SFTConfig, rows: Sequence[Row], device: torch.device) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, dict[str, Any]]:
    """The model to train (float32 weights; autocast supplies bfloat16) and a description for provenance."""
    if config.base_model is not None:
        lm = load_model(config.base_model, device=device, dtype=torch.float32)
        base: dict[str, Any] = {"kind": "pretrained", "source": config.base_model}
        if Path(config.base_model).is_dir():
            base["tree_sha256"] = tree_sha256(config.base_model)[0]
            base["source"] = Path(config.base_model).name
            record = read_record(config.base_model)
            if record is not None:
                base["kind"] = "continued" if record["lineage"][0].get("from") == "scratch" else "pretrained"
                base["lineage"] = record["lineage"]
        return lm.model, lm.tokenizer, base
    scratch = config.scratch
    assert scratch is not None
    if scratch.tokenizer is not None:
        tokenizer = AutoTokenizer.from_pretrained(scratch.tokenizer, local_files_only=True)
        described = {"tokenizer": "shared offline byte-level BPE", "tokenizer_sha256": tree_sha256(scratch.tokenizer)[0]}
    else:
        tokenizer = train_tokenizer([r.prompt + "\n" + r.target for r in rows], vocab_size=scratch.vocab_size)
        described = {"tokenizer": "offline byte-level BPE on the training rows"}
    if scratch.arch == "qwen3_5_08b":
        torch.manual_seed(config.seed)
        model_config = build_qwen35_08b_config(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        with torch.device(device):  # 0.75B weights drawn where they live, not on the CPU first
            model = AutoModelForCausalLM.from_config(model_config).to(dtype=torch.float32)
    else:
        lm = build_tiny(tokenizer=tokenizer, arch=scratch.arch, hidden_size=scratch.hidden_size,
                        num_layers=scratch.num_layers, seed=config.seed, device=device, dtype=torch.float32)
        model = lm.model
    base = {"kind": "scratch", **dataclasses.asdict(scratch), **described}
    return model, tokenizer, base


def _order(n: int, steps: int, per_step: int, seed: int) -> list[int]:
    """Row indices for every sample of the run: whole shuffled epochs, then a shuffled partial epoch."""
    rng = random.Random(seed)
    order: list[int] = []
    while len(order) < steps * per_step:
        epoch = list(range(n))
        rng.shuffle(epoch)
        order += epoch
    return order[: steps * per_step]


def train(config: SFTConfig, on_log: Callable[[int, float, float], None] | None = None) -> RunResult:
    """Run one SFT job; writes ``<out_dir>/final`` (unless ``save`` is off) and ``<out_dir>/provenance.json``.

    ``on_log(step, loss, seconds)`` is called at every logged step (benchmarks print from it).
    """
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = [r for path in config.data for r in load_rows(path)]
    fmt = config.output_format(rows)
    device = torch.device(config.device) if config.device else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    bf16 = config.bf16 if config.bf16 is not None else (device.type == "cuda" and torch.cuda.is_bf16_supported())
    torch.manual_seed(config.seed)
    model, tokenizer, base = _build_model(config, rows, device)
    if config.packing:
        from gencoord_env.train.packed import supports_packing

        if not supports_packing(model):
            raise UsageError(f"packing=True trains the Qwen3.5 hybrid decoder; this run's model is {model.config.model_type}: "
                             "train it with packing=False (padded micro-batches)")
    model.train()
    lr = default_lr(config.base_model, config.scratch) if config.lr is None else config.lr
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    per_step = config.micro_batch * config.grad_accum
    steps = config.max_steps or math.ceil(len(rows) * config.epochs / per_step)
    order = _order(len(rows), steps, per_step, config.seed)
    used = sorted(set(order))  # a short run (max_steps) tokenizes only the rows it samples
    encoded = dict(zip(used, encode([rows[i] for i in used], tokenizer, config.max_length, config.subword_dropout,
                                    config.subword_dropout_rows, config.seed)))
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, fused=device.type == "cuda")
    schedule = get_cosine_schedule_with_warmup(opt, math.ceil(config.warmup_ratio * steps), steps)

    losses: list[float] = []
    exposure = {"samples": 0, "prompt_tokens": 0, "target_tokens": 0, "renamed_samples": 0, "request_removed_samples": 0}
    renamer = _Renamer(rows, tokenizer, config) if config.code_renaming > 0 or config.request_removal > 0 else None
    monitor = _monitor_rows(rows, encoded, used) if config.monitor_every else []
    curve: list[dict[str, Any]] = []
    resume = _Resume(out / "resume.pt", _config_sha256(config.to_dict()), config.resume_every)
    first, before = resume.load(model, opt, schedule, losses, exposure, curve, device)
    progress = _progress(config.progress)
    start = time.perf_counter() - before
    pace: list[tuple[int, float, int]] = []  # (step, seconds, tokens so far) at each logged step of this process
    with progress, _determinism(config.deterministic, device) as nondeterministic:
        task = progress.add_task("sft", total=steps, loss=float("nan"), completed=first)
        for step in range(first, steps):
            span = range(step * per_step, (step + 1) * per_step)
            batch = [(renamer(pos, order[pos]) if renamer else None) or encoded[order[pos]] for pos in span]
            exposure["renamed_samples"] += sum(e.row_id.endswith("#renamed") for e in batch)
            exposure["request_removed_samples"] += sum("#removed" in e.row_id for e in batch)
            n_items = sum(e.target_tokens for e in batch)
            total = torch.zeros((), device=device)
            for micro in _micro_batches(batch, config):
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                    if config.packing:
                        from gencoord_env.train.packed import collate, packed_loss

                        loss = packed_loss(model, collate(micro, device, config.decision_weight), n_items)
                    else:
                        ids, labels, weights = _collate(micro, pad_id, device, config.decision_weight)
                        loss = masked_loss(model, ids, labels, n_items, weights)
                loss.backward()
                total += loss.detach()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            opt.step()
            schedule.step()
            opt.zero_grad(set_to_none=True)
            exposure["samples"] += len(batch)
            exposure["prompt_tokens"] += sum(e.prompt_tokens for e in batch)
            exposure["target_tokens"] += n_items
            if step % config.log_every == 0 or step == steps - 1:
                losses.append(float(total))  # one host sync per logged step only
                pace.append((step + 1, time.perf_counter() - start, exposure["prompt_tokens"] + exposure["target_tokens"]))
                progress.update(task, loss=losses[-1])
                if on_log:
                    on_log(step + 1, losses[-1], time.perf_counter() - start)
            if monitor and ((step + 1) % config.monitor_every == 0 or step == steps - 1):
                got = teacher_forced(model, tokenizer, [rows[i] for i in monitor], encoded=[encoded[i] for i in monitor])
                curve.append({"step": step + 1, "decision_accuracy": got["decision_accuracy"],
                              "decision_loss": got["decision_loss"], "row_exact": got["row_exact"]})
            resume.save(step + 1, steps, model, opt, schedule, losses, exposure, curve, time.perf_counter() - start)
            progress.advance(task)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    model.eval()

    hashes = [file_sha256(p) for p in config.data]
    data_files = [{"file": Path(p).name, "sha256": h, "rows": sum(1 for _ in open(p, encoding="utf-8"))} for p, h in zip(config.data, hashes)]
    cfg = config.to_dict()
    provenance: dict[str, Any] = {
        "data": {"files": data_files, "sha256": hashlib.sha256("".join(hashes).encode()).hexdigest()},
        "config": cfg,
        "config_sha256": _config_sha256(cfg),
        "base_model": {**base, "model_type": model.config.model_type,
                       "parameters": sum(p.numel() for p in model.parameters())},
        "tokenizer_vocab": len(tokenizer),
        "format": fmt.name,
        "seed": config.seed,
        "libraries": _libraries(device),
        "precision": "bfloat16 autocast, float32 weights" if bf16 else "float32",
        "batches": _batching(config, device),
        "optimizer_steps": steps,
        "epochs": steps * per_step / len(rows),
        "token_exposure": {**exposure, "total_tokens": exposure["prompt_tokens"] + exposure["target_tokens"]},
        "train_seconds": seconds,
        "loss_first": losses[0],
        "loss_final": losses[-1],
        "loss_curve": {"every": config.log_every, "values": losses},
        "pace": {"steps": [p[0] for p in pace], "seconds": [p[1] for p in pace], "tokens": [p[2] for p in pace]},
    }
    provenance["deterministic"] = {"on": config.deterministic, "nondeterministic_ops": sorted(set(nondeterministic))}
    if curve:
        provenance["decision_curve"] = {"rows": len(monitor), "points": curve}
    if config.fit_rows:
        measured = sorted(encoded)[: config.fit_rows]
        fit = teacher_forced(model, tokenizer, [rows[i] for i in measured], encoded=[encoded[i] for i in measured])
        provenance["fit"] = {"teacher_forced": fit, **verdict(fit, None)}
        shout(provenance["fit"], str(out))
    seen = {t for e in encoded.values() for t in e.input_ids}
    provenance["seen_tokens"] = len(seen)
    checkpoint = None
    if config.save:
        checkpoint = out / "final"
        model.save_pretrained(checkpoint)
        tokenizer.save_pretrained(checkpoint)
        previous = read_record(config.base_model) if config.base_model and Path(config.base_model).is_dir() else None
        entry = {
            "from": "scratch" if config.scratch is not None else ("checkpoint" if previous else "pretrained"),
            "base": base.get("source") if config.base_model else None,
            "data_sha256": provenance["data"]["sha256"], "rows": len(rows), "optimizer_steps": steps,
            "epochs": provenance["epochs"], "lr": lr, "seed": config.seed, "config_sha256": provenance["config_sha256"],
            "decision_weight": config.decision_weight, "code_renaming": config.code_renaming,
            "token_exposure": provenance["token_exposure"], "subword_dropout": [config.subword_dropout, config.subword_dropout_rows],
        }
        record = {
            "format": fmt.name,
            "lineage": [*(previous or {}).get("lineage", []), entry],
            "seen_token_ids": sorted(seen | set((previous or {}).get("seen_token_ids", []))),
        }
        (checkpoint / RECORD).write_text(json.dumps(record, sort_keys=True) + "\n", encoding="utf-8")
        digest, files = tree_sha256(checkpoint)
        provenance["checkpoint"] = {"dir": "final", "tree_sha256": digest, "files": files}
    (out / "provenance.json").write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    resume.done()
    return RunResult(checkpoint, provenance, losses)


#: cuBLAS's setting for reproducible results (read when a process first uses cuBLAS; see torch's notes on randomness)
CUBLAS_WORKSPACE = ":4096:8"


@contextlib.contextmanager
def _determinism(on: bool, device: torch.device) -> Iterator[list[str]]:
    """Deterministic kernels while training, the process's previous settings restored after.

    A small model's fit is a race between the decision tokens and the shortcuts around them, and a run on
    a GPU that reduces in a different order each time (attention and embedding backward by atomic adds)
    can end on either side of it: the same seed gave decision token 0.82 once and 1.00 another time. On:
    ``torch.use_deterministic_algorithms`` (warn-only, so an op without a deterministic kernel still runs),
    cuDNN deterministic, cuBLAS's fixed workspace, and attention on the math kernel (the fused kernels'
    backward adds by atomics unless strictly asked). Yields a list that collects the warnings of the ops
    that ran without a deterministic kernel (recorded in the provenance).
    """
    if not on:
        yield []
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    previous = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
                torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    found: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught, (
                sdpa_kernel([SDPBackend.MATH]) if device.type == "cuda" else contextlib.nullcontext()):
            warnings.simplefilter("always")
            yield found
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = previous[2], previous[3]
    for w in caught:
        if "determinis" in str(w.message):
            found.append(str(w.message).splitlines()[0][:300])
        else:  # not ours to swallow
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _batching(config: SFTConfig, device: torch.device) -> dict[str, Any]:
    if not config.packing:
        return {"packing": False, "micro_batch": config.micro_batch, "grad_accum": config.grad_accum}
    from gencoord_env.train.packed import kernels_used

    return {"packing": True, "pack_tokens": config.pack_tokens, "kernels": kernels_used(device)}


class _Resume:
    """A run's resumable state in one file: weights, optimizer, schedule, the step reached and what was
    logged so far, written atomically every ``every`` updates and removed when the run ends."""

    def __init__(self, path: Path, config_sha256: str, every: int) -> None:
        self.path, self.config_sha256, self.every = path, config_sha256, every

    def load(self, model: Any, opt: Any, schedule: Any, losses: list[float], exposure: dict[str, int],
             curve: list[dict[str, Any]], device: torch.device) -> tuple[int, float]:
        """The step to start from and the seconds already trained (0 and 0.0 without a state of this run)."""
        if not self.every or not self.path.is_file():
            return 0, 0.0
        state = torch.load(self.path, map_location=device, weights_only=True)
        if state.get("config_sha256") != self.config_sha256:
            raise DataError(f"{self.path} holds the state of a run with other settings; remove it to start this "
                            "run afresh, or start the run it belongs to")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        schedule.load_state_dict(state["schedule"])
        losses[:] = state["losses"]
        exposure.update(state["exposure"])
        curve[:] = state["curve"]
        return int(state["step"]), float(state["seconds"])

    def save(self, step: int, steps: int, model: Any, opt: Any, schedule: Any, losses: list[float],
             exposure: Mapping[str, int], curve: list[dict[str, Any]], seconds: float) -> None:
        if not self.every or step % self.every or step == steps:
            return
        tmp = self.path.with_suffix(".tmp")
        torch.save({"config_sha256": self.config_sha256, "step": step, "model": model.state_dict(),
                    "opt": opt.state_dict(), "schedule": schedule.state_dict(), "losses": losses,
                    "exposure": dict(exposure), "curve": curve, "seconds": seconds}, tmp)
        os.replace(tmp, self.path)

    def done(self) -> None:
        self.path.unlink(missing_ok=True)


class _Renamer:
    """Per drawn sample, seeded by (run seed, sample position): keep it, or rename its codes (``code_renaming``)."""

    def __init__(self, rows: Sequence[Row], tokenizer: PreTrainedTokenizerBase, config: SFTConfig) -> None:
        self.rows, self.tokenizer, self.config = rows, tokenizer, config
        self.codes = public_codes()
        self.twins: dict[tuple[str, str, str], list[int]] = {}
        for i, r in enumerate(rows):
            self.twins.setdefault(twin_key(r.episode, r.stage), []).append(i)

    def __call__(self, position: int, index: int) -> Encoded | None:
        row = self.rows[index]
        twins = [self.rows[j] for j in self.twins[twin_key(row.episode, row.stage)] if self.rows[j].binding != row.binding]
        if (self.config.request_removal and row.stage == "receiver_after_request"
                and random.Random(f"remove:{self.config.seed}:{position}").random() < self.config.request_removal):
            from gencoord_env.train.removal import default_code, without_request

            default = default_code(row)
            target = next((r.target for r in [row, *twins] if r.binding == default), None)
            if target is not None:
                row, twins = without_request(row, target), []  # the other binding's removed row writes the same
        rng = random.Random(f"rename:{self.config.seed}:{position}")
        renamed = rng.random() < self.config.code_renaming
        if not renamed and not row.id.endswith("#removed"):
            return None
        if renamed:
            names = renaming_for(row_codes(row.prompt) or (row.binding,), rng, self.codes)
            # the twin, renamed alike, locates the renamed row's decision token
            row, twins = rename_row(row, names), [rename_row(t, names) for t in twins[:1]]
        first = encode([row, *twins[:1]], self.tokenizer, self.config.max_length)[0]
        return dataclasses.replace(first, row_id=f"{first.row_id}#renamed" if renamed else first.row_id)


def _monitor_rows(rows: Sequence[Row], encoded: Mapping[int, Encoded], used: Sequence[int], total: int = 128) -> list[int]:
    """A fixed sample for the decision curve: ``total`` rows dealt round-robin over the stage x template cells."""
    cells: dict[str, list[int]] = {}
    for i in used:
        if encoded[i].decisions:
            cells.setdefault(cell_of(rows[i].stage, rows[i].episode), []).append(i)
    queues = [cells[c] for c in sorted(cells)]
    out: list[int] = []
    for depth in range(max(map(len, queues), default=0)):
        out += [q[depth] for q in queues if depth < len(q)][: total - len(out)]
        if len(out) >= total:
            break
    return sorted(out)


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.4f}"), TimeElapsedColumn(), TimeRemainingColumn(),
        disable=not enabled,
    )
