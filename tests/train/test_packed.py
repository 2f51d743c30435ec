"""Packed training of the Qwen3.5 hybrid decoder computes what padded training computes: the same loss and the
same gradients on the real rows, each row on its own (the recurrence and attention restart at each row)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from gencoord_env.agents.lm.loading import build_tiny
from gencoord_env.train.data import Row, load_rows, write_rows
from gencoord_env.train.packed import collate, pack, packed_hidden, packed_loss
from gencoord_env.train.sft import ScratchConfig, SFTConfig, _collate, encode, masked_loss, train


@pytest.fixture(scope="module")
def rows(data_dir: Path) -> list[Row]:
    forward = load_rows(data_dir / "forward.jsonl")
    return [forward[0], forward[1], forward[1001]]  # both stages, prompts of different lengths


def test_pack_keeps_order_and_bounds() -> None:
    items = [type("E", (), {"input_ids": [0] * n})() for n in (5, 4, 3, 9, 1)]
    assert [[len(e.input_ids) for e in p] for p in pack(items, 9)] == [[5, 4], [3], [9], [1]]
    with pytest.raises(ValueError, match="max_tokens must be >= 1"):
        pack(items, 0)


def test_packed_loss_and_gradients_equal_the_padded_ones(rows: list[Row]) -> None:
    lm = build_tiny([r.prompt + "\n" + r.target for r in rows], arch="qwen3_5", hidden_size=32, num_layers=2,
                    vocab_size=500, seed=3)  # one Gated-DeltaNet layer, one attention layer
    model = lm.model.train()
    encoded = encode(rows, lm.tokenizer)
    n_items = sum(e.target_tokens for e in encoded)
    ids, labels, _ = _collate(encoded, lm.tokenizer.pad_token_id, torch.device("cpu"))
    padded = masked_loss(model, ids, labels, n_items)
    padded.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()

    batch = collate(encoded, torch.device("cpu"))
    assert batch.tokens == sum(len(e.input_ids) for e in encoded) and batch.cu_seqlens[-1] == batch.tokens
    packed = packed_loss(model, batch, n_items)
    packed.backward()
    assert packed.item() == pytest.approx(padded.item(), rel=1e-5)
    for name, grad in want.items():
        torch.testing.assert_close(dict(model.named_parameters())[name].grad, grad, rtol=2e-4, atol=2e-6, msg=name)

    # each row alone: its hidden states do not depend on the rows packed before it
    first = packed_hidden(model, collate(encoded[:1], torch.device("cpu")))
    torch.testing.assert_close(packed_hidden(model, batch)[:, : len(encoded[0].input_ids)], first, rtol=1e-5, atol=1e-5)
    alone = packed_hidden(model, collate(encoded[2:], torch.device("cpu")))
    start = sum(len(e.input_ids) for e in encoded[:2])
    torch.testing.assert_close(packed_hidden(model, batch)[:, start:], alone, rtol=1e-5, atol=1e-5)


def test_a_packed_run_trains_like_a_padded_one_and_other_models_are_refused(rows: list[Row], tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    write_rows(rows[1:], data)
    base = SFTConfig(data=(str(data),), out_dir=str(tmp_path / "padded"), lr=1e-2, max_steps=2, micro_batch=1,
                     grad_accum=2, log_every=1, progress=False, seed=5, save=False, fit_rows=0,
                     scratch=ScratchConfig(arch="qwen3_5", vocab_size=400, hidden_size=16, num_layers=2))
    padded = train(base)
    packed = train(dataclasses.replace(base, out_dir=str(tmp_path / "packed"), packing=True, pack_tokens=1500))
    assert packed.provenance["batches"]["packing"] and packed.provenance["batches"]["kernels"]["attention"] == "sdpa, row by row"
    assert packed.losses == pytest.approx(padded.losses, rel=2e-3)
    with pytest.raises(ValueError, match="packing=True trains the Qwen3.5 hybrid decoder; this run's model is qwen3"):
        train(dataclasses.replace(base, out_dir=str(tmp_path / "qwen3"), packing=True,
                                  scratch=ScratchConfig(arch="qwen3", vocab_size=400, hidden_size=32, num_layers=1)))
