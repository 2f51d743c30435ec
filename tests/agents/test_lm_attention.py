"""SDPA over left-padded batches: no query row that attends to nothing reaches the kernel, and real positions
keep their logits.

On a GPU, PyTorch's memory-efficient and cuDNN SDPA kernels may return NaN for a query row whose mask is all
False, and the next layer spreads it to the real positions; the CPU's kernels (math and flash) return zeros
for such a row, so the NaN itself cannot be shown here. What is checked is the condition the GPU kernels
need: the masks the models of ``build_tiny`` and ``load_model`` hand to ``scaled_dot_product_attention``.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from gencoord_env.agents.lm.attention import PAD_SAFE_SDPA  # noqa: E402
from gencoord_env.agents.lm.loading import LoadedModel, build_tiny, load_model  # noqa: E402

CORPUS = [f"SELF resource.obtain(q={i % 9},item=oak_log)\nREQ agent_b craft.item(q=1,item=stick) PRIOR NODE" for i in range(200)]
PAD = 37  # left padding of the first row


@pytest.fixture
def masks_seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every ``attn_mask`` that reaches ``torch.nn.functional.scaled_dot_product_attention``."""
    seen: list[Any] = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("attn_mask", args[3] if len(args) > 3 else None))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    yield seen


def _tiny(arch: str) -> LoadedModel:
    lm = build_tiny(CORPUS, arch=arch, hidden_size=64, num_layers=2, vocab_size=300)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # prompt-dependent, varied samples
        for param in lm.model.parameters():
            if param.dim() == 2:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.15)
    return lm


def _batch(lm: LoadedModel, width: int = 90) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(10, len(lm.tokenizer), (2, width), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    ids[0, :PAD], mask[0, :PAD] = lm.tokenizer.pad_token_id, 0
    return ids, mask


def _unattended_rows(masks: list[Any]) -> int:
    return sum(int((~m.any(dim=-1)).sum()) for m in masks if m is not None and m.dtype == torch.bool)


@pytest.mark.parametrize("arch", ["qwen3", "qwen3_5"])
def test_no_query_row_of_a_left_padded_batch_attends_to_nothing(arch: str, masks_seen: list[Any], tmp_path: Path) -> None:
    lm = _tiny(arch)
    assert lm.model.config._attn_implementation == PAD_SAFE_SDPA
    ids, mask = _batch(lm)
    with torch.no_grad():
        lm.model(input_ids=ids, attention_mask=mask)
        lm.model.generate(input_ids=ids, attention_mask=mask, do_sample=True, max_new_tokens=3,
                          pad_token_id=lm.tokenizer.pad_token_id)
    assert any(m is not None for m in masks_seen) and _unattended_rows(masks_seen) == 0

    # a saved model comes back through load_model the same way, and the saved config does not name the implementation
    lm.model.save_pretrained(tmp_path)
    lm.tokenizer.save_pretrained(tmp_path)
    assert PAD_SAFE_SDPA not in (tmp_path / "config.json").read_text()
    loaded = load_model(tmp_path, device="cpu")
    assert loaded.model.config._attn_implementation == PAD_SAFE_SDPA
    masks_seen.clear()
    with torch.no_grad():
        loaded.model(input_ids=ids, attention_mask=mask)
    assert _unattended_rows(masks_seen) == 0

    # what plain SDPA hands the kernel: a row per layer call for each pad query (the rows GPU kernels may NaN)
    loaded.model.set_attn_implementation("sdpa")
    masks_seen.clear()
    with torch.no_grad():
        loaded.model(input_ids=ids, attention_mask=mask)
    assert _unattended_rows(masks_seen) >= PAD


@pytest.mark.parametrize("arch", ["qwen3", "qwen3_5"])
@pytest.mark.parametrize("bf16", [False, True])
def test_real_positions_keep_their_logits_and_samples(arch: str, bf16: bool) -> None:
    lm = _tiny(arch)
    ids, mask = _batch(lm)

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = lm.model(input_ids=ids, attention_mask=mask).logits
            torch.manual_seed(3)
            sampled = lm.model.generate(input_ids=ids, attention_mask=mask, do_sample=True, max_new_tokens=6,
                                        pad_token_id=lm.tokenizer.pad_token_id)
        return logits, sampled

    safe_logits, safe_samples = run()
    lm.model.set_attn_implementation("sdpa")
    plain_logits, plain_samples = run()
    assert torch.equal(safe_logits[0, PAD:], plain_logits[0, PAD:]) and torch.equal(safe_logits[1], plain_logits[1])
    assert torch.equal(safe_samples, plain_samples)
    assert torch.isfinite(safe_logits).all()
