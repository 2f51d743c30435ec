"""MinecraftWorld's own logic (dispatch, failure stop, fault recovery) against the fake sidecar."""
from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from gencoord_env.world.minecraft import EpisodeLost, MinecraftWorld, ServerUnreachable, SidecarDied
from gencoord_env.world.minecraft.runtime import Runtime
from gencoord_env.world.minecraft.schedule import check
from gencoord_env.world.types import SkillCall, Station, WorldSpec

SPEC = WorldSpec(
    agents=("A", "B"),
    stations=(Station("chest1", "chest", (3, 0, 1)),),
    positions={"A": (0, 0, 0), "B": (2, 0, 0)},
    inventories={"A": {"oak_log": 2}, "B": {}},
    containers={"chest1": {"cobblestone": 8}},
)


def wait(cid: str, actor: str, ticks: int, after: tuple[str, ...] = ()) -> SkillCall:
    return SkillCall(cid, actor, "wait", {"ticks": ticks}, after=after)


@pytest.fixture
def world(fake_runtime: Runtime) -> Iterator[MinecraftWorld]:
    w = MinecraftWorld(runtime=fake_runtime)
    yield w
    w.close()


def test_reset_run_observe(world: MinecraftWorld) -> None:
    world.reset(SPEC)
    events = world.run([wait("c1", "A", 1), wait("c2", "B", 1, after=("c1",))])
    assert [(e.call_id, e.ok) for e in events] == [("c1", True), ("c2", True)]
    truth = world.observe()
    assert truth.inventories == {"A": {"oak_log": 2}, "B": {}}
    assert truth.containers == {"chest1": {"cobblestone": 8}}
    assert truth.sites == {"site": ((0, 0, 0, "oak_planks"), (1, 0, 2, "oak_planks"))}
    assert world.log_path is not None and world.log_path.exists()


def test_independent_actors_overlap_and_after_is_honoured(world: MinecraftWorld) -> None:
    world.reset(SPEC)
    ev = {e.call_id: e for e in world.run([wait("a1", "A", 40), wait("b1", "B", 40), wait("b2", "B", 1, after=("a1",))])}
    a1, b1, b2 = ev["a1"].data, ev["b1"].data, ev["b2"].data
    assert b1["start"] < a1["end"] and a1["start"] < b1["end"]  # both bots worked at once
    assert b2["start"] >= a1["end"]                              # b2 waited for a1


def test_one_call_per_actor_in_list_order(world: MinecraftWorld) -> None:
    world.reset(SPEC)
    events = world.run([wait("a1", "A", 10), wait("a2", "A", 1), wait("a3", "A", 1)])
    assert [e.call_id for e in events] == ["a1", "a2", "a3"]
    assert all(e.ok for e in events)  # the fake refuses a second concurrent call of one actor


def test_no_new_call_after_a_failure(world: MinecraftWorld) -> None:
    world.reset(SPEC)
    calls = [
        SkillCall("a1", "A", "withdraw", {"station": "chest1", "item": "missing_item", "count": 1}),
        wait("b1", "B", 20),
        wait("a2", "A", 1),
        wait("b2", "B", 1),
    ]
    events = world.run(calls)
    assert [(e.call_id, e.ok) for e in events] == [("a1", False), ("b1", True)]  # b1 was already running
    assert events[0].reason == "not enough missing_item"


def test_bad_call_lists_are_refused_before_execution(world: MinecraftWorld) -> None:
    world.reset(SPEC)
    with pytest.raises(ValueError, match=re.escape("did you mean 'withdraw'?")):
        world.run([SkillCall("c1", "A", "withdrw", {})])
    with pytest.raises(ValueError, match=re.escape("lacks argument(s) ['count']")):
        world.run([SkillCall("c1", "A", "deposit", {"station": "chest1", "item": "stick"})])
    with pytest.raises(ValueError, match="not one of the episode's agents"):
        world.run([wait("c1", "C", 1)])
    with pytest.raises(ValueError, match="can never start"):
        world.run([wait("a1", "A", 1, after=("b1",)), wait("b1", "B", 1, after=("a1",))])
    with pytest.raises(ValueError, match="duplicate call ids"):
        world.run([wait("a1", "A", 1), wait("a1", "B", 1)])
    assert "recv execute" not in world.log_path.read_text()  # type: ignore[union-attr]


def test_schedule_check_catches_cross_actor_order_deadlock() -> None:
    # a2 waits for b1, b1 for... b0 which comes after nothing, but A's own order makes a1 wait: fine.
    check([wait("a1", "A", 1), wait("b1", "B", 1, after=("a1",)), wait("a2", "A", 1, after=("b1",))])
    with pytest.raises(ValueError, match=re.escape("calls ['a1', 'a2', 'b1'] can never start")):
        # a1 needs b1, b1 needs a2, which comes after a1 in A's list.
        check([wait("a1", "A", 1, after=("b1",)), wait("a2", "A", 1), wait("b1", "B", 1, after=("a2",))])


def test_run_before_reset_says_what_to_do(world: MinecraftWorld) -> None:
    with pytest.raises(RuntimeError, match=re.escape("call reset(spec) before run() or observe()")):
        world.run([])


def test_killed_sidecar_raises_within_10s_and_reset_recovers(world: MinecraftWorld) -> None:
    world.reset(SPEC)
    first = world.sidecar
    t0 = time.monotonic()
    with pytest.raises(SidecarDied, match="call reset\\(\\) to start a fresh sidecar"):
        world.run([wait("a1", "A", 999), wait("b1", "B", 400)])
    assert time.monotonic() - t0 < 10
    with pytest.raises(EpisodeLost, match="failed earlier in this episode"):
        world.observe()
    world.reset(SPEC)
    assert world.sidecar is not first and world.restarts == 1
    assert [e.ok for e in world.run([wait("a1", "A", 1)])] == [True]


def test_externally_killed_sidecar_is_replaced_at_reset(world: MinecraftWorld) -> None:
    world.reset(SPEC)
    assert world.sidecar is not None
    world.sidecar.process.kill()
    world.sidecar.process.wait()
    with pytest.raises(SidecarDied):
        world.observe()
    world.reset(SPEC)
    assert world.observe().inventories["A"] == {"oak_log": 2}


def test_close_stops_the_process(fake_runtime: Runtime) -> None:
    w = MinecraftWorld(runtime=fake_runtime)
    w.reset(SPEC)
    proc = w.sidecar.process  # type: ignore[union-attr]
    w.close()
    assert proc.poll() is not None
    w.close()  # twice is fine


def test_server_option_validation(fake_runtime: Runtime) -> None:
    with pytest.raises(ValueError, match="server must be one of"):
        MinecraftWorld(server="bedrock", runtime=fake_runtime)
    with pytest.raises(ValueError, match="needs host=... and port=..."):
        MinecraftWorld(server="external", runtime=fake_runtime)
    with pytest.raises(ValueError, match="needs jar=PATH"):
        MinecraftWorld(server="vanilla", runtime=fake_runtime)
    with pytest.raises(ValueError, match=re.escape("pass accept_eula=True")):
        MinecraftWorld(server="vanilla", jar="server.jar", runtime=fake_runtime)


def test_external_server_unreachable(fake_runtime: Runtime) -> None:
    from gencoord_env.world.minecraft.supervisor import free_tcp_port

    w = MinecraftWorld(server="external", host="127.0.0.1", port=free_tcp_port(), runtime=fake_runtime)
    with pytest.raises(ServerUnreachable, match="online-mode=false, or use server='embedded'"):
        w.reset(SPEC)
    w.close()
