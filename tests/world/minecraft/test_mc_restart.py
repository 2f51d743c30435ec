"""A restarted sidecar serves every world that was attached: the real sidecar killed, or its ipc socket unlinked,
while two worlds of a pool are mid-episode. Whichever world resets first starts the new sidecar; the others,
which held arenas of the same names on the old one, get arenas of the new one (a world used to be refused
with ``ArenaBusy`` at every later reset, asking the new sidecar to close an arena another world now held).

Skipped only when the sidecar's Node packages are not installed (``gencoord setup`` installs them).
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path


from gencoord_env.world.minecraft import MinecraftBackendError, MinecraftWorld, SidecarPool
from gencoord_env.world.types import SkillCall, Station, WorldSpec
from sidecar_installed import needs_sidecar

pytestmark = needs_sidecar

SPEC = WorldSpec(
    agents=("agent_a", "agent_b"),
    stations=(Station("chest1", "chest", (3, 0, 2)),),
    positions={"agent_a": (0, 0, 0), "agent_b": (2, 0, 0)},
    inventories={"agent_a": {"oak_log": 1}, "agent_b": {}},
    containers={"chest1": {"stick": 2}},
)
#: long enough to be cut off by the fault: the episode is mid-way when the sidecar goes
LONG = [SkillCall("w1", "agent_a", "wait", {"ticks": 600})]
SHORT = [SkillCall("w2", "agent_a", "wait", {"ticks": 1})]


def _kill(pool: SidecarPool) -> None:
    assert pool.sidecar is not None
    os.kill(pool.sidecar.process.pid, signal.SIGKILL)


def _unlink(pool: SidecarPool) -> None:
    assert pool.sidecar is not None
    Path(pool.sidecar.endpoint[len("ipc://"):]).unlink()


def _in_flight(worlds: list[MinecraftWorld], seconds: float = 30.0) -> None:
    """Wait until every world has a call in flight."""
    deadline = time.monotonic() + seconds
    while not all(w._client_ is not None and w._client_._ops for w in worlds):
        assert time.monotonic() < deadline, "the episodes did not start"
        time.sleep(0.01)


def test_every_world_plays_on_after_the_sidecar_is_replaced_mid_episode() -> None:
    """Killed, then its socket unlinked: each time two worlds are mid-episode and a third, new one resets
    first and so starts the new sidecar (and takes its first free arena, a0)."""
    with SidecarPool(arenas=2, transport="ipc") as pool:
        worlds = [MinecraftWorld(pool=pool), MinecraftWorld(pool=pool)]
        for w in worlds:
            w.reset(SPEC)
        assert {w.arena for w in worlds} == {"a0", "a1"}
        for restarts, fault in enumerate((_kill, _unlink), 1):
            lost: list[BaseException] = []

            def episode(world: MinecraftWorld, lost: list[BaseException] = lost) -> None:
                try:
                    world.run(LONG)
                except MinecraftBackendError as err:
                    lost.append(err)

            threads = [threading.Thread(target=episode, args=(w,)) for w in worlds]
            for t in threads:
                t.start()
            _in_flight(worlds)
            fault(pool)
            with MinecraftWorld(pool=pool) as newcomer:
                newcomer.reset(SPEC)  # a dead or unreachable sidecar is replaced here
                assert newcomer.arena == "a0" and pool.restarts == restarts
                for t in threads:
                    t.join(120)
                assert not any(t.is_alive() for t in threads)
                assert len(lost) == 2, lost  # both episodes are lost with the old sidecar
                for k in range(2):  # and both worlds play on beside the newcomer, whichever resets first
                    for w in (worlds if k % 2 else worlds[::-1]):
                        w.reset(SPEC)
                    assert all(e.ok for w in worlds for e in w.run(SHORT))
                assert len({newcomer.arena, *(w.arena for w in worlds)}) == 3
        assert pool.restarts == 2
        for w in worlds:
            w.close()
