"""Arenas of one real sidecar: concurrent episodes, per-arena truth, local faults, other processes.

Skipped only when the sidecar's Node packages are not installed (``gencoord setup`` installs them).
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from gencoord_env.world.minecraft import ArenaBusy, ArenaFault, MinecraftWorld, SidecarPool
from gencoord_env.world.sim import SimWorld
from gencoord_env.world.types import SkillCall, Station, WorldSpec
from sidecar_installed import needs_sidecar

pytestmark = needs_sidecar

# Two different episodes with the same station names: were any item, block or ledger entry to cross
# arenas, one of the two read-backs would show it.
SPEC_A = WorldSpec(
    agents=("agent_a", "agent_b"),
    stations=(Station("chest1", "chest", (4, 0, 2)), Station("site", "site", (0, 0, 6), cells=((0, 0, 6), (1, 0, 6)))),
    positions={"agent_a": (0, 0, 0), "agent_b": (3, 0, 0)},
    inventories={"agent_a": {"oak_log": 1}, "agent_b": {"cobblestone": 2}},
    containers={"chest1": {"stick": 3}},
)
CALLS_A = [
    SkillCall("a1", "agent_a", "craft", {"item": "oak_planks", "count": 4, "station": ""}),
    SkillCall("a2", "agent_a", "give", {"to": "agent_b", "item": "oak_planks", "count": 4}, after=("a1",)),
    SkillCall("b1", "agent_b", "await_handoff", {"from": "agent_a", "item": "oak_planks", "count": 4}),
    SkillCall("b2", "agent_b", "place", {"site": "site", "item": "cobblestone", "count": 2}),
    SkillCall("b3", "agent_b", "deposit", {"station": "chest1", "item": "oak_planks", "count": 4}, after=("a2",)),
]
SPEC_B = WorldSpec(
    agents=("agent_a", "agent_b"),
    stations=(Station("chest1", "chest", (-3, 0, 1)), Station("site", "site", (2, 0, -4), cells=((2, 0, -4),))),
    positions={"agent_a": (1, 0, 1), "agent_b": (-1, 0, -1)},
    inventories={"agent_a": {"oak_planks": 4}, "agent_b": {"glass": 1}},
    containers={"chest1": {"coal": 2}},
)
CALLS_B = [
    SkillCall("c1", "agent_a", "craft", {"item": "crafting_table", "count": 1, "station": ""}),
    SkillCall("c2", "agent_a", "deposit", {"station": "chest1", "item": "crafting_table", "count": 1}, after=("c1",)),
    SkillCall("d1", "agent_b", "withdraw", {"station": "chest1", "item": "coal", "count": 2}),
    SkillCall("d2", "agent_b", "place", {"site": "site", "item": "glass", "count": 1}),
]


def sim_truth(spec: WorldSpec, calls: list[SkillCall]):  # type: ignore[no-untyped-def]
    sim = SimWorld()
    sim.reset(spec)
    assert all(e.ok for e in sim.run(calls))
    return sim.observe()


@pytest.fixture(scope="module")
def pool() -> Iterator[SidecarPool]:
    with SidecarPool(arenas=2, sidecar_args=("--test-ops",)) as p:
        yield p


def _run(world: MinecraftWorld, spec: WorldSpec, calls: list[SkillCall], out: dict, key: str) -> None:
    try:
        world.reset(spec)
        out[key] = (world.run(calls), world.observe())
    except BaseException as e:  # noqa: BLE001 - handed to the test thread
        out[key] = e


def test_two_arenas_run_different_episodes_at_once_each_verifying_its_own_world(pool: SidecarPool) -> None:
    a, b = MinecraftWorld(pool=pool), MinecraftWorld(pool=pool)
    try:
        out: dict = {}
        threads = [threading.Thread(target=_run, args=(a, SPEC_A, CALLS_A, out, "a")),
                   threading.Thread(target=_run, args=(b, SPEC_B, CALLS_B, out, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for key in ("a", "b"):
            assert not isinstance(out[key], BaseException), out[key]
        assert a.arena != b.arena and {a.arena, b.arena} == {"a0", "a1"}
        events_a, truth_a = out["a"]
        events_b, truth_b = out["b"]
        assert all(e.ok for e in events_a) and all(e.ok for e in events_b)
        assert [e.data["to"] for e in events_a if e.kind == "handoff"] == ["agent_b"]
        # each arena's truth is its own episode's and equals the item-conserving sim's
        assert truth_a == sim_truth(SPEC_A, CALLS_A)
        assert truth_b == sim_truth(SPEC_B, CALLS_B)
        assert truth_a.containers == {"chest1": {"stick": 3, "oak_planks": 4}}
        assert truth_b.containers == {"chest1": {"crafting_table": 1}}
        origins = {x["name"]: x["origin"] for x in pool.hello()["arenas"]}
        assert abs(origins[a.arena][0] - origins[b.arena][0]) >= 64  # disjoint regions along x
    finally:
        a.close()
        b.close()


def test_an_arena_fault_does_not_touch_its_neighbour(pool: SidecarPool) -> None:
    a, b = MinecraftWorld(pool=pool), MinecraftWorld(pool=pool)
    try:
        a.reset(SPEC_A)
        out: dict = {}
        neighbour = threading.Thread(target=_run, args=(b, SPEC_B, CALLS_B, out, "b"))
        neighbour.start()
        assert pool.sidecar is not None and pool.sidecar.client is not None
        assert pool.sidecar.client.call("drop_bot", {"arena": a.arena, "agent": "agent_b"}) == {"dropped": True}
        with pytest.raises(ArenaFault, match=f"arena {a.arena}: agent_b's bot is disconnected"):
            a.run(CALLS_A)
        neighbour.join(120)
        assert not isinstance(out["b"], BaseException), out["b"]
        events_b, truth_b = out["b"]
        assert all(e.ok for e in events_b) and truth_b == sim_truth(SPEC_B, CALLS_B)
        # the faulted arena is rebuilt at its next reset and plays a whole episode again
        a.reset(SPEC_A)
        assert a.rebuilt and sorted(a.rejoined) == ["agent_a", "agent_b"] and a.restarts == 0
        assert all(e.ok for e in a.run(CALLS_A))
        assert a.observe() == sim_truth(SPEC_A, CALLS_A)
        b.reset(SPEC_B)
        assert not b.rebuilt and b.rejoined == ()
    finally:
        a.close()
        b.close()


def test_an_arena_belongs_to_the_connection_that_opened_it(pool: SidecarPool) -> None:
    a = MinecraftWorld(pool=pool)
    stranger = pool.client()  # another connection to the same socket, with the same rights on it
    try:
        a.reset(SPEC_B)
        assert a.arena is not None
        for op, args in [("observe", {"arena": a.arena}), ("close_arena", {"arena": a.arena}),
                         ("reset", {"arena": a.arena, "spec": {"agents": ["agent_a"], "positions": {"agent_a": [0, 0, 0]}}}),
                         ("execute", {"arena": a.arena, "call": {"id": "x", "actor": "agent_a", "op": "wait", "args": {"ticks": 1}}})]:
            with pytest.raises(ArenaBusy, match=f"arena {a.arena} is held by another connection"):
                stranger.call(op, args)
        with pytest.raises(ArenaBusy, match=f"arena {a.arena} is held by another client"):
            stranger.call("open_arena", {"arena": a.arena})
        # the owner's resend on a fresh socket (Lazy Pirate) and its next client keep the arena
        assert a._client_ is not None
        a._client_._reconnect_keeping_pending()
        assert all(e.ok for e in a.run(CALLS_B))
        assert a.observe() == sim_truth(SPEC_B, CALLS_B)
        a._drop_client()
        a.reset(SPEC_B)
        assert a.observe().containers == {"chest1": {"coal": 2}}
    finally:
        stranger.close()
        a.close()


def test_a_held_arena_is_refused_and_a_closed_one_reused(pool: SidecarPool) -> None:
    a = MinecraftWorld(pool=pool, arena="a1")
    a.reset(SPEC_B)
    other = MinecraftWorld(pool=pool, arena="a1")
    with pytest.raises(ArenaBusy, match="arena a1 is held by another client"):
        other.reset(SPEC_B)
    a.close()
    other.reset(SPEC_B)
    assert other.arena == "a1"
    other.close()


_OTHER_PROCESS = """
import json, os, sys
from gencoord_env.world.minecraft import MinecraftWorld
from gencoord_env.world.types import SkillCall
sys.path[:0] = [sys.argv[2], os.path.dirname(os.path.dirname(sys.argv[2]))]  # this folder and tests/
from test_mc_arenas import CALLS_B, SPEC_B
with MinecraftWorld(endpoint=sys.argv[1]) as w:
    w.reset(SPEC_B)
    ok = all(e.ok for e in w.run(CALLS_B))
    print(json.dumps({"arena": w.arena, "ok": ok, "truth": w.observe().to_dict()}))
"""


def test_another_process_holds_an_arena_of_the_same_sidecar(pool: SidecarPool) -> None:
    from pathlib import Path

    mine = MinecraftWorld(pool=pool)
    try:
        mine.reset(SPEC_A)
        proc = subprocess.run([sys.executable, "-c", _OTHER_PROCESS, pool.endpoint, str(Path(__file__).parent)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        theirs = json.loads(proc.stdout.strip().splitlines()[-1])
        assert theirs["ok"] and theirs["arena"] != mine.arena
        assert theirs["truth"] == json.loads(json.dumps(sim_truth(SPEC_B, CALLS_B).to_dict()))
        assert all(e.ok for e in mine.run(CALLS_A)) and mine.observe() == sim_truth(SPEC_A, CALLS_A)
    finally:
        mine.close()
