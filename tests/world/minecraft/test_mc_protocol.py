from __future__ import annotations

import re

import msgpack
import pytest

from gencoord_env.limits import LIMITS
from gencoord_env.world.minecraft.errors import ProtocolMismatch, RequestRefused, RequestTooLarge
from gencoord_env.world.minecraft.protocol import (
    MAX_MESSAGE_BYTES,
    SPEC_LIMITS,
    arena_from_map,
    check_hello,
    call_to_map,
    decode_reply,
    decode_request,
    encode_reply,
    encode_request,
    events_from_result,
    execute_args,
    ground_truth_from_map,
    reset_args,
    spec_to_map,
)
from gencoord_env.world.types import GroundTruth, SkillCall, Station, WorldEvent, WorldSpec

SPEC = WorldSpec(
    agents=("A", "B"),
    stations=(
        Station("chest1", "chest", (3, 0, 1)),
        Station("site", "site", (6, 0, 6), cells=((6, 0, 6), (7, 0, 6))),
    ),
    positions={"A": (0, 0, 0), "B": (2, 0, 0)},
    inventories={"A": {"oak_log": 2, "stick": 0}, "B": {}},
    containers={"chest1": {"cobblestone": 8}},
    cook_ticks=20,
)


def test_request_envelope_round_trip() -> None:
    msg = decode_request(encode_request(5, "execute", {"id": "c1"}))
    assert msg == {"v": 2, "id": 5, "op": "execute", "args": {"id": "c1"}}


def test_unknown_op_is_refused_before_sending() -> None:
    with pytest.raises(ValueError, match=re.escape("unknown sidecar op 'pong'")):
        encode_request(1, "pong")


def test_oversized_request_is_refused_before_sending() -> None:
    assert MAX_MESSAGE_BYTES == LIMITS.sections["transport"]["message_bytes"]["max"]
    with pytest.raises(RequestTooLarge, match=re.escape(f"over limits.transport.message_bytes ({MAX_MESSAGE_BYTES}); "
                                                        "it was not sent")):
        encode_request(1, "reset", {"blob": "x" * (MAX_MESSAGE_BYTES + 1)})


def test_unencodable_args_are_refused_not_leaked_as_msgpack_errors() -> None:
    with pytest.raises(RequestRefused, match="execute args cannot be sent .*ints of at most 64 bits"):
        encode_request(1, "execute", {"q": 2**64})
    with pytest.raises(RequestRefused):
        encode_request(1, "execute", {"q": object()})


def _spec(stations: tuple[Station, ...] = (), inventory: dict[str, int] | None = None) -> WorldSpec:
    return WorldSpec(agents=("a",), stations=stations, positions={"a": (0, 0, 0)}, inventories={"a": inventory or {}},
                     containers={})


def test_a_spec_over_the_spec_limits_is_refused_before_sending() -> None:
    cells = tuple((x % 20, 0, x // 20 % 20) for x in range(SPEC_LIMITS["site_cells"].max + 1))
    with pytest.raises(RequestTooLarge, match=re.escape(
            f"{len(cells)} site cells (limits.spec.site_cells: at most {SPEC_LIMITS['site_cells'].max})")):
        reset_args("a0", _spec((Station("s", "site", (0, 0, 0), cells=cells),)))
    stations = tuple(Station(f"c{i}", "chest", (i % 40 - 20, 0, i // 40)) for i in range(SPEC_LIMITS["stations"].max + 1))
    with pytest.raises(RequestTooLarge, match=re.escape("stations (limits.spec.stations")):
        reset_args("a0", _spec(stations))
    kinds = {f"item{i}": 1 for i in range(SPEC_LIMITS["item_kinds"].max + 1)}
    with pytest.raises(RequestTooLarge, match=re.escape("item kinds (limits.spec.item_kinds")):
        reset_args("a0", _spec(inventory=kinds))
    at_limit = _spec((Station("s", "site", (0, 0, 0), cells=cells[:-1]),))
    assert len(reset_args("a0", at_limit)["spec"]["stations"][0]["cells"]) == SPEC_LIMITS["site_cells"].max


def test_reply_ok_and_error_decode() -> None:
    ok = decode_reply(encode_reply(3, result="pong"))
    assert (ok.id, ok.ok, ok.result) == (3, True, "pong")
    err = decode_reply(encode_reply(4, error=("SkillFailed", "no path")))
    assert (err.ok, err.error_type, err.error_message) == (False, "SkillFailed", "no path")


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (b"\xc1\xc1", "not msgpack"),
        (msgpack.packb([1, 2]), "must be a map"),
        (msgpack.packb({"v": 1, "id": 1, "ok": True}), "protocol v=1"),
        (msgpack.packb({"v": 2, "id": "1", "ok": True}), "lacks an int 'id'"),
        (msgpack.packb({"v": 2, "id": 1, "ok": False, "error": "boom"}), "lacks error.type"),
    ],
)
def test_malformed_replies_raise_protocol_mismatch(payload: bytes, match: str) -> None:
    with pytest.raises(ProtocolMismatch, match=match):
        decode_reply(payload)


def test_hello_version_checks() -> None:
    good = {"protocol": 2, "minecraft": "1.21.4", "sidecar": "0.1.0", "arenas": []}
    assert check_hello(good) is good
    with pytest.raises(ProtocolMismatch, match="speaks protocol 1"):
        check_hello({**good, "protocol": 1})
    with pytest.raises(ProtocolMismatch, match="serves Minecraft '1.20.1'"):
        check_hello({**good, "minecraft": "1.20.1"})


def test_spec_to_map_is_plain_and_drops_zero_counts() -> None:
    m = spec_to_map(SPEC)
    assert m["stations"][1] == {"name": "site", "kind": "site", "pos": [6, 0, 6], "cells": [[6, 0, 6], [7, 0, 6]]}
    assert m["inventories"] == {"A": {"oak_log": 2}, "B": {}}
    assert m["positions"] == {"A": [0, 0, 0], "B": [2, 0, 0]}
    assert m["cook_ticks"] == 20
    assert msgpack.unpackb(msgpack.packb(m)) == m  # only msgpack-native values


def test_call_to_map_leaves_scheduling_out() -> None:
    call = SkillCall("c2", "B", "deposit", {"station": "chest1", "item": "stick", "count": 2}, after=("c1",))
    assert call_to_map(call) == {"id": "c2", "actor": "B", "op": "deposit",
                                 "args": {"station": "chest1", "item": "stick", "count": 2}}


def test_arena_ops_name_their_arena() -> None:
    call = SkillCall("c1", "A", "wait", {"ticks": 1})
    assert execute_args("a3", call) == {"arena": "a3", "call": call_to_map(call)}
    assert reset_args("a3", SPEC) == {"arena": "a3", "spec": spec_to_map(SPEC), "rebuild": False}
    assert reset_args("a3", SPEC, rebuild=True)["rebuild"] is True
    assert arena_from_map({"arena": "a1", "origin": [64, 0, 0], "agents": []}) == "a1"
    with pytest.raises(ProtocolMismatch, match="open_arena returned no arena name"):
        arena_from_map({"origin": [0, 0, 0]})


def test_events_decode() -> None:
    evs = events_from_result({"events": [
        {"call_id": "c1", "actor": "A", "op": "give", "ok": True},
        {"call_id": "c1", "actor": "A", "op": "give", "ok": True, "kind": "handoff", "data": {"to": "B"}},
    ]})
    assert evs == [WorldEvent("c1", "A", "give", True),
                   WorldEvent("c1", "A", "give", True, kind="handoff", data={"to": "B"})]
    with pytest.raises(ProtocolMismatch, match="lacks an events list"):
        events_from_result({"event": []})
    with pytest.raises(ProtocolMismatch, match="lacks call_id/ok"):
        events_from_result({"events": [{"ok": True}]})


def test_event_actions_decode() -> None:
    [ev] = events_from_result({"events": [
        {"call_id": "c1", "actor": "A", "op": "give", "ok": True, "actions": {"walks": 1, "tosses": 1}},
    ]})
    assert dict(ev.actions) == {"walks": 1, "window_clicks": 0, "tosses": 1, "placements": 0}
    [ev] = events_from_result({"events": [{"call_id": "c1", "actor": "A", "op": "give", "ok": True}]})
    assert dict(ev.actions) == {}  # a sidecar that does not count says nothing
    with pytest.raises(ProtocolMismatch, match=re.escape("event.actions has unknown categories ['jumps']")):
        events_from_result({"events": [{"call_id": "c1", "ok": True, "actions": {"jumps": 2}}]})
    with pytest.raises(ProtocolMismatch, match="expected counts >= 0"):
        events_from_result({"events": [{"call_id": "c1", "ok": True, "actions": {"walks": -1}}]})


def test_ground_truth_decode_sorts_sites_and_sums_stacks() -> None:
    truth = ground_truth_from_map({
        "inventories": {"A": {"stick": 4, "dirt": 0}, "B": [{"name": "stick", "count": 64}, {"name": "stick", "count": 1}]},
        "containers": {"chest1": {}},
        "sites": {"site": [[7, 0, 6, "cobblestone"], [6, 0, 6, "cobblestone"]]},
        "furnaces": {"furnace1": {"input": {}, "fuel": {"coal": 1}, "output": {"iron_ingot": 2}}},
    })
    assert truth == GroundTruth(
        inventories={"A": {"stick": 4}, "B": {"stick": 65}},
        containers={"chest1": {}},
        sites={"site": ((6, 0, 6, "cobblestone"), (7, 0, 6, "cobblestone"))},
        furnaces={"furnace1": {"input": {}, "fuel": {"coal": 1}, "output": {"iron_ingot": 2}}},
    )
    with pytest.raises(ProtocolMismatch, match=r"\[x, y, z, block\]"):
        ground_truth_from_map({"sites": {"s": [[1, 2, 3]]}})
    with pytest.raises(ProtocolMismatch, match="non-integer count"):
        ground_truth_from_map({"inventories": {"A": {"stick": "many"}}})
