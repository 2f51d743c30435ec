"""Packed training of the Qwen3.5 hybrid decoder: the rows of a step concatenated, no padding, no mask.

Padded micro-batches spend their compute on padding and their launches on small shapes; a step of the
paper's recipe (16 rows, ~650 tokens each) fits one sequence of ~10k tokens. Packed, every token is a real
one and each layer runs once over the whole step:

- Gated-DeltaNet layers: the short convolution and the chunked gated delta rule of ``flash-linear-attention``
  (``fla``) with ``cu_seqlens``, so the recurrence restarts at each row's first token and no row reads the
  one before it;
- full-attention layers: variable-length flash attention (``torch.nn.attention.varlen``) over the same
  boundaries, with positions restarting at 0 in each row;
- without ``fla`` or varlen attention (the CPU, an older torch), the same layers run row by row with the
  reference kernels, which is how the tests check the packed forward against the padded one.

Labels need no care at the seams: each row starts with its prompt, whose labels are -100, so the last token
of a row never predicts the first token of the next.

Example::

    packs = pack(encoded_rows, max_tokens=16384)
    batch = collate(packs[0], device)
    loss = packed_loss(model, batch, n_items=sum(e.target_tokens for e in packs[0]))
"""
from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from gencoord_env.errors import UsageError

__all__ = ["Packed", "collate", "kernels_used", "pack", "packed_hidden", "packed_loss", "supports_packing"]


@dataclass(frozen=True)
class Packed:
    """Rows concatenated into one sequence: ids, labels and positions (1, T), the row boundaries."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    positions: torch.Tensor
    cu_seqlens: torch.Tensor  # (rows + 1,) int32, on the device
    lengths: tuple[int, ...]
    weights: torch.Tensor | None = None  # (1, T) per-label loss weights (decision_weight), or None

    @property
    def tokens(self) -> int:
        return sum(self.lengths)


def pack(items: Sequence[Any], max_tokens: int) -> list[list[Any]]:
    """``items`` (each with ``input_ids``) in order, cut into runs of at most ``max_tokens`` tokens (a longer
    row alone)."""
    if max_tokens < 1:
        raise UsageError(f"max_tokens must be >= 1, got {max_tokens}")
    packs: list[list[Any]] = []
    current: list[Any] = []
    used = 0
    for item in items:
        n = len(item.input_ids)
        if current and used + n > max_tokens:
            packs.append(current)
            current, used = [], 0
        current.append(item)
        used += n
    if current:
        packs.append(current)
    return packs


def collate(items: Sequence[Any], device: torch.device, decision_weight: float = 1.0) -> Packed:
    """One :class:`Packed` of ``items`` (:class:`gencoord_env.train.sft.Encoded`)."""
    lengths = tuple(len(e.input_ids) for e in items)
    ids = torch.tensor([t for e in items for t in e.input_ids], dtype=torch.long)[None]
    labels = torch.tensor([t for e in items for t in e.labels], dtype=torch.long)[None]
    positions = torch.cat([torch.arange(n) for n in lengths])[None]
    bounds = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    weights = None
    if decision_weight != 1.0:
        weights = torch.ones_like(labels, dtype=torch.float32)
        start = 0
        for e, n in zip(items, lengths):
            for k in e.decisions:
                weights[0, start + e.prompt_tokens + k] = decision_weight
            start += n
    def move(t: Any) -> Any:
        return None if t is None else t.to(device, non_blocking=True)

    return Packed(move(ids), move(labels), move(positions), move(bounds), lengths, move(weights))


def _text_model(model: nn.Module) -> nn.Module | None:
    from gencoord_env.agents.lm.hybrid import _text_model as text_model

    return text_model(model)


def supports_packing(model: nn.Module) -> bool:
    """Whether :func:`packed_hidden` runs ``model``: the Qwen3.5 hybrid text decoder."""
    from gencoord_env.agents.lm.hybrid import supports_hybrid

    return supports_hybrid(model)


# ------------------------------------------------------------------------------------------ kernels

_FAST: dict[str, Any] = {}


def _fla() -> tuple[Any, Any] | None:
    if "fla" not in _FAST:
        try:
            from fla.modules.causal_conv1d import causal_conv1d
            from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        except Exception:  # noqa: BLE001 - any import failure: the reference path
            _FAST["fla"] = None
        else:
            _FAST["fla"] = (causal_conv1d, chunk_gated_delta_rule)
    fast: tuple[Any, Any] | None = _FAST["fla"]
    return fast


def _varlen() -> Any:
    if "varlen" not in _FAST:
        try:
            from torch.nn.attention.varlen import varlen_attn
        except Exception:  # noqa: BLE001
            _FAST["varlen"] = None
        else:
            _FAST["varlen"] = varlen_attn
    return _FAST["varlen"]


def kernels_used(device: torch.device, prefer: str = "auto") -> dict[str, str]:
    """What :func:`packed_hidden` runs on ``device`` with ``prefer`` (``auto``: the fastest available;
    ``reference``: row by row with the reference kernels)."""
    fast = device.type == "cuda" and prefer == "auto"
    return {
        "gated_delta_net": "fla chunk_gated_delta_rule + causal_conv1d, cu_seqlens"
        if fast and _fla() is not None else "reference, row by row",
        "attention": "torch varlen flash attention" if fast and _varlen() is not None else "sdpa, row by row",
    }


def _varlen_call(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, longest: int, scale: float) -> torch.Tensor:
    """Causal varlen attention (T, H, D) whatever the installed torch calls its options."""
    fn = _varlen()
    params = inspect.signature(fn).parameters
    kwargs: dict[str, Any] = {}
    if "is_causal" in params:
        kwargs["is_causal"] = True
    else:
        kwargs["window_size"] = (-1, 0)
    if "scale" in params:
        kwargs["scale"] = scale
    if k.shape[1] != q.shape[1]:
        if "enable_gqa" in params:
            kwargs["enable_gqa"] = True
        else:
            k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
            v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    out = fn(q, k, v, cu, cu, longest, longest, **kwargs)
    return out[0] if isinstance(out, tuple) else out


# ------------------------------------------------------------------------------------------- layers


def _gated_delta_net(m: nn.Module, x: torch.Tensor, cu: torch.Tensor, lengths: Sequence[int], fast: bool) -> torch.Tensor:
    from gencoord_env.agents.lm.kernels import _reference

    length = x.shape[1]
    mixed = m.in_proj_qkv(x)
    z = m.in_proj_z(x).reshape(1, length, -1, m.head_v_dim)
    b, a = m.in_proj_b(x), m.in_proj_a(x)
    weight = m.conv1d.weight.squeeze(1)
    kernels = _fla() if fast else None
    if kernels is not None:
        mixed, _ = kernels[0](mixed.contiguous(), weight, m.conv1d.bias, activation="silu", cu_seqlens=cu)
    else:
        conv = _reference("causal_conv1d_fn")
        mixed = torch.cat([conv(seg.transpose(1, 2), weight, m.conv1d.bias, activation="silu").transpose(1, 2)
                           for seg in mixed.split(list(lengths), dim=1)], dim=1)
    query, key, value = torch.split(mixed, [m.key_dim, m.key_dim, m.value_dim], dim=-1)
    query = query.reshape(1, length, -1, m.head_k_dim)
    key = key.reshape(1, length, -1, m.head_k_dim)
    value = value.reshape(1, length, -1, m.head_v_dim)
    beta = b.sigmoid()
    g = -m.A_log.float().exp() * F.softplus(a.float() + m.dt_bias)
    if kernels is not None:
        out, _ = kernels[1](query, key, value, g=g, beta=beta, use_qk_l2norm_in_kernel=True, cu_seqlens=cu.long())
    else:
        chunk = _reference("torch_chunk_gated_delta_rule")
        parts = zip(*(t.split(list(lengths), dim=1) for t in (query, key, value, g, beta)))
        out = torch.cat([chunk(q, k, v, g=gg, beta=bb, use_qk_l2norm_in_kernel=True)[0] for q, k, v, gg, bb in parts], dim=1)
    out = m.norm(out.reshape(-1, m.head_v_dim), z.reshape(-1, m.head_v_dim)).reshape(1, length, -1)
    return m.out_proj(out)


def _attention(m: nn.Module, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cu: torch.Tensor,
               lengths: Sequence[int], fast: bool) -> torch.Tensor:
    from transformers.models.qwen3_5.modeling_qwen3_5 import apply_rotary_pos_emb

    length = x.shape[1]
    shape = (1, length, -1, m.head_dim)
    query, gate = torch.chunk(m.q_proj(x).view(1, length, -1, m.head_dim * 2), 2, dim=-1)
    gate = gate.reshape(1, length, -1)
    query = m.q_norm(query.reshape(shape)).transpose(1, 2)
    key = m.k_norm(m.k_proj(x).view(shape)).transpose(1, 2)
    value = m.v_proj(x).view(shape).transpose(1, 2)
    query, key = apply_rotary_pos_emb(query, key, cos, sin)
    dtype = value.dtype  # bfloat16 under autocast; rotary's float32 tables would promote q and k
    query, key = query.to(dtype), key.to(dtype)
    if fast and _varlen() is not None:
        out = _varlen_call(query[0].transpose(0, 1), key[0].transpose(0, 1), value[0].transpose(0, 1), cu,
                           max(lengths), m.scaling)
        out = out.reshape(1, length, -1)
    else:
        parts = [F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=m.scaling, enable_gqa=True)
                 for q, k, v in zip(*(t.split(list(lengths), dim=2) for t in (query, key, value)))]
        out = torch.cat(parts, dim=2).transpose(1, 2).reshape(1, length, -1)
    return m.o_proj(out * torch.sigmoid(gate))


def packed_hidden(model: nn.Module, batch: Packed, prefer: str = "auto") -> torch.Tensor:
    """The final hidden states (1, T, hidden) of the packed rows, each row on its own (see the module
    docstring). ``prefer``: ``auto`` (fla and varlen attention on CUDA when present) or ``reference``."""
    text = _text_model(model)
    if text is None or not supports_packing(model):
        raise UsageError(f"packed training runs the Qwen3.5 hybrid decoder; {type(model).__name__} is not one "
                         "(train it with padded micro-batches: packing=False)")
    fast = batch.input_ids.device.type == "cuda" and prefer == "auto"
    hidden = text.embed_tokens(batch.input_ids)
    cos, sin = text.rotary_emb(hidden, batch.positions[None].expand(3, -1, -1))
    for layer in text.layers:
        residual = hidden
        hidden = layer.input_layernorm(hidden)
        if hasattr(layer, "linear_attn"):
            hidden = _gated_delta_net(layer.linear_attn, hidden, batch.cu_seqlens, batch.lengths, fast)
        else:
            hidden = _attention(layer.self_attn, hidden, cos, sin, batch.cu_seqlens, batch.lengths, fast)
        hidden = residual + hidden
        hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
    return text.norm(hidden)


def packed_loss(model: nn.Module, batch: Packed, n_items: int | None = None, prefer: str = "auto") -> torch.Tensor:
    """Summed cross-entropy of the target tokens of the packed rows divided by ``n_items`` (default: their
    count), as :func:`gencoord_env.train.sft.masked_loss` of the same rows padded."""
    shifted = batch.labels[:, 1:]
    keep = shifted != -100
    count = int(keep.sum()) if n_items is None else n_items
    if count == 0:
        raise UsageError("no target tokens in the batch: every label is -100")
    hidden = packed_hidden(model, batch, prefer)[:, :-1]
    logits = model.get_output_embeddings()(hidden[keep]).float()
    losses = F.cross_entropy(logits, shifted[keep], reduction="none")
    if batch.weights is not None:
        losses = losses * batch.weights[:, 1:][keep]
    return losses.sum() / count
