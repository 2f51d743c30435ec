"""Value types of the commitment language: a proposal, its peer requests and tasks (frozen, value equality).

Argument values are compared together with their type, so ``q=1``, ``q=1.0`` and ``q=true`` are three
different tasks even though ``1 == 1.0 == True`` in Python.
"""
from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass, field
from typing import Any, Union

Value = Union[str, int, float, bool, None]


def _typed(value: Value) -> tuple[str, Value]:
    return (type(value).__name__, value)


class Args(Mapping[str, Value]):
    """Immutable, hashable argument mapping; equality ignores key order but not value types."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Value] | None = None) -> None:
        self._items: dict[str, Value] = dict(items or {})

    def _typed_items(self) -> frozenset[tuple[str, tuple[str, Value]]]:
        return frozenset((k, _typed(v)) for k, v in self._items.items())

    def as_dict(self) -> dict[str, Value]:
        """The underlying dict, without a copy (read-only by contract; the codec's hot path uses it)."""
        return self._items

    def __getitem__(self, key: str) -> Value:
        return self._items[key]

    # Mapping's mixins go through __getitem__ and exceptions; these read the dict directly (hot paths).
    def get(self, key: str, default: Any = None) -> Any:
        return self._items.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def keys(self) -> KeysView[str]:
        return self._items.keys()

    def items(self) -> ItemsView[str, Value]:
        return self._items.items()

    def values(self) -> ValuesView[Value]:
        return self._items.values()

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Args):
            a, b = self._items, other._items
            if len(a) != len(b):
                return False
            for k, v in a.items():
                if k not in b:
                    return False
                w = b[k]
                if type(v) is not type(w) or v != w:
                    return False
            return True
        if isinstance(other, Mapping):
            return self._typed_items() == Args(other)._typed_items()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._typed_items())

    def __repr__(self) -> str:
        return f"Args({self._items!r})"


@dataclass(frozen=True)
class Task:
    """One ``skill(key=value,...)`` step of a path. ``args`` uses the canonical compact keys."""

    skill: str
    args: Args = field(default_factory=Args)

    def __post_init__(self) -> None:
        if not isinstance(self.args, Args):
            object.__setattr__(self, "args", Args(self.args))

    def get(self, key: str, default: Any = None) -> Any:
        return self.args.get(key, default)


@dataclass(frozen=True)
class PeerRequest:
    """The ``REQ <target> <path>`` line: the path the sender asks ``target`` to run."""

    target: str
    requested_plan: tuple[Task, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "requested_plan", tuple(self.requested_plan))


@dataclass(frozen=True)
class Proposal:
    """A parsed Short DSL record: the ``SELF`` line and its ``REQ`` lines. ``REQ -`` gives ``peer_requests == ()``.

    Requests to distinct peers commute, so several are kept in one canonical order, by target: two records
    that ask the same peers for the same paths are equal whatever order their ``REQ`` lines came in.
    """

    self_plan: tuple[Task, ...] = ()
    peer_requests: tuple[PeerRequest, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "self_plan", tuple(self.self_plan))
        requests = tuple(self.peer_requests)
        if len(requests) > 1:  # stable: requests to one target keep their order (the checker names them)
            requests = tuple(sorted(requests, key=lambda r: str(getattr(r, "target", ""))))
        object.__setattr__(self, "peer_requests", requests)
