"""SidecarPool and arena-holding worlds: arena bookkeeping, local faults and shared recovery, against the fake sidecar."""
from __future__ import annotations

import gc
import re
import time
from collections.abc import Iterator

import pytest

from gencoord_env.world.minecraft import ArenaBusy, ArenaFault, EpisodeLost, MinecraftWorld, SidecarDied, SidecarPool
from gencoord_env.world.minecraft.runtime import Runtime
from gencoord_env.world.types import SkillCall, Station, WorldSpec

SPEC = WorldSpec(
    agents=("A", "B"),
    stations=(Station("chest1", "chest", (3, 0, 1)),),
    positions={"A": (0, 0, 0), "B": (2, 0, 0)},
    inventories={"A": {"oak_log": 2}, "B": {}},
    containers={"chest1": {"cobblestone": 8}},
)


def wait(cid: str, actor: str, ticks: int) -> SkillCall:
    return SkillCall(cid, actor, "wait", {"ticks": ticks})


@pytest.fixture
def pool(fake_runtime: Runtime) -> Iterator[SidecarPool]:
    with SidecarPool(arenas=2, runtime=fake_runtime) as p:
        yield p


def _log(pool: SidecarPool) -> str:
    assert pool.log_path is not None
    return pool.log_path.read_text()


def _logged(pool: SidecarPool, pattern: str, seconds: float = 15.0) -> bool:
    """Whether the sidecar's log shows ``pattern`` within ``seconds``: the sidecar writes its log from its own
    event loop, so a line about a request may land after the reply reached us (on a loaded machine, later)."""
    deadline = time.monotonic() + seconds
    while not re.search(pattern, _log(pool)):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_worlds_of_one_pool_hold_different_arenas_of_one_sidecar(pool: SidecarPool) -> None:
    a, b = MinecraftWorld(pool=pool), MinecraftWorld(pool=pool)
    a.reset(SPEC)
    b.reset(SPEC)
    assert (a.arena, b.arena) == ("a0", "a1") and a.sidecar is b.sidecar is pool.sidecar
    assert "--arenas 2" in " ".join(pool.sidecar.process.args)  # type: ignore[union-attr]
    third = MinecraftWorld(pool=pool)
    third.reset(SPEC)
    assert third.arena == "a2"  # a new one when every arena is held
    a.close()
    again = MinecraftWorld(pool=pool)
    again.reset(SPEC)
    assert again.arena == "a0"  # the first free one
    assert pool.sidecar is not None and pool.sidecar.alive, "closing a world of a pool leaves the sidecar running"
    assert _logged(pool, re.escape("recv close_arena #1")), _log(pool)


def test_named_arena_held_elsewhere_is_arena_busy(pool: SidecarPool) -> None:
    holder = MinecraftWorld(pool=pool, arena="a1")
    holder.reset(SPEC)
    with pytest.raises(ArenaBusy, match=re.escape("open_arena refused: arena a1 is held by another client")):
        MinecraftWorld(pool=pool, arena="a1").reset(SPEC)
    holder.close()


def test_a_world_dropped_without_close_lets_go_of_its_arena(pool: SidecarPool) -> None:
    world = MinecraftWorld(pool=pool, arena="a1")
    world.reset(SPEC)
    assert {a["name"]: a["held"] for a in pool.hello()["arenas"]}["a1"]
    del world
    gc.collect()
    deadline = time.monotonic() + 60
    while {a["name"]: a["held"] for a in pool.hello()["arenas"]}["a1"]:
        assert time.monotonic() < deadline, "the dropped world still holds its arena"
        time.sleep(0.02)
    again = MinecraftWorld(pool=pool, arena="a1")
    again.reset(SPEC)  # free for the next world
    again.close()


def test_arena_fault_ends_the_episode_and_the_next_reset_rebuilds(pool: SidecarPool) -> None:
    a, b = MinecraftWorld(pool=pool), MinecraftWorld(pool=pool)
    a.reset(SPEC)
    b.reset(SPEC)
    with pytest.raises(ArenaFault, match="arena a0: B's bot is disconnected"):
        a.run([wait("a1", "A", 40), wait("b1", "B", 997)])
    with pytest.raises(EpisodeLost, match=r"lost its episode earlier \(that error was raised then\); call reset"):
        a.observe()
    with pytest.raises(EpisodeLost):
        a.run([wait("a2", "A", 1)])
    assert all(e.ok for e in b.run([wait("c1", "A", 1)])), "the neighbour goes on"
    a.reset(SPEC)
    assert a.rebuilt and a.arena == "a0" and pool.restarts == 0
    # A's call still in flight was abandoned, so the world itself asked for the rebuild too
    assert _logged(pool, r"recv reset #\d+ id=\d+ arena=a0 rebuild=True"), _log(pool)
    assert all(e.ok for e in a.run([wait("a2", "A", 1)]))
    b.reset(SPEC)
    assert not b.rebuilt


def test_a_dead_sidecar_is_restarted_once_for_all_its_worlds(pool: SidecarPool) -> None:
    a, b = MinecraftWorld(pool=pool), MinecraftWorld(pool=pool)
    a.reset(SPEC)
    b.reset(SPEC)
    first = pool.sidecar
    with pytest.raises(SidecarDied):
        a.run([wait("a1", "A", 999)])
    with pytest.raises(SidecarDied):
        b.run([wait("b1", "A", 1)])
    a.reset(SPEC)
    b.reset(SPEC)
    assert pool.sidecar is not first and pool.restarts == 1 and pool.generation == 2
    assert {a.arena, b.arena} == {"a0", "a1"}
    assert all(e.ok for e in a.run([wait("a2", "A", 1)])) and all(e.ok for e in b.run([wait("b2", "B", 1)]))


def test_a_world_of_another_process_attaches_by_endpoint(pool: SidecarPool) -> None:
    mine = MinecraftWorld(pool=pool)
    mine.reset(SPEC)
    with MinecraftWorld(endpoint=pool.endpoint) as attached:
        attached.reset(SPEC)
        assert attached.arena == "a1" and attached.sidecar is None
        assert all(e.ok for e in attached.run([wait("x1", "A", 1)]))
        assert attached.observe().inventories == {"A": {"oak_log": 2}, "B": {}}
    assert pool.sidecar is not None and pool.sidecar.alive, "an attached world leaves the sidecar running"


def test_pool_and_endpoint_options_are_checked(fake_runtime: Runtime) -> None:
    with pytest.raises(ValueError, match="belong to the shared sidecar's SidecarPool"):
        MinecraftWorld(pool=SidecarPool(runtime=fake_runtime), transport="tcp")
    with pytest.raises(ValueError, match="not both"):
        MinecraftWorld(pool=SidecarPool(runtime=fake_runtime), endpoint="ipc:///x")
    with pytest.raises(ValueError, match="endpoint must be tcp://127.0.0.1:<port> or ipc://<path>"):
        MinecraftWorld(endpoint="tcp://10.0.0.1:5555")
    with pytest.raises(ValueError, match=re.escape("need 0 <= arenas <= max_arenas <= 64")):
        SidecarPool(arenas=5, max_arenas=4, runtime=fake_runtime)
