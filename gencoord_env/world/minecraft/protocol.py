"""The sidecar protocol: the only place plain dicts cross the ZeroMQ boundary.

Every message is one msgpack map (see ``docs/architecture.md``, "Sidecar protocol")::

    request  {v: 2, id: <int>, op: <str>, args: <map>}
    reply    {v: 2, id: <int>, ok: true,  result: <any>}
           | {v: 2, id: <int>, ok: false, error: {type: <str>, message: <str>}}

A sidecar serves several arenas (disjoint regions of one world, each with its own bots): a client holds
one with ``open_arena`` and names it in every op that touches a world (``reset``, ``execute``,
``observe``, ``barrier``, ``drop_bot``).

Encoding turns frozen world values into maps; decoding checks shape and version and turns maps back
into frozen values, raising ProtocolMismatch on anything else so a malformed reply never leaks inward.

Sizes: ``data/limits.json`` bounds a message (``limits.transport.message_bytes``) and a reset spec
(``limits.spec.*``); the sidecar reads the same file. A request beyond them is refused here, before it is
sent (RequestTooLarge), so the sidecar's own checks fire only on a bug.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgpack

from gencoord_env.errors import UsageError
from gencoord_env.limits import LIMITS, Limit, LimitsError

from ..types import EXECUTOR_ACTIONS, GroundTruth, SkillCall, WorldEvent, WorldSpec
from .errors import ProtocolMismatch, RequestRefused, RequestTooLarge


def wire_limit(section: str, name: str) -> Limit:
    """``limits.<section>.<name>`` of ``data/limits.json`` (sections ``transport``, ``spec`` and ``arena``).

    >>> wire_limit("transport", "message_bytes").max
    1048576
    """
    entry = LIMITS.sections.get(section, {}).get(name) if isinstance(LIMITS.sections.get(section), dict) else None
    low, high = (entry.get("min"), entry.get("max")) if isinstance(entry, dict) else (None, None)
    if type(low) is not int or type(high) is not int or not 0 <= low <= high:
        raise LimitsError(f"limits.{section}.{name}: expected {{min, max, about}} with integers 0 <= min <= max, "
                          f"got {entry!r}; the sidecar's socket and reset specs are bounded by it")
    about = entry.get("about", "") if isinstance(entry, dict) else ""
    return Limit(name, low, high, str(about))


PROTOCOL_VERSION = 2
MINECRAFT_VERSION = "1.21.4"
#: The protocol number of MINECRAFT_VERSION, as a server's status ping names it.
MINECRAFT_PROTOCOL = 769
#: The sidecar's socket drops a larger message before receiving it whole; refuse one here first.
MAX_MESSAGE_BYTES = wire_limit("transport", "message_bytes").max
#: What one reset spec may hold (the sidecar refuses more, before any work).
SPEC_LIMITS: Mapping[str, Limit] = {n: wire_limit("spec", n) for n in ("stations", "site_cells", "item_kinds")}
#: Where a reset spec may place anything: |x|, |z| up to ``reach.max`` from the arena's origin, y within ``height``.
ARENA_REACH, ARENA_HEIGHT = wire_limit("arena", "reach"), wire_limit("arena", "height")
OPS: frozenset[str] = frozenset({"hello", "ping", "open_arena", "close_arena", "reset", "execute", "observe",
                                 "barrier", "shutdown", "drop_bot"})
#: Ops that may be resent after a timeout: repeating them cannot change the world twice.
IDEMPOTENT_OPS: frozenset[str] = frozenset({"hello", "ping", "observe", "barrier"})

_MISMATCH_HINT = (
    "the Python package and mineflayer_server/ come from different versions; "
    "reinstall both from one checkout and run `gencoord setup`"
)


@dataclass(frozen=True)
class Reply:
    """A decoded reply. ``error_type``/``error_message`` are set when ``ok`` is false."""

    id: int
    ok: bool
    result: Any = None
    error_type: str = ""
    error_message: str = ""


def encode_request(request_id: int, op: str, args: Mapping[str, Any] | None = None) -> bytes:
    """One request as msgpack bytes.

    >>> decode_request(encode_request(7, "ping"))["op"]
    'ping'
    """
    if op not in OPS:
        raise UsageError(f"unknown sidecar op {op!r}; expected one of {sorted(OPS)}")
    try:
        payload: bytes = msgpack.packb({"v": PROTOCOL_VERSION, "id": request_id, "op": op, "args": dict(args or {})})
    except (TypeError, ValueError, OverflowError) as e:  # e.g. an int beyond 64 bits
        raise RequestRefused(f"{op} args cannot be sent ({type(e).__name__}: {e}); nothing was sent: the sidecar "
                             "takes maps, lists, strings, booleans and ints of at most 64 bits") from None
    if len(payload) > MAX_MESSAGE_BYTES:
        raise RequestTooLarge(f"{op} request is {len(payload)} bytes, over limits.transport.message_bytes "
                              f"({MAX_MESSAGE_BYTES}); it was not sent: send less per request")
    return payload


def decode_request(payload: bytes) -> dict[str, Any]:
    """The map of a request (used by tests and fake sidecars)."""
    msg = msgpack.unpackb(payload, raw=False)
    if not isinstance(msg, dict):
        raise ProtocolMismatch(f"a request must be a msgpack map, got {type(msg).__name__}")
    return msg


def encode_reply(request_id: int, *, result: Any = None, error: tuple[str, str] | None = None) -> bytes:
    """A reply as msgpack bytes (the sidecar's side; used by tests and fake sidecars)."""
    msg: dict[str, Any] = {"v": PROTOCOL_VERSION, "id": request_id, "ok": error is None}
    if error is None:
        msg["result"] = result
    else:
        msg["error"] = {"type": error[0], "message": error[1]}
    payload: bytes = msgpack.packb(msg)
    return payload


def decode_reply(payload: bytes) -> Reply:
    """Check one reply's envelope; ProtocolMismatch if it is not a version-1 reply map."""
    if len(payload) > MAX_MESSAGE_BYTES:
        raise ProtocolMismatch(f"reply of {len(payload)} bytes is over the cap of {MAX_MESSAGE_BYTES}; {_MISMATCH_HINT}")
    try:
        msg = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several unrelated types on garbage
        raise ProtocolMismatch(f"reply is not msgpack ({type(e).__name__}: {e}); {_MISMATCH_HINT}") from None
    if not isinstance(msg, dict):
        raise ProtocolMismatch(f"reply must be a map, got {type(msg).__name__}; {_MISMATCH_HINT}")
    if msg.get("v") != PROTOCOL_VERSION:
        raise ProtocolMismatch(f"reply speaks protocol v={msg.get('v')!r}, expected {PROTOCOL_VERSION}; {_MISMATCH_HINT}")
    rid, ok = msg.get("id"), msg.get("ok")
    if not isinstance(rid, int) or not isinstance(ok, bool):
        raise ProtocolMismatch(f"reply lacks an int 'id' or bool 'ok': {msg!r:.200}; {_MISMATCH_HINT}")
    if ok:
        return Reply(id=rid, ok=True, result=msg.get("result"))
    err = msg.get("error")
    if not isinstance(err, dict) or not isinstance(err.get("type"), str):
        raise ProtocolMismatch(f"error reply lacks error.type: {msg!r:.200}; {_MISMATCH_HINT}")
    return Reply(id=rid, ok=False, error_type=err["type"], error_message=str(err.get("message", "")))


def check_hello(result: Any) -> dict[str, Any]:
    """Validate the ``hello`` result: same protocol and Minecraft version as this package."""
    if not isinstance(result, dict):
        raise ProtocolMismatch(f"hello returned {result!r:.200}, not a map; {_MISMATCH_HINT}")
    if result.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolMismatch(
            f"sidecar speaks protocol {result.get('protocol')!r}, this package {PROTOCOL_VERSION}; {_MISMATCH_HINT}"
        )
    if result.get("minecraft") != MINECRAFT_VERSION:
        raise ProtocolMismatch(
            f"sidecar serves Minecraft {result.get('minecraft')!r}, this package needs {MINECRAFT_VERSION}; {_MISMATCH_HINT}"
        )
    return result


# ---- world values -> maps -------------------------------------------------------------------------

def spec_to_map(spec: WorldSpec) -> dict[str, Any]:
    """The ``reset`` args for a WorldSpec."""
    return {
        "agents": list(spec.agents),
        "stations": [
            {"name": s.name, "kind": s.kind, "pos": list(s.pos), "cells": [list(c) for c in s.cells]}
            for s in spec.stations
        ],
        "positions": {a: list(p) for a, p in spec.positions.items()},
        "inventories": {a: _counts_out(c) for a, c in spec.inventories.items()},
        "containers": {s: _counts_out(c) for s, c in spec.containers.items()},
        "cook_ticks": int(spec.cook_ticks),
    }


def call_to_map(call: SkillCall) -> dict[str, Any]:
    """The map of a SkillCall (``after`` is the Python scheduler's business, not sent)."""
    return {"id": call.id, "actor": call.actor, "op": call.op, "args": dict(call.args)}


def check_spec_size(spec: WorldSpec) -> None:
    """RequestTooLarge if ``spec`` holds more than ``limits.spec.*`` allows (the sidecar would refuse it)."""
    sizes = {
        "stations": len(spec.stations),
        "site_cells": sum(len(s.cells) for s in spec.stations),
        "item_kinds": max((len(c) for c in [*spec.inventories.values(), *spec.containers.values()]), default=0),
    }
    over = [f"{sizes[name]} {name.replace('_', ' ')} (limits.spec.{name}: at most {limit.max})"
            for name, limit in SPEC_LIMITS.items() if sizes[name] > limit.max]
    if over:
        raise RequestTooLarge(f"the reset spec holds {', '.join(over)}; it was not sent: build a smaller layout "
                              "(the limits are gencoord_env/data/limits.json, section spec, read by both sides)")


def check_spec_places(spec: WorldSpec) -> None:
    """ValueError naming every station, cell or position of ``spec`` outside the arena (``limits.arena``):
    the world could not build it, and the sidecar would refuse it.

    >>> from gencoord_env.world.types import Station
    >>> check_spec_places(WorldSpec(("a",), (Station("c", "chest", (0, 900, 0)),), {"a": (0, 0, 0)}, {}, {}))
    Traceback (most recent call last):
    gencoord_env.errors.UsageError: the reset spec places c at (0, 900, 0), outside the arena; every station, cell and position must keep |x| and |z| at most 24 (limits.arena.reach) and y from 0 to 16 (limits.arena.height)
    """
    places = [*((s.name, p) for s in spec.stations for p in (s.pos, *s.cells)), *spec.positions.items()]
    outside = [f"{name} at {tuple(p)}" for name, p in places
               if len(p) != 3 or abs(p[0]) > ARENA_REACH.max or abs(p[2]) > ARENA_REACH.max or p[1] not in ARENA_HEIGHT]
    if outside:
        shown = ", ".join(outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5 else "")
        raise UsageError(f"the reset spec places {shown}, outside the arena; every station, cell and position must keep "
                         f"|x| and |z| at most {ARENA_REACH.max} ({ARENA_REACH.cite('arena')}) and y from {ARENA_HEIGHT.min} "
                         f"to {ARENA_HEIGHT.max} ({ARENA_HEIGHT.cite('arena')})")


def reset_args(arena: str, spec: WorldSpec, rebuild: bool = False) -> dict[str, Any]:
    """The ``reset`` args: the arena, its episode spec, and whether to rebuild it first.

    RequestTooLarge, before anything is sent, for a spec over ``limits.spec.*``; ValueError for one that places
    anything outside the arena (``limits.arena``).
    """
    check_spec_size(spec)
    check_spec_places(spec)
    return {"arena": arena, "spec": spec_to_map(spec), "rebuild": bool(rebuild)}


def execute_args(arena: str, call: SkillCall) -> dict[str, Any]:
    """The ``execute`` args: the arena and one skill call."""
    return {"arena": arena, "call": call_to_map(call)}


def arena_from_map(result: Any) -> str:
    """The arena name of an ``open_arena`` result ``{arena, origin, agents}``."""
    name = _map(result, "open_arena result").get("arena")
    if not isinstance(name, str) or not name:
        raise ProtocolMismatch(f"open_arena returned no arena name: {result!r:.200}; {_MISMATCH_HINT}")
    return name


def _counts_out(counts: Mapping[str, int]) -> dict[str, int]:
    return {str(k): int(v) for k, v in counts.items() if int(v) != 0}


# ---- maps -> world values -------------------------------------------------------------------------

def _counts_in(value: Any, where: str) -> dict[str, int]:
    if value is None:
        return {}
    if isinstance(value, list):  # tolerate [{name, count}] lists, summing stacks
        out: dict[str, int] = {}
        for entry in value:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise ProtocolMismatch(f"{where}: bad item entry {entry!r:.100}; {_MISMATCH_HINT}")
            out[entry["name"]] = out.get(entry["name"], 0) + int(entry.get("count", 0))
        return {k: v for k, v in out.items() if v}
    if not isinstance(value, dict):
        raise ProtocolMismatch(f"{where}: expected a map item -> count, got {value!r:.100}; {_MISMATCH_HINT}")
    try:
        return {str(k): int(v) for k, v in value.items() if int(v) != 0}
    except (TypeError, ValueError):
        raise ProtocolMismatch(f"{where}: non-integer count in {value!r:.100}; {_MISMATCH_HINT}") from None


def _map(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProtocolMismatch(f"{where}: expected a map, got {value!r:.100}; {_MISMATCH_HINT}")
    return value


def _actions_in(value: Any) -> dict[str, int]:
    """An event's executor action counts: every category of EXECUTOR_ACTIONS (absent ones are 0), or ``{}``
    when the sidecar sent none."""
    if value is None:
        return {}
    actions = _map(value, "event.actions")
    unknown = sorted(set(actions) - set(EXECUTOR_ACTIONS))
    if unknown:
        raise ProtocolMismatch(f"event.actions has unknown categories {unknown}; expected {list(EXECUTOR_ACTIONS)}; "
                               f"{_MISMATCH_HINT}")
    out = {c: actions.get(c, 0) for c in EXECUTOR_ACTIONS}
    if not all(type(n) is int and n >= 0 for n in out.values()):
        raise ProtocolMismatch(f"event.actions: expected counts >= 0, got {actions!r:.200}; {_MISMATCH_HINT}")
    return out


def event_from_map(m: Any) -> WorldEvent:
    """One WorldEvent from its map."""
    if not isinstance(m, dict) or not isinstance(m.get("call_id"), str) or not isinstance(m.get("ok"), bool):
        raise ProtocolMismatch(f"event lacks call_id/ok: {m!r:.200}; {_MISMATCH_HINT}")
    return WorldEvent(
        call_id=m["call_id"],
        actor=str(m.get("actor", "")),
        op=str(m.get("op", "")),
        ok=m["ok"],
        kind=str(m.get("kind", "skill")),
        reason=str(m.get("reason", "") or ""),
        data=dict(_map(m.get("data"), "event.data")),
        actions=_actions_in(m.get("actions")),
    )


def events_from_result(result: Any) -> list[WorldEvent]:
    """The events of an ``execute`` result ``{events: [...]}``."""
    events = _map(result, "execute result").get("events")
    if not isinstance(events, list):
        raise ProtocolMismatch(f"execute result lacks an events list: {result!r:.200}; {_MISMATCH_HINT}")
    return [event_from_map(e) for e in events]


def _cell(value: Any) -> tuple[int, int, int, str]:
    if not isinstance(value, (list, tuple)) or len(value) != 4:
        raise ProtocolMismatch(f"site cell must be [x, y, z, block], got {value!r:.100}; {_MISMATCH_HINT}")
    x, y, z, block = value
    return int(x), int(y), int(z), str(block)


def ground_truth_from_map(m: Any) -> GroundTruth:
    """GroundTruth from the ``observe`` result; sites sorted so equal worlds compare equal."""
    m = _map(m, "observe result")
    return GroundTruth(
        inventories={a: _counts_in(c, f"inventories.{a}") for a, c in _map(m.get("inventories"), "inventories").items()},
        containers={s: _counts_in(c, f"containers.{s}") for s, c in _map(m.get("containers"), "containers").items()},
        sites={
            s: tuple(sorted(_cell(c) for c in (cells or [])))
            for s, cells in _map(m.get("sites"), "sites").items()
        },
        furnaces={
            s: {slot: _counts_in(c, f"furnaces.{s}.{slot}") for slot, c in _map(f, f"furnaces.{s}").items()}
            for s, f in _map(m.get("furnaces"), "furnaces").items()
        },
    )
