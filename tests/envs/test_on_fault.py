"""``on_fault``: an infrastructure fault of the world truncates the episode (or raises, by default).

These use a world that raises the backend's real fault types at chosen calls; the Minecraft backend's
own faults (a dropped bot, a killed sidecar) are checked in ``tests/minecraft/test_on_fault_mc.py``.
"""
from __future__ import annotations

import re
from typing import Any

import pytest

import gencoord_env
from gencoord_env import FailureCode, dsl
from gencoord_env.tasks import references as R
from gencoord_env.world.minecraft.errors import ArenaFault, MinecraftBackendError, SidecarDied
from gencoord_env.world.sim import SimWorld


class FaultyWorld(SimWorld):
    """The sim world, except that the ``run`` / ``reset`` numbered in ``faults`` raise instead."""

    def __init__(self, run_faults: dict[int, Exception] | None = None, reset_faults: dict[int, Exception] | None = None) -> None:
        super().__init__()
        self.run_faults, self.reset_faults = dict(run_faults or {}), dict(reset_faults or {})
        self.runs = self.resets = 0

    def reset(self, spec: Any) -> None:
        self.resets += 1
        if self.resets in self.reset_faults:
            raise self.reset_faults[self.resets]
        super().reset(spec)

    def run(self, calls: Any) -> Any:
        self.runs += 1
        if self.runs in self.run_faults:
            raise self.run_faults[self.runs]
        return super().run(calls)


DIED = SidecarDied("the sidecar exited with code -9; call reset() to start a fresh sidecar", returncode=-9)


def _good(stage: str, ep: Any) -> str:
    q = R.sender_initial(ep)
    return dsl.format(q if stage == "sender_initial" else R.receiver_after_request(q.peer_requests[0]))


def _play(env: Any) -> tuple[dict, dict, dict, dict]:
    obs, infos = env.reset(options={"index": 0})
    while env.agents:
        turn = next(a for a, i in infos.items() if i["deciding"])
        obs, rewards, terms, truncs, infos = env.step({turn: _good(infos[turn]["stage"], env.session.episode)})
    return rewards, terms, truncs, infos


def test_a_fault_in_step_truncates_the_episode_and_the_next_reset_recovers() -> None:
    world = FaultyWorld(run_faults={1: DIED})
    env = gencoord_env.parallel_env(backend="sim", world=world, on_fault="truncate")
    rewards, terms, truncs, infos = _play(env)
    assert rewards == {"agent_a": 0.0, "agent_b": 0.0}
    assert terms == {"agent_a": False, "agent_b": False} and truncs == {"agent_a": True, "agent_b": True}
    info = infos["agent_a"]
    assert info["fault"] == {"type": "SidecarDied", "message": str(DIED)} and info["outcome"] is None
    assert info["stage"] == "done" and info["reason"] == str(DIED) and env.agents == []
    assert info["trace"][-1] == {"stage": "fault", "type": "SidecarDied", "message": str(DIED)}
    assert [t["stage"] for t in info["trace"]] == ["sender_initial", "deliver", "receiver_after_request", "resolve", "fault"]
    # the next episode runs as usual
    rewards, terms, truncs, infos = _play(env)
    assert infos["agent_a"]["outcome"] is FailureCode.SUCCESS and "fault" not in infos["agent_a"]
    assert rewards == {"agent_a": 1.0, "agent_b": 1.0} and all(terms.values()) and not any(truncs.values())


def test_by_default_the_fault_raises() -> None:
    env = gencoord_env.parallel_env(backend="sim", world=FaultyWorld(run_faults={1: DIED}))
    with pytest.raises(SidecarDied, match=re.escape("call reset() to start a fresh sidecar")):
        _play(env)
    assert _play(env)[3]["agent_a"]["outcome"] is FailureCode.SUCCESS


def test_an_agent_mistake_is_not_a_fault_and_other_errors_still_raise() -> None:
    env = gencoord_env.parallel_env(backend="sim", world=FaultyWorld(run_faults={1: ValueError("a bug")}), on_fault="truncate")
    with pytest.raises(ValueError, match="a bug"):
        _play(env)
    obs, infos = env.reset(options={"index": 0})
    _, _, terms, truncs, infos = env.step({"agent_a": "hello", "agent_b": "hello"})
    assert infos["agent_a"]["outcome"] is FailureCode.PARSE_FAILURE and all(terms.values()) and not any(truncs.values())


def test_a_fault_in_reset_is_retried_once_then_raises() -> None:
    arena = ArenaFault("arena a0: agent_b's bot is disconnected; this episode is lost: the next reset rebuilds the arena")
    world = FaultyWorld(reset_faults={1: arena})
    env = gencoord_env.parallel_env(backend="sim", world=world, on_fault="truncate")
    obs, infos = env.reset(options={"index": 0})
    assert world.resets == 2 and infos["agent_a"]["reset_fault"] == {"type": "ArenaFault", "message": str(arena)}
    assert env.observation_space("agent_a").contains(obs["agent_a"])
    world = FaultyWorld(reset_faults={1: arena, 2: DIED})
    env = gencoord_env.parallel_env(backend="sim", world=world, on_fault="truncate")
    with pytest.raises(SidecarDied):
        env.reset(options={"index": 0})
    assert world.resets == 2
    raising = gencoord_env.parallel_env(backend="sim", world=FaultyWorld(reset_faults={1: arena}))
    with pytest.raises(ArenaFault):
        raising.reset(options={"index": 0})


def test_the_aec_form_and_numeric_infos_see_a_truncation() -> None:
    env = gencoord_env.env(backend="sim", world=FaultyWorld(run_faults={1: DIED}), on_fault="truncate", infos="numbers")
    env.reset(options={"index": 0})
    steps = 0
    for _ in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        if term or trunc:
            assert trunc and not term and reward == 0.0 and info["truncated"] == 1 and info["done"] == 1
            env.step(None)
        else:
            env.step(_good("sender_initial" if steps == 0 else "receiver_after_request", env.unwrapped.session.episode))
        steps += 1
    assert env.agents == [] and steps == 4


def test_on_fault_is_checked() -> None:
    with pytest.raises(ValueError, match=re.escape("unknown on_fault 'truncated'; expected one of raise, truncate (did you mean 'truncate'?)")):
        gencoord_env.parallel_env(backend="sim", on_fault="truncated")
    assert issubclass(SidecarDied, MinecraftBackendError)


@pytest.mark.parametrize("role", ["first", "second"])
def test_the_single_agent_view_reports_a_fault_as_a_truncation(role: str) -> None:
    from gencoord_env.agents.single_agent import gym_env

    world = FaultyWorld(run_faults={1: DIED})
    env = gym_env(role=role, backend="sim", world=world, on_fault="truncate")
    env.reset(options={"index": 0})
    ep = env.env.session.episode
    stage = "sender_initial" if role == "first" else "receiver_after_request"
    if role == "second":  # the partner (rule) sent the request; the learner realizes it
        action = dsl.format(R.receiver_after_request(R.sender_initial(ep).peer_requests[0]))
    else:
        action = _good(stage, ep)
    _, reward, terminated, truncated, info = env.step(action)
    assert (terminated, truncated, reward) == (False, True, 0.0)
    assert info["fault"]["type"] == "SidecarDied"
    env.reset(options={"index": 0})  # the next reset recovers
    _, reward, terminated, truncated, info = env.step(_good(stage, env.env.session.episode) if role == "first" else action)
    assert terminated and not truncated and info["outcome"] == "SUCCESS"
