"""SimWorld: every op's success and failure reasons, handoffs, dependencies, batches, furnace, sites."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest

from gencoord_env.world.recipes import load_recipes
from gencoord_env.world.sim import SimWorld, WorldNotResetError, WorldSpecError, _event
from gencoord_env.world.types import SKILL_OPS, SkillCall, Station, WorldEvent, WorldSpec

A, B = "agent_a", "agent_b"
BOOK = load_recipes()
SITE_CELLS = ((5, 0, 5), (6, 0, 5), (5, 1, 5))
STATIONS = (
    Station("chest_a", "chest", (0, 0, 0)),
    Station("chest_b", "chest", (10, 0, 0)),
    Station("table", "crafting_table", (3, 0, 3)),
    Station("furnace", "furnace", (0, 0, 6)),
    Station("site_a", "site", (5, 0, 5), cells=SITE_CELLS),
)


def spec(inv_a: Mapping[str, int] | None = None, inv_b: Mapping[str, int] | None = None,
         chest_a: Mapping[str, int] | None = None) -> WorldSpec:
    return WorldSpec(
        agents=(A, B),
        stations=STATIONS,
        positions={A: (1, 0, 1), B: (9, 0, 1)},
        inventories={A: dict(inv_a or {}), B: dict(inv_b or {})},
        containers={"chest_a": dict(chest_a or {})},
    )


def call(cid: str, actor: str, op: str, after: tuple[str, ...] = (), **args: Any) -> SkillCall:
    if "from_" in args:
        args["from"] = args.pop("from_")
    return SkillCall(cid, actor, op, args, after)


def world(**kwargs: Any) -> SimWorld:
    w = SimWorld()
    w.reset(spec(**kwargs))
    return w


def run1(w: SimWorld, c: SkillCall) -> WorldEvent:
    events = w.run([c])
    assert len(events) == 1
    return events[0]


def failed(w: SimWorld, c: SkillCall, code: str, reason: str) -> None:
    """The call fails with ``code`` and a reason equal to ``reason``."""
    event = run1(w, c)
    assert not event.ok
    assert event.data == {"error": code}
    assert event.reason == reason


def inv(w: SimWorld, agent: str) -> dict[str, int]:
    return dict(w.observe().inventories[agent])


# ---------------------------------------------------------------- reset / observe


def test_reset_and_observe_ground_truth() -> None:
    w = world(inv_a={"oak_log": 2, "coal": 0}, chest_a={"cobblestone": 3})
    truth = w.observe()
    assert truth.inventories == {A: {"oak_log": 2}, B: {}}  # zero counts omitted
    assert truth.containers == {"chest_a": {"cobblestone": 3}, "chest_b": {}}
    assert truth.sites == {"site_a": ()}
    assert truth.furnaces == {"furnace": {"input": {}, "fuel": {}, "output": {}}}
    assert w.positions() == {A: (1, 0, 1), B: (9, 0, 1)}
    assert w.in_flight() == {}


def test_observe_is_a_snapshot() -> None:
    w = world(inv_a={"oak_log": 2})
    truth = w.observe()
    truth.inventories[A]["oak_log"] = 99  # type: ignore[index]
    assert inv(w, A) == {"oak_log": 2}


def test_reset_restores_the_spec_state() -> None:
    w = world(chest_a={"oak_log": 1})
    assert run1(w, call("c1", A, "withdraw", station="chest_a", item="oak_log", count=1)).ok
    w.reset(spec(chest_a={"oak_log": 1}))
    assert w.observe().containers["chest_a"] == {"oak_log": 1}
    assert inv(w, A) == {}
    # ids may be reused after a reset
    assert run1(w, call("c1", A, "withdraw", station="chest_a", item="oak_log", count=1)).ok


def test_reset_does_not_alias_spec_mappings() -> None:
    s = spec(inv_a={"oak_log": 1})
    w = SimWorld()
    w.reset(s)
    assert run1(w, call("c1", A, "deposit", station="chest_a", item="oak_log", count=1)).ok
    assert s.inventories[A] == {"oak_log": 1}
    assert s.containers["chest_a"] == {}


def test_reset_rejects_non_spec() -> None:
    with pytest.raises(TypeError, match=re.escape("Expected a gencoord_env.world.types.WorldSpec but got dict")):
        SimWorld().reset({"agents": [A]})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"stations": (Station("c", "chset", (0, 0, 0)),)},
         "station 'c' has unknown kind 'chset'; expected one of ['chest', 'crafting_table', 'furnace', 'site']; "
         "did you mean 'chest'?"),
        ({"stations": (Station("c", "chest", (0, 0, 0)), Station("c", "chest", (1, 0, 0)))},
         "station names must be distinct and non-empty, got 'c' twice or empty"),
        ({"stations": (Station("c", "chest", (0, 0, 0), cells=((0, 0, 0),)),)},
         "station 'c' of kind 'chest' has cells; only sites have cells"),
        ({"stations": (Station("s", "site", (0, 0, 0), cells=((0, 0, 0), (0, 0, 0))),)},
         "site 's' lists a cell twice"),
        ({"agents": (A, A)}, "agents must be distinct non-empty names"),
        ({"positions": {A: (0, 0, 0)}}, "no start position for agent 'agent_b'"),
        ({"inventories": {"agent_c": {}}}, "inventory for unknown agent 'agent_c'"),
        ({"inventories": {A: {"oak_log": -1}}}, "inventories['agent_a']: expected item name -> count >= 0"),
        ({"containers": {"table": {"oak_log": 1}}},
         "containers['table']: contents need a chest station, got 'crafting_table'"),
        ({"containers": {"nowhere": {"oak_log": 1}}},
         "containers['nowhere']: contents need a chest station, got 'no such station'"),
    ],
)
def test_reset_rejects_inconsistent_spec(changes: dict[str, Any], message: str) -> None:
    base = spec()
    s = WorldSpec(**{**{f: getattr(base, f) for f in ("agents", "stations", "positions", "inventories",
                                                      "containers")}, **changes})
    with pytest.raises(WorldSpecError, match=re.escape(message)):
        SimWorld().reset(s)


def test_run_and_observe_before_reset_raise() -> None:
    with pytest.raises(WorldNotResetError, match=re.escape("call reset(spec) before run(calls)")):
        SimWorld().run([])
    with pytest.raises(WorldNotResetError, match=re.escape("call reset(spec) before observe()")):
        SimWorld().observe()


def test_run_rejects_non_skillcall() -> None:
    w = world()
    with pytest.raises(TypeError, match=re.escape("Expected a gencoord_env.world.types.SkillCall but got dict")):
        w.run([{"id": "c1"}])  # type: ignore[list-item]


def test_fast_event_equals_dataclass_event() -> None:
    args = ("c1", A, "goto", True, "skill", "", {"station": "table"})
    fast, slow = _event(*args), WorldEvent(*args)
    assert fast == slow and repr(fast) == repr(slow)
    with pytest.raises(AttributeError):
        fast.ok = False  # type: ignore[misc]


# ---------------------------------------------------------------- generic call checks


def test_unknown_op_is_a_failed_event_with_suggestion() -> None:
    failed(world(), call("c1", A, "withdrw", station="chest_a", item="oak_log", count=1), "unknown_op",
           f"unknown op 'withdrw'; expected one of {sorted(SKILL_OPS)}; did you mean 'withdraw'?")


def test_non_string_op_is_unknown() -> None:
    failed(world(), SkillCall("c1", A, ["goto"], {"station": "table"}), "unknown_op",  # type: ignore[arg-type]
           f"unknown op ['goto']; expected one of {sorted(SKILL_OPS)}")


def test_unknown_actor() -> None:
    failed(world(), call("c1", "agent_c", "goto", station="table"), "unknown_actor",
           "actor 'agent_c' is not an agent; expected one of ['agent_a', 'agent_b']")


def test_duplicate_call_id() -> None:
    w = world()
    assert run1(w, call("c1", A, "goto", station="table")).ok
    failed(w, call("c1", A, "goto", station="table"), "duplicate_call",
           "call id 'c1' already ran in this episode; ids must be unique")


def test_non_string_call_id() -> None:
    failed(world(), SkillCall(7, A, "goto", {"station": "table"}), "bad_args",  # type: ignore[arg-type]
           "call id must be a string, got 7")


@pytest.mark.parametrize(
    ("op", "args", "reason"),
    [
        ("withdraw", {"station": "chest_a", "item": "oak_log"},
         "withdraw: missing ['count']; expected exactly ['station', 'item', 'count']"),
        ("goto", {"station": "table", "speed": 2},
         "goto: unexpected ['speed']; expected exactly ['station']"),
        ("give", {"item": "oak_log", "count": 1, "peer": B},
         "give: missing ['to'] and unexpected ['peer']; expected exactly ['to', 'item', 'count']"),
        ("withdraw", {"station": "chest_a", "item": "oak_log", "count": 0},
         "withdraw: count must be an int in [1, 2304], got 0"),
        ("withdraw", {"station": "chest_a", "item": "oak_log", "count": "2"},
         "withdraw: count must be an int in [1, 2304], got '2'"),
        ("withdraw", {"station": "chest_a", "item": "oak_log", "count": True},
         "withdraw: count must be an int in [1, 2304], got True"),
        ("withdraw", {"station": "chest_a", "item": "oak_log", "count": 2305},
         "withdraw: count must be an int in [1, 2304], got 2305"),
        ("withdraw", {"station": "chest_a", "item": 5, "count": 1}, "withdraw: item must be a string, got 5"),
        ("withdraw", {"station": "chest_a", "item": "oak_lg", "count": 1},
         "withdraw: item 'oak_lg' is not a Minecraft item name; did you mean 'oak_log'?"),
        ("withdraw", {"station": "", "item": "oak_log", "count": 1},
         "withdraw: station must be a string of 1 to 128 characters, got ''"),
        ("give", {"to": 7, "item": "oak_log", "count": 1}, "give: to must be a string, got 7"),
        ("wait", {"ticks": -1}, "wait: ticks must be an int in [0, 1200], got -1"),
        ("wait", {"ticks": 1.5}, "wait: ticks must be an int in [0, 1200], got 1.5"),
        ("wait", {"ticks": 1201}, "wait: ticks must be an int in [0, 1200], got 1201"),
    ],
)
def test_bad_args(op: str, args: dict[str, Any], reason: str) -> None:
    failed(world(), SkillCall("c1", A, op, args), "bad_args", reason)


def test_args_must_be_a_mapping() -> None:
    failed(world(), SkillCall("c1", A, "goto", ["table"]), "bad_args",  # type: ignore[arg-type]
           "goto: args must be a mapping, got list")


def test_missing_dependency_names_it() -> None:
    failed(world(), call("c2", A, "goto", after=("c1",), station="table"), "missing_dependency",
           "dependency 'c1' has not succeeded before call 'c2'")


def test_failed_call_is_not_a_satisfied_dependency() -> None:
    w = world()
    assert not run1(w, call("c1", A, "withdraw", station="chest_a", item="oak_log", count=1)).ok
    failed(w, call("c2", A, "goto", after=("c1",), station="table"), "missing_dependency",
           "dependency 'c1' has not succeeded before call 'c2'")


def test_dependencies_carry_across_runs_of_one_episode() -> None:
    w = world()
    assert run1(w, call("c1", A, "goto", station="table")).ok
    assert run1(w, call("c2", B, "goto", after=("c1",), station="table")).ok


def test_run_stops_at_first_failure() -> None:
    w = world(chest_a={"oak_log": 1})
    events = w.run([
        call("c1", A, "withdraw", station="chest_a", item="oak_log", count=1),
        call("c2", A, "withdraw", station="chest_a", item="oak_log", count=1, after=("c1",)),
        call("c3", A, "goto", station="table"),
    ])
    assert [(e.call_id, e.ok) for e in events] == [("c1", True), ("c2", False)]
    assert w.positions()[A] == (0, 0, 0)  # c3 never ran


# ---------------------------------------------------------------- goto / chests


def test_goto() -> None:
    w = world()
    event = run1(w, call("c1", A, "goto", station="furnace"))
    assert event == WorldEvent("c1", A, "goto", True, "skill", "", {"station": "furnace"})
    assert w.positions()[A] == (0, 0, 6)


def test_goto_unknown_station_suggests() -> None:
    failed(world(), call("c1", A, "goto", station="tabel"), "unknown_station",
           "goto: no station named 'tabel'; did you mean 'table'?")


def test_withdraw_and_deposit() -> None:
    w = world(chest_a={"oak_log": 3})
    e1 = run1(w, call("c1", A, "withdraw", station="chest_a", item="oak_log", count=2))
    assert e1.ok and e1.data == {"station": "chest_a", "item": "oak_log", "count": 2}
    assert w.positions()[A] == (0, 0, 0)  # walked to the chest
    e2 = run1(w, call("c2", A, "deposit", station="chest_b", item="oak_log", count=1))
    assert e2.ok and e2.data == {"station": "chest_b", "item": "oak_log", "count": 1}
    truth = w.observe()
    assert truth.containers == {"chest_a": {"oak_log": 1}, "chest_b": {"oak_log": 1}}
    assert truth.inventories[A] == {"oak_log": 1}
    assert run1(w, call("c3", A, "withdraw", station="chest_a", item="oak_log", count=1)).ok
    assert w.observe().containers["chest_a"] == {}  # emptied entries vanish


def test_withdraw_failures() -> None:
    w = world(chest_a={"oak_log": 1})
    failed(w, call("c1", A, "withdraw", station="chest_a", item="oak_log", count=2), "missing_items",
           "withdraw: chest 'chest_a' holds 1 oak_log, expected at least 2")
    failed(w, call("c2", A, "withdraw", station="table", item="oak_log", count=1), "wrong_station_kind",
           "withdraw: station 'table' is a crafting_table, expected a chest")
    failed(w, call("c3", A, "withdraw", station="chest_c", item="oak_log", count=1), "unknown_station",
           "withdraw: no station named 'chest_c'; did you mean 'chest_b'?")
    assert w.observe().containers["chest_a"] == {"oak_log": 1}


def test_deposit_failures() -> None:
    w = world(inv_a={"oak_log": 1})
    failed(w, call("c1", A, "deposit", station="chest_b", item="oak_log", count=2), "missing_items",
           "deposit: agent_a's inventory holds 1 oak_log, expected at least 2")
    failed(w, call("c2", A, "deposit", station="furnace", item="oak_log", count=1), "wrong_station_kind",
           "deposit: station 'furnace' is a furnace, expected a chest")
    assert inv(w, A) == {"oak_log": 1}


# ---------------------------------------------------------------- handoff


def test_give_and_await_handoff_events() -> None:
    w = world(inv_a={"oak_planks": 4})
    events = w.run([
        call("g", A, "give", to=B, item="oak_planks", count=4),
        call("h", B, "await_handoff", after=("g",), from_=A, item="oak_planks", count=4),
    ])
    assert events == [
        WorldEvent("g", A, "give", True, "skill", "", {"to": B, "item": "oak_planks", "count": 4, "in_flight": 4}),
        WorldEvent("h", B, "await_handoff", True, "skill", "", {"from": A, "item": "oak_planks", "count": 4}),
        WorldEvent("h", B, "await_handoff", True, "handoff", "", {
            "from": A, "to": B, "item": "oak_planks", "count": 4,
            "inventories_before": {A: {"oak_planks": 4}, B: {}}, "inventories_after": {A: {}, B: {"oak_planks": 4}}}),
    ]
    assert inv(w, A) == {} and inv(w, B) == {"oak_planks": 4}
    assert w.in_flight() == {}


def test_give_walks_to_the_peer() -> None:
    w = world(inv_a={"oak_planks": 1})
    assert run1(w, call("g", A, "give", to=B, item="oak_planks", count=1)).ok
    assert w.positions()[A] == w.positions()[B] == (9, 0, 1)


def test_unawaited_give_leaves_items_in_flight() -> None:
    w = world(inv_a={"oak_planks": 4})
    assert run1(w, call("g", A, "give", to=B, item="oak_planks", count=3)).ok
    assert w.in_flight() == {(A, B, "oak_planks"): 3}
    assert inv(w, A) == {"oak_planks": 1} and inv(w, B) == {}


def test_await_handoff_takes_exactly_count_from_flight() -> None:
    w = world(inv_a={"oak_planks": 4})
    events = w.run([
        call("g1", A, "give", to=B, item="oak_planks", count=1),
        call("g2", A, "give", to=B, item="oak_planks", count=3),
        call("h1", B, "await_handoff", from_=A, item="oak_planks", count=2),
    ])
    assert events[1].data["in_flight"] == 4
    assert events[2].data == {"from": A, "item": "oak_planks", "count": 2}
    assert events[3].kind == "handoff" and events[3].data == {
        "from": A, "to": B, "item": "oak_planks", "count": 2,
        # before: just before g1, the earliest give whose items arrive
        "inventories_before": {A: {"oak_planks": 4}, B: {}}, "inventories_after": {A: {}, B: {"oak_planks": 2}}}
    assert inv(w, B) == {"oak_planks": 2}
    assert w.in_flight() == {(A, B, "oak_planks"): 2}
    assert [e.kind for e in w.run([call("h2", B, "await_handoff", from_=A, item="oak_planks", count=2)])] == [
        "skill", "handoff"]
    assert inv(w, B) == {"oak_planks": 4} and w.in_flight() == {}


def test_handoff_failures() -> None:
    w = world(inv_a={"oak_planks": 2})
    failed(w, call("c1", A, "give", to=B, item="oak_planks", count=3), "missing_items",
           "give: agent_a's inventory holds 2 oak_planks, expected at least 3")
    failed(w, call("c2", A, "give", to=A, item="oak_planks", count=1), "self_handoff",
           "give: 'agent_a' names itself as the peer; a handoff needs the other agent")
    failed(w, call("c3", A, "give", to="agent_c", item="oak_planks", count=1), "unknown_agent",
           "give: 'agent_c' is not an agent; expected one of ['agent_a', 'agent_b']")
    failed(w, call("c4", B, "await_handoff", from_=A, item="oak_planks", count=1), "nothing_in_flight",
           "await_handoff: 0 oak_planks in flight from 'agent_a' to 'agent_b', expected at least 1")
    assert run1(w, call("c5", A, "give", to=B, item="oak_planks", count=1)).ok
    failed(w, call("c6", B, "await_handoff", from_=A, item="oak_planks", count=2), "nothing_in_flight",
           "await_handoff: 1 oak_planks in flight from 'agent_a' to 'agent_b', expected at least 2")
    failed(w, call("c7", B, "await_handoff", from_=A, item="stick", count=1), "nothing_in_flight",
           "await_handoff: 0 stick in flight from 'agent_a' to 'agent_b', expected at least 1")
    failed(w, call("c8", A, "await_handoff", from_=B, item="oak_planks", count=1), "nothing_in_flight",
           "await_handoff: 0 oak_planks in flight from 'agent_b' to 'agent_a', expected at least 1")
    failed(w, call("c9", B, "await_handoff", from_=B, item="oak_planks", count=1), "self_handoff",
           "await_handoff: 'agent_b' names itself as the peer; a handoff needs the other agent")
    assert w.in_flight() == {(A, B, "oak_planks"): 1}


# ---------------------------------------------------------------- crafting


def test_craft_in_inventory_grid() -> None:
    w = world(inv_a={"oak_log": 1})
    event = run1(w, call("c1", A, "craft", item="oak_planks", count=4, station=""))
    assert event.ok
    assert event.data == {"item": "oak_planks", "count": 4, "station": "", "batches": 1, "produced": 4,
                          "consumed": {"oak_log": 1}}
    assert inv(w, A) == {"oak_planks": 4}
    assert w.positions()[A] == (1, 0, 1)  # the 2x2 grid needs no walk


def test_craft_whole_batches() -> None:
    w = world(inv_a={"oak_planks": 5})
    event = run1(w, call("c1", A, "craft", item="stick", count=5, station=""))
    assert (event.data["batches"], event.data["produced"], event.data["consumed"]) == (2, 8, {"oak_planks": 4})
    assert inv(w, A) == {"oak_planks": 1, "stick": 8}


def test_craft_at_table_walks_there_and_allows_2x2_recipes() -> None:
    w = world(inv_a={"oak_planks": 12})
    assert run1(w, call("c1", A, "craft", item="chest", count=1, station="table")).ok
    assert w.positions()[A] == (3, 0, 3)
    assert run1(w, call("c2", A, "craft", item="crafting_table", count=1, station="table")).ok
    assert inv(w, A) == {"chest": 1, "crafting_table": 1}


def test_craft_multi_input_recipe() -> None:
    w = world(inv_a={"oak_planks": 6, "oak_slab": 3})
    event = run1(w, call("c1", A, "craft", item="barrel", count=1, station="table"))
    assert event.data["consumed"] == {"oak_planks": 6, "oak_slab": 2}
    assert inv(w, A) == {"barrel": 1, "oak_slab": 1}


def test_craft_failures() -> None:
    w = world(inv_a={"oak_planks": 9, "stick": 1})
    failed(w, call("c1", A, "craft", item="chest", count=1, station=""), "needs_crafting_table",
           'craft: chest needs a crafting table, got station ""; expected a crafting_table station')
    failed(w, call("c2", A, "craft", item="chest", count=2, station="table"), "missing_items",
           "craft 2 chest: agent_a's inventory holds 9 oak_planks, expected at least 16")
    failed(w, call("c3", A, "craft", item="chest", count=1, station="chest_a"), "wrong_station_kind",
           "craft: station 'chest_a' is a chest, expected a crafting_table")
    failed(w, call("c4", A, "craft", item="chest", count=1, station="tabel"), "unknown_station",
           "craft: no station named 'tabel'; did you mean 'table'?")
    failed(w, call("c5", A, "craft", item="chests", count=1, station="table"), "bad_args",
           "craft: item 'chests' is not a Minecraft item name; did you mean 'chest'?")
    failed(w, call("c6", A, "craft", item="oak_log", count=1, station=""), "unknown_recipe",
           "craft: no recipe makes 'oak_log'; did you mean 'oak_wood'?")
    failed(w, call("c7", A, "craft", item="oak_fence", count=1, station="table"), "missing_items",
           "craft 1 oak_fence: agent_a's inventory holds 1 stick, expected at least 2")
    assert inv(w, A) == {"oak_planks": 9, "stick": 1}  # a failed craft consumes nothing


# ---------------------------------------------------------------- place


def test_place_fills_cells_in_order() -> None:
    w = world(inv_a={"oak_planks": 2, "cobblestone": 1})
    e1 = run1(w, call("p1", A, "place", site="site_a", item="oak_planks", count=2))
    assert e1.ok and e1.data == {"site": "site_a", "item": "oak_planks", "count": 2,
                                 "cells": [(5, 0, 5), (6, 0, 5)]}
    assert w.positions()[A] == (5, 0, 5)
    e2 = run1(w, call("p2", A, "place", site="site_a", item="cobblestone", count=1))
    assert e2.data["cells"] == [(5, 1, 5)]
    assert w.observe().sites == {"site_a": ((5, 0, 5, "oak_planks"), (5, 1, 5, "cobblestone"),
                                            (6, 0, 5, "oak_planks"))}
    assert inv(w, A) == {}


def test_place_failures() -> None:
    w = world(inv_a={"oak_planks": 5, "stick": 1})
    failed(w, call("p1", A, "place", site="site_a", item="oak_planks", count=4), "site_full",
           "place: site 'site_a' has 3 free cells, expected at least 4")
    failed(w, call("p2", A, "place", site="site_a", item="stick", count=1), "not_a_block",
           f"place: 'stick' does not place as a block; expected one of {sorted(BOOK.blocks)}")
    failed(w, call("p3", A, "place", site="chest_a", item="oak_planks", count=1), "wrong_station_kind",
           "place: station 'chest_a' is a chest, expected a site")
    failed(w, call("p4", A, "place", site="site_a", item="cobblestone", count=1), "missing_items",
           "place: agent_a's inventory holds 0 cobblestone, expected at least 1")
    assert run1(w, call("p5", A, "place", site="site_a", item="oak_planks", count=3)).ok
    failed(w, call("p6", A, "place", site="site_a", item="oak_planks", count=1), "site_full",
           "place: site 'site_a' has 0 free cells, expected at least 1")
    assert inv(w, A) == {"oak_planks": 2, "stick": 1}


# ---------------------------------------------------------------- furnace


def test_furnace_smelts_once_input_and_fuel_are_in() -> None:
    w = world(inv_a={"cobblestone": 3, "coal": 1})
    e1 = run1(w, call("f1", A, "furnace_input", station="furnace", item="cobblestone", count=3))
    assert e1.data == {"station": "furnace", "item": "cobblestone", "count": 3, "smelted": 0, "burned": 0}
    assert w.positions()[A] == (0, 0, 6)
    e2 = run1(w, call("f2", A, "furnace_fuel", station="furnace", item="coal", count=1))
    assert e2.data == {"station": "furnace", "item": "coal", "count": 1, "smelted": 3, "burned": 1}
    assert w.observe().furnaces["furnace"] == {"input": {}, "fuel": {}, "output": {"stone": 3}}
    e3 = run1(w, call("f3", A, "furnace_output", station="furnace", item="stone", count=3))
    assert e3.data == {"station": "furnace", "item": "stone", "count": 3}
    assert inv(w, A) == {"stone": 3}
    assert w.observe().furnaces["furnace"] == {"input": {}, "fuel": {}, "output": {}}


def test_furnace_fuel_first_then_input() -> None:
    w = world(inv_a={"sand": 2, "oak_planks": 2})
    assert run1(w, call("f1", A, "furnace_fuel", station="furnace", item="oak_planks", count=2)).data["smelted"] == 0
    e2 = run1(w, call("f2", A, "furnace_input", station="furnace", item="sand", count=2))
    assert (e2.data["smelted"], e2.data["burned"]) == (2, 2)


def test_furnace_output_takes_exactly_count() -> None:
    w = world(inv_a={"sand": 3, "coal": 1})
    w.run([call("f1", A, "furnace_input", station="furnace", item="sand", count=3),
           call("f2", A, "furnace_fuel", station="furnace", item="coal", count=1)])
    event = run1(w, call("f3", A, "furnace_output", station="furnace", item="glass", count=2))
    assert event.data == {"station": "furnace", "item": "glass", "count": 2}
    assert inv(w, A) == {"glass": 2}
    assert w.observe().furnaces["furnace"]["output"] == {"glass": 1}


def test_furnace_output_fails_when_fuel_is_short() -> None:
    w = world(inv_a={"raw_iron": 2, "stick": 3})
    w.run([call("f1", A, "furnace_input", station="furnace", item="raw_iron", count=2),
           call("f2", A, "furnace_fuel", station="furnace", item="stick", count=3)])
    failed(w, call("f3", A, "furnace_output", station="furnace", item="iron_ingot", count=2), "output_missing",
           "furnace_output: furnace 'furnace' has input 1 raw_iron, fuel empty, output 1 iron_ingot; "
           "expected at least 2 iron_ingot in the output slot")
    failed(w, call("f4", A, "furnace_output", station="furnace", item="stone", count=1), "output_missing",
           "furnace_output: furnace 'furnace' has input 1 raw_iron, fuel empty, output 1 iron_ingot; "
           "expected at least 1 stone in the output slot")
    assert w.observe().furnaces["furnace"] == {"input": {"raw_iron": 1}, "fuel": {}, "output": {"iron_ingot": 1}}


def test_furnace_load_failures() -> None:
    w = world(inv_a={"cobblestone": 80, "sand": 1, "coal": 2, "oak_log": 1, "stick": 1})
    failed(w, call("f1", A, "furnace_input", station="furnace", item="stick", count=1), "not_smeltable",
           "furnace_input: 'stick' does not smelt; expected one of "
           f"{sorted(BOOK.smelting)}")
    failed(w, call("f2", A, "furnace_fuel", station="furnace", item="sand", count=1), "not_fuel",
           f"furnace_fuel: 'sand' is not a fuel; expected one of {sorted(BOOK.fuel_ticks)}")
    failed(w, call("f3", A, "furnace_input", station="furnace", item="raw_iron", count=1), "missing_items",
           "furnace_input: agent_a's inventory holds 0 raw_iron, expected at least 1")
    failed(w, call("f4", A, "furnace_input", station="chest_a", item="sand", count=1), "wrong_station_kind",
           "furnace_input: station 'chest_a' is a chest, expected a furnace")
    failed(w, call("f5", A, "furnace_input", station="furnace", item="cobblestone", count=65), "slot_full",
           "furnace_input: furnace 'furnace' input slot holds 0 cobblestone; adding 65 exceeds one stack of 64")
    assert run1(w, call("f6", A, "furnace_fuel", station="furnace", item="coal", count=1)).data["smelted"] == 0
    failed(w, call("f7", A, "furnace_fuel", station="furnace", item="oak_log", count=1), "slot_busy",
           "furnace_fuel: furnace 'furnace' fuel slot holds 1 coal, expected it empty or holding oak_log")
    failed(w, call("f8", A, "furnace_input", station="furnace", item="cobblestone", count=65), "slot_full",
           "furnace_input: furnace 'furnace' input slot holds 0 cobblestone; adding 65 exceeds one stack of 64")
    assert run1(w, call("f9", A, "furnace_input", station="furnace", item="cobblestone", count=60)).data == {
        "station": "furnace", "item": "cobblestone", "count": 60, "smelted": 8, "burned": 1}
    failed(w, call("f10", A, "furnace_input", station="furnace", item="cobblestone", count=13), "slot_full",
           "furnace_input: furnace 'furnace' input slot holds 52 cobblestone; adding 13 exceeds one stack of 64")
    failed(w, call("f12", A, "furnace_input", station="furnace", item="sand", count=1), "slot_busy",
           "furnace_input: furnace 'furnace' input slot holds 52 cobblestone, expected it empty or holding sand")
    failed(w, call("f11", A, "furnace_output", station="table", item="stone", count=1), "wrong_station_kind",
           "furnace_output: station 'table' is a crafting_table, expected a furnace")


# ---------------------------------------------------------------- wait, determinism


def test_wait() -> None:
    assert run1(world(), call("w", A, "wait", ticks=0)) == WorldEvent("w", A, "wait", True, "skill", "", {"ticks": 0})


def test_episode_is_deterministic() -> None:
    calls = [
        call("a1", A, "withdraw", station="chest_a", item="oak_log", count=2),
        call("a2", A, "craft", after=("a1",), item="oak_planks", count=8, station=""),
        call("a3", A, "give", after=("a2",), to=B, item="oak_planks", count=8),
        call("b1", B, "await_handoff", after=("a3",), from_=A, item="oak_planks", count=8),
        call("b2", B, "craft", after=("b1",), item="chest", count=1, station="table"),
        call("b3", B, "deposit", after=("b2",), station="chest_b", item="chest", count=1),
    ]
    runs = []
    for _ in range(2):
        w = world(chest_a={"oak_log": 2})
        runs.append((w.run(calls), w.observe().to_dict(), w.positions()))
    assert runs[0] == runs[1]
    events, truth, _ = runs[0]
    assert all(e.ok for e in events) and len(events) == 7
    assert truth["containers"] == {"chest_a": {}, "chest_b": {"chest": 1}}


def test_layout_is_validated_again_for_a_new_stations_tuple() -> None:
    w = SimWorld()
    w.reset(spec())
    bad = WorldSpec(agents=(A, B), stations=(Station("c", "oven", (0, 0, 0)),), positions=spec().positions,
                    inventories={}, containers={})
    for _ in range(2):  # a failed layout is never cached
        with pytest.raises(WorldSpecError, match="unknown kind 'oven'"):
            w.reset(bad)
    w.reset(spec(chest_a={"oak_log": 1}))
    assert w.observe().containers == {"chest_a": {"oak_log": 1}, "chest_b": {}}
