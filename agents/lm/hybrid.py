"""Forward pass of Qwen3.5's hybrid decoder (Gated-DeltaNet + gated full attention) over preallocated state.

transformers' forward is written for training and for every cache kind; at inference it copies the
whole recurrent state after each token, goes through its cache objects and mask builders in Python,
and repeats the key/value heads of the full cache when compiled. This module runs the same layers, with
the model's own submodules and weights, over buffers it owns:

- per Gated-DeltaNet layer a conv state (B, conv_dim, W) and a recurrent state (B, HV, K, V), both
  updated in place (see :mod:`gencoord_env.agents.lm.kernels`);
- per full-attention layer a key and a value cache (B, H_kv, L, head_dim); decode attends with the
  query heads packed per key/value head, so the cache is never repeated.

Three kinds of call, each with shapes fixed per (batch, width), so each can be compiled and captured
as a CUDA graph:

- a prefill starts fresh sequences at slot 0 (left-padded prompts, ``pad_mask`` marks real tokens):
  leading padding is inert because the state it passes through is still zero;
- an extension continues the sequences already in the state (a shared prefix spliced in by
  :func:`gencoord_env.agents.lm.prefix.splice`) with a right-padded chunk: each row's real tokens come
  first, so the short convolution sees the prefix's last inputs right before them; padding after them
  decays nothing and writes nothing into the recurrent state (its gate and step size are zero), and
  the convolution window kept for decoding ends at each row's last real token;
- a decode step appends one token at ``slot``.

Example::

    state = HybridState.allocate(model, batch=1, cache_len=1280)
    logits = hybrid_forward(model, state, ids, positions, slots=torch.arange(ids.shape[1]), decode=False)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from gencoord_env.agents.lm import kernels
from gencoord_env.errors import UsageError

__all__ = ["FusedProjections", "HybridState", "hybrid_forward", "supports_hybrid"]


def _text_model(model: nn.Module) -> nn.Module | None:
    """The decoder stack (embed_tokens, layers, norm, rotary_emb) of a causal or conditional Qwen3.5."""
    inner = getattr(model, "model", None)
    for candidate in (inner, getattr(inner, "language_model", None)):
        if candidate is not None and all(hasattr(candidate, a) for a in ("embed_tokens", "layers", "norm", "rotary_emb")):
            return candidate
    return None


def supports_hybrid(model: nn.Module) -> bool:
    """Whether :func:`hybrid_forward` can run ``model`` (Qwen3.5 text layers, no conv bias)."""
    text = _text_model(model)
    model_type = getattr(getattr(text, "config", None), "model_type", "")
    if text is None or not hasattr(model, "lm_head") or model_type not in {"qwen3_5", "qwen3_5_text"}:
        return False
    for layer in text.layers:
        if hasattr(layer, "linear_attn"):
            if layer.linear_attn.conv1d.bias is not None:
                return False
        elif not (hasattr(layer, "self_attn") and hasattr(layer.self_attn, "q_norm")):
            return False
    return True


@dataclass
class HybridState:
    """The decoder's state for one batch size and cache length, at fixed addresses."""

    conv: dict[int, torch.Tensor]
    recurrent: dict[int, torch.Tensor]
    keys: dict[int, torch.Tensor]
    values: dict[int, torch.Tensor]

    @classmethod
    def allocate(cls, model: nn.Module, *, batch: int, cache_len: int, state_dtype: torch.dtype = torch.float32) -> HybridState:
        text = _text_model(model)
        if text is None:
            raise UsageError(f"{type(model).__name__} has no Qwen3.5 decoder stack; use the transformers forward")
        param = next(model.parameters())
        device, dtype = param.device, param.dtype
        conv, recurrent, keys, values = {}, {}, {}, {}
        for index, layer in enumerate(text.layers):
            if hasattr(layer, "linear_attn"):
                m = layer.linear_attn
                conv[index] = torch.zeros(batch, m.conv_dim, m.conv_kernel_size, device=device, dtype=dtype)
                recurrent[index] = torch.zeros(batch, m.num_v_heads, m.head_k_dim, m.head_v_dim, device=device, dtype=state_dtype)
            else:
                m = layer.self_attn
                heads = m.k_proj.out_features // m.head_dim
                keys[index] = torch.zeros(batch, heads, cache_len, m.head_dim, device=device, dtype=dtype)
                values[index] = torch.zeros(batch, heads, cache_len, m.head_dim, device=device, dtype=dtype)
        return cls(conv=conv, recurrent=recurrent, keys=keys, values=values)


# Projections of one layer that read the same input, by submodule: one matrix multiply can do each
# group's work when its weights are concatenated (FusedProjections).
FUSABLE: dict[str, tuple[str, ...]] = {
    "linear_attn": ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"),
    "self_attn": ("q_proj", "k_proj", "v_proj"),
    "mlp": ("gate_proj", "up_proj"),
}


class FusedProjections:
    """Each layer's :data:`FUSABLE` groups with their weights concatenated, so a decode step launches one
    matrix multiply where the model has two to four (at batch 1 a step is mostly kernel launches).

    The weights are copies (Qwen3.5-0.8B: ~0.7 GB in bf16): :meth:`refresh` after the model's weights
    change. Groups with a bias are left to the model's own modules.
    """

    def __init__(self, model: nn.Module) -> None:
        text = _text_model(model)
        if text is None:
            raise UsageError(f"{type(model).__name__} has no Qwen3.5 decoder stack to fuse")
        self._modules: dict[tuple[int, str], list[nn.Linear]] = {}
        for index, layer in enumerate(text.layers):
            for group, names in FUSABLE.items():
                parent = getattr(layer, group, None)
                if parent is None:
                    continue
                modules = [getattr(parent, name) for name in names]
                if all(getattr(m, "bias", None) is None for m in modules):
                    self._modules[(index, group)] = modules
        with torch.no_grad():
            self.weights = {key: torch.cat([m.weight for m in modules]) for key, modules in self._modules.items()}

    def get(self, index: int, group: str) -> torch.Tensor | None:
        return self.weights.get((index, group))

    def refresh(self) -> None:
        """Copy the model's current weights in (in place: captured graphs keep reading these buffers)."""
        with torch.no_grad():
            for key, modules in self._modules.items():
                self.weights[key].copy_(torch.cat([m.weight for m in modules]))

    @property
    def nbytes(self) -> int:
        return sum(w.numel() * w.element_size() for w in self.weights.values())


def _project(x: torch.Tensor, modules: list[nn.Module], fused: torch.Tensor | None) -> list[torch.Tensor]:
    """Each module applied to ``x``: one multiply with the concatenated weight when there is one."""
    if fused is None:
        return [m(x) for m in modules]
    return list(F.linear(x, fused).split([m.out_features for m in modules], dim=-1))


def _gated_delta_net(
    m: nn.Module,
    x: torch.Tensor,
    conv_state: torch.Tensor,
    state: torch.Tensor,
    pad_mask: torch.Tensor | None,
    decode: bool,
    extend: bool = False,
    fused: torch.Tensor | None = None,
) -> torch.Tensor:
    if pad_mask is not None:  # padded positions must not move the conv or recurrent state
        x = (x * pad_mask[:, :, None]).to(x.dtype)
    batch, length, _ = x.shape
    mixed, z, b, a = _project(x, [m.in_proj_qkv, m.in_proj_z, m.in_proj_b, m.in_proj_a], fused)
    z = z.reshape(batch, length, -1, m.head_v_dim)
    weight = m.conv1d.weight.squeeze(1)
    width = weight.shape[-1]
    if decode:
        mixed = kernels.conv_step(mixed[:, 0], conv_state, weight).unsqueeze(1)
    elif extend:
        # The window before this chunk (the last ``width`` inputs so far), then the chunk.
        joined = torch.cat([conv_state.transpose(1, 2).to(mixed.dtype), mixed], dim=1)
        lengths = pad_mask.sum(dim=1) if pad_mask is not None else torch.full((batch,), length, device=x.device)
        ends = (lengths[:, None] + torch.arange(width, device=x.device)[None, :])[:, :, None]
        conv_state.copy_(joined.gather(1, ends.expand(-1, -1, joined.shape[-1])).transpose(1, 2))
        mixed = kernels.causal_conv(joined[:, 1:], weight)[:, width - 1 :]
    else:
        tail = mixed[:, -width:].transpose(1, 2)
        if length < width:
            tail = F.pad(tail, (width - length, 0))
        conv_state.copy_(tail)
        mixed = kernels.causal_conv(mixed, weight)
    query, key, value = torch.split(mixed, [m.key_dim, m.key_dim, m.value_dim], dim=-1)
    query = query.reshape(batch, length, -1, m.head_k_dim)
    key = key.reshape(batch, length, -1, m.head_k_dim)
    value = value.reshape(batch, length, -1, m.head_v_dim)
    beta = b.sigmoid()
    g = -m.A_log.float().exp() * F.softplus(a.float() + m.dt_bias)
    if decode:
        out = kernels.delta_rule_step(query, key, value, g, beta, state)
    elif extend:
        if pad_mask is not None:  # padding after a row's tokens: no decay, no write
            real = pad_mask[:, :, None]
            g = torch.where(real, g, torch.zeros_like(g))
            beta = torch.where(real, beta, torch.zeros_like(beta))
        out, final = kernels.delta_rule_chunk(query, key, value, g, beta, state.float())
        state.copy_(final)
    else:
        out, final = kernels.delta_rule_chunk(query, key, value, g, beta)
        state.copy_(final)
    out = m.norm(out.reshape(-1, m.head_v_dim), z.reshape(-1, m.head_v_dim)).reshape(batch, length, -1)
    return m.out_proj(out)


def _attention(
    m: nn.Module,
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    slots: torch.Tensor,
    mask: torch.Tensor | None,
    decode: bool,
    extend: bool = False,
    fused: torch.Tensor | None = None,
) -> torch.Tensor:
    from transformers.models.qwen3_5.modeling_qwen3_5 import apply_rotary_pos_emb

    batch, length, _ = x.shape
    shape = (batch, length, -1, m.head_dim)
    q_all, k_all, v_all = _project(x, [m.q_proj, m.k_proj, m.v_proj], fused)
    query, gate = torch.chunk(q_all.reshape(batch, length, -1, m.head_dim * 2), 2, dim=-1)
    gate = gate.reshape(batch, length, -1)
    query = m.q_norm(query.reshape(shape)).transpose(1, 2)
    key = m.k_norm(k_all.reshape(shape)).transpose(1, 2)
    value = v_all.reshape(shape).transpose(1, 2)
    query, key = apply_rotary_pos_emb(query, key, cos, sin)
    keys.index_copy_(2, slots, key)
    values.index_copy_(2, slots, value)
    heads, kv_heads = query.shape[1], key.shape[1]
    groups = heads // kv_heads
    if decode:
        # Decode: the query heads of one key/value head act as that head's query rows, so the cache is read once.
        # Written out rather than through SDPA: the fused kernels parallelise over query rows, of which a
        # decode step has only 4 per key/value head, and took ~66 us per layer at batch 1 (H100); two
        # batched matmuls read the cache at full bandwidth.
        packed = query.reshape(batch, kv_heads, groups, m.head_dim)
        scores = torch.matmul(packed, keys.transpose(-1, -2)).float() * m.scaling
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1).to(values.dtype)
        out = torch.matmul(probs, values).reshape(batch, heads, 1, m.head_dim)
    elif extend:
        # A chunk after cached tokens: attend over the cache up to the mask's width (the slots in use),
        # query heads packed per key/value head as in decoding, so the cache is not repeated.
        assert mask is not None  # forward() refuses an extension without one
        span = mask.shape[-1]
        packed = query.reshape(batch, kv_heads, groups * length, m.head_dim)
        grouped = mask[:, :, None].expand(-1, -1, groups, -1, -1).reshape(batch, 1, groups * length, span)
        out = F.scaled_dot_product_attention(packed, keys[:, :, :span], values[:, :, :span], attn_mask=grouped, scale=m.scaling)
        out = out.reshape(batch, heads, length, m.head_dim)
    elif mask is None:
        # Unpadded prefill of a fresh sequence: the keys are exactly this call's tokens.
        out = F.scaled_dot_product_attention(query, key, value, is_causal=True, scale=m.scaling, enable_gqa=True)
    else:
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=m.scaling)
    out = out.transpose(1, 2).reshape(batch, length, -1)
    return m.o_proj(out * torch.sigmoid(gate))


def _mlp(m: nn.Module, x: torch.Tensor, fused: torch.Tensor | None) -> torch.Tensor:
    if fused is None:
        return m(x)
    gate, up = _project(x, [m.gate_proj, m.up_proj], fused)
    return m.down_proj(m.act_fn(gate) * up)


def hybrid_forward(
    model: nn.Module,
    state: HybridState,
    ids: torch.Tensor,
    positions: torch.Tensor,
    slots: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    pad_mask: torch.Tensor | None = None,
    *,
    decode: bool,
    extend: bool = False,
    last: torch.Tensor | None = None,
    fused: FusedProjections | None = None,
) -> torch.Tensor:
    """Logits of each row's last position, (B, vocab), after writing this call's tokens into ``state``.

    ``decode``: one token continuing the sequences in ``state``; ``extend``: a right-padded chunk
    continuing them; else a prefill of fresh sequences. ``ids``/``positions`` (B, T); ``slots`` (T,)
    cache slots of the tokens (``arange(T)`` for a prefill, the current slot for a decode step).
    ``attn_mask``: None for an unpadded prefill (causal), else a boolean mask over keys, (B, 1, T, T)
    for a prefill, (B, 1, T, S) over the first S cache slots for an extension and (B, 1, 1, L) for a
    decode step. ``pad_mask`` (B, T): real tokens of a padded prefill or extension. ``last`` (B,): the
    column whose logits to return per row (None: the last column). ``fused``: concatenated projection
    weights to use instead of the modules' own (same function, fewer kernels).
    """
    if extend and attn_mask is None:
        raise UsageError("an extension needs attn_mask over the cache slots it attends to")
    text = _text_model(model)
    if text is None:
        raise UsageError(f"{type(model).__name__} has no Qwen3.5 decoder stack; use the transformers forward")
    hidden = text.embed_tokens(ids)
    cos, sin = text.rotary_emb(hidden, positions[None].expand(3, -1, -1))
    for index, layer in enumerate(text.layers):
        residual = hidden
        hidden = layer.input_layernorm(hidden)
        if index in state.recurrent:
            weight = fused.get(index, "linear_attn") if fused is not None else None
            hidden = _gated_delta_net(
                layer.linear_attn, hidden, state.conv[index], state.recurrent[index], pad_mask, decode, extend, weight
            )
        else:
            weight = fused.get(index, "self_attn") if fused is not None else None
            hidden = _attention(
                layer.self_attn, hidden, cos, sin, state.keys[index], state.values[index], slots, attn_mask, decode, extend, weight
            )
        hidden = residual + hidden
        hidden = hidden + _mlp(layer.mlp, layer.post_attention_layernorm(hidden), fused.get(index, "mlp") if fused is not None else None)
    if last is None:
        final = hidden[:, -1:]
    else:
        final = hidden.gather(1, last.view(-1, 1, 1).expand(-1, 1, hidden.shape[-1]))
    return model.lm_head(text.norm(final))[:, -1, :]
