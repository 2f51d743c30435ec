"""BPE-dropout (Provilkov et al., 2020) for the offline byte-level BPE tokenizer, seeded and in pure Python.

A model trained on one deterministic segmentation only ever sees the tokens that segmentation produces.
A word it never met (a held-out template's name, a new task description) is segmented into vocabulary
pieces that may never have appeared on their own in training, such as a bare ``Ġ`` (space) or a single
letter, whose embeddings are then still at their random initial values. Encoding a few training
prompts with merges randomly skipped shows the model those pieces in context.

The tokenizers library has BPE-dropout built in, but draws from an unseeded generator; this encoder
takes a ``random.Random``, so a run's data stays a function of its seed. With ``p=0`` it reproduces the
fast tokenizer's own encoding (checked by the tests).

Example::

    drop = BPEDropout(tokenizer)
    ids = drop.encode(text, random.Random(0), p=0.1)   # a valid, non-canonical segmentation of text
    tokenizer.decode(ids) == text
"""
from __future__ import annotations

import json
import random
import re

from transformers import PreTrainedTokenizerBase

from gencoord_env.errors import UsageError

__all__ = ["BPEDropout"]


class BPEDropout:
    """Segment text like ``tokenizer`` does, skipping each applicable merge with probability ``p``."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise TypeError(f"BPE-dropout needs a fast (Rust-backed) tokenizer, got {type(tokenizer).__name__}")
        model = json.loads(backend.to_str())["model"]
        if model.get("type") != "BPE":
            raise UsageError(f"BPE-dropout needs a BPE tokenizer, got a {model.get('type')} model")
        merges = [m.split(" ", 1) if isinstance(m, str) else m for m in model["merges"]]
        self._ranks: dict[tuple[str, str], int] = {(a, b): r for r, (a, b) in enumerate(merges)}
        self._vocab: dict[str, int] = model["vocab"]
        self._pre = backend.pre_tokenizer
        specials = sorted(tokenizer.all_special_tokens, key=len, reverse=True)
        self._special_ids = {t: tokenizer.convert_tokens_to_ids(t) for t in specials}
        self._split = re.compile("(" + "|".join(re.escape(t) for t in specials) + ")") if specials else None
        self._backend = backend
        # added words (the binding codes of train_tokenizer) stay whole, matched exactly as the tokenizer does
        self._whole_ids = frozenset(i for t, i in tokenizer.get_added_vocab().items() if t not in self._special_ids)

    def encode(self, text: str, rng: random.Random, p: float) -> list[int]:
        """Token ids of ``text``; special tokens and added words stay whole, every other pre-token goes
        through dropout BPE."""
        if not 0.0 <= p < 1.0:
            raise UsageError(f"dropout probability must be in [0, 1), got {p}")
        parts = self._split.split(text) if self._split else [text]
        ids: list[int] = []
        for part in parts:
            if not part:
                continue
            if part in self._special_ids:
                ids.append(self._special_ids[part])
                continue
            for span, whole in self._spans(part):
                if whole is not None:
                    ids.append(whole)
                    continue
                for piece, _ in self._pre.pre_tokenize_str(span):
                    ids.extend(self._vocab[s] for s in self._merge(piece, rng, p))
        return ids

    def _spans(self, part: str) -> list[tuple[str, int | None]]:
        """``part`` cut around its added words: (text, None) to segment, (word, id) to keep whole."""
        if not self._whole_ids:
            return [(part, None)]
        enc = self._backend.encode(part, add_special_tokens=False)
        spans: list[tuple[str, int | None]] = []
        pos = 0
        for tid, (a, b) in zip(enc.ids, enc.offsets):
            if tid in self._whole_ids:
                if a > pos:
                    spans.append((part[pos:a], None))
                spans.append((part[a:b], tid))
                pos = b
        if pos < len(part):
            spans.append((part[pos:], None))
        return spans

    def _merge(self, piece: str, rng: random.Random, p: float) -> list[str]:
        # Lowest-rank merge first, leftmost occurrence first: the canonical BPE order when p == 0.
        symbols = list(piece)
        ranks = self._ranks
        while len(symbols) > 1:
            best = -1
            best_rank = len(ranks)
            for i in range(len(symbols) - 1):
                r = ranks.get((symbols[i], symbols[i + 1]))
                if r is not None and r < best_rank and (p == 0.0 or rng.random() >= p):
                    best, best_rank = i, r
            if best < 0:
                break
            symbols[best : best + 2] = [symbols[best] + symbols[best + 1]]
        return symbols
