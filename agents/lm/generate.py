"""Batched text generation for learned policies (greedy by default, or seeded sampling), with per-call records.

The paper's learned agents decode greedily (deterministic), with a structured cap of 256 new tokens,
and their cost is reported as calls, input tokens, output tokens and time to commitment. A
:class:`Generator` turns a batch of local contexts into completions and one
:class:`GenerationRecord` per prompt carrying those numbers.

Sampling (``do_sample=True``; for reinforcement learning) draws each token from the model's
distribution with ``temperature`` and nucleus (``top_p``) filtering, by inverse CDF over the nucleus
sorted by probability, with one uniform number per (row, step) drawn on the CPU from a seeded
``torch.Generator``. The draw is therefore a pure function of the logits and the seed, whatever the
device: given the same logits, both decoding paths below draw the same tokens. Records then carry ``completion_ids`` (every sampled
token, the stopping one included) and ``logprobs``: for each of those tokens ``log_softmax(logits)`` of
the raw model logits, i.e. at temperature 1, before top-p and before the ``min_new_tokens`` EOS block.
That is the quantity a policy-gradient loss recomputes with a teacher-forced forward pass of the same
model (TRL's GRPO divides the logits by its ``temperature`` first: with temperature 1 the two agree).
Greedy decoding is unchanged by all of this; ``logprobs=True`` adds the same raw log-probabilities to
greedy records.

Two decoding paths compute the same function:

- ``"static"``: our own loop over a preallocated (static) KV / recurrent-state cache. Prompts are
  left-padded, the whole batch is prefilled in one forward pass, then one token per step is decoded.
  On CUDA the decode step is captured once as a CUDA graph per (batch, cache length) shape and replayed,
  so a step costs one graph launch instead of hundreds of kernel launches from Python; stopping is
  checked on the device and read back only every few steps. This is the fast path.
- ``"generate"``: plain ``model.generate``; the reference the static loop is tested against, and
  a fallback for models the static loop does not support.

For Qwen3.5 the static loop runs :func:`gencoord_env.agents.lm.hybrid.hybrid_forward` (the model's own layers over
state buffers it owns, updated in place) instead of transformers' forward; its Gated-DeltaNet ops use
the ``flash-linear-attention`` (``fla``) Triton kernels on CUDA when that package is importable (see
:func:`kernel_report`). On CUDA the prefill is also compiled and captured as a CUDA graph, once per
(batch, prompt width rounded up to 64), so a batch-1 prefill costs one graph launch instead of
thousands of kernel launches from Python.

Prefix reuse (``prefix_cache``, off by default until it is shown equal to a full prefill on CUDA in bfloat16;
the CPU tests hold it equal in float32): prompts carry the shared prior first
(:mod:`gencoord_env.agents.lm.prompt`), so the prompts of one template begin with the same head. The
static loop keeps the model's state after each distinct head (:mod:`gencoord_env.agents.lm.prefix`: keys
and values, and for Qwen3.5 the Gated-DeltaNet conv windows and recurrent states), splices it into
every row that starts with that head and prefills only the suffixes, right-padded after it, so a call
pays for the local part of its prompts only. :meth:`Generator.generate` finds the head from the
layout; :meth:`Generator.generate_tokens` takes its length (``shared``). Outputs are those of a full
prefill (the tests hold greedy tokens identical and log-probabilities within 1e-4 in float32). On CUDA
the suffix prefill is compiled and captured per (head slots rounded up to 128, suffix width rounded up
to 64). Cached states are dropped when the model's weights change in place.

Stopping: at any EOS id of the model or tokenizer, and (``stop_at_record_end``) once the completion has
finished the two-line Short DSL record, i.e. after its second newline. ``output_tokens`` counts every
generated token, including a final EOS or newline token.
"""

from __future__ import annotations

import contextlib

import time
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from transformers import LogitsProcessor, LogitsProcessorList, PreTrainedModel, PreTrainedTokenizerBase, StoppingCriteria, StoppingCriteriaList

from gencoord_env.agents.lm import kernels
from gencoord_env.agents.lm.hybrid import FusedProjections, HybridState, hybrid_forward, supports_hybrid
from gencoord_env.agents.lm.prefix import PrefixCache, PrefixState, compute_prefix, splice, weights_fingerprint
from gencoord_env.agents.lm.prompt import prompt_parts
from gencoord_env.errors import UsageError

__all__ = ["GenerationConfig", "GenerationRecord", "Generator", "kernel_report"]

Backend = Literal["auto", "static", "generate"]
StopReason = Literal["eos", "record_end", "max_new_tokens"]

# How many decode steps run between two reads of the on-device "all finished" flag. Each read is a
# host-device synchronisation; reading every step would leave the GPU idle while Python catches up.
_CHECK_EVERY = 8
# Prompt widths are rounded up to a multiple of this on CUDA, so one captured prefill serves a range of
# prompt lengths (left padding is exact: padded positions are masked and leave the state untouched).
_PREFILL_BUCKET = 64
# With a shared prefix, the slots before the suffix are this many wide (rounded up), so one captured
# suffix prefill serves prefixes of several lengths; suffix widths round up to _PREFILL_BUCKET. Both
# round on every device, so the CPU runs the layout (gaps, padding) that CUDA runs.
_PREFIX_BUCKET = 128


def _allow_recompiles(limit: int = 64) -> None:
    """Each (batch, width) shape compiles the same step function once; dynamo's default cap is 8."""
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(config, name) and getattr(config, name) < limit:
            setattr(config, name, limit)


@dataclass(frozen=True)
class GenerationConfig:
    """How to decode. Defaults are the paper's: greedy, at most 256 new tokens."""

    max_new_tokens: int = 256
    # EOS is suppressed until this many tokens exist (used to force a fixed output length in timing).
    min_new_tokens: int = 0
    stop_at_record_end: bool = True
    record_lines: int = 2
    use_chat_template: bool = True
    backend: Backend = "auto"
    # CUDA graphs for the decode step on CUDA devices; off gives the same tokens, only slower.
    cuda_graphs: bool = True
    # torch.compile the decode step before graph capture: fuses its many small element-wise kernels
    # (measured on an H100: 4.2 -> 2.2 ms per step at batch 1) for a one-off compile of ~30 s per shape.
    # None: on when CUDA graphs are in use.
    compile_decode: bool | None = None
    # torch.compile the prefill before its graph capture (fuses the float32 norm / gate arithmetic that
    # dominates a batch-64 prefill); None: as compile_decode. Costs one compile per (batch, width bucket).
    compile_prefill: bool | None = None
    # Run Qwen3.5 through gencoord_env.agents.lm.hybrid (own state buffers, in-place updates); None: whenever supported.
    hybrid: bool | None = None
    # dtype of the Gated-DeltaNet recurrent state between decode steps: "float32" as transformers keeps
    # it, or "model" (bf16 on GPU) to halve the state traffic of large-batch decoding (measured on an
    # H200 at batch 64: 70.1 vs 70.5 commitments/s, so float32 stays the default).
    recurrent_state: Literal["float32", "model"] = "float32"
    # Static decoders (shape, buffers, graph) kept; each holds a full cache for its batch size.
    max_decoders: int = 4
    # Sample instead of decoding greedily: softmax(logits / temperature) restricted to the smallest set of
    # most probable tokens whose mass reaches top_p. ``seed`` seeds the generator's sampling stream.
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0
    # Per-token raw log-probabilities in the records (see the module docstring); None: on when sampling.
    logprobs: bool | None = None
    # Reuse the state after a prompt's shared head (the prior, laid first by agents.lm.prompt): computed
    # once per distinct head, each call prefills only what follows it. Static backend; Qwen3.5 through
    # the hybrid forward, or attention-only models through transformers' forward.
    prefix_cache: bool = False
    # Shared heads shorter than this are prefilled with the rest (a cached state would save nothing).
    min_prefix_tokens: int = 32
    # Distinct prefix states kept (Qwen3.5-0.8B: ~20 MB each, mostly the float32 recurrent states).
    max_prefixes: int = 64
    # Hybrid forward: one matrix multiply per layer for the projections that read the same input
    # (Gated-DeltaNet in_proj q/k/v/z/b/a, attention q/k/v, MLP gate/up) over concatenated copies of
    # their weights (Qwen3.5-0.8B: +0.7 GB), refreshed when the weights change. Same tokens; fewer
    # kernels per decode step. Not yet measured on GPU, so off by default.
    fuse_projections: bool = False

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise UsageError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not 0 <= self.min_new_tokens <= self.max_new_tokens:
            raise UsageError(
                f"min_new_tokens must be in [0, max_new_tokens={self.max_new_tokens}], got {self.min_new_tokens}"
            )
        if self.recurrent_state not in ("float32", "model"):
            raise UsageError(f"recurrent_state must be 'float32' or 'model', got {self.recurrent_state!r}")
        if self.backend not in ("auto", "static", "generate"):
            raise UsageError(f"backend must be 'auto', 'static' or 'generate', got {self.backend!r}")
        if not self.temperature > 0:
            raise UsageError(f"temperature must be > 0 (greedy decoding is do_sample=False), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise UsageError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.min_prefix_tokens < 1:
            raise UsageError(f"min_prefix_tokens must be >= 1, got {self.min_prefix_tokens}")
        if self.max_prefixes < 1:
            raise UsageError(f"max_prefixes must be >= 1, got {self.max_prefixes}")

    @property
    def wants_logprobs(self) -> bool:
        return self.do_sample if self.logprobs is None else self.logprobs


@dataclass(frozen=True)
class GenerationRecord:
    """One prompt's completion and its cost. ``latency_s`` is the wall time of the whole (batched) call."""

    text: str
    # The generated token ids up to (not including) the stop token.
    tokens: tuple[int, ...]
    input_tokens: int
    output_tokens: int
    latency_s: float
    stop_reason: StopReason
    batch_size: int
    backend: str
    # Every generated token of this row including the one that stopped it (EOS or the record end's last
    # newline): the tokens the model emitted, as a policy-gradient loss scores them.
    completion_ids: tuple[int, ...] = ()
    # log p(token | prompt, earlier tokens) of each ``completion_ids`` token under the raw model logits
    # (log_softmax, temperature 1, no top-p, no EOS block); None unless logprobs were asked for.
    logprobs: tuple[float, ...] | None = None


def kernel_report() -> dict[str, str]:
    """Which implementation transformers bound for each Gated-DeltaNet op (``module.function``).

    transformers picks the ``fla`` / ``causal_conv1d`` kernels at import time when those packages are
    importable, else its reference PyTorch code; this reads back what it chose (used by the
    ``generate`` path), plus what the static loop's hybrid forward uses (``hybrid_forward``).
    """
    try:
        from transformers.models.qwen3_5 import modeling_qwen3_5 as mod
    except ImportError:  # pragma: no cover - transformers without Qwen3.5
        return {}
    names = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "causal_conv1d_fn", "causal_conv1d_update")
    report: dict[str, str] = {}
    for name in names:
        fn = getattr(mod, name, None)
        if fn is None:
            continue
        chosen = fn
        for cell in getattr(fn, "__closure__", None) or ():
            value = cell.cell_contents
            module = getattr(value, "__module__", None)
            if callable(value) and isinstance(module, str) and module and not module.startswith("transformers"):
                chosen = value
                break
        report[name] = f"{getattr(chosen, '__module__', '?')}.{getattr(chosen, '__name__', '?')}"
    report["hybrid_forward"] = "fla triton kernels on cuda" if kernels.fla_available() else "pytorch reference kernels"
    return report


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    ids: set[int] = set()
    sources = [getattr(model.generation_config, "eos_token_id", None), getattr(model.config, "eos_token_id", None), tokenizer.eos_token_id]
    for source in sources:
        if source is None:
            continue
        ids.update([source] if isinstance(source, int) else source)
    if not ids:
        raise UsageError("neither the model nor the tokenizer defines an EOS token id; set tokenizer.eos_token")
    return sorted(ids)


def _newline_table(tokenizer: PreTrainedTokenizerBase, vocab_size: int) -> torch.Tensor:
    """Number of newlines each token id decodes to (record-end detection on the device)."""
    table = torch.zeros(vocab_size, dtype=torch.int32)
    pieces = tokenizer.convert_ids_to_tokens(list(range(min(vocab_size, len(tokenizer)))))
    for token_id, piece in enumerate(pieces):
        if piece is None:
            continue
        # Byte-level BPE spells "\n" as "Ċ"; decode only the candidates (decoding every id is slow).
        if "Ċ" in piece or "\n" in piece:
            table[token_id] = tokenizer.decode([token_id]).count("\n")
    return table


def _sample(logits: torch.Tensor, uniform: torch.Tensor, temperature: torch.Tensor | float, top_p: torch.Tensor | float) -> torch.Tensor:
    """One token id per row, drawn by inverse CDF with ``uniform`` (one number in [0, 1) per row).

    The distribution is ``softmax(logits / temperature)`` restricted to its top-p nucleus: the most
    probable tokens, in order, while the mass before each is below ``top_p`` (so the first always
    stays). Tokens with logit -inf have probability 0 and are never drawn.
    """
    probs = torch.softmax(logits / temperature, dim=-1)
    ordered, order = probs.sort(dim=-1, descending=True, stable=True)
    kept = torch.where(ordered.cumsum(-1) - ordered < top_p, ordered, torch.zeros_like(ordered))
    cdf = kept.cumsum(-1)
    pos = torch.searchsorted(cdf, uniform.view(-1, 1) * cdf[:, -1:], right=True)
    # Float rounding can put the target at the very top; the kept tokens are a prefix of ``order``.
    pos = torch.minimum(pos, (kept > 0).sum(-1, keepdim=True) - 1)
    return order.gather(-1, pos).view(-1)


class _InverseCDF(LogitsProcessor):
    """Makes ``model.generate``'s greedy pick the token :func:`_sample` draws (the ``generate`` path).

    It runs after transformers' own processors (the ``min_new_tokens`` EOS block), as the static loop does.
    """

    def __init__(self, noise: torch.Tensor, prompt_len: int, temperature: float, top_p: float) -> None:
        self.noise, self.prompt_len, self.temperature, self.top_p = noise, prompt_len, temperature, top_p

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        step = input_ids.shape[1] - self.prompt_len
        chosen = _sample(scores.float(), self.noise[:, step].to(scores.device), self.temperature, self.top_p)
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, chosen.view(-1, 1), 0.0)


class _RecordEnd(StoppingCriteria):
    """Stops rows whose completion holds ``lines`` newlines (for the ``generate`` path)."""

    def __init__(self, table: torch.Tensor, prompt_len: int, lines: int) -> None:
        self.table, self.prompt_len, self.lines = table, prompt_len, lines

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: object) -> torch.BoolTensor:
        table = self.table.to(input_ids.device)
        return table[input_ids[:, self.prompt_len :]].sum(dim=1) >= self.lines


class Generator:
    """Batched generation (greedy, or seeded sampling) with a structured cap and per-call records.

    Example::

        gen = Generator(lm.model, lm.tokenizer)
        records = gen.generate(["<local context of env 0>", "<local context of env 1>"])
        records[0].text, records[0].output_tokens, records[0].latency_s

        sampler = Generator(lm.model, lm.tokenizer, GenerationConfig(do_sample=True, temperature=1.0, top_p=0.95, seed=1))
        group = sampler.generate(["<context>"] * 8)        # eight samples of one context
        group[0].completion_ids, group[0].logprobs         # raw model log-probabilities per token
    """

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, config: GenerationConfig | None = None) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.config = config or GenerationConfig()
        self.device = next(model.parameters()).device
        self.eos_ids = _eos_ids(model, tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]
        vocab = model.get_output_embeddings().weight.shape[0]
        self._newlines_cpu = _newline_table(tokenizer, vocab)
        self._decoders: OrderedDict[tuple[int, int, bool, bool], _StaticDecoder] = OrderedDict()
        # The sampling stream: successive calls draw successive noise, so a Generator built with one seed
        # reproduces its whole sequence of samples; ``seed=`` on a call pins that call alone.
        self._rng = torch.Generator().manual_seed(self.config.seed)
        self.backend = self._pick_backend()
        self._graphs = self.config.cuda_graphs and self.device.type == "cuda"
        self._hybrid = supports_hybrid(self.model) if self.config.hybrid is None else self.config.hybrid
        self.prefixes: PrefixCache | None = None
        if self.config.prefix_cache and self.backend == "static" and self._prefix_supported():
            self.prefixes = PrefixCache(lambda tokens: compute_prefix(self.model, tokens, hybrid=self._hybrid), self.config.max_prefixes)
        self.fused: FusedProjections | None = None
        if self.config.fuse_projections and self.backend == "static" and self._hybrid:
            self.fused = FusedProjections(self.model)
        # Both hold values computed from the weights: recomputed when a training step changes them.
        self._weights = weights_fingerprint(self.model) if (self.prefixes or self.fused) else None
        # Token ids of each shared head text seen (the prior recurs at every decision of its template).
        self._head_ids: OrderedDict[str, list[int]] = OrderedDict()

    # ------------------------------------------------------------------ public API

    def prompt_text(self, context: str) -> str:
        """The model input for one local context (:func:`gencoord_env.agents.lm.prompt.prompt_text`)."""
        return prompt_parts(self.tokenizer, context, self.config.use_chat_template).text

    def generate(self, contexts: Sequence[str], *, seed: int | None = None) -> list[GenerationRecord]:
        """Complete every context in one batched call; records come back in input order.

        When sampling, ``seed`` makes this call's samples a function of the seed and the prompts alone
        (row ``i`` uses the ``i``-th row of the seed's noise); without it the call continues the
        generator's own stream, seeded by ``config.seed``.
        """
        start = time.perf_counter()
        if not contexts:
            return []
        parts = [prompt_parts(self.tokenizer, context, self.config.use_chat_template) for context in contexts]
        # One call for the batch: a fast tokenizer encodes the texts in parallel.
        prompts = self.tokenizer([p.text for p in parts], add_special_tokens=False)["input_ids"]
        shared = [_common_prefix(ids, self._head(p.shared)) for ids, p in zip(prompts, parts)]
        return self._run(prompts, start, seed, shared)

    def generate_tokens(
        self, prompts: Sequence[Sequence[int]], *, seed: int | None = None, shared: int | Sequence[int] | None = None
    ) -> list[GenerationRecord]:
        """As :meth:`generate`, for prompts already tokenized (benchmarks, cached prompts).

        ``shared``: how many leading tokens of each prompt (one number for all) are a head that other
        prompts share, whose state the prefix cache may keep; None: no shared head.
        """
        rows = [list(p) for p in prompts]
        if isinstance(shared, int):
            shared = [shared] * len(rows)
        if shared is not None and len(shared) != len(rows):
            raise UsageError(f"got {len(rows)} prompts but {len(shared)} shared lengths")
        return self._run(rows, time.perf_counter(), seed, None if shared is None else list(shared))

    def graph_status(self) -> dict[str, str]:
        """For each compiled (batch, cache length) shape: ``"graph"``, ``"eager"`` or why capture failed."""
        status = {}
        for (batch, length, _, _), d in self._decoders.items():
            forward = "hybrid" if d.hybrid else "transformers"
            status[f"{batch}x{length}"] = f"{forward} decode " + ("graph" if d.graph is not None else (d.graph_error or "eager"))
            for width, entry in d.prefills.items():
                status[f"{batch}x{length} prefill {width}"] = "graph" if entry.graph is not None else (entry.error or "eager")
            for (start, width), suffix in d.extends.items():
                status[f"{batch}x{length} suffix {start}+{width}"] = "graph" if suffix.graph is not None else (suffix.error or "eager")
        return status

    # ------------------------------------------------------------------ internals

    def _pick_backend(self) -> str:
        if self.config.backend != "auto":
            return self.config.backend
        # The static loop needs the cache class for this architecture; anything else uses generate.
        model_type = getattr(self.model.config, "model_type", "")
        return "static" if model_type in {"qwen3", "qwen3_5", "qwen3_5_text", "qwen2", "llama"} else "generate"

    def _noise(self, rows: int, seed: int | None) -> torch.Tensor | None:
        """One uniform number per (row, step) for sampling, drawn on the CPU; None when decoding greedily."""
        if not self.config.do_sample:
            return None
        rng = self._rng if seed is None else torch.Generator().manual_seed(seed)
        return torch.rand((rows, self.config.max_new_tokens), generator=rng, dtype=torch.float32)

    def _prefix_supported(self) -> bool:
        """Whether the static loop can start from a spliced state: the hybrid forward, or attention only."""
        layer_types = getattr(self.model.config, "layer_types", None) or ["full_attention"]
        return self._hybrid or all(kind == "full_attention" for kind in layer_types)

    def _check_weights(self) -> None:
        """After an in-place weight update: forget cached prefix states, recopy fused weights."""
        if self._weights is None:
            return
        current = weights_fingerprint(self.model)
        if current != self._weights:
            self._weights = current
            if self.prefixes is not None:
                self.prefixes.clear()
            if self.fused is not None:
                self.fused.refresh()

    def _head(self, text: str) -> list[int]:
        """Token ids of a shared head text, memoized (each prior recurs at every decision of its template)."""
        if not text:
            return []
        ids = self._head_ids.get(text)
        if ids is None:
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            self._head_ids[text] = ids
            while len(self._head_ids) > 4 * self.config.max_prefixes:
                self._head_ids.popitem(last=False)
        else:
            self._head_ids.move_to_end(text)
        return ids

    def _run(
        self, prompts: list[list[int]], start: float, seed: int | None = None, shared: list[int] | None = None
    ) -> list[GenerationRecord]:
        if not prompts:
            return []
        if any(len(p) == 0 for p in prompts):
            raise UsageError("every prompt needs at least one token")
        noise = self._noise(len(prompts), seed)
        # CUDA graphs are captured on, and replayed from, the current device's streams: a model on cuda:1
        # decoded while cuda:0 is current captures an empty graph and replays nothing (the output buffer's
        # stale tokens come back as the completion). Make the model's device current for the whole call.
        with torch.inference_mode(), _on_device(self.device):
            if self.backend == "static":
                self._check_weights()
                rows, logps = self._decode_static(prompts, noise, shared)
            else:
                rows, logps = self._decode_generate(prompts, noise)
        latency = time.perf_counter() - start
        records = []
        for n, (prompt, tokens) in enumerate(zip(prompts, rows)):
            kept, reason = self._cut(tokens)
            emitted = len(kept) + (reason != "max_new_tokens")
            text = self.tokenizer.decode(kept, skip_special_tokens=True)
            if reason == "record_end":
                text = "\n".join(text.split("\n")[: self.config.record_lines])
            records.append(
                GenerationRecord(
                    text=text.strip(),
                    tokens=tuple(kept),
                    input_tokens=len(prompt),
                    output_tokens=emitted,
                    latency_s=latency,
                    stop_reason=reason,
                    batch_size=len(prompts),
                    backend=self.backend,
                    completion_ids=tuple(tokens[:emitted]),
                    logprobs=None if logps is None else tuple(logps[n][:emitted]),
                )
            )
        return records

    def _cut(self, tokens: list[int]) -> tuple[list[int], StopReason]:
        """The tokens before the stop point, and why generation stopped (same rule for both paths)."""
        eos = set(self.eos_ids)
        newlines = 0
        for i, token in enumerate(tokens):
            if token in eos and i >= self.config.min_new_tokens:
                return tokens[:i], "eos"
            if self.config.stop_at_record_end:
                newlines += int(self._newlines_cpu[token]) if token < len(self._newlines_cpu) else 0
                if newlines >= self.config.record_lines:
                    return tokens[:i], "record_end"
        return tokens[: self.config.max_new_tokens], "max_new_tokens"

    def _left_pad(self, prompts: list[list[int]], width: int) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.bool)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            mask[row, width - len(prompt) :] = True
        return ids, mask

    def _decode_generate(self, prompts: list[list[int]], noise: torch.Tensor | None = None) -> tuple[list[list[int]], list[list[float]] | None]:
        width = max(len(p) for p in prompts)
        ids, mask = self._left_pad(prompts, width)
        criteria = StoppingCriteriaList()
        if self.config.stop_at_record_end:
            criteria.append(_RecordEnd(self._newlines_cpu, width, self.config.record_lines))
        processors = LogitsProcessorList()
        if noise is not None:  # greedy over a one-hot of the token our sampler draws
            processors.append(_InverseCDF(noise, width, self.config.temperature, self.config.top_p))
        want_logprobs = self.config.wants_logprobs
        out = self.model.generate(
            input_ids=ids.to(self.device),
            attention_mask=mask.long().to(self.device),
            do_sample=False,
            max_new_tokens=self.config.max_new_tokens,
            min_new_tokens=self.config.min_new_tokens,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
            stopping_criteria=criteria,
            logits_processor=processors,
            **({"output_logits": True, "return_dict_in_generate": True} if want_logprobs else {}),
        )
        sequences = out.sequences if want_logprobs else out
        new = sequences[:, width:]
        logps = None
        if want_logprobs:  # ``out.logits`` are the raw logits of each step, before any processor
            raw = torch.stack(out.logits, dim=1).float().log_softmax(-1)
            logps = raw.gather(-1, new.unsqueeze(-1)).squeeze(-1).cpu().tolist()
        return [row.tolist() for row in new.cpu()], logps

    def _prefix_rows(self, prompts: list[list[int]], shared: list[int] | None) -> list[PrefixState | None] | None:
        """Each prompt's cached head state (None: prefill it whole), or None when no prompt has one."""
        if self.prefixes is None or shared is None:
            return None
        # At least one token after the head, whose logits start the completion.
        lengths = [min(n, len(p) - 1) for p, n in zip(prompts, shared)]
        if not any(n >= self.config.min_prefix_tokens for n in lengths):
            return None
        return [self.prefixes.get(tuple(p[:n])) if n >= self.config.min_prefix_tokens else None for p, n in zip(prompts, lengths)]

    def _decode_static(
        self, prompts: list[list[int]], noise: torch.Tensor | None = None, shared: list[int] | None = None
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        heads = self._prefix_rows(prompts, shared)
        if heads is not None:
            return self._decode_after_prefix(prompts, heads, noise)
        width = max(len(p) for p in prompts)
        if self._graphs:
            width = _round_up(width, _PREFILL_BUCKET)
        batch = _bucket(len(prompts))
        # Fill the bucket with copies of the first prompt; their outputs are dropped.
        padded_prompts = prompts + [prompts[0]] * (batch - len(prompts))
        cache_len = _round_up(width + self.config.max_new_tokens, 256)
        decoder = self._decoder(batch, cache_len, noise is not None, self.config.wants_logprobs)
        ids, mask = self._left_pad(padded_prompts, width)
        out, logps = decoder.run(ids, mask, self.config, noise)
        return [row.tolist() for row in out[: len(prompts)]], None if logps is None else logps[: len(prompts)].tolist()

    def _decode_after_prefix(
        self, prompts: list[list[int]], heads: list[PrefixState | None], noise: torch.Tensor | None
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        """Splice each row's head state in, prefill only the suffixes (right-padded), then decode."""
        ids, mask, prefix, cache_len = self._suffix_batch(prompts, heads)
        decoder = self._decoder(ids.shape[0], cache_len, noise is not None, self.config.wants_logprobs)
        out, logps = decoder.run(ids, mask, self.config, noise, prefix=prefix)
        real = len(prompts)
        return [row.tolist() for row in out[:real]], None if logps is None else logps[:real].tolist()

    def _suffix_batch(
        self, prompts: list[list[int]], heads: list[PrefixState | None]
    ) -> tuple[torch.Tensor, torch.Tensor, _Prefix, int]:
        """The suffixes right-padded to one width (ids, mask), where the rows start, and the cache length."""
        batch = _bucket(len(prompts))
        # Fill the bucket with copies of the first prompt; their outputs are dropped.
        heads = heads + [heads[0]] * (batch - len(prompts))
        prompts = prompts + [prompts[0]] * (batch - len(prompts))
        start = _round_up(max(h.length if h is not None else 0 for h in heads), _PREFIX_BUCKET)
        suffixes = [p[h.length if h is not None else 0 :] for p, h in zip(prompts, heads)]
        width = _round_up(max(len(s) for s in suffixes), _PREFILL_BUCKET)
        ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((batch, width), dtype=torch.bool)
        for row, suffix in enumerate(suffixes):
            ids[row, : len(suffix)] = torch.tensor(suffix, dtype=torch.long)
            mask[row, : len(suffix)] = True
        base = torch.tensor([h.length if h is not None else 0 for h in heads], dtype=torch.long)
        cache_len = _round_up(start + width + self.config.max_new_tokens, 256)
        return ids, mask, _Prefix(heads, start, base), cache_len

    def _decoder(self, batch: int, cache_len: int, sample: bool = False, logprobs: bool = False) -> _StaticDecoder:
        key = (batch, cache_len, sample, logprobs)
        if key in self._decoders:
            self._decoders.move_to_end(key)
            return self._decoders[key]
        while len(self._decoders) >= self.config.max_decoders:
            self._decoders.popitem(last=False)
        compile_step = self.config.compile_decode if self.config.compile_decode is not None else self._graphs
        hybrid = self._hybrid
        decoder = _StaticDecoder(
            self.model,
            batch=batch,
            cache_len=cache_len,
            eos_ids=self.eos_ids,
            pad_id=self.pad_id,
            newline_table=self._newlines_cpu,
            use_graph=self._graphs,
            compile_step=compile_step,
            compile_prefill=self.config.compile_prefill if self.config.compile_prefill is not None else compile_step,
            hybrid=hybrid,
            state_dtype=torch.float32 if self.config.recurrent_state == "float32" else self.model.dtype,
            sample=sample,
            logprobs=logprobs,
            fused=self.fused,
        )
        self._decoders[key] = decoder
        return decoder


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _common_prefix(ids: Sequence[int], head: Sequence[int]) -> int:
    """How many leading tokens ``ids`` shares with ``head`` (a head tokenized alone may merge its last
    token with what follows it in the prompt; only the tokens both agree on are shared)."""
    count = 0
    for a, b in zip(ids, head):
        if a != b:
            break
        count += 1
    return count


def _bucket(batch: int) -> int:
    """Batch sizes rounded up to a power of two, so a handful of graphs serve every batch."""
    size = 1
    while size < batch:
        size *= 2
    return size


@dataclass
class _PrefillGraph:
    """A captured prefill for one prompt width: copy the prompt into ``ids`` / ``mask``, then replay."""

    ids: torch.Tensor
    mask: torch.Tensor
    graph: torch.cuda.CUDAGraph | None = None
    error: str | None = None


@dataclass
class _SuffixGraph:
    """A captured suffix prefill for one (prefix slots, suffix width): copy ids / mask / base, then replay."""

    ids: torch.Tensor
    mask: torch.Tensor
    base: torch.Tensor
    graph: torch.cuda.CUDAGraph | None = None
    error: str | None = None


@dataclass(frozen=True)
class _Prefix:
    """Where each batch row starts: its head state (None: empty), ``start`` slots before the suffixes,
    and ``base`` (B,) the position of each row's first suffix token (its head's length)."""

    heads: list[PrefixState | None]
    start: int
    base: torch.Tensor


class _StaticDecoder:
    """Cache, device buffers and (on CUDA) the captured decode step for one (batch, cache length).

    Every buffer the decode step reads or writes lives here at a fixed address, which is what lets a
    CUDA graph replay the step: the step advances its own counters in place. With ``hybrid`` the model
    runs through :func:`gencoord_env.agents.lm.hybrid.hybrid_forward` over a :class:`HybridState`; otherwise through
    transformers' forward over a ``StaticCache``.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        *,
        batch: int,
        cache_len: int,
        eos_ids: list[int],
        pad_id: int,
        newline_table: torch.Tensor,
        use_graph: bool,
        compile_step: bool = False,
        compile_prefill: bool = False,
        hybrid: bool = False,
        state_dtype: torch.dtype = torch.float32,
        sample: bool = False,
        logprobs: bool = False,
        fused: FusedProjections | None = None,
    ) -> None:
        self.model = model
        self.fused = fused
        # Python-level switches: each (sample, logprobs) pair is its own decoder and captured graph, so
        # the greedy step stays exactly the code it always was.
        self.sample, self.logprobs = sample, logprobs
        self.batch, self.cache_len = batch, cache_len
        device = next(model.parameters()).device
        self.device = device
        vocab = newline_table.shape[0]
        self.hybrid = hybrid
        self.layer_types = list(getattr(model.config, "layer_types", None) or ["full_attention"] * model.config.num_hidden_layers)
        self.has_linear = "linear_attention" in self.layer_types
        if hybrid:
            self.state = HybridState.allocate(model, batch=batch, cache_len=cache_len, state_dtype=state_dtype)
        else:
            from transformers import StaticCache

            self.cache = StaticCache(config=model.config, max_cache_len=cache_len)
        if compile_step or compile_prefill:
            _allow_recompiles()

        with torch.inference_mode():
            self.pad_id = pad_id
            self.kv_index = torch.arange(cache_len, device=device)
            self.allowed = torch.zeros(batch, cache_len, dtype=torch.bool, device=device)
            self.tokens = torch.zeros(batch, 1, dtype=torch.long, device=device)
            self.positions = torch.zeros(batch, 1, dtype=torch.long, device=device)
            self.slot = torch.zeros((), dtype=torch.long, device=device)
            self.produced = torch.zeros(1, dtype=torch.long, device=device)
            self.min_new = torch.zeros((), dtype=torch.long, device=device)
            self.record_lines = torch.zeros((), dtype=torch.int32, device=device)
            self.newlines = torch.zeros(batch, dtype=torch.int32, device=device)
            self.finished = torch.zeros(batch, dtype=torch.bool, device=device)
            self.out = torch.full((batch, cache_len), pad_id, dtype=torch.long, device=device)
            # Sampling inputs (filled by ``run``) and the raw log-probability of each emitted token.
            self.noise = torch.zeros(batch, cache_len, dtype=torch.float32, device=device)
            self.temperature = torch.ones((), dtype=torch.float32, device=device)
            self.top_p = torch.ones((), dtype=torch.float32, device=device)
            self.out_logp = torch.zeros(batch, cache_len, dtype=torch.float32, device=device)
            self.is_eos = torch.zeros(vocab, dtype=torch.bool, device=device)
            self.is_eos[torch.tensor([i for i in eos_ids if i < vocab], dtype=torch.long)] = True
            self.newline_table = newline_table.to(device)
            self.graph: torch.cuda.CUDAGraph | None = None
            self._decode = torch.compile(self._step, dynamic=False) if compile_step else self._step
            self.use_graph = use_graph
            self.prefills: dict[int, _PrefillGraph] = {}
            self._prefill_fn = torch.compile(self._prefill_body, dynamic=False) if (compile_prefill and use_graph) else self._prefill_body
            self.extends: dict[tuple[int, int], _SuffixGraph] = {}
            self._extend_fn = torch.compile(self._extend_body, dynamic=False) if (compile_prefill and use_graph) else self._extend_body
            # Why the decode step runs without a graph, when it does (None: graph in use or not asked for).
            self.graph_error: str | None = None
            if use_graph:
                try:
                    self._capture()
                except RuntimeError as exc:  # a kernel that cannot be captured: same tokens, eager speed
                    self.graph = None
                    self.graph_error = _first_line(exc)
                    warnings.warn(f"decoding without CUDA graphs: {self.graph_error}", RuntimeWarning, stacklevel=2)

    # The model forward with our own masks: a dict of ready masks makes transformers skip its mask
    # construction, whose data-dependent shortcuts would break graph capture.
    def _forward(self, ids: torch.Tensor, positions: torch.Tensor, full_mask: torch.Tensor | None, linear_mask: torch.Tensor | None) -> torch.Tensor:
        masks: dict[str, torch.Tensor | None] = {"full_attention": full_mask}
        if self.has_linear:
            masks["linear_attention"] = linear_mask
        out = self.model(
            input_ids=ids,
            position_ids=positions,
            attention_mask=masks,
            cache=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1, :]

    def _choose(self, logits: torch.Tensor) -> torch.Tensor:
        """Greedy pick (or a sampled one) with EOS held back before ``min_new`` tokens; finished rows emit padding."""
        logits = logits.float()
        raw = logits.log_softmax(dim=-1) if self.logprobs else None
        block = self.is_eos & (self.produced < self.min_new)
        logits = logits.masked_fill(block, float("-inf"))
        if self.sample:
            chosen = _sample(logits, self.noise.index_select(1, self.produced), self.temperature, self.top_p)
        else:
            chosen = logits.argmax(dim=-1)
        chosen = torch.where(self.finished, torch.full_like(chosen, self.pad_id), chosen)
        self.out.index_copy_(1, self.produced, chosen.view(-1, 1))
        if raw is not None:
            self.out_logp.index_copy_(1, self.produced, raw.gather(-1, chosen.view(-1, 1)))
        self.newlines.add_(self.newline_table[chosen])
        done = self.is_eos[chosen] & (self.produced >= self.min_new)
        # The record-end rule is data (zero lines disables it), so one captured graph serves both settings.
        done = done | ((self.record_lines > 0) & (self.newlines >= self.record_lines))
        self.finished.logical_or_(done)
        self.produced.add_(1)
        return chosen

    def _step(self) -> None:
        full_mask = (self.allowed & (self.kv_index <= self.slot))[:, None, None, :]
        if self.hybrid:
            logits = hybrid_forward(
                self.model, self.state, self.tokens, self.positions, self.slot.view(1), full_mask, decode=True, fused=self.fused
            )
        else:
            logits = self._forward(self.tokens, self.positions, full_mask, None)
        chosen = self._choose(logits)
        self.tokens.copy_(chosen.view(-1, 1))
        self.positions.add_(1)
        self.slot.add_(1)

    def _prefill_body(self, ids: torch.Tensor, mask: torch.Tensor, padded: bool) -> None:
        """Prefill a left-padded batch (``mask`` marks real tokens); ``padded`` False when none is padding."""
        width = ids.shape[1]
        self.allowed.fill_(True)
        self.allowed[:, :width] = mask
        pad = width - mask.sum(dim=1, keepdim=True)
        positions = (torch.arange(width, device=self.device)[None, :] - pad).clamp(min=0)
        q_index = torch.arange(width, device=self.device)
        linear_mask = mask if self.has_linear and padded else None
        self.produced.zero_()
        self.newlines.zero_()
        self.finished.zero_()
        if self.hybrid:
            full_mask = None
            if padded:  # keys are this call's tokens only; the diagonal keeps padding rows finite
                causal = q_index[None, :] <= q_index[:, None]
                full_mask = ((mask[:, None, :] & causal[None]) | torch.eye(width, dtype=torch.bool, device=self.device)[None])[:, None]
            logits = hybrid_forward(self.model, self.state, ids, positions, q_index, full_mask, linear_mask, decode=False, fused=self.fused)
        else:
            self.cache.reset()
            full_mask = None  # unpadded: keys sit in slots 0..width-1, so SDPA's own causal rule is exact
            if padded:
                causal = self.kv_index[None, :] <= q_index[:, None]
                full_mask = (self.allowed[:, None, :] & causal[None]) | (self.kv_index[None, None, :] == q_index[None, :, None])
                full_mask = full_mask[:, None]
            logits = self._forward(ids, positions, full_mask, linear_mask)
        chosen = self._choose(logits)
        self.tokens.copy_(chosen.view(-1, 1))
        self.positions.copy_(positions[:, -1:] + 1)
        self.slot.fill_(width)

    def _extend_body(self, ids: torch.Tensor, mask: torch.Tensor, base: torch.Tensor, start: int) -> None:
        """Prefill right-padded suffixes (``mask``: each row's real tokens first) after the state spliced
        into slots before ``start``; ``base`` (B,) is each row's position of its first suffix token."""
        width = ids.shape[1]
        span = start + width
        self.allowed[:, start:span] = mask
        self.allowed[:, span:] = True
        lengths = mask.sum(dim=1)
        q_index = torch.arange(width, device=self.device)
        slots = q_index + start
        positions = base[:, None] + q_index[None, :]
        self.produced.zero_()
        self.newlines.zero_()
        self.finished.zero_()
        # Keys a token may see: its row's spliced prefix and its own earlier suffix tokens; padding sees
        # itself only, so its row of the softmax stays finite.
        keys = self.kv_index if not self.hybrid else self.kv_index[:span]
        causal = keys[None, :] <= slots[:, None]
        visible = (self.allowed[:, None, : keys.shape[0]] & causal[None]) | (keys[None, None, :] == slots[None, :, None])
        if self.hybrid:
            logits = hybrid_forward(
                self.model, self.state, ids, positions, slots, visible[:, None], mask, decode=False, extend=True,
                last=lengths - 1, fused=self.fused,
            )
        else:
            logits = self._forward_rows(ids, positions, visible[:, None], lengths - 1)
        chosen = self._choose(logits)
        self.tokens.copy_(chosen.view(-1, 1))
        self.positions.copy_((base + lengths).view(-1, 1))
        self.slot.fill_(span)

    def _forward_rows(self, ids: torch.Tensor, positions: torch.Tensor, full_mask: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        """transformers' forward over the static cache; logits at column ``last[r]`` of each row."""
        decoder = getattr(self.model, self.model.base_model_prefix)
        out = decoder(input_ids=ids, position_ids=positions, attention_mask={"full_attention": full_mask}, cache=self.cache, use_cache=True)
        hidden = out.last_hidden_state
        final = hidden.gather(1, last.view(-1, 1, 1).expand(-1, 1, hidden.shape[-1]))
        return self.model.lm_head(final)[:, -1, :]

    def _splice(self, prefix: _Prefix) -> None:
        """Put each row's head state (or an empty one) into the cache, before slot ``prefix.start``."""
        if len(prefix.heads) != self.batch:
            raise UsageError(f"got head states for {len(prefix.heads)} rows, the decoder has {self.batch}")
        if self.hybrid:
            state = self.state
            splice(prefix.heads, prefix.start, conv=state.conv, recurrent=state.recurrent, keys=state.keys,
                   values=state.values, allowed=self.allowed)
            return
        sample = next(h for h in prefix.heads if h is not None)
        layers = self.cache.layers
        for index, layer in enumerate(layers):
            if not layer.is_initialized:  # allocate the static tensors (transformers does it on first write)
                k, v = sample.keys[index], sample.values[index]
                layer.lazy_initialization(k.expand(self.batch, -1, -1, -1), v.expand(self.batch, -1, -1, -1))
        splice(prefix.heads, prefix.start, conv={}, recurrent={}, keys={i: layer.keys for i, layer in enumerate(layers)},
               values={i: layer.values for i, layer in enumerate(layers)}, allowed=self.allowed)
        for layer in layers:  # the suffix's keys and values go right after the prefix slots
            layer.cumulative_length.fill_(prefix.start)

    def _extend(self, ids: torch.Tensor, mask: torch.Tensor, prefix: _Prefix) -> None:
        """Splice the heads in, then prefill the suffixes (through a captured graph on CUDA)."""
        width = ids.shape[1]
        # Capture first: warming a graph up runs the prefill over whatever the state holds. As for the
        # fresh prefill, only the hybrid forward is captured (transformers' static cache moves its own
        # write position, which a replayed warm-up would push past the cache).
        entry = self._extend_graph(prefix.start, width) if self.use_graph and self.hybrid else None
        self._splice(prefix)
        base = prefix.base.to(self.device)
        if entry is not None and entry.graph is not None:
            entry.ids.copy_(ids)
            entry.mask.copy_(mask)
            entry.base.copy_(base)
            entry.graph.replay()
        else:
            self._extend_body(ids, mask, base, prefix.start)

    def _extend_graph(self, start: int, width: int) -> _SuffixGraph:
        key = (start, width)
        if key in self.extends:
            return self.extends[key]
        entry = _SuffixGraph(
            ids=torch.full((self.batch, width), self.pad_id, dtype=torch.long, device=self.device),
            mask=torch.ones((self.batch, width), dtype=torch.bool, device=self.device),
            base=torch.zeros(self.batch, dtype=torch.long, device=self.device),
        )
        self.extends[key] = entry
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):  # compile and autotune outside the capture
                for _ in range(2):
                    self._extend_fn(entry.ids, entry.mask, entry.base, start)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._extend_fn(entry.ids, entry.mask, entry.base, start)
            entry.graph = graph
        except RuntimeError as exc:  # same tokens through the eager suffix prefill
            entry.error = _first_line(exc)
            warnings.warn(f"suffix prefill without CUDA graphs: {entry.error}", RuntimeWarning, stacklevel=2)
        return entry

    def _prefill(self, ids: torch.Tensor, mask: torch.Tensor) -> None:
        """Prefill through the captured graph for this width when there is one (capturing it on first use)."""
        width = ids.shape[1]
        entry = self._prefill_graph(width) if self.use_graph and self.hybrid else None
        if entry is not None and entry.graph is not None:
            entry.ids.copy_(ids)
            entry.mask.copy_(mask)
            entry.graph.replay()
        else:
            self._prefill_body(ids, mask, padded=not bool(mask.all()))

    def _prefill_graph(self, width: int) -> _PrefillGraph:
        if width in self.prefills:
            return self.prefills[width]
        entry = _PrefillGraph(
            ids=torch.full((self.batch, width), self.pad_id, dtype=torch.long, device=self.device),
            mask=torch.ones((self.batch, width), dtype=torch.bool, device=self.device),
        )
        self.prefills[width] = entry
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):  # compile and autotune outside the capture
                for _ in range(2):
                    self._prefill_fn(entry.ids, entry.mask, True)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._prefill_fn(entry.ids, entry.mask, True)
            entry.graph = graph
        except RuntimeError as exc:  # same tokens through the eager prefill
            entry.error = _first_line(exc)
            warnings.warn(f"prefill without CUDA graphs: {entry.error}", RuntimeWarning, stacklevel=2)
        return entry

    def _capture(self) -> None:
        # Put the state in a valid condition and let Triton autotune before capturing.
        ids = torch.full((self.batch, 1), self.pad_id, dtype=torch.long, device=self.device)
        mask = torch.ones_like(ids, dtype=torch.bool)
        self.min_new.fill_(0)
        self.record_lines.fill_(0)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self._prefill_body(ids, mask, padded=False)
            for _ in range(3):
                self._decode()
        torch.cuda.current_stream().wait_stream(stream)
        self._prefill_body(ids, mask, padded=False)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._decode()
        self.graph = graph

    @torch.inference_mode()
    def run(self, ids: torch.Tensor, mask: torch.Tensor, config: GenerationConfig,
            noise: torch.Tensor | None = None, prefix: _Prefix | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Decode a left-padded batch, or with ``prefix`` right-padded suffixes after spliced head states;
        returns (batch, produced) token ids on the CPU, and their raw log-probabilities when this decoder
        records them. ``noise`` (rows x max_new_tokens uniforms) drives sampling; rows past it (bucket
        padding) sample with zeros."""
        width = ids.shape[1] + (prefix.start if prefix is not None else 0)
        budget = min(config.max_new_tokens, self.cache_len - width)
        self.min_new.fill_(config.min_new_tokens)
        self.record_lines.fill_(config.record_lines if config.stop_at_record_end else 0)
        if self.sample:
            if noise is None:
                raise UsageError("this decoder samples: pass noise")
            self.noise.zero_()
            self.noise[: noise.shape[0], : noise.shape[1]].copy_(noise[:, : self.cache_len])
            self.temperature.fill_(config.temperature)
            self.top_p.fill_(config.top_p)
        if prefix is None:
            self._prefill(ids.to(self.device), mask.to(self.device))
        else:
            self._extend(ids.to(self.device), mask.to(self.device), prefix)
        # Before min_new_tokens only a record end can finish a row: without that rule, no need to ask
        # the device (each ask is a host-device synchronisation).
        can_finish = config.stop_at_record_end and config.record_lines > 0
        produced = 1
        while produced < budget:
            if produced % _CHECK_EVERY == 0 and (can_finish or produced > config.min_new_tokens) and bool(self.finished.all()):
                break
            if self.graph is not None:
                self.graph.replay()
            else:
                self._decode()
            produced += 1
        return self.out[:, :produced].cpu(), (self.out_logp[:, :produced].cpu() if self.logprobs else None)


def _on_device(device: torch.device) -> contextlib.AbstractContextManager[object]:
    """``torch.cuda.device(device)`` for a CUDA device, else nothing."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return f"{exc.__class__.__name__}: {text.splitlines()[0] if text else ''}"
