"""Every memo of the package in one place: pure functions of frozen values, bounded, clearable.

Derived values (an episode's grounded DAG, its world, the rendered parts of a context, parsed prior
nodes) are pure functions of frozen inputs. They are memoized with ``cache``, which is
``functools.lru_cache`` plus a registry, or, on the codec's hot path, with a bounded ``Memo`` dict; either
way ``clear()`` empties all of them at once (tests, long runs that load new priors) and ``stats()`` shows
what each holds. Nothing else in the package keeps
state between calls: no caches keyed by ``id()``, no memo fields inside frozen values.

A ``Memo`` is bounded in entries and in bytes, because its keys are often agent text: an entry larger than
``max_entry_bytes`` is not kept (it is computed again when asked for again), and the oldest entries make
room for new ones once ``maxsize`` entries or ``max_bytes`` bytes are held. Sizes are measured cheaply
(``entry_bytes``: ``sys.getsizeof`` of strings, tuples of them and arrays; shallow for other values).

>>> from gencoord_env import caches
>>> caches.clear()
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar


F = TypeVar("F", bound=Callable[..., Any])
V = TypeVar("V")

_REGISTRY: list[Any] = []

#: Default bounds of a ``Memo``: bytes it holds in all, and the largest entry it keeps.
MAX_BYTES = 32 << 20
MAX_ENTRY_BYTES = 64 << 10


class CacheStats(NamedTuple):
    """What one cache holds; ``bytes`` / ``max_bytes`` are ``None`` for an ``lru_cache`` (bounded in entries)."""

    hits: int
    misses: int
    maxsize: int | None
    currsize: int
    bytes: int | None = None
    max_bytes: int | None = None


def cache(maxsize: int | None = 4096) -> Callable[[F], F]:
    """``functools.lru_cache(maxsize)``, registered so that ``clear()`` reaches it."""

    def decorate(fn: F) -> F:
        wrapped = lru_cache(maxsize=maxsize)(fn)
        _REGISTRY.append(wrapped)
        return wrapped  # type: ignore[return-value]

    return decorate


def entry_bytes(obj: Any) -> int:
    """An object's size for a memo's accounting: strings, bytes and arrays whole, tuples with their items
    (keys are text or tuples of text), other objects shallow (``sys.getsizeof``)."""
    kind = type(obj)
    if kind is tuple:
        return sys.getsizeof(obj) + sum(entry_bytes(item) for item in obj)
    nbytes = getattr(obj, "nbytes", None)  # numpy arrays that view memory they do not own
    return sys.getsizeof(obj) if type(nbytes) is not int else max(nbytes, sys.getsizeof(obj))


class Memo(dict[Any, Any]):
    """A bounded dict for hot lookups (``memo.get(key)`` is a C call), registered like ``cache``.

    ``put`` keeps an entry of at most ``max_entry_bytes``; to hold it within ``maxsize`` entries and
    ``max_bytes`` bytes it first drops the oldest entries. ``bytes`` is what the entries held take, as
    ``entry_bytes`` measures them (or as ``put``'s ``size`` says); ``clear()`` empties the memo.
    """

    def __init__(self, name: str, maxsize: int = 4096, max_bytes: int = MAX_BYTES,
                 max_entry_bytes: int = MAX_ENTRY_BYTES) -> None:
        super().__init__()
        # a leaf module (errors -> suggest -> caches): only the package's own memos are built, so bad bounds are a bug
        if not 0 < max_entry_bytes <= max_bytes:
            raise AssertionError(f"Memo {name!r}: expected 0 < max_entry_bytes <= max_bytes, got {max_entry_bytes} and {max_bytes}")
        self.name = name
        self.maxsize = maxsize
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes
        self.bytes = 0
        self.costs: dict[Any, int] = {}  # beside the dict, not in it: get() stays the plain dict lookup
        self.__qualname__ = name
        _REGISTRY.append(self)

    def put(self, key: Any, value: V, size: int | None = None) -> V:
        """Keep ``value`` under ``key`` if it fits (``size``: its bytes, when the caller knows them better
        than ``entry_bytes``, e.g. a parsed record holds about its text again); returns ``value``."""
        if key in self:
            return value
        cost = entry_bytes(key) + entry_bytes(value) if size is None else size
        if cost > self.max_entry_bytes:
            return value
        while self and (len(self) >= self.maxsize or self.bytes + cost > self.max_bytes):
            oldest = next(iter(self))
            self.bytes -= self.costs.pop(oldest)
            del self[oldest]
        self[key] = value
        self.costs[key] = cost
        self.bytes += cost
        return value

    def clear(self) -> None:
        super().clear()
        self.costs.clear()
        self.bytes = 0

    def cache_clear(self) -> None:
        self.clear()

    def cache_info(self) -> CacheStats:
        # hits and misses are not counted on the hot path
        return CacheStats(-1, -1, self.maxsize, len(self), self.bytes, self.max_bytes)


def clear() -> None:
    """Empty every registered cache."""
    for c in _REGISTRY:
        c.cache_clear()


def stats() -> dict[str, CacheStats]:
    """``{qualified name: CacheStats(hits, misses, maxsize, currsize, bytes, max_bytes)}`` of every registered
    cache (``bytes`` and ``max_bytes``: a ``Memo``'s accounted bytes and budget; ``None`` for an ``lru_cache``)."""
    return {getattr(c, "name", None) or f"{c.__module__}.{c.__qualname__}": CacheStats(*c.cache_info())
            for c in _REGISTRY}


__all__ = ["CacheStats", "MAX_BYTES", "MAX_ENTRY_BYTES", "Memo", "cache", "clear", "entry_bytes", "stats"]
