"""A shared prompt prefix computed once: the model's state at its end, and where decoding starts from it.

Prompts lay the shared prior first (:mod:`gencoord_env.agents.lm.prompt`), so many calls begin with
the same tokens. :class:`PrefixState` is what a decoder needs to continue after those tokens instead of
recomputing them:

- per full-attention layer the keys and values of the prefix, (1, H_kv, P, head_dim);
- per Gated-DeltaNet layer (Qwen3.5) the short-convolution window (1, conv_dim, W), its last W inputs,
  and the recurrent state (1, HV, K, V) after the prefix's last token.

The linear-attention layers carry no per-token cache, so their state must be exactly the state after
the prefix: :func:`splice` copies it into each row that starts with the prefix, and the decoder's
suffix prefill continues from it (right-padded, padding inert; see :func:`~gencoord_env.agents.lm.hybrid.hybrid_forward`).
Keys and values are placed right-aligned before the suffix region, at slots ``[start - P, start)``;
full attention reads slots through its mask, so rows with prefixes of different lengths share one
layout.

:class:`PrefixCache` keeps recently used prefixes (least recently used out first). Its owner must
:meth:`~PrefixCache.clear` it when the model's weights change (a training step writes them in place;
:func:`weights_fingerprint` tells), since the states were computed from the old weights.

Example::

    cache = PrefixCache(lambda tokens: compute_prefix(model, tokens, hybrid=True), max_entries=64)
    entry = cache.get(tuple(prompt[:shared]))
    entry.length, entry.nbytes
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from gencoord_env.agents.lm.hybrid import HybridState, hybrid_forward
from gencoord_env.errors import UsageError

__all__ = ["PrefixCache", "PrefixState", "compute_prefix", "splice", "weights_fingerprint"]


@dataclass(frozen=True, eq=False)
class PrefixState:
    """The model's state after ``tokens`` (batch 1); tensors are never written after construction."""

    tokens: tuple[int, ...]
    conv: dict[int, torch.Tensor]
    recurrent: dict[int, torch.Tensor]
    keys: dict[int, torch.Tensor]
    values: dict[int, torch.Tensor]

    @property
    def length(self) -> int:
        return len(self.tokens)

    @property
    def nbytes(self) -> int:
        tensors = [*self.conv.values(), *self.recurrent.values(), *self.keys.values(), *self.values.values()]
        return sum(t.numel() * t.element_size() for t in tensors)


@torch.inference_mode()
def compute_prefix(model: nn.Module, tokens: Sequence[int], *, hybrid: bool) -> PrefixState:
    """Run ``tokens`` through ``model`` once (batch 1, no padding) and keep the state at their end.

    ``hybrid``: through :func:`hybrid_forward` (Qwen3.5: keys/values and linear-attention states);
    else through the model's own forward with a dynamic cache (attention-only models: keys/values).
    """
    if not tokens:
        raise UsageError("a prefix needs at least one token")
    device = next(model.parameters()).device
    ids = torch.tensor([list(tokens)], dtype=torch.long, device=device)
    positions = torch.arange(len(tokens), device=device)[None]
    if hybrid:
        # float32: the chunked delta rule's own output dtype, and what a fresh prefill hands the decoder.
        state = HybridState.allocate(model, batch=1, cache_len=len(tokens), state_dtype=torch.float32)
        hybrid_forward(model, state, ids, positions, positions[0], decode=False)
        return PrefixState(tuple(tokens), state.conv, state.recurrent, state.keys, state.values)
    cache = model(input_ids=ids, position_ids=positions, use_cache=True).cache
    keys = {i: layer.keys for i, layer in enumerate(cache.layers)}
    values = {i: layer.values for i, layer in enumerate(cache.layers)}
    return PrefixState(tuple(tokens), {}, {}, keys, values)


def splice(
    rows: Sequence[PrefixState | None],
    start: int,
    *,
    conv: dict[int, torch.Tensor],
    recurrent: dict[int, torch.Tensor],
    keys: dict[int, torch.Tensor],
    values: dict[int, torch.Tensor],
    allowed: torch.Tensor,
) -> None:
    """Make each batch row ``r`` continue after ``rows[r]`` (None: from an empty state).

    Writes the prefix's keys/values at slots ``[start - P, start)`` of that row, its linear-attention
    states into the row's state buffers, and marks in ``allowed`` (B, L) exactly those slots as
    attendable within ``[0, start)``. Rows sharing one prefix are written by one copy per layer.
    """
    device = allowed.device
    allowed[:, :start] = False
    fresh = [row for row, entry in enumerate(rows) if entry is None]
    if fresh:
        index = torch.tensor(fresh, dtype=torch.long, device=device)
        for tensor in (*conv.values(), *recurrent.values()):
            tensor.index_fill_(0, index, 0)
    groups: dict[tuple[int, ...], tuple[PrefixState, list[int]]] = {}
    for row, entry in enumerate(rows):
        if entry is not None:
            groups.setdefault(entry.tokens, (entry, []))[1].append(row)
    for entry, members in groups.values():
        if entry.length > start:
            raise UsageError(f"a prefix of {entry.length} tokens does not fit before slot {start}")
        index = torch.tensor(members, dtype=torch.long, device=device)
        count = len(members)
        for layer, tensor in conv.items():
            tensor.index_copy_(0, index, entry.conv[layer].to(tensor.dtype).expand(count, *tensor.shape[1:]))
        for layer, tensor in recurrent.items():
            tensor.index_copy_(0, index, entry.recurrent[layer].to(tensor.dtype).expand(count, *tensor.shape[1:]))
        slots = slice(start - entry.length, start)
        for layer, tensor in keys.items():
            tensor[index, :, slots] = entry.keys[layer].to(tensor.dtype)
            values[layer][index, :, slots] = entry.values[layer].to(values[layer].dtype)
        allowed[index, slots] = True


def weights_fingerprint(model: nn.Module) -> tuple[tuple[int, int], ...]:
    """Where each parameter lives and how often it was written in place: changes with any weight update."""
    return tuple((p.data_ptr(), p._version) for p in model.parameters())


class PrefixCache:
    """Prefix states by token sequence, least recently used out first."""

    def __init__(self, compute: Callable[[tuple[int, ...]], PrefixState], max_entries: int = 64) -> None:
        if max_entries < 1:
            raise UsageError(f"max_entries must be >= 1, got {max_entries}")
        self._compute = compute
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[int, ...], PrefixState] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every state (the weights they were computed from changed)."""
        self._entries.clear()

    def get(self, tokens: tuple[int, ...]) -> PrefixState:
        entry = self._entries.get(tokens)
        if entry is not None:
            self.hits += 1
            self._entries.move_to_end(tokens)
            return entry
        self.misses += 1
        entry = self._compute(tokens)
        while len(self._entries) >= self.max_entries:
            self._entries.popitem(last=False)
        self._entries[tokens] = entry
        return entry
