"""'Did you mean': the closest name of a set, as ``difflib.get_close_matches(word, names, n=1)`` finds it.

``difflib`` compares the word with every name, about 12 microseconds each: 17-24 ms over the 1,385 Minecraft
item names, for every misspelled item. A large set is indexed once by the character pairs of its names
(each padded with ``^`` and ``$``); a word is compared with difflib only against the ``CANDIDATES`` names
that share the most pairs with it (Dice coefficient), and a short word also against the names of about its
length; on ordinary typos (a letter dropped, added, changed or two swapped) that is where difflib's best
match is. ``benchmarks/did_you_mean.py`` measures the
time and the agreement with the full comparison.

>>> close_match("oak_plank", frozenset({"oak_planks", "oak_log", "stone"}))
'oak_planks'
"""
from __future__ import annotations

import difflib
import heapq
from collections import Counter
from collections.abc import Iterable
from itertools import chain

from gencoord_env.caches import cache

#: Names a word is compared with by difflib, out of an indexed set.
CANDIDATES = 12
#: Sets up to this size are compared whole (the index would not pay for itself).
SMALL = 64
#: Words up to this length share few pairs with anything (``iar`` and ``air`` share only ``r$``): they are
#: compared with every name within one character of their length too.
SHORT = 5


def close_match(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The name of ``choices`` closest to ``word`` with a difflib ratio of at least ``cutoff``, else ``None``.

    A ``frozenset`` of more than ``SMALL`` names is indexed once (memoized by the set); other choices are
    compared whole.
    """
    close = close_matches(word, choices, 1, cutoff)
    return close[0] if close else None


def close_matches(word: str, choices: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The (at most) ``n`` names of ``choices`` closest to ``word``, best first, as ``close_match`` finds one."""
    if isinstance(choices, frozenset) and len(choices) > SMALL:
        names = _index(choices).candidates(word, max(CANDIDATES, n))
    else:
        names = sorted(choices)
    return difflib.get_close_matches(word, names, n=n, cutoff=cutoff)


def unknown(what: str, value: object, names: Iterable[str]) -> str:
    """The message for a name that is not one of ``names``: what was given, every name accepted (as a
    reader's list, not a Python one), and the closest.

    >>> unknown("policy", "rnadom", ["rule", "random"])
    "unknown policy 'rnadom'; expected one of rule, random (did you mean 'random'?)"
    """
    names = [str(n) for n in names]
    hint = close_match(str(value), names)
    return f"unknown {what} {value!r}; expected one of {', '.join(names)}" + (f" (did you mean {hint!r}?)" if hint else "")


def _pairs(name: str) -> set[str]:
    padded = f"^{name}$"
    return {padded[i : i + 2] for i in range(len(padded) - 1)}


class NameIndex:
    """The names of a set by the character pairs they contain."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = tuple(sorted(names))
        self.sizes = [len(_pairs(name)) for name in self.names]
        by_pair: dict[str, list[int]] = {}
        for i, name in enumerate(self.names):
            for pair in _pairs(name):
                by_pair.setdefault(pair, []).append(i)
        self.by_pair = {pair: tuple(ids) for pair, ids in by_pair.items()}
        self.by_length: dict[int, list[str]] = {}
        for name in self.names:
            self.by_length.setdefault(len(name), []).append(name)

    def candidates(self, word: str, k: int = CANDIDATES) -> list[str]:
        """The ``k`` names sharing the most character pairs with ``word``, relative to both sizes."""
        pairs = _pairs(word)
        shared = Counter(chain.from_iterable(self.by_pair.get(p, ()) for p in pairs))  # counted in C
        n, sizes = len(pairs), self.sizes
        best = heapq.nlargest(k, shared.items(), key=lambda item: item[1] / (n + sizes[item[0]]))
        out = [self.names[i] for i, _ in best]
        if len(word) <= SHORT:
            out += [name for d in (-1, 0, 1) for name in self.by_length.get(len(word) + d, ()) if name not in out]
        return out


@cache(maxsize=8)
def _index(choices: frozenset[str]) -> NameIndex:
    return NameIndex(choices)


__all__ = ["CANDIDATES", "NameIndex", "close_match", "close_matches", "unknown"]
