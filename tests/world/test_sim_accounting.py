"""SimWorld's runtime accounting: the executor actions each call counts (``sim`` docstring, "Executor
actions") and the handoff event's inventories before and after."""
from __future__ import annotations

from typing import Any

from gencoord_env.world.sim import SimWorld
from gencoord_env.world.types import EXECUTOR_ACTIONS, SkillCall, Station, WorldEvent, WorldSpec

A, B = "agent_a", "agent_b"
STATIONS = (
    Station("chest_a", "chest", (0, 0, 0)),
    Station("table", "crafting_table", (3, 0, 3)),
    Station("furnace", "furnace", (0, 0, 6)),
    Station("site_a", "site", (5, 0, 5), cells=((5, 0, 5), (6, 0, 5), (5, 1, 5))),
)


def world(inv_a: dict[str, int] | None = None, chest_a: dict[str, int] | None = None) -> SimWorld:
    w = SimWorld()
    w.reset(WorldSpec(agents=(A, B), stations=STATIONS, positions={A: (1, 0, 1), B: (9, 0, 1)},
                      inventories={A: inv_a or {}, B: {}}, containers={"chest_a": chest_a or {}}))
    return w


def call(cid: str, actor: str, op: str, **args: Any) -> SkillCall:
    if "from_" in args:
        args["from"] = args.pop("from_")
    return SkillCall(cid, actor, op, args)


def acts(walks: int = 0, window_clicks: int = 0, tosses: int = 0, placements: int = 0) -> dict[str, int]:
    return {"walks": walks, "window_clicks": window_clicks, "tosses": tosses, "placements": placements}


def test_each_op_counts_the_actions_it_models() -> None:
    w = world(inv_a={"oak_log": 2, "cobblestone": 3, "coal": 1, "raw_iron": 1}, chest_a={"oak_log": 1})
    events = w.run([
        call("g1", A, "goto", station="chest_a"),
        call("w1", A, "withdraw", station="chest_a", item="oak_log", count=1),   # already there: no walk
        call("c1", A, "craft", item="oak_planks", count=8, station=""),          # two batches in the grid
        call("c2", A, "craft", item="stick", count=4, station="table"),          # walks to the table
        call("p1", A, "place", site="site_a", item="cobblestone", count=3),
        call("f1", A, "furnace_input", station="furnace", item="raw_iron", count=1),
        call("f2", A, "furnace_fuel", station="furnace", item="coal", count=1),
        call("f3", A, "furnace_output", station="furnace", item="iron_ingot", count=1),
        call("d1", A, "give", to=B, item="oak_planks", count=6),
        call("h1", B, "await_handoff", from_=A, item="oak_planks", count=6),
        call("x1", B, "wait", ticks=3),
    ])
    assert all(e.ok for e in events), [e.reason for e in events if not e.ok]
    got = {(e.call_id, e.kind): dict(e.actions) for e in events}
    assert got == {
        ("g1", "skill"): acts(walks=1),
        ("w1", "skill"): acts(window_clicks=1),
        ("c1", "skill"): acts(window_clicks=2),
        ("c2", "skill"): acts(walks=1, window_clicks=1),
        ("p1", "skill"): acts(walks=1, placements=3),
        ("f1", "skill"): acts(walks=1, window_clicks=1),
        ("f2", "skill"): acts(window_clicks=1),
        ("f3", "skill"): acts(window_clicks=1),
        ("d1", "skill"): acts(walks=1, tosses=1),
        ("h1", "skill"): acts(),        # the receiver stands still and picks the items up
        ("h1", "handoff"): acts(),      # the handoff's actions are its call's skill event's
        ("x1", "skill"): acts(),
    }
    assert all(tuple(e.actions) == EXECUTOR_ACTIONS for e in events)


def test_a_failed_call_counts_only_the_walk_it_made() -> None:
    w = world()
    [event] = w.run([call("w1", A, "withdraw", station="chest_a", item="oak_log", count=1)])
    assert not event.ok and event.data == {"error": "missing_items"}
    assert event.actions == acts(walks=1)
    [event] = w.run([call("w2", A, "withdraw", station="nowhere", item="oak_log", count=1)])
    assert not event.ok and event.actions == acts()


def test_action_counts_are_left_out_of_equality() -> None:
    done = WorldEvent("c1", A, "goto", True, "skill", "", {"station": "table"}, actions=acts(walks=1))
    assert done == WorldEvent("c1", A, "goto", True, "skill", "", {"station": "table"}, actions=acts(walks=3))


def test_handoff_carries_both_inventories_before_the_toss_and_after_the_arrival() -> None:
    w = world(inv_a={"oak_planks": 8, "stick": 2})
    events = w.run([
        call("g", A, "give", to=B, item="oak_planks", count=8),
        call("h", B, "await_handoff", from_=A, item="oak_planks", count=8),
    ])
    handoff = events[-1]
    assert handoff.kind == "handoff"
    assert handoff.data["inventories_before"] == {A: {"oak_planks": 8, "stick": 2}, B: {}}
    assert handoff.data["inventories_after"] == {A: {"stick": 2}, B: {"oak_planks": 8}}
    assert "inventories_before" not in events[1].data  # the snapshots belong to the handoff event


def test_a_later_await_is_before_the_toss_of_the_earliest_give_it_receives_from() -> None:
    w = world(inv_a={"oak_planks": 4})
    w.run([
        call("g1", A, "give", to=B, item="oak_planks", count=1),
        call("g2", A, "give", to=B, item="oak_planks", count=3),
        call("h1", B, "await_handoff", from_=A, item="oak_planks", count=2),  # all of g1, one of g2
    ])
    second = w.run([call("h2", B, "await_handoff", from_=A, item="oak_planks", count=2)])[-1]
    assert second.data["inventories_before"] == {A: {"oak_planks": 3}, B: {}}  # just before g2's toss
    assert second.data["inventories_after"] == {A: {}, B: {"oak_planks": 4}}


def test_a_snapshot_is_a_copy_that_later_calls_do_not_change() -> None:
    w = world(inv_a={"oak_planks": 8})
    events = w.run([
        call("g", A, "give", to=B, item="oak_planks", count=8),
        call("h", B, "await_handoff", from_=A, item="oak_planks", count=8),
        call("c", B, "craft", item="crafting_table", count=1, station=""),
    ])
    assert events[2].data["inventories_after"] == {A: {}, B: {"oak_planks": 8}}
