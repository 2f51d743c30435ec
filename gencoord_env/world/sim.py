"""The pure-Python world (``backend="sim"``): the reference semantics of every skill call.

The Minecraft backend executes the same :class:`~gencoord_env.world.types.SkillCall` values with real
Mineflayer bots and must report the same events and the same :class:`GroundTruth`; a parity test
compares the two. This module is therefore written as the specification of each op.

State
    Inventories (agent -> item counts), chest contents, furnace slots (:mod:`.furnace`), site cells and
    items *in flight* (tossed by ``give`` and not yet picked up by ``await_handoff``). Stations do not
    move. Inventories and chests have no capacity limit here (tasks stay far below Minecraft's 36 and 27
    stacks); a furnace slot holds one item kind, one stack at most. Time does not pass: furnaces settle
    at once and ``wait`` does nothing, so ``WorldSpec.cook_ticks`` has no effect here.

Running calls
    :meth:`SimWorld.run` executes calls strictly in the given order (the compiler emits a topological
    order; the Minecraft backend may overlap calls of different actors, which the ``after`` lists make
    equivalent) and stops after the first failed call; the returned events include that failed call's
    event. Successful call ids are remembered until the next ``reset``, so ``after`` may name a call of an
    earlier ``run`` of the same episode.
    Each call is checked in this order, and the first problem fails it (within an op, the failure codes
    listed below are also checked in the order given):

    1. ``duplicate_call`` - the id already ran in this episode (ids are unique per episode), or
       ``bad_args`` if the id is not a string;
    2. ``unknown_actor`` - the actor is not an agent of the spec;
    3. ``unknown_op`` - the op is not in ``SKILL_OPS``;
    4. ``bad_args`` - an argument is missing, unexpected, or not of its type in the op table
       ``data/skill_ops.json``, which the Node sidecar checks calls against too (counts are ints in
       [1, 2304], ``ticks`` ints in [0, 1200], items minecraft-data item names, station and agent names
       non-empty strings, the station of ``craft`` may be ``""``);
    5. ``missing_dependency`` - an id in ``after`` has not succeeded earlier in this episode;
    6. the op's own checks below.

    Failures are values, never exceptions: a failed event has ``ok=False``, a ``reason`` saying what was
    wrong and what was expected, and ``data == {"error": <code>}``. Only programming errors raise
    (``TypeError`` for a spec that is not a ``WorldSpec`` or a call that is not a ``SkillCall``,
    :class:`WorldSpecError` for an inconsistent spec, :class:`WorldNotResetError` for ``run`` before
    ``reset``).

Ops (``data`` of the successful event; station ops walk to the station first, as the Node skills do,
so the actor's position becomes the station's even when the op then fails on items)

    ============== =========================================================================================
    goto           walk to any station. ``{station}``
    withdraw       chest -> inventory, exactly ``count``. ``{station, item, count}``.
                   Fails: ``unknown_station``, ``wrong_station_kind`` (not a chest), ``missing_items``.
    deposit        inventory -> chest, exactly ``count``. Same data and failures.
    give           items leave the giver and are in flight to the peer (``to``); the giver walks to the
                   peer. ``{to, item, count, in_flight}`` where ``in_flight`` is the total now in flight
                   from the giver to ``to`` of ``item``. A give nobody awaits leaves its items in flight:
                   in neither inventory, so not in ground truth. Fails: ``unknown_agent``,
                   ``self_handoff``, ``missing_items``.
    await_handoff  succeeds when at least ``count`` of ``item`` are in flight from ``from`` to the actor;
                   exactly ``count`` arrive (more in flight stay there for a later await, as the Minecraft
                   side claims ``count`` from its pickup ledger). ``{from, item, count}``, followed by a
                   second event ``kind="handoff"`` for the same call and actor (the receiver) with
                   ``data={from, to, item, count, inventories_before, inventories_after}``: both agents'
                   inventories just before the toss of the earliest give whose items arrive, and just
                   after they arrived. Fails: ``unknown_agent``, ``self_handoff``, ``nothing_in_flight``.
    craft          at least ``count`` outputs in whole recipe batches (:meth:`RecipeBook.craft_plan`).
                   ``station == ""`` uses the 2x2 inventory grid; otherwise the station must be a
                   crafting table, which also crafts 2x2 recipes. ``{item, count, station, batches,
                   produced, consumed}``. Fails: ``unknown_recipe``, ``needs_crafting_table``,
                   ``unknown_station``, ``wrong_station_kind``, ``missing_items``.
    place          fills the site's next ``count`` free cells in ``Station.cells`` order with blocks named
                   like the item; all or nothing (checked before any block is placed).
                   ``{site, item, count, cells}``. Fails: ``unknown_station``, ``wrong_station_kind``,
                   ``not_a_block``, ``site_full``, ``missing_items``.
    furnace_input  inventory -> input slot, then the furnace settles (:func:`.furnace.settle`).
                   ``{station, item, count, smelted, burned}`` (what settling did). Fails:
                   ``unknown_station``, ``wrong_station_kind``, ``not_smeltable``, ``missing_items``,
                   ``slot_busy`` (slot holds another item), ``slot_full`` (over one stack).
    furnace_fuel   inventory -> fuel slot, then settle. Same data; ``not_fuel`` instead of ``not_smeltable``.
    furnace_output succeeds when the output slot holds at least ``count`` of ``item``; takes exactly
                   ``count``. ``{station, item, count}``. Fails:
                   ``unknown_station``, ``wrong_station_kind``, ``output_missing``.
    wait           no-op. ``{ticks}``
    ============== =========================================================================================

Executor actions (``WorldEvent.actions``)
    The sim counts the logical actions it models, in the categories the Minecraft skills count real
    Mineflayer actions in (``mineflayer_server/src/actions.js``):

    ============== ===================================================== ====================================
    category       sim                                                   Minecraft
    ============== ===================================================== ====================================
    walks          one per call that moves the actor (to a station, or   each pathfinder walk started; none
                   to the peer for ``give``); none when it stands there  when the bot is already in reach
    window_clicks  one per container transfer (``withdraw``,             each window click packet sent,
                   ``deposit``, ``furnace_*``) and one per craft batch   except those of a toss
    tosses         one per ``give``                                      each toss of a give's items
    placements     one per block placed                                  each block placed
    ============== ===================================================== ====================================

    A failed call counts only its walk: the sim checks everything else before it acts. Tosses and
    placements match Minecraft's counts for the same successful calls. Window clicks do not: Minecraft
    picks a stack up and puts it down (two clicks or more per transfer) and moves every ingredient into
    the crafting grid, so its count is at least the sim's. Walks differ either way: a Minecraft bot in
    reach of a station does not walk, a build may need several walks, and a receiver walks onto a toss
    whose items landed out of its reach.

Item conservation is strict: only ``craft`` (``consumed`` -> ``produced``) and settling furnaces
(``smelted`` inputs -> outputs, ``burned`` fuel destroyed) change the total of any item over
inventories, chests, furnace slots, site blocks and items in flight.

Positions are not ground truth (bots stand *near* a station in Minecraft); :meth:`SimWorld.positions`
exposes the sim's for tests and traces.

Speed: state is plain dicts mutated in place; frozen values are built only in :meth:`observe`.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from gencoord_env.catalog import minecraft_items
from gencoord_env.errors import UsageError
from gencoord_env.suggest import close_matches
from gencoord_env.world.furnace import FurnaceSlots, settle
from gencoord_env.world.recipes import RecipeBook, load_recipes
from gencoord_env.caches import Memo
from gencoord_env.world.types import (
    OpTableError,
    EXECUTOR_ACTIONS,
    OP_ARGS,
    SKILL_OPS,
    STATION_BLOCKS,
    GroundTruth,
    Pos,
    SkillCall,
    Station,
    WorldEvent,
    WorldSpec,
)

_Result = tuple[bool, str, dict[str, Any]]  # (ok, reason or "", data); a failure's data is {"error": code}

#: Argument kinds of the op table as small ints, for the per-call argument check.
_STRING, _INT, _ITEM = 0, 1, 2
_KIND_CODES: Mapping[str, int] = {"string": _STRING, "int": _INT, "item": _ITEM}


class WorldSpecError(UsageError):
    """A ``WorldSpec`` is inconsistent (unknown station kind, contents for a non-chest, ...)."""


class WorldNotResetError(RuntimeError):
    """``run`` or ``observe`` was called before ``reset``."""


_new = object.__new__
_EVENT_FIELDS = tuple(f.name for f in dataclasses.fields(WorldEvent))
if _EVENT_FIELDS != ("call_id", "actor", "op", "ok", "kind", "reason", "data", "actions") or hasattr(WorldEvent, "__slots__"):
    raise ImportError(f"WorldEvent changed shape ({_EVENT_FIELDS}); update sim._event to match")
if EXECUTOR_ACTIONS != ("walks", "window_clicks", "tosses", "placements"):
    raise ImportError(f"EXECUTOR_ACTIONS changed ({EXECUTOR_ACTIONS}); update sim._actions to count them")


def _event(call_id: str, actor: str, op: str, ok: bool, kind: str, reason: str, data: dict[str, Any],
           actions: dict[str, int] | None = None) -> WorldEvent:
    """A ``WorldEvent`` equal to ``WorldEvent(call_id, actor, op, ok, kind, reason, data, actions)``, built in
    half the time: a frozen dataclass's ``__init__`` pays one ``object.__setattr__`` per field, and events
    are the largest per-call cost of an episode."""
    event = _new(WorldEvent)
    event.__dict__.update(call_id=call_id, actor=actor, op=op, ok=ok, kind=kind, reason=reason, data=data,
                          actions={} if actions is None else actions)
    return event


#: Ops whose success is one container transfer: one window click (see "Executor actions").
_ONE_CLICK: frozenset[str] = frozenset({"withdraw", "deposit", "furnace_input", "furnace_fuel", "furnace_output"})


def _actions(op: str, ok: bool, data: Mapping[str, Any], walked: bool) -> dict[str, int]:
    """The executor actions of one call, by the table of the module docstring."""
    clicks = tosses = placements = 0
    if ok:
        if op in _ONE_CLICK:
            clicks = 1
        elif op == "craft":
            clicks = data["batches"]
        elif op == "give":
            tosses = 1
        elif op == "place":
            placements = data["count"]
    return {"walks": int(walked), "window_clicks": clicks, "tosses": tosses, "placements": placements}


def _fail(code: str, reason: str) -> _Result:
    return False, reason, {"error": code}


def _counts(field: str, key: str, counts: object) -> dict[str, int]:
    """``counts`` without zeros, checked; ``field[key]`` names it in an error (built only then)."""
    if type(counts) is not dict and not isinstance(counts, Mapping):
        raise WorldSpecError(f"{field}[{key!r}]: expected a mapping item -> count, got {type(counts).__name__}")
    out: dict[str, int] = {}
    for item, n in counts.items():
        if type(item) is not str or type(n) is not int or n < 0:
            raise WorldSpecError(f"{field}[{key!r}]: expected item name -> count >= 0, got {item!r}: {n!r}")
        if n:
            out[item] = n
    return out


def _missing(where: str, have: int, item: str, need: int) -> _Result:
    return _fail("missing_items", f"{where} holds {have} {item}, expected at least {need}")


_Layout = tuple[dict[str, Station], tuple[str, ...], tuple[str, ...], tuple[str, ...]]
#: Validated layouts by their ``stations`` tuple: an episode builds its WorldSpec once and is reset many
#: times, and validating a layout costs more than the rest of ``reset``. A hit costs one tuple hash
#: (the dict then finds the same tuple object by identity before comparing values).
_LAYOUTS = Memo("world.sim.layouts")
#: how many layouts a world keeps at hand (a core pool has ten)
_RECENT_LAYOUTS = 16
#: agent tuples already checked, with their set
_AGENT_SETS = Memo("world.sim.agent_sets", maxsize=64)


def _build_layout(stations: tuple[Station, ...]) -> _Layout:
    """Station lookup plus the names of chests, furnaces and sites; raises for an inconsistent layout."""
    by_name: dict[str, Station] = {}
    for s in stations:
        if not isinstance(s, Station):
            raise TypeError(f"Expected WorldSpec.stations to hold Station values but got {type(s).__name__}")
        if s.kind not in STATION_BLOCKS:
            close = close_matches(s.kind, list(STATION_BLOCKS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise WorldSpecError(f"station {s.name!r} has unknown kind {s.kind!r}; expected one of "
                                 f"{sorted(STATION_BLOCKS)}{hint}")
        if s.name in by_name or not s.name:
            raise WorldSpecError(f"station names must be distinct and non-empty, got {s.name!r} twice or empty")
        if s.cells and s.kind != "site":
            raise WorldSpecError(f"station {s.name!r} of kind {s.kind!r} has cells; only sites have cells")
        if len(set(s.cells)) != len(s.cells):
            raise WorldSpecError(f"site {s.name!r} lists a cell twice: {s.cells!r}")
        by_name[s.name] = s
    return (by_name,
            tuple(n for n, s in by_name.items() if s.kind == "chest"),
            tuple(n for n, s in by_name.items() if s.kind == "furnace"),
            tuple(n for n, s in by_name.items() if s.kind == "site"))


class SimWorld:
    """In-process world implementing the ``World`` protocol; see the module docstring for semantics.

    >>> from gencoord_env.world.types import Station, WorldSpec, SkillCall
    >>> w = SimWorld()
    >>> w.reset(WorldSpec(agents=("agent_a", "agent_b"), stations=(Station("chest_a", "chest", (0, 0, 0)),),
    ...                   positions={"agent_a": (1, 0, 0), "agent_b": (2, 0, 0)},
    ...                   inventories={"agent_a": {"oak_log": 1}}, containers={}))
    >>> [e.ok for e in w.run([SkillCall("c1", "agent_a", "craft", {"item": "oak_planks", "count": 4,
    ...                                                             "station": ""})])]
    [True]
    >>> dict(w.observe().inventories["agent_a"])
    {'oak_planks': 4}
    """

    # the layout of the last reset (``_load_layout``)
    _stations: dict[str, Station]
    _chest_names: tuple[str, ...]
    _furnace_names: tuple[str, ...]
    _site_names: tuple[str, ...]

    def __init__(self, recipes: RecipeBook | None = None) -> None:
        self._book = recipes or load_recipes()
        self._handlers: dict[str, Callable[[str, Mapping[str, Any]], _Result]] = {
            "goto": self._goto, "withdraw": self._withdraw, "deposit": self._deposit, "give": self._give,
            "await_handoff": self._await_handoff, "craft": self._craft, "place": self._place,
            "furnace_input": self._furnace_input, "furnace_fuel": self._furnace_fuel,
            "furnace_output": self._furnace_output, "wait": self._wait,
        }
        missing = set(SKILL_OPS) ^ set(self._handlers)
        if missing:
            raise OpTableError(f"SimWorld handlers out of sync with SKILL_OPS (skill_ops.json): {sorted(missing)}")
        self._items = minecraft_items()
        self._arg_specs = {
            op: tuple((name, _KIND_CODES[t.kind], t.min, t.max) for name, t in args.items())
            for op, args in OP_ARGS.items()
        }
        self._layout_src: tuple[Station, ...] | None = None
        self._recent_layouts: list[tuple[tuple[Station, ...], _Layout]] = []
        self._stations: dict[str, Station] = {}
        self._agents: frozenset[str] = frozenset()
        self._reset = False

    # ------------------------------------------------------------------ World protocol

    def start(self) -> None:
        """Nothing to start: the sim world is ready when made."""

    def reset(self, spec: WorldSpec) -> None:
        """Start an episode: inventories and chests from ``spec``; empty furnaces, sites and flight."""
        if not isinstance(spec, WorldSpec):
            raise TypeError(f"Expected a gencoord_env.world.types.WorldSpec but got {type(spec).__name__}")
        if spec.stations is not self._layout_src:
            self._load_layout(spec.stations)
        agents = spec.agents
        names = _AGENT_SETS.get(agents) if type(agents) is tuple else None
        if names is None:
            if len(set(agents)) != len(agents) or not all(isinstance(a, str) and a for a in agents):
                raise WorldSpecError(f"agents must be distinct non-empty names, got {agents!r}")
            names = frozenset(agents)
            if type(agents) is tuple and all(type(a) is str for a in agents):
                _AGENT_SETS.put(agents, names)
        self._agents = names
        stations = self._stations
        pos: dict[str, Pos] = {}
        for agent in agents:
            if agent not in spec.positions:
                raise WorldSpecError(f"no start position for agent {agent!r}; positions has {sorted(spec.positions)}")
            pos[agent] = tuple(spec.positions[agent])  # type: ignore[assignment]
        self._pos = pos
        inv: dict[str, dict[str, int]] = {agent: {} for agent in agents}
        for agent, counts in spec.inventories.items():
            if agent not in inv:
                raise WorldSpecError(f"inventory for unknown agent {agent!r}; agents are {list(agents)}")
            if type(counts) is not dict or counts:
                inv[agent] = _counts("inventories", agent, counts)
        self._inv = inv
        chests: dict[str, dict[str, int]] = {name: {} for name in self._chest_names}
        for name, counts in spec.containers.items():
            if name not in chests:
                kind = stations[name].kind if name in stations else "no such station"
                raise WorldSpecError(f"containers[{name!r}]: contents need a chest station, got {kind!r}")
            if type(counts) is not dict or counts:  # an empty dict is the empty chest already there
                chests[name] = _counts("containers", name, counts)
        self._chests = chests
        self._furnaces = {name: FurnaceSlots() for name in self._furnace_names}
        self._sites: dict[str, list[tuple[int, int, int, str]]] = {name: [] for name in self._site_names}
        self._flight: dict[tuple[str, str, str], int] = {}
        # (from, to, item) -> gives in flight, oldest first, as [items not yet received, inventories before]
        self._tosses: dict[tuple[str, str, str], list[list[Any]]] = {}
        # the last successful await_handoff's (before, after) inventories, which run() puts on its handoff event
        self._handoff: tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]] | None = None
        self._done: set[str] = set()
        self._seen: set[str] = set()
        self._reset = True

    def run(self, calls: list[SkillCall]) -> list[WorldEvent]:
        """Execute ``calls`` in order; stop after the first failure. Returns every event, in order."""
        if not self._reset:
            raise WorldNotResetError("call reset(spec) before run(calls)")
        events: list[WorldEvent] = []
        append = events.append
        execute = self._execute
        pos = self._pos
        for call in calls:
            if type(call) is not SkillCall:
                raise TypeError(f"Expected a gencoord_env.world.types.SkillCall but got {type(call).__name__}")
            actor = call.actor
            at = pos.get(actor) if type(actor) is str else None
            ok, reason, data = execute(call)
            walked = at is not None and pos[actor] != at
            append(_event(call.id, actor, call.op, ok, "skill", reason, data, _actions(call.op, ok, data, walked)))
            if not ok:
                break
            if call.op == "await_handoff":
                assert self._handoff is not None
                before, after = self._handoff
                append(_event(call.id, actor, call.op, True, "handoff", "",
                              {"from": data["from"], "to": actor, "item": data["item"], "count": data["count"],
                               "inventories_before": before, "inventories_after": after},
                              {"walks": 0, "window_clicks": 0, "tosses": 0, "placements": 0}))
        return events

    def observe(self) -> GroundTruth:
        """Frozen world truth: zero counts omitted, site cells sorted as ``(x, y, z, block)``."""
        if not self._reset:
            raise WorldNotResetError("call reset(spec) before observe()")
        furnaces: dict[str, dict[str, dict[str, int]]] = {}
        for name, f in self._furnaces.items():
            furnaces[name] = {
                "input": {f.input_item: f.input_count} if f.input_count else {},
                "fuel": {f.fuel_item: f.fuel_count} if f.fuel_count else {},
                "output": {f.output_item: f.output_count} if f.output_count else {},
            }
        return GroundTruth(
            inventories={a: dict(c) for a, c in self._inv.items()},
            containers={s: dict(c) for s, c in self._chests.items()},
            sites={s: tuple(sorted(cells)) for s, cells in self._sites.items()},
            furnaces=furnaces,
        )

    def close(self) -> None:
        """Nothing to release; present for the ``World`` protocol."""
        self._reset = False

    # ------------------------------------------------------------------ introspection (tests, traces)

    def in_flight(self) -> dict[tuple[str, str, str], int]:
        """Items tossed and not yet picked up: ``(from, to, item) -> count``."""
        return dict(self._flight)

    def positions(self) -> dict[str, Pos]:
        """Where each agent stands: its start, or the last station / peer it walked to."""
        return dict(self._pos)

    # ------------------------------------------------------------------ internals

    def _load_layout(self, stations: tuple[Station, ...]) -> None:
        # Episodes share one stations tuple per distinct layout (``Episode.world``), so the few a pool has are
        # found among the recent ones by identity, without hashing every station; else by value.
        recent = self._recent_layouts
        layout: _Layout | None = next((entry[1] for entry in recent if entry[0] is stations), None)
        if layout is None:
            layout = _LAYOUTS.get(stations)
            if layout is None:
                layout = _LAYOUTS.put(stations, _build_layout(stations))
            recent.insert(0, (stations, layout))
            del recent[_RECENT_LAYOUTS:]
        self._stations, self._chest_names, self._furnace_names, self._site_names = layout
        self._layout_src = stations

    def _execute(self, call: SkillCall) -> _Result:
        """Run one call through the checks of the module docstring, in order, then its op."""
        call_id, actor, op = call.id, call.actor, call.op
        if type(call_id) is not str:
            return _fail("bad_args", f"call id must be a string, got {call_id!r}")
        seen = self._seen
        if call_id in seen:
            return _fail("duplicate_call", f"call id {call_id!r} already ran in this episode; ids must be unique")
        seen.add(call_id)
        if type(actor) is not str or actor not in self._agents:
            return _fail("unknown_actor", f"actor {actor!r} is not an agent; expected one of {sorted(self._agents)}")
        handler = self._handlers.get(op) if type(op) is str else None
        if handler is None:
            close = close_matches(op, list(SKILL_OPS), n=1) if type(op) is str else []
            hint = f"; did you mean {close[0]!r}?" if close else ""
            return _fail("unknown_op", f"unknown op {op!r}; expected one of {sorted(SKILL_OPS)}{hint}")
        args = call.args
        problem = self._check_args(op, args)
        if problem:
            return _fail("bad_args", problem)
        done = self._done
        for dep in call.after:
            if type(dep) is not str or dep not in done:
                return _fail("missing_dependency", f"dependency {dep!r} has not succeeded before call {call_id!r}")
        result = handler(actor, args)
        if result[0]:
            done.add(call_id)
        return result

    def _check_args(self, op: str, args: object) -> str:
        """``""`` when ``args`` has exactly the op's arguments with valid types, else what is wrong."""
        spec = self._arg_specs[op]
        if type(args) is not dict and not isinstance(args, Mapping):
            return f"{op}: args must be a mapping, got {type(args).__name__}"
        if len(args) == len(spec):
            get, items = args.get, self._items
            for name, kind, low, high in spec:
                value = get(name, None)
                if type(value) is str:
                    if kind == _STRING:
                        if len(value) < low or len(value) > high:
                            break
                    elif kind != _ITEM or value not in items:
                        break
                elif kind != _INT or type(value) is not int or value < low or value > high:
                    break
            else:
                return ""
        return self._describe_bad_args(op, args)

    def _describe_bad_args(self, op: str, args: Mapping[str, Any]) -> str:
        expected = set(SKILL_OPS[op])
        missing = sorted(expected - args.keys())
        extra = sorted(map(str, args.keys() - expected))
        if missing or extra:
            parts = ([f"missing {missing}"] if missing else []) + ([f"unexpected {extra}"] if extra else [])
            return f"{op}: {' and '.join(parts)}; expected exactly {list(SKILL_OPS[op])}"
        for name, arg_type in OP_ARGS[op].items():
            value = args[name]
            if arg_type.accepts(value, self._items):
                continue
            if arg_type.kind == "item" and type(value) is str:
                close = close_matches(value, sorted(self._items), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                return f"{op}: {name} {value!r} is not a Minecraft item name{hint}"
            if arg_type.kind != "int" and type(value) is not str:
                return f"{op}: {name} must be a string, got {value!r}"
            return f"{op}: {name} must be {arg_type.expected()}, got {value!r}"
        raise AssertionError(f"{op}: args {args!r} judged both valid and invalid")

    def _station(self, op: str, name: str, kind: str) -> Station | _Result:
        station = self._stations.get(name)
        if station is None:
            close = close_matches(name, list(self._stations), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            return _fail("unknown_station", f"{op}: no station named {name!r}{hint}")
        if station.kind != kind:
            return _fail("wrong_station_kind", f"{op}: station {name!r} is a {station.kind}, expected a {kind}")
        return station

    def _walk(self, actor: str, op: str, name: str, kind: str) -> Station | _Result:
        """Resolve a station of ``kind`` and walk the actor there (the Node skills path-find first)."""
        station = self._station(op, name, kind)
        if type(station) is Station:
            self._pos[actor] = station.pos
        return station

    def _agent(self, actor: str, op: str, peer: str) -> _Result | None:
        if type(peer) is not str or peer not in self._agents:
            return _fail("unknown_agent", f"{op}: {peer!r} is not an agent; expected one of {sorted(self._agents)}")
        if peer == actor:
            return _fail("self_handoff", f"{op}: {actor!r} names itself as the peer; a handoff needs the other agent")
        return None

    # ------------------------------------------------------------------ ops

    def _goto(self, actor: str, args: Mapping[str, Any]) -> _Result:
        name = args["station"]
        station = self._stations.get(name)
        if station is None:
            close = close_matches(name, list(self._stations), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            return _fail("unknown_station", f"goto: no station named {name!r}{hint}")
        self._pos[actor] = station.pos
        return True, "", {"station": name}

    def _withdraw(self, actor: str, args: Mapping[str, Any]) -> _Result:
        station = self._walk(actor, "withdraw", args["station"], "chest")
        if type(station) is not Station:
            return station  # type: ignore[return-value]
        item, count = args["item"], args["count"]
        chest = self._chests[station.name]
        have = chest.get(item, 0)
        if have < count:
            return _missing(f"withdraw: chest {station.name!r}", have, item, count)
        if have == count:
            del chest[item]
        else:
            chest[item] = have - count
        inv = self._inv[actor]
        inv[item] = inv.get(item, 0) + count
        return True, "", {"station": station.name, "item": item, "count": count}

    def _deposit(self, actor: str, args: Mapping[str, Any]) -> _Result:
        station = self._walk(actor, "deposit", args["station"], "chest")
        if type(station) is not Station:
            return station  # type: ignore[return-value]
        item, count = args["item"], args["count"]
        if not self._take(actor, item, count):
            return _missing(f"deposit: {actor}'s inventory", self._inv[actor].get(item, 0), item, count)
        chest = self._chests[station.name]
        chest[item] = chest.get(item, 0) + count
        return True, "", {"station": station.name, "item": item, "count": count}

    def _give(self, actor: str, args: Mapping[str, Any]) -> _Result:
        to, item, count = args["to"], args["item"], args["count"]
        bad = self._agent(actor, "give", to)
        if bad:
            return bad
        self._pos[actor] = self._pos[to]
        have = self._inv[actor].get(item, 0)
        if have < count:
            return _missing(f"give: {actor}'s inventory", have, item, count)
        before = self._inventories()
        self._take(actor, item, count)
        key = (actor, to, item)
        flying = self._flight.get(key, 0) + count
        self._flight[key] = flying
        self._tosses.setdefault(key, []).append([count, before])
        return True, "", {"to": to, "item": item, "count": count, "in_flight": flying}

    def _await_handoff(self, actor: str, args: Mapping[str, Any]) -> _Result:
        peer, item, count = args["from"], args["item"], args["count"]
        bad = self._agent(actor, "await_handoff", peer)
        if bad:
            return bad
        key = (peer, actor, item)
        flying = self._flight.get(key, 0)
        if flying < count:
            return _fail("nothing_in_flight", f"await_handoff: {flying} {item} in flight from {peer!r} to "
                                              f"{actor!r}, expected at least {count}")
        if flying == count:
            del self._flight[key]
        else:
            self._flight[key] = flying - count
        inv = self._inv[actor]
        inv[item] = inv.get(item, 0) + count
        self._handoff = (self._claim_tosses(key, count), self._inventories())
        return True, "", {"from": peer, "item": item, "count": count}

    def _craft(self, actor: str, args: Mapping[str, Any]) -> _Result:
        item, count, name = args["item"], args["count"], args["station"]
        recipe = self._book.crafting.get(item)
        if recipe is None:
            close = close_matches(item, list(self._book.crafting), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            return _fail("unknown_recipe", f"craft: no recipe makes {item!r}{hint}")
        if name:
            station = self._walk(actor, "craft", name, "crafting_table")
            if type(station) is not Station:
                return station  # type: ignore[return-value]
        elif recipe.table:
            return _fail("needs_crafting_table", f"craft: {item} needs a crafting table, got station \"\"; "
                                                 "expected a crafting_table station")
        batches = -(-count // recipe.count)
        inv = self._inv[actor]
        for need_item, per_batch in recipe.inputs.items():
            have = inv.get(need_item, 0)
            if have < per_batch * batches:
                return _missing(f"craft {count} {item}: {actor}'s inventory", have, need_item, per_batch * batches)
        consumed: dict[str, int] = {}
        for need_item, per_batch in recipe.inputs.items():
            need = per_batch * batches
            left = inv[need_item] - need
            if left:
                inv[need_item] = left
            else:
                del inv[need_item]
            consumed[need_item] = need
        produced = batches * recipe.count
        inv[item] = inv.get(item, 0) + produced
        return True, "", {"item": item, "count": count, "station": name, "batches": batches,
                          "produced": produced, "consumed": consumed}

    def _place(self, actor: str, args: Mapping[str, Any]) -> _Result:
        site = self._walk(actor, "place", args["site"], "site")
        if type(site) is not Station:
            return site  # type: ignore[return-value]
        item, count = args["item"], args["count"]
        if item not in self._book.blocks:
            return _fail("not_a_block", f"place: {item!r} does not place as a block; expected one of "
                                        f"{sorted(self._book.blocks)}")
        filled = self._sites[site.name]
        free = len(site.cells) - len(filled)
        if free < count:
            return _fail("site_full", f"place: site {site.name!r} has {free} free cells, expected at least {count}")
        if not self._take(actor, item, count):
            return _missing(f"place: {actor}'s inventory", self._inv[actor].get(item, 0), item, count)
        cells = site.cells[len(filled):len(filled) + count]
        filled.extend((x, y, z, item) for x, y, z in cells)
        return True, "", {"site": site.name, "item": item, "count": count, "cells": list(cells)}

    def _furnace_load(self, actor: str, args: Mapping[str, Any], op: str, fuel: bool) -> _Result:
        station = self._walk(actor, op, args["station"], "furnace")
        if type(station) is not Station:
            return station  # type: ignore[return-value]
        item, count = args["item"], args["count"]
        if fuel and item not in self._book.fuel_ticks:
            return _fail("not_fuel", f"{op}: {item!r} is not a fuel; expected one of {sorted(self._book.fuel_ticks)}")
        if not fuel and item not in self._book.smelting:
            return _fail("not_smeltable", f"{op}: {item!r} does not smelt; expected one of "
                                          f"{sorted(self._book.smelting)}")
        have = self._inv[actor].get(item, 0)
        if have < count:
            return _missing(f"{op}: {actor}'s inventory", have, item, count)
        slots = self._furnaces[station.name]
        slot_item, slot_count = (slots.fuel_item, slots.fuel_count) if fuel else (slots.input_item, slots.input_count)
        slot = "fuel" if fuel else "input"
        if slot_count and slot_item != item:
            return _fail("slot_busy", f"{op}: furnace {station.name!r} {slot} slot holds {slot_count} {slot_item}, "
                                      f"expected it empty or holding {item}")
        stack = self._book.stack_size(item)
        if slot_count + count > stack:
            return _fail("slot_full", f"{op}: furnace {station.name!r} {slot} slot holds {slot_count} {item}; "
                                      f"adding {count} exceeds one stack of {stack}")
        self._take(actor, item, count)
        if fuel:
            slots.fuel_item, slots.fuel_count = item, slot_count + count
        else:
            slots.input_item, slots.input_count = item, slot_count + count
        smelted, burned = settle(slots, self._book)
        return True, "", {"station": station.name, "item": item, "count": count, "smelted": smelted,
                          "burned": burned}

    def _furnace_input(self, actor: str, args: Mapping[str, Any]) -> _Result:
        return self._furnace_load(actor, args, "furnace_input", fuel=False)

    def _furnace_fuel(self, actor: str, args: Mapping[str, Any]) -> _Result:
        return self._furnace_load(actor, args, "furnace_fuel", fuel=True)

    def _furnace_output(self, actor: str, args: Mapping[str, Any]) -> _Result:
        station = self._walk(actor, "furnace_output", args["station"], "furnace")
        if type(station) is not Station:
            return station  # type: ignore[return-value]
        item, count = args["item"], args["count"]
        slots = self._furnaces[station.name]
        have = slots.output_count if slots.output_item == item else 0
        if have < count:
            return _fail("output_missing", f"furnace_output: furnace {station.name!r} has {slots.describe()}; "
                                           f"expected at least {count} {item} in the output slot")
        if have == count:
            slots.output_item, slots.output_count = "", 0
        else:
            slots.output_count = have - count
        inv = self._inv[actor]
        inv[item] = inv.get(item, 0) + count
        return True, "", {"station": station.name, "item": item, "count": count}

    def _wait(self, actor: str, args: Mapping[str, Any]) -> _Result:
        return True, "", {"ticks": args["ticks"]}

    def _inventories(self) -> dict[str, dict[str, int]]:
        """A copy of every agent's inventory (for the handoff's before / after snapshots)."""
        return {agent: dict(counts) for agent, counts in self._inv.items()}

    def _claim_tosses(self, key: tuple[str, str, str], count: int) -> dict[str, dict[str, int]]:
        """Mark ``count`` items of the gives in flight under ``key`` received, oldest give first; returns
        the inventories from just before the earliest of those gives tossed."""
        queue = self._tosses[key]
        before: dict[str, dict[str, int]] = queue[0][1]
        while count:
            entry = queue[0]
            n = min(count, entry[0])
            entry[0] -= n
            count -= n
            if not entry[0]:
                del queue[0]
        if not queue:
            del self._tosses[key]
        return before

    def _take(self, actor: str, item: str, count: int) -> bool:
        """Remove ``count`` of ``item`` from the actor's inventory; ``False`` (and no change) if short."""
        inv = self._inv[actor]
        have = inv.get(item, 0)
        if have < count:
            return False
        if have == count:
            del inv[item]
        else:
            inv[item] = have - count
        return True
