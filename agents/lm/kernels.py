"""The Gated-DeltaNet operations of the hybrid decoder, as PyTorch custom ops with one CPU and one CUDA body.

Why custom ops: ``torch.compile`` then sees each kernel as one opaque node (no graph break, no tracing
into Triton launch code), fuses the element-wise work around it, and the whole step can be captured as
one CUDA graph.

- CUDA bodies use the Triton kernels of ``flash-linear-attention`` (``fla``) when it is importable: the
  causal short convolution (``causal-conv1d`` has no wheel; PyTorch's depthwise conv fallback is slow at
  large batch) and the recurrent gated delta rule launched with the state as both input and output, so
  a decode step updates the recurrent state in place instead of allocating a new one and copying it
  back (at batch 64 that copy alone moves ~2.4 GB per step).
- CPU bodies call the reference PyTorch functions of transformers, so on the CPU the hybrid decoder
  computes exactly what ``model.generate`` computes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["causal_conv", "delta_rule_chunk", "delta_rule_step", "fla_available"]

try:  # the Triton kernels; absent on CPU-only installs
    import triton
    from fla.modules.causal_conv1d.ops import causal_conv1d_fwd as _fla_conv_fwd
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as _fla_chunk
    from fla.ops.gated_delta_rule.fused_recurrent import fused_recurrent_gated_delta_rule_fwd_kernel as _fla_recurrent_kernel
except Exception:  # noqa: BLE001 - any import failure means "use the reference code"
    _fla_conv_fwd = _fla_chunk = _fla_recurrent_kernel = None


def fla_available() -> bool:
    """Whether the CUDA bodies run ``fla``'s Triton kernels (else the PyTorch reference code)."""
    return _fla_recurrent_kernel is not None


def _reference(name: str):  # type: ignore[no-untyped-def]
    """transformers' PyTorch implementation of ``name``, unwrapped from its hub-kernel dispatch."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mod

    fn = getattr(mod, name)
    return getattr(fn, "__wrapped__", fn)


# ---------------------------------------------------------------------------------------- causal conv


def _conv_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    conv = _reference("causal_conv1d_fn")
    return conv(x.transpose(1, 2), weight, None, activation="silu").transpose(1, 2).contiguous()


@torch.library.custom_op("gencoord_lm::causal_conv", mutates_args=(), schema="(Tensor x, Tensor weight) -> Tensor")
def causal_conv(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Depthwise causal convolution plus SiLU over a fresh sequence: x (B, T, D), weight (D, W) -> (B, T, D)."""
    return _conv_reference(x, weight)


@causal_conv.register_kernel("cuda")
def _causal_conv_cuda(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    if _fla_conv_fwd is None:
        return _conv_reference(x, weight)
    y, _ = _fla_conv_fwd(
        x=x.contiguous(), weight=weight.contiguous(), bias=None, residual=None, initial_state=None,
        output_final_state=False, activation="silu",
    )
    return y


@causal_conv.register_fake
def _causal_conv_fake(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


# ----------------------------------------------------------------------------- chunked delta rule


def _chunk_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, initial: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    chunk = _reference("torch_chunk_gated_delta_rule")
    o, state = chunk(q, k, v, g=g, beta=beta, initial_state=initial, output_final_state=True, use_qk_l2norm_in_kernel=True)
    return o.contiguous(), state.float().contiguous()


@torch.library.custom_op(
    "gencoord_lm::delta_rule_chunk",
    mutates_args=(),
    schema="(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, Tensor? initial=None) -> (Tensor, Tensor)",
)
def delta_rule_chunk(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, initial: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gated delta rule over a chunk: output (B, T, HV, V) and the float32 final state (B, HV, K, V).

    ``initial`` (float32, B x HV x K x V): the state before the chunk (a cached prefix's); None: zero.
    """
    return _chunk_reference(q, k, v, g, beta, initial)


@delta_rule_chunk.register_kernel("cuda")
def _delta_rule_chunk_cuda(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, initial: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    if _fla_chunk is None:
        return _chunk_reference(q, k, v, g, beta, initial)
    o, state = _fla_chunk(q, k, v, g=g, beta=beta, initial_state=initial, output_final_state=True, use_qk_l2norm_in_kernel=True)
    return o.contiguous(), state.float().contiguous()


@delta_rule_chunk.register_fake
def _delta_rule_chunk_fake(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, initial: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, _, heads, v_dim = v.shape
    state = q.new_empty((batch, heads, k.shape[-1], v_dim), dtype=torch.float32)
    return torch.empty_like(v, memory_format=torch.contiguous_format), state


# ---------------------------------------------------------------------------- one recurrent step


@torch.library.custom_op(
    "gencoord_lm::delta_rule_step",
    mutates_args=("state",),
    schema="(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, Tensor(a!) state) -> Tensor",
)
def delta_rule_step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """One decode token of the gated delta rule; ``state`` (B, HV, K, V) is updated in place. Returns (B, 1, HV, V)."""
    return _step_reference(q, k, v, g, beta, state)


def _step_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    step = _reference("torch_recurrent_gated_delta_rule")
    o, new_state = step(q, k, v, g=g, beta=beta, initial_state=state, output_final_state=True, use_qk_l2norm_in_kernel=True)
    state.copy_(new_state)
    return o.contiguous()


@delta_rule_step.register_kernel("cuda")
def _delta_rule_step_cuda(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    if _fla_recurrent_kernel is None:
        return _step_reference(q, k, v, g, beta, state)
    q, k, v, g, beta = (t.contiguous() for t in (q, k, v, g, beta))
    batch, steps, heads, k_dim = k.shape
    v_heads, v_dim = v.shape[2], v.shape[3]
    block_k = triton.next_power_of_2(k_dim)
    block_v = min(8, triton.next_power_of_2(v_dim))
    o = torch.empty_like(v)
    # h0 and ht are the same buffer: each program reads its (K, BV) tile of the state once at the start
    # and writes it once at the end, so no program reads a tile another one writes.
    _fla_recurrent_kernel[(triton.cdiv(v_dim, block_v) * batch * v_heads,)](
        q=q, k=k, v=v, g=g, gk=None, gv=None, beta=beta, A_log=None, dt_bias=None, o=o,
        h0=state, ht=state, cu_seqlens=None, scale=k_dim**-0.5, T=steps, H=heads, HV=v_heads, K=k_dim, V=v_dim,
        BK=block_k, BV=block_v, IS_BETA_HEADWISE=True, USE_QK_L2NORM_IN_KERNEL=True, APPLY_BETA_SIGMOID=False,
        ALLOW_NEG_EIGVAL=False, STATE_V_FIRST=False, num_warps=1, num_stages=3,
    )
    return o


@delta_rule_step.register_fake
def _delta_rule_step_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(v, memory_format=torch.contiguous_format)


def conv_step(x: torch.Tensor, state: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """One decode token of the causal conv plus SiLU: x (B, D), ``state`` (B, D, W) shifted in place -> (B, D).

    Plain tensor code on purpose: under ``torch.compile`` it fuses into a single kernel.
    """
    window = torch.cat([state[:, :, 1:], x.unsqueeze(-1).to(state.dtype)], dim=-1)
    state.copy_(window)
    out = (window.to(weight.dtype) * weight).sum(-1)
    return F.silu(out).to(x.dtype)
