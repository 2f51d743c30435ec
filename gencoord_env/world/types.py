"""The world interface shared by the pure-Python world (``sim``) and the Minecraft backend.

Everything here is a plain frozen value so that both backends execute the same compiled skill calls and
report the same events and ground truth. Positions are integer block coordinates ``(x, y, z)`` relative
to the arena floor: ``y == 0`` is the first air layer above the ground. The Minecraft backend adds the
server's ground height; the sim uses them as they are.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from gencoord_env.data_files import data_path, read_json
from gencoord_env.errors import DataError, UnknownName
from gencoord_env.limits import LIMITS, Limits
from gencoord_env.suggest import close_matches

Pos = tuple[int, int, int]
Counts = Mapping[str, int]  # item name (minecraft-data) -> count, zero counts omitted

#: Station kinds a layout may declare; each maps to one Minecraft block.
STATION_BLOCKS: Mapping[str, str] = {
    "chest": "chest",
    "crafting_table": "crafting_table",
    "furnace": "furnace",
    "site": "",  # a build site is an area of air cells, not a block
}

#: The rule table of the skill-call ops, shared with the Node sidecar (``mineflayer_server/src/skills.js``).
SKILL_OPS_PATH = data_path("skill_ops.json")

#: Kinds of skill-call argument types: strings (``min`` / ``max`` bound the length), ints (they bound the
#: value) and minecraft-data item names.
ARG_KINDS: tuple[str, ...] = ("string", "int", "item")


class OpTableError(DataError):
    """``skill_ops.json`` is malformed; the message names the entry to fix."""


@dataclass(frozen=True)
class ArgType:
    """The type of a skill-call argument, as ``skill_ops.json`` declares it under ``types``.

    >>> OP_ARGS["wait"]["ticks"]
    ArgType(name='ticks', kind='int', min=0, max=1200)
    """

    name: str
    kind: str
    min: int
    max: int

    def accepts(self, value: object, items: frozenset[str]) -> bool:
        """Whether ``value`` has this type (``items``: the known item names, for kind ``item``)."""
        if self.kind == "int":
            return type(value) is int and self.min <= value <= self.max
        if type(value) is not str:
            return False
        if self.kind == "item":
            return value in items
        return self.min <= len(value) <= self.max

    def expected(self) -> str:
        """What a value of this type is, for failure messages: ``"an int in [1, 2304]"``."""
        if self.kind == "int":
            return f"an int in [{self.min}, {self.max}]"
        if self.kind == "item":
            return "a Minecraft item name"
        return f"a string of {self.min} to {self.max} characters"


def _int(raw: object, where: str) -> int:
    if type(raw) is not int:
        raise OpTableError(f"{where}: expected an int, got {raw!r}")
    return raw


def parse_skill_ops(raw: object, limits: Limits = LIMITS) -> Mapping[str, Mapping[str, ArgType]]:
    """Validate a decoded ``skill_ops.json`` and return op -> argument name -> type, arguments in call order.

    A type's ``limit`` names the entry of ``limits.args`` (``data/limits.json``) that bounds it; a ``min`` or
    ``max`` of its own overrides that bound (the crafting grid's station may be ``""``).
    """
    if not isinstance(raw, dict) or not isinstance(raw.get("types"), dict) or not isinstance(raw.get("ops"), dict):
        raise OpTableError("ops: expected an object with the objects 'types' and 'ops'")
    types: dict[str, ArgType] = {}
    for name, entry in raw["types"].items():
        where = f"ops.types.{name}"
        if not isinstance(entry, dict) or entry.get("kind") not in ARG_KINDS:
            raise OpTableError(f"{where}: expected an object whose kind is one of {list(ARG_KINDS)}")
        bounds: dict[str, object] = {}
        if "limit" in entry:
            limit = limits.args.get(entry["limit"]) if isinstance(entry["limit"], str) else None
            if limit is None:
                raise OpTableError(f"{where}.limit: {entry['limit']!r} is not a limit of limits.json's args; "
                                   f"expected one of {sorted(limits.args)}")
            bounds = {"min": limit.min, "max": limit.max}
        bounds.update({k: entry[k] for k in ("min", "max") if k in entry})
        low, high = _int(bounds.get("min"), f"{where}.min"), _int(bounds.get("max"), f"{where}.max")
        if not 0 <= low <= high:
            raise OpTableError(f"{where}: expected 0 <= min <= max, got min {low} and max {high}")
        types[name] = ArgType(name, entry["kind"], low, high)
    ops: dict[str, Mapping[str, ArgType]] = {}
    for op, entry in raw["ops"].items():
        where = f"ops.ops.{op}"
        if not isinstance(entry, dict) or not isinstance(entry.get("args"), dict):
            raise OpTableError(f"{where}: expected an object with an object 'args' (argument name -> type name)")
        args: dict[str, ArgType] = {}
        for arg, type_name in entry["args"].items():
            if type_name not in types:
                close = close_matches(str(type_name), list(types), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise OpTableError(f"{where}.args.{arg}: unknown type {type_name!r}; expected one of {sorted(types)}{hint}")
            args[arg] = types[type_name]
        ops[op] = MappingProxyType(args)
    return MappingProxyType(ops)


def load_skill_ops(path: Path = SKILL_OPS_PATH) -> Mapping[str, Mapping[str, ArgType]]:
    """Read and validate an op table (the packaged ``skill_ops.json`` by default)."""
    return parse_skill_ops(read_json(path, "op table", OpTableError))


#: The backend-neutral skill-call ops the compiler emits and every world executes (``data/skill_ops.json``):
#: op -> argument name -> type. Counts are positive ints, items minecraft-data names.
OP_ARGS: Mapping[str, Mapping[str, ArgType]] = load_skill_ops()
#: op -> its argument names, in call order.
SKILL_OPS: Mapping[str, tuple[str, ...]] = MappingProxyType({op: tuple(args) for op, args in OP_ARGS.items()})


@dataclass(frozen=True)
class Station:
    """A named place of the layout. ``cells`` lists the build cells of a ``site`` in fill order."""

    name: str
    kind: str
    pos: Pos
    cells: tuple[Pos, ...] = ()


@dataclass(frozen=True)
class WorldSpec:
    """Everything a backend needs to reset the arena for one episode."""

    agents: tuple[str, ...]
    stations: tuple[Station, ...]
    positions: Mapping[str, Pos]
    inventories: Mapping[str, Counts]
    containers: Mapping[str, Counts]  # chest station -> contents
    cook_ticks: int = 0  # furnace smelt time; 0 means "as fast as the backend can"

    def station(self, name: str) -> Station:
        for s in self.stations:
            if s.name == name:
                return s
        raise UnknownName("station", name, [s.name for s in self.stations])


@dataclass(frozen=True)
class SkillCall:
    """One compiled, backend-neutral action. ``after`` lists ids of calls that must finish first."""

    id: str
    actor: str
    op: str
    args: Mapping[str, Any]
    after: tuple[str, ...] = ()
    task_id: str = ""  # the dispatch-plan task this call realizes


#: Categories of low-level executor actions, the same on every backend (``WorldEvent.actions``):
#: pathfinder walks started, inventory-window clicks, tosses of a give's items, blocks placed.
EXECUTOR_ACTIONS: tuple[str, ...] = ("walks", "window_clicks", "tosses", "placements")


@dataclass(frozen=True)
class WorldEvent:
    """What executing one call did. ``kind`` is ``"skill"`` or ``"handoff"``.

    A failed call has ``ok=False`` and a human-readable ``reason``; it is never silently skipped.

    ``actions`` counts the low-level executor actions the call took, by category of
    :data:`EXECUTOR_ACTIONS` (every category present, zeros included; a failed call counts what it did
    before failing; a ``handoff`` event counts none, its call's skill event holds them). Each backend
    counts them where they happen (``sim`` module docstring, "Executor actions"). An empty mapping means
    the backend did not say. The counts are left out of equality: Minecraft needs more clicks and
    sometimes fewer walks than the sim for the same call, and two events that did the same thing to the
    world should compare equal whatever their executors needed.

    A successful ``handoff`` event's ``data`` also has ``inventories_before`` and ``inventories_after``:
    both agents' inventories (agent -> item counts) from world truth just before the giver tossed the
    items and just after the receiver had them.
    """

    call_id: str
    actor: str
    op: str
    ok: bool
    kind: str = "skill"
    reason: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)
    actions: Mapping[str, int] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class GroundTruth:
    """World truth read back after execution (after a barrier on Minecraft).

    ``sites`` maps a site station to the sorted cells that hold a block, as ``(x, y, z, block)``.
    ``furnaces`` maps a furnace station to ``{"input": Counts, "fuel": Counts, "output": Counts}``.
    """

    inventories: Mapping[str, Counts]
    containers: Mapping[str, Counts]
    sites: Mapping[str, tuple[tuple[int, int, int, str], ...]]
    furnaces: Mapping[str, Mapping[str, Counts]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "inventories": {a: dict(sorted(c.items())) for a, c in sorted(self.inventories.items())},
            "containers": {s: dict(sorted(c.items())) for s, c in sorted(self.containers.items())},
            "sites": {s: [list(cell) for cell in cells] for s, cells in sorted(self.sites.items())},
            "furnaces": {
                s: {slot: dict(sorted(c.items())) for slot, c in sorted(f.items())}
                for s, f in sorted(self.furnaces.items())
            },
        }


class World(Protocol):
    """A backend.

    ``run`` executes compiled calls honouring each call's ``after`` list (calls of different actors whose
    dependencies are met may run concurrently), stops starting new calls after the first failed one, and
    returns every event in completion order. The ``handoff`` event comes with the receiver's
    ``await_handoff``: when it succeeds, its call yields a second event ``kind="handoff"`` (actor = the
    receiver, ``data = {from, to, item, count, inventories_before, inventories_after}``). ``give`` yields only its own skill event; a failed ``give``
    makes the peer's pending ``await_handoff`` for that item fail too, with a reason naming the give.
    """

    def start(self) -> None:
        """Make the backend ready (Minecraft: start its sidecar, a few seconds), so that no episode's clock
        counts it; the env calls it before each reset's episode begins, and a ready backend returns at once.
        A world without it starts in its ``reset``."""
        ...

    def reset(self, spec: WorldSpec) -> None: ...

    def run(self, calls: list[SkillCall]) -> list[WorldEvent]: ...

    def observe(self) -> GroundTruth: ...

    def close(self) -> None: ...
