"""A stalled sidecar (SIGSTOP, then SIGCONT, as a paused VM or a starved machine would leave it) ends the
episode it stalled in as an infrastructure fault: truncated with the fault in infos, or ``SidecarStalled``
raised, never an agent's failure code, though the skills' wall-clock budgets ran out meanwhile; the next
``reset()`` plays an episode to success on the same sidecar."""
from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import gencoord_env
from gencoord_env import FailureCode

from mc_support import play_sender
from sidecar_installed import needs_sidecar

pytestmark = needs_sidecar

#: A skill's budget, and how long the sidecar is stopped: the budgets of the skills then running run out.
SKILL_MS = 5000
STOPPED_S = 8.0


@pytest.fixture(scope="module")
def world() -> Iterator[Any]:
    from gencoord_env.world.minecraft import MinecraftWorld

    w = MinecraftWorld(sidecar_args=("--skill-timeout-ms", str(SKILL_MS)))
    yield w
    w.close()


class _Stopper(threading.Thread):
    """Once the world has a skill in flight, stop the sidecar for STOPPED_S, then let it go on."""

    def __init__(self, world: Any) -> None:
        super().__init__(daemon=True)
        self.world, self.stopped_at = world, None
        self.pid = world.sidecar.process.pid

    def run(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            client = self.world._client_
            if client is not None and "execute" in client._ops.values():
                break
            time.sleep(0.01)
        else:
            return
        os.kill(self.pid, signal.SIGSTOP)
        self.stopped_at = time.monotonic()
        try:
            time.sleep(STOPPED_S)  # the fault itself: how long the process stays stopped
        finally:
            os.kill(self.pid, signal.SIGCONT)


def _stalled_step(env: Any, receiver: str, record: str) -> Any:
    stopper = _Stopper(env.world)
    stopper.start()
    try:
        return env.step({receiver: record})
    finally:
        stopper.join(STOPPED_S + 70)
        assert stopper.stopped_at is not None, "the receiver's step ran no skill"


def _recovered(env: Any) -> None:
    receiver, record = play_sender(env)
    _, rewards, terms, truncs, infos = env.step({receiver: record})
    assert infos["agent_a"]["outcome"] is FailureCode.SUCCESS, infos["agent_a"]["reason"]
    assert all(terms.values()) and not any(truncs.values())


def test_a_stall_truncates_the_episode_with_the_fault_not_an_agent_failure(world: Any) -> None:
    env = gencoord_env.parallel_env(backend="minecraft", pool="heldout", world=world, on_fault="truncate")
    receiver, record = play_sender(env)
    _, rewards, terms, truncs, infos = _stalled_step(env, receiver, record)
    info = infos["agent_a"]
    assert info["outcome"] is None, f"a stalled episode ended as {info['outcome']}: {info['reason']}"
    assert truncs == {"agent_a": True, "agent_b": True} and not any(terms.values())
    assert info["fault"]["type"] == "SidecarStalled" and info["trace"][-1]["stage"] == "fault"
    assert "the sidecar stalled during this episode" in info["fault"]["message"]
    assert "the process ran nothing (stopped, e.g. SIGSTOP" in info["fault"]["message"]
    _recovered(env)
    assert world.restarts == 0


def test_a_stall_raises_sidecar_stalled(world: Any) -> None:
    from gencoord_env.world.minecraft import SidecarStalled

    env = gencoord_env.parallel_env(backend="minecraft", pool="heldout", world=world, on_fault="raise")
    receiver, record = play_sender(env)
    with pytest.raises(SidecarStalled, match=r"a stall of \d+\.\d s \(the process ran nothing"):
        _stalled_step(env, receiver, record)
    _recovered(env)
    assert world.restarts == 0
