"""SDPA attention whose left-padding rows attend to something, so no kernel can return NaN for them.

In a left-padded batch a pad position's query may see only earlier keys, and those are pads too, which
the padding mask removes: its row of transformers' boolean SDPA mask is all False. On the CPU, PyTorch's
SDPA (the math kernel) returns zeros for such a row. A kernel that returned NaN there would spread it to every
real position of that sequence in the next layer through ``0 * NaN`` (the real queries give the pad keys
weight 0), and transformers 5 builds this mask without the correction it once applied (``sdpa_mask``'s
``allow_torch_fix`` is deprecated and does nothing). This was the suspected cause of NaN probabilities in
bf16 GRPO sampling of unevenly padded prompts; on one H200 (torch 2.11 + cu130,
``scripts/bf16_padding_nan.py``, ``reports/README.md``) no kernel returned NaN on such rows (math and
memory-efficient: zeros; cuDNN: finite values) and no padded forward or sampled ``generate`` of a random
model met NaN, so the cause is not confirmed there; the mask below stays as a guard that costs real
positions nothing.

:data:`PAD_SAFE_SDPA` is transformers' SDPA with one change to its mask: a row that attends to nothing
attends to every key instead. Only pad queries have such rows, and no real query reads their outputs
(pad keys stay masked for real queries), so the logits of real positions are unchanged.
:func:`use_pad_safe_attention` switches a model that uses SDPA to it; :func:`gencoord_env.agents.lm.loading.load_model`
and ``build_tiny`` do so for every model they return. The implementation is registered under its name in
transformers' attention and mask interfaces; ``save_pretrained`` does not record it.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface, AttentionMaskInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

__all__ = ["PAD_SAFE_SDPA", "pad_safe_sdpa_mask", "use_pad_safe_attention"]

#: the attention implementation's name in transformers' interfaces
PAD_SAFE_SDPA = "sdpa_pad_safe"


def pad_safe_sdpa_mask(*args: Any, **kwargs: Any) -> torch.Tensor | None:
    """transformers' ``sdpa_mask``, with every query row that attends to no key made to attend to all keys."""
    mask = sdpa_mask(*args, **kwargs)
    if mask is None:  # no mask at all: SDPA's own causal flag, no padding
        return None
    return mask | ~mask.any(dim=-1, keepdim=True)


AttentionInterface.register(PAD_SAFE_SDPA, sdpa_attention_forward)
AttentionMaskInterface.register(PAD_SAFE_SDPA, pad_safe_sdpa_mask)


def use_pad_safe_attention(model: PreTrainedModel) -> PreTrainedModel:
    """Switch ``model`` from SDPA to :data:`PAD_SAFE_SDPA` (in place; returned for chaining). A model on another
    attention implementation (eager, flash attention) is left as it is: eager's additive mask keeps such rows
    finite, and flash attention takes no padding mask."""
    if model.config._attn_implementation == "sdpa":
        model.set_attn_implementation(PAD_SAFE_SDPA)
    return model
