"""Shared fixtures: the built data sets (once per session) and a tiny offline model."""
from __future__ import annotations

from pathlib import Path

import pytest

from gencoord_env.train.data import build_all


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data")
    build_all(out)
    return out


def qwen_tokenizer(corpus: list[str], template: str = "qwen3_5", vocab_size: int = 1000):  # type: ignore[no-untyped-def]
    """An offline byte-level BPE tokenizer dressed as a Qwen checkpoint's: the chat template those checkpoints
    ship (TRL's copies: ``qwen3_5`` is Qwen3.5-0.8B's, thinking off by default; ``qwen3`` Qwen3's), their turn
    and tool-call tokens as added tokens (not special: a decoded completion keeps them), ``<|im_end|>`` as EOS
    and ``<|endoftext|>`` as padding, as Qwen's tokenizer configs set them."""
    from tokenizers import AddedToken
    from trl.chat_template_utils import qwen3_5_nothink_chat_template, qwen3_chat_template

    from gencoord_env.agents.lm.loading import train_tokenizer

    tok = train_tokenizer(corpus, vocab_size=vocab_size)
    tok.add_tokens([AddedToken(t, normalized=False, special=False)
                    for t in ("<tool_call>", "</tool_call>", "<think>", "</think>", "<tool_response>", "</tool_response>")])
    tok.chat_template = {"qwen3_5": qwen3_5_nothink_chat_template, "qwen3": qwen3_chat_template}[template]
    tok.eos_token = "<|im_end|>"
    tok.pad_token = "<|endoftext|>"
    return tok


def save_qwen_checkpoint(out: Path, corpus: list[str], template: str = "qwen3_5", arch: str = "qwen3_5",
                         hidden_size: int = 64, num_layers: int = 2) -> Path:
    """A tiny random-weight Qwen3.5 (or Qwen3) model saved with :func:`qwen_tokenizer`: a local checkpoint
    folder shaped like a real one, for CPU tests."""
    from gencoord_env.agents.lm.loading import build_tiny

    tok = qwen_tokenizer(corpus, template)
    lm = build_tiny(tokenizer=tok, arch=arch, hidden_size=hidden_size, num_layers=num_layers, seed=0)  # type: ignore[arg-type]
    lm.model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def make_qwen_tokenizer():  # type: ignore[no-untyped-def]
    """:func:`qwen_tokenizer` (tests call it with their own corpus and template)."""
    return qwen_tokenizer


@pytest.fixture(scope="session")
def make_qwen_checkpoint():  # type: ignore[no-untyped-def]
    """:func:`save_qwen_checkpoint`."""
    return save_qwen_checkpoint
