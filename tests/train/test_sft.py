"""SFT on a tiny offline model: prompt tokens are masked, the loss is the usual one on target + EOS,
a short run learns, and the checkpoint round-trips with a provenance record that hashes it."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from gencoord_env.agents.lm.generate import Generator
from gencoord_env.agents.lm.loading import build_tiny, load_model
from gencoord_env.agents.lm.policy import prompt_text
from gencoord_env.train.data import Row, load_rows, write_rows
from gencoord_env.train.sft import SFTConfig, ScratchConfig, _collate, encode, masked_loss, train, tree_sha256


@pytest.fixture(scope="module")
def rows(data_dir: Path) -> list[Row]:
    return load_rows(data_dir / "forward.jsonl")[:8]


@pytest.fixture(scope="module")
def tiny(rows: list[Row]):  # type: ignore[no-untyped-def]
    return build_tiny([r.prompt + "\n" + r.target for r in rows], hidden_size=32, num_layers=1, vocab_size=400)


def test_prompt_is_the_generators_prompt(tiny, rows: list[Row]) -> None:  # type: ignore[no-untyped-def]
    assert prompt_text(tiny.tokenizer, rows[0].prompt) == Generator(tiny.model, tiny.tokenizer).prompt_text(rows[0].prompt)
    assert prompt_text(tiny.tokenizer, rows[0].prompt).endswith("<|im_start|>assistant\n")


def test_prompt_tokens_get_label_minus_100_and_target_ends_with_eos(tiny, rows: list[Row]) -> None:  # type: ignore[no-untyped-def]
    tok = tiny.tokenizer
    for e, r in zip(encode(rows, tok), rows):
        prompt = tok(prompt_text(tok, r.prompt), add_special_tokens=False)["input_ids"]
        target = tok(r.target, add_special_tokens=False)["input_ids"]
        assert e.input_ids == prompt + target + [tok.eos_token_id]
        assert e.labels == [-100] * len(prompt) + target + [tok.eos_token_id]
        assert tok.decode(e.labels[len(prompt):-1]) == r.target


def test_rows_longer_than_max_length_are_refused_not_truncated(tiny, rows: list[Row]) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=re.escape(f"row {rows[0].id} has")):
        encode(rows[:1], tiny.tokenizer, max_length=50)


def test_masked_loss_is_the_causal_lm_loss_on_target_tokens_and_ignores_padding(tiny, rows: list[Row]) -> None:  # type: ignore[no-untyped-def]
    enc = encode(rows[:3], tiny.tokenizer)
    ids, labels, _ = _collate(enc, tiny.tokenizer.pad_token_id, torch.device("cpu"))
    with torch.no_grad():
        ours = masked_loss(tiny.model, ids, labels)
        reference = tiny.model(input_ids=ids, labels=labels).loss
        assert torch.allclose(ours, reference, atol=1e-5)
        alone_ids, alone_labels, _ = _collate(enc[:1], tiny.tokenizer.pad_token_id, torch.device("cpu"))
        padded = masked_loss(tiny.model, ids[:1], labels[:1])  # row 0 padded to the batch width
        assert torch.allclose(masked_loss(tiny.model, alone_ids, alone_labels), padded, atol=1e-5)
        # Changing a prompt token's label to -100 (it already is) changes nothing; unmasking one changes the loss.
        unmasked = labels.clone()
        unmasked[0, 5] = ids[0, 5]
        assert not torch.allclose(masked_loss(tiny.model, ids, unmasked), ours)


def test_config_needs_exactly_one_model_source() -> None:
    with pytest.raises(ValueError, match="exactly one of base_model"):
        SFTConfig(data=("x.jsonl",), out_dir="out")
    with pytest.raises(ValueError, match="exactly one of base_model"):
        SFTConfig(data=("x.jsonl",), out_dir="out", base_model="m", scratch=ScratchConfig())


def test_short_scratch_run_learns_and_checkpoint_round_trips(rows: list[Row], tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    write_rows(rows[:4], data)
    config = SFTConfig(data=(str(data),), out_dir=str(tmp_path / "run"), scratch=ScratchConfig(vocab_size=400, hidden_size=32, num_layers=1),
                       lr=1e-2, max_steps=40, micro_batch=2, grad_accum=2, log_every=1, progress=False, seed=7)
    result = train(config)
    assert result.losses[-1] < 0.6 * result.losses[0]

    prov = json.loads((tmp_path / "run" / "provenance.json").read_text())
    assert prov["optimizer_steps"] == 40 and prov["token_exposure"]["samples"] == 160
    assert prov["data"]["files"][0]["rows"] == 4 and len(prov["data"]["files"][0]["sha256"]) == 64
    assert prov["config"]["lr"] == 1e-2 and prov["config"]["data"] == ["rows.jsonl"]
    assert prov["checkpoint"]["tree_sha256"] == tree_sha256(tmp_path / "run" / "final")[0]
    assert prov["base_model"]["kind"] == "scratch" and prov["libraries"]["torch"] == torch.__version__
    target_tokens = sum(e.target_tokens for e in encode(rows[:4], load_model(tmp_path / "run" / "final").tokenizer))
    assert prov["token_exposure"]["target_tokens"] == target_tokens * 160 // 4

    loaded = load_model(tmp_path / "run" / "final", device="cpu")
    enc = encode(rows[:2], loaded.tokenizer)
    ids, _, _ = _collate(enc, loaded.tokenizer.pad_token_id, torch.device("cpu"))
    saved_model = result.checkpoint
    assert saved_model is not None
    again = load_model(saved_model, device="cpu")
    with torch.no_grad():
        assert torch.equal(loaded.model(input_ids=ids).logits, again.model(input_ids=ids).logits)

    # Same seed, same data: the same losses, bit for bit (deterministic kernels), and the process's settings back
    assert prov["deterministic"]["on"] and not torch.are_deterministic_algorithms_enabled()
    rerun = train(SFTConfig(**{**config.__dict__, "out_dir": str(tmp_path / "rerun"), "save": False}))
    assert rerun.losses == result.losses


def test_a_run_cut_short_continues_from_its_resumable_state_to_the_same_weights(rows: list[Row], tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    write_rows(rows[:24], data)
    base = dict(data=(str(data),), scratch=ScratchConfig(vocab_size=400, hidden_size=32, num_layers=1), max_steps=7,
                micro_batch=2, grad_accum=1, device="cpu", progress=False, log_every=1, fit_rows=0, code_renaming=0.5)
    whole = train(SFTConfig(out_dir=str(tmp_path / "whole"), **base))

    class Cut(Exception):
        pass

    def cut_at_5(step: int, loss: float, seconds: float) -> None:
        if step == 5:
            raise Cut  # after update 5, before its state would be saved: the run goes back to update 4

    config = SFTConfig(out_dir=str(tmp_path / "cut"), resume_every=2, **base)
    with pytest.raises(Cut):
        train(config, on_log=cut_at_5)
    assert (tmp_path / "cut" / "resume.pt").is_file() and not (tmp_path / "cut" / "final").exists()
    resumed = train(config)
    assert resumed.losses == whole.losses and resumed.provenance["token_exposure"] == whole.provenance["token_exposure"]
    assert tree_sha256(tmp_path / "cut" / "final")[0] == tree_sha256(tmp_path / "whole" / "final")[0]
    assert not (tmp_path / "cut" / "resume.pt").exists()  # removed once the run ends
    # the state of another run's settings is refused, never continued
    with pytest.raises(Cut):
        train(SFTConfig(out_dir=str(tmp_path / "other"), resume_every=2, **base), on_log=cut_at_5)
    with pytest.raises(ValueError, match="holds the state of a run with other settings"):
        train(SFTConfig(out_dir=str(tmp_path / "other"), resume_every=2, **{**base, "max_steps": 8}))
