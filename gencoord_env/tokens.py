"""Token observations: observation text -> fixed-length integer ids, for learners that want numbers.

The package's own tokenizer is word-level over the closed vocabulary the environment writes: identifiers
(skill paths split at dots, item and station names, agent ids, stage names), single digits (so any
quantity is composable) and punctuation. Its vocabulary (``data/vocab.json``) is built offline from the
observations of every pool and route plus every Minecraft item name (``scripts/build_vocab.py``); a word
outside it maps to ``<unk>`` (id 1), padding is id 0. It needs nothing beyond the standard library.

Any Hugging Face tokenizer can be used instead (``HFTokenizer``): a ``transformers`` tokenizer or a
``tokenizers.Tokenizer``.

    >>> tok = WordTokenizer.default()
    >>> ids, mask = encode_fixed(tok, "STAGE sender_initial", 8)
    >>> mask.tolist()
    [1, 1, 0, 0, 0, 0, 0, 0]
"""
from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from gencoord_env.caches import Memo, cache
from gencoord_env.data_files import data_path
from gencoord_env.errors import DataError, UsageError

PAD, UNK = 0, 1
SPECIALS: tuple[str, ...] = ("<pad>", "<unk>")
#: words (identifiers with underscores), single digits, any other non-space character
WORD_RE = re.compile(r"[A-Za-z_]+|\d|[^\sA-Za-z_\d]")
#: ids of each (tokenizer, line) seen: observations repeat whole lines (the prior, the stations)
_LINES = Memo("tokens.lines", maxsize=1 << 16)
_PARTS = Memo("tokens.parts", maxsize=1 << 14)
#: whole fixed-length observations and bags of words (read-only; callers get copies): a decision met again
#: (every reset meets an episode's first one; a waiting agent sees one of a few lines) is a lookup
_FIXED = Memo("tokens.fixed", maxsize=1 << 12, max_bytes=16 << 20)
_BAGS = Memo("tokens.bags", maxsize=1 << 12, max_bytes=16 << 20)
_SERIALS = itertools.count()


@runtime_checkable
class Tokenizer(Protocol):
    vocab_size: int
    pad_id: int

    def encode(self, text: str) -> list[int]: ...


class WordTokenizer:
    """The package's offline word-level tokenizer (see the module docstring)."""

    def __init__(self, vocab: Sequence[str]) -> None:
        if tuple(vocab[: len(SPECIALS)]) != SPECIALS:
            raise DataError(f"a vocabulary starts with {SPECIALS}; got {tuple(vocab[:2])}")
        if len(set(vocab)) != len(vocab):
            raise DataError("a vocabulary lists every word once")
        self.words = tuple(vocab)
        self.ids = {w: i for i, w in enumerate(vocab)}
        self.vocab_size = len(vocab)
        self.pad_id = PAD
        self.serial = next(_SERIALS)

    @classmethod
    def default(cls) -> WordTokenizer:
        return _default_tokenizer()

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        get, serial = self.ids.get, self.serial
        for line in text.split("\n"):
            ids = _LINES.get((serial, line))
            if ids is None:
                ids = _LINES.put((serial, line), [get(w, UNK) for w in WORD_RE.findall(line)])
            out += ids
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self.words[i] for i in ids if i != PAD)


@cache(maxsize=1)
def _default_tokenizer() -> WordTokenizer:
    """The shipped vocabulary, then the words of catalog skills it lacks (sorted): a skill added to the
    catalog is known at once; ``scripts/build_vocab.py`` makes its words part of the file."""
    from gencoord_env.catalog import CATALOG

    words = json.loads(data_path("vocab.json").read_text(encoding="utf-8"))["words"]
    known = set(words)
    return WordTokenizer(words + sorted({w for s in CATALOG.skills for w in WORD_RE.findall(s)} - known))


class HFTokenizer:
    """Any Hugging Face tokenizer (``transformers`` or ``tokenizers``) behind the same interface."""

    def __init__(self, tokenizer: Any) -> None:
        self.inner = tokenizer
        size = getattr(tokenizer, "vocab_size", None)
        if size is None and hasattr(tokenizer, "get_vocab_size"):
            size = tokenizer.get_vocab_size()
        if size is None:
            raise TypeError(f"expected a Hugging Face tokenizer, got {type(tokenizer).__name__} (no vocab size)")
        # transformers counts added tokens apart from vocab_size
        self.vocab_size = int(len(tokenizer)) if hasattr(tokenizer, "__len__") else int(size)
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else 0

    def encode(self, text: str) -> list[int]:
        try:
            return list(self.inner.encode(text, add_special_tokens=False))
        except TypeError:  # tokenizers.Tokenizer: encode(...) returns an Encoding
            return list(self.inner.encode(text, add_special_tokens=False).ids)


def as_tokenizer(spec: Any) -> Tokenizer:
    """``None`` or ``"word"``: the package's tokenizer; a Hugging Face tokenizer object: wrapped."""
    if spec is None or spec == "word":
        return WordTokenizer.default()
    if isinstance(spec, (WordTokenizer, HFTokenizer)):
        return spec
    if isinstance(spec, str):
        raise UsageError(f"unknown tokenizer {spec!r}; pass 'word' or a loaded Hugging Face tokenizer object")
    return HFTokenizer(spec)


def encode_parts(tokenizer: Tokenizer, parts: Sequence[str]) -> np.ndarray:
    """The ids of ``"\\n".join(parts)`` (word tokenizers: line breaks carry no token), each part's ids
    memoized: the large parts of an observation (the prior, the stations) recur at every decision."""
    if not isinstance(tokenizer, WordTokenizer):
        return np.asarray(tokenizer.encode("\n".join(parts)), dtype=np.int64)
    arrays = []
    for part in parts:
        ids = _PARTS.get((tokenizer.serial, part))
        if ids is None:
            ids = _PARTS.put((tokenizer.serial, part), np.asarray(tokenizer.encode(part), dtype=np.int64))
        arrays.append(ids)
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)


def encode_fixed(tokenizer: Tokenizer, text: str | Sequence[str], length: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, mask) of exactly ``length``: the first ``length`` ids, padded; mask 1 on real tokens.

    ``text`` may be given in parts (``contexts.render_parts``). Truncation keeps the head: identity,
    stage, private field, observation, history and messages come before the shared prior, which is the
    same for every decision of an episode.
    """
    parts = (text,) if isinstance(text, str) else tuple(text)
    if not isinstance(tokenizer, WordTokenizer):
        return _fixed(tokenizer, parts, length)
    key = (tokenizer.serial, length, parts)
    found = _FIXED.get(key)
    if found is None:
        found = _FIXED.put(key, _read_only(*_fixed(tokenizer, parts, length)))
    return found[0].copy(), found[1].copy()


def _fixed(tokenizer: Tokenizer, parts: tuple[str, ...], length: int) -> tuple[np.ndarray, np.ndarray]:
    ids = encode_parts(tokenizer, parts)[:length]
    out = np.zeros(length, dtype=np.int64) if tokenizer.pad_id == 0 else np.full(length, tokenizer.pad_id, dtype=np.int64)
    out[: len(ids)] = ids
    mask = np.zeros(length, dtype=np.int8)
    mask[: len(ids)] = 1
    return out, mask


def bag_of_words(tokenizer: Tokenizer, local: Sequence[str], prior: str | None = None) -> np.ndarray:
    """float32 word counts, ``2 x vocab_size`` long: the words of ``local`` (text parts) in the first half,
    those of ``prior`` (the shared prior's text, counted apart) in the second; zeros there without one."""
    local = tuple(local)
    if not isinstance(tokenizer, WordTokenizer):
        return _bag(tokenizer, local, prior)
    key = (tokenizer.serial, local, prior)
    found = _BAGS.get(key)
    if found is None:
        found = _BAGS.put(key, _read_only(_bag(tokenizer, local, prior))[0])
    return found.copy()  # type: ignore[no-any-return]


def _bag(tokenizer: Tokenizer, local: tuple[str, ...], prior: str | None) -> np.ndarray:
    v = tokenizer.vocab_size
    counts = np.zeros(2 * v, dtype=np.float32)
    counts[:v] = np.bincount(encode_parts(tokenizer, local), minlength=v)[:v]
    if prior is not None:
        counts[v:] = np.bincount(encode_parts(tokenizer, (prior,)), minlength=v)[:v]
    return counts


def _read_only(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    for a in arrays:
        a.flags.writeable = False
    return arrays


__all__ = ["HFTokenizer", "PAD", "Tokenizer", "UNK", "WORD_RE", "WordTokenizer", "as_tokenizer", "bag_of_words",
           "encode_fixed", "encode_parts"]
