"""Every memo of the package in one place: pure functions of frozen values, bounded, clearable.

Derived values (an episode's grounded DAG, its world, the rendered parts of a context, parsed prior
nodes) are pure functions of frozen inputs. They are memoized with ``cache``, which is
``functools.lru_cache`` plus a registry, or, on the codec's hot path, with a bounded ``Memo`` dict; either
way ``clear()`` empties all of them at once (tests, long runs that load new priors) and ``stats()`` shows
what each holds. Nothing else in the package keeps
state between calls: no caches keyed by ``id()``, no memo fields inside frozen values.

>>> from gencoord_env import caches
>>> caches.clear()
"""
from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_REGISTRY: list[Any] = []


def cache(maxsize: int | None = 4096) -> Callable[[F], F]:
    """``functools.lru_cache(maxsize)``, registered so that ``clear()`` reaches it."""

    def decorate(fn: F) -> F:
        wrapped = lru_cache(maxsize=maxsize)(fn)
        _REGISTRY.append(wrapped)
        return wrapped  # type: ignore[return-value]

    return decorate


class Memo(dict):  # type: ignore[type-arg]
    """A bounded dict for hot lookups (``memo.get(key)`` is a C call), registered like ``cache``.

    Once ``maxsize`` entries are held, ``put`` stops adding (the working set of a run is small and
    stable: item names, agent ids, argument-key tuples); ``clear()`` empties it.
    """

    def __init__(self, name: str, maxsize: int = 4096) -> None:
        super().__init__()
        self.name = name
        self.maxsize = maxsize
        self.__qualname__ = name
        _REGISTRY.append(self)

    def put(self, key: Any, value: Any) -> Any:
        if len(self) < self.maxsize:
            self[key] = value
        return value

    def cache_clear(self) -> None:
        self.clear()

    def cache_info(self) -> tuple[int, int, int, int]:
        return (-1, -1, self.maxsize, len(self))  # hits and misses are not counted on the hot path


def clear() -> None:
    """Empty every registered cache."""
    for c in _REGISTRY:
        c.cache_clear()


def stats() -> dict[str, Any]:
    """``{qualified name: (hits, misses, maxsize, currsize)}`` of every registered cache."""
    return {getattr(c, "name", None) or f"{c.__module__}.{c.__qualname__}": tuple(c.cache_info()) for c in _REGISTRY}


__all__ = ["Memo", "cache", "clear", "stats"]
