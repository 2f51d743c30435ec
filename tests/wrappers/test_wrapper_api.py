from __future__ import annotations

import io

import pytest
from pettingzoo.test import parallel_api_test

import gencoord_env
from gencoord_env.wrappers import (
    CounterfactualFeedback,
    RequestRemoval,
    RequestReplacement,
    TraceRecorder,
    UnreliableChannel,
    interventions,
)


@pytest.mark.parametrize("make", [
    lambda: RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="request")),
    lambda: RequestReplacement(gencoord_env.parallel_env(backend="sim", pool="request", route="single_step")),
    lambda: CounterfactualFeedback(gencoord_env.parallel_env(backend="sim", pool="goal_capability", route="feedback")),
    lambda: UnreliableChannel(gencoord_env.parallel_env(backend="sim", pool="request"), drop=0.3, duplicate=0.3),
    lambda: TraceRecorder(RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="request")), io.StringIO()),
    lambda: gencoord_env.parallel_env(backend="sim", pool="heldout", surface="freeform"),
])
def test_wrapped_envs_pass_the_parallel_api_test(make):
    parallel_api_test(make(), num_cycles=20)


def test_spaces_and_agents_are_the_wrapped_envs():
    base = gencoord_env.parallel_env(backend="sim", pool="request")
    env = TraceRecorder(UnreliableChannel(base, delay=0.5, seed=3), io.StringIO())
    assert env.unwrapped is base
    assert env.observation_space("agent_a") is base.observation_space("agent_a")
    assert env.possible_agents == base.possible_agents
    assert interventions(env) == [{"name": "UnreliableChannel", "args": {"drop": 0.0, "delay": 0.5, "duplicate": 0.0, "seed": 3}}]
