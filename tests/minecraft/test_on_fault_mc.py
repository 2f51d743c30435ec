"""``on_fault="truncate"`` on the real Minecraft backend: a bot dropped mid-episode and a killed sidecar each
end the episode as a truncation with the typed fault in infos, and the next ``reset()`` recovers (the
arena rebuilt, a fresh sidecar) and plays an episode to success from server truth."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import gencoord_env
from gencoord_env import FailureCode

from mc_support import play_sender
from sidecar_installed import needs_sidecar

pytestmark = needs_sidecar


@pytest.fixture(scope="module")
def env() -> Iterator[Any]:
    from gencoord_env.world.minecraft import MinecraftWorld

    world = MinecraftWorld(sidecar_args=("--test-ops",))
    env = gencoord_env.parallel_env(backend="minecraft", pool="heldout", world=world, on_fault="truncate")
    yield env
    world.close()


def _truncated(env: Any, receiver: str, record: str, fault: str) -> dict[str, Any]:
    """The receiver's step, in which the world is found broken: a truncation for every agent."""
    _, rewards, terms, truncs, infos = env.step({receiver: record})  # compile, execute: the world is gone
    assert truncs == {"agent_a": True, "agent_b": True} and terms == {"agent_a": False, "agent_b": False}
    assert rewards == {"agent_a": 0.0, "agent_b": 0.0} and env.agents == []
    info = infos["agent_a"]
    assert info["fault"]["type"] == fault and info["outcome"] is None and info["trace"][-1]["stage"] == "fault"
    assert info["reason"] == info["fault"]["message"]
    return info


def _recovered(env: Any) -> dict[str, Any]:
    receiver, record = play_sender(env)
    _, rewards, terms, truncs, infos = env.step({receiver: record})
    assert infos["agent_a"]["outcome"] is FailureCode.SUCCESS, infos["agent_a"]["reason"]
    assert rewards == {"agent_a": 1.0, "agent_b": 1.0} and all(terms.values()) and not any(truncs.values())
    return infos["agent_a"]


def test_a_dropped_bot_truncates_the_episode_and_reset_rebuilds_the_arena(env: Any) -> None:
    world = env.world
    receiver, record = play_sender(env)
    assert world.sidecar.client.call("drop_bot", {"arena": world.arena, "agent": receiver}) == {"dropped": True}
    info = _truncated(env, receiver, record, "ArenaFault")
    assert receiver in info["fault"]["message"] and "the next reset rebuilds" in info["fault"]["message"]
    _recovered(env)
    assert world.rebuilt and world.restarts == 0


def test_a_killed_sidecar_truncates_the_episode_and_reset_starts_a_fresh_one(env: Any) -> None:
    world = env.world
    receiver, record = play_sender(env)
    restarts, process = world.restarts, world.sidecar.process
    process.kill()
    process.wait()
    info = _truncated(env, receiver, record, "SidecarDied")
    assert "call reset() to start a fresh sidecar" in info["fault"]["message"]
    _recovered(env)
    assert world.restarts == restarts + 1 and world.sidecar.process is not process
