"""End-to-end against the real sidecar (Node, embedded flying-squid, two Mineflayer bots).

Skipped only when the sidecar's Node packages are not installed (``gencoord setup`` installs them).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gencoord_env.world.minecraft import (
    ArenaFault,
    MinecraftWorld,
    ProtocolMismatch,
    ServerRefused,
    SidecarDied,
    SpecRefused,
    locate,
)
from gencoord_env.world.types import SkillCall, Station, WorldSpec
from sidecar_installed import needs_sidecar

pytestmark = needs_sidecar

SPEC = WorldSpec(
    agents=("agent_a", "agent_b"),
    stations=(
        Station("chest1", "chest", (4, 0, 2)),
        Station("site", "site", (0, 0, 6), cells=((0, 0, 6), (1, 0, 6))),
    ),
    positions={"agent_a": (0, 0, 0), "agent_b": (3, 0, 0)},
    inventories={"agent_a": {"oak_log": 1}, "agent_b": {"oak_planks": 4}},
    containers={"chest1": {"cobblestone": 2}},
)
CALLS = [
    SkillCall("a1", "agent_a", "craft", {"item": "oak_planks", "count": 4, "station": ""}),
    SkillCall("a2", "agent_a", "deposit", {"station": "chest1", "item": "oak_planks", "count": 4}, after=("a1",)),
    SkillCall("b1", "agent_b", "craft", {"item": "crafting_table", "count": 1, "station": ""}),
    SkillCall("b2", "agent_b", "withdraw", {"station": "chest1", "item": "cobblestone", "count": 2}),
    SkillCall("b3", "agent_b", "place", {"site": "site", "item": "cobblestone", "count": 2}, after=("b2",)),
]


@pytest.fixture(scope="module")
def world() -> Iterator[MinecraftWorld]:
    w = MinecraftWorld()
    yield w
    w.close()


def test_episode_verified_from_server_truth(world: MinecraftWorld) -> None:
    for _ in range(2):  # the second episode checks that reset restores the arena
        world.reset(SPEC)
        events = world.run(CALLS)
        assert sorted((e.call_id, e.ok) for e in events) == [(c.id, True) for c in sorted(CALLS, key=lambda c: c.id)], events
        truth = world.observe()
        assert truth.inventories == {"agent_a": {}, "agent_b": {"crafting_table": 1}}
        assert truth.containers == {"chest1": {"oak_planks": 4}}
        assert truth.sites == {"site": ((0, 0, 6, "cobblestone"), (1, 0, 6, "cobblestone"))}


def test_a_spec_the_world_cannot_build_is_refused_with_what_to_fix(world: MinecraftWorld) -> None:
    import dataclasses

    high = dataclasses.replace(SPEC, stations=(Station("chest1", "chest", (4, 900, 2)),), containers={})
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=re.escape("the reset spec places chest1 at (4, 900, 2), outside the arena; "
                                                   "every station, cell and position must keep |x| and |z| at most 24 "
                                                   "(limits.arena.reach) and y from 0 to 16 (limits.arena.height)")):
        world.reset(high)
    assert time.monotonic() - t0 < 5.0  # refused before it was sent, not after the sidecar's reset stalled
    # a spec the sidecar refuses for its content: the spec is named as what to fix, not the installation
    unknown = dataclasses.replace(SPEC, inventories={"agent_a": {"unobtainium": 1}})
    with pytest.raises(SpecRefused, match="unobtainium") as refused:
        world.reset(unknown)
    assert not isinstance(refused.value, ProtocolMismatch) and "reinstall" not in str(refused.value)
    assert "fix the reset spec" in str(refused.value)
    world.reset(SPEC)  # the world goes on
    assert world.restarts == 0 and not world.rebuilt


def test_failed_skill_is_a_value_and_stops_new_calls(world: MinecraftWorld) -> None:
    world.reset(SPEC)
    events = world.run([
        SkillCall("a1", "agent_a", "deposit", {"station": "chest1", "item": "diamond", "count": 1}),
        SkillCall("a2", "agent_a", "craft", {"item": "oak_planks", "count": 4, "station": ""}, after=("a1",)),
    ])
    assert [(e.call_id, e.ok) for e in events] == [("a1", False)] and events[0].reason
    assert world.observe().inventories["agent_a"] == {"oak_log": 1}


def test_ping_round_trip(world: MinecraftWorld) -> None:
    world.reset(SPEC)
    assert world.ping() < 0.5  # a health check, not a benchmark: see benchmarks/minecraft_ping.py


def test_killed_sidecar_raises_within_10s_and_next_reset_recovers() -> None:
    w = MinecraftWorld()
    try:
        w.reset(SPEC)
        proc = w.sidecar.process  # type: ignore[union-attr]
        threading.Timer(0.5, proc.kill).start()
        t0 = time.monotonic()
        with pytest.raises(SidecarDied, match="call reset\\(\\) to start a fresh sidecar"):
            w.run([SkillCall("a1", "agent_a", "wait", {"ticks": 600}), SkillCall("b1", "agent_b", "wait", {"ticks": 600})])
        assert time.monotonic() - t0 < 25  # noticed while the 30 s waits still ran (a generous bound: a loaded machine)
        w.reset(SPEC)
        assert w.restarts == 1 and w.sidecar is not None and w.sidecar.process is not proc
        assert all(e.ok for e in w.run(CALLS))
        assert w.observe().containers == {"chest1": {"oak_planks": 4}}
    finally:
        w.close()


def test_failed_give_ends_the_peers_await_at_once(world: MinecraftWorld) -> None:
    world.reset(SPEC)
    t0 = time.monotonic()
    events = world.run([
        SkillCall("g1", "agent_a", "give", {"to": "agent_b", "item": "oak_log", "count": 5}),
        SkillCall("w1", "agent_b", "await_handoff", {"from": "agent_a", "item": "oak_log", "count": 5}),
    ])
    elapsed = time.monotonic() - t0
    by_id = {e.call_id: e for e in events}
    assert not by_id["g1"].ok and not by_id["w1"].ok
    assert "agent_a's give of 5 oak_log (call g1) failed: agent_a has 1 oak_log, needs 5" in by_id["w1"].reason
    # the reason above names the give; a bound below the 20 s skill timeout checks it did not wait that out
    assert elapsed < 15, f"the await took {elapsed:.1f} s: it waited for its skill timeout instead of the failed give"


def test_drop_bot_is_refused_without_test_ops(world: MinecraftWorld) -> None:
    world.reset(SPEC)
    assert world.sidecar is not None and world.sidecar.client is not None
    with pytest.raises(ProtocolMismatch, match="drop_bot is a test-only op; start the sidecar with --test-ops"):
        world.sidecar.client.call("drop_bot", {"arena": world.arena, "agent": "agent_b"})
    assert all(e.ok for e in world.run([SkillCall("b1", "agent_b", "wait", {"ticks": 1})]))


def test_disconnected_bot_is_an_arena_fault_and_the_arena_is_rebuilt_at_reset() -> None:
    with MinecraftWorld(sidecar_args=("--test-ops",)) as w:
        w.reset(SPEC)
        assert w.rejoined == () and not w.rebuilt
        assert w.sidecar is not None and w.sidecar.client is not None
        assert w.sidecar.client.call("drop_bot", {"arena": w.arena, "agent": "agent_b"}) == {"dropped": True}
        with pytest.raises(ArenaFault, match=re.escape("agent_b's bot is disconnected (its connection closed: dropped by the drop_bot test op); "
                                                  "this episode is lost: the next reset rebuilds")):
            w.run([SkillCall("b1", "agent_b", "wait", {"ticks": 1})])
        w.reset(SPEC)
        # the same sidecar; the arena's bots rejoined
        assert w.rebuilt and sorted(w.rejoined) == ["agent_a", "agent_b"] and w.restarts == 0
        assert all(e.ok for e in w.run(CALLS))
        truth = w.observe()
        assert truth.inventories == {"agent_a": {}, "agent_b": {"crafting_table": 1}}
        assert truth.containers == {"chest1": {"oak_planks": 4}}


#: A stand-in for an external server (test fixture of the checkout): the embedded flying-squid, admitting the
#: players it is told to as operators, as a vanilla server admits those of its ops.json.
STANDIN = Path(__file__).resolve().parents[3] / "mineflayer_server" / "test" / "standin_server.js"
EXTERNAL = WorldSpec(agents=("ext_a", "ext_b"), stations=(), positions={"ext_a": (10, 0, 10), "ext_b": (12, 0, 10)},
                     inventories={"ext_a": {"oak_log": 1}, "ext_b": {}}, containers={})


@contextmanager
def standin_server(operators: tuple[str, ...]) -> Iterator[int]:
    """Run the stand-in server; yields its port."""
    rt = locate()
    proc = subprocess.Popen(
        [str(rt.node), str(STANDIN), "--rules", str(rt.rules_dir), "--operators", ",".join(operators)],
        cwd=rt.sidecar_dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env={**os.environ, **rt.env()}, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY "), f"the stand-in server did not start: {line!r}"
        yield int(json.loads(line[6:])["port"])
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.skipif(not STANDIN.exists(), reason="the stand-in server is a fixture of the checkout's mineflayer_server/test")
def test_external_server_bots_join_a_running_server() -> None:
    # the external sidecar's bots join as <arena>_<agent>, arena a0
    with standin_server(("a0_ext_a", "a0_ext_b")) as port, MinecraftWorld(server="external", host="127.0.0.1", port=port) as ext:
        ext.reset(EXTERNAL)
        events = ext.run([SkillCall("e1", "ext_a", "craft", {"item": "oak_planks", "count": 4, "station": ""})])
        assert [e.ok for e in events] == [True]
        assert ext.observe().inventories["ext_a"] == {"oak_planks": 4}


def test_another_sidecars_bots_are_refused_by_the_embedded_server(world: MinecraftWorld) -> None:
    # Only the bots a sidecar creates itself may join its server: another process's bots are strangers,
    # whatever names they take. The world's own episode goes on.
    world.reset(SPEC)
    assert world.sidecar is not None
    port = int(world.sidecar.ready_info["mc_port"])
    with MinecraftWorld(server="external", host="127.0.0.1", port=port) as ext:
        t0 = time.monotonic()
        refused = (re.escape(f"the server at 127.0.0.1:{port} refused ") + r"(a0_ext_[ab]): refused: this server admits only the "
                   r"bots its sidecar created; \1 connecting from 127\.0\.0\.1:\d+ is not one of them")
        with pytest.raises(ServerRefused, match=refused):
            ext.reset(EXTERNAL)
        assert time.monotonic() - t0 < 15, "the refused sidecar gave up at once, not after its bots' spawn timeout"
    assert all(e.ok for e in world.run(CALLS))
    assert world.observe().containers == {"chest1": {"oak_planks": 4}}
