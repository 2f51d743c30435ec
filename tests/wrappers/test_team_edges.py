"""Interventions per edge of a team: only the named channel is rewritten and traced, specs round-trip, and an
edge no template of the env has is refused with a suggestion."""
from __future__ import annotations

import re

import pytest

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.agents.rollout import run_episode
from gencoord_env.wrappers import (
    CounterfactualFeedback,
    RequestRemoval,
    RequestReplacement,
    TraceRecorder,
    UnreliableChannel,
    apply,
    interventions,
)


def _env(pool: str = "teams", **kw):  # type: ignore[no-untyped-def]
    return gencoord_env.parallel_env(pool=pool, backend="sim", **kw)


def _index(env, template: str, perm: int = 0) -> int:  # type: ignore[no-untyped-def]
    return next(k for k, e in enumerate(env.unwrapped.episodes) if e.template.id == template and e.perm == perm)


def _records(info, name: str) -> list[dict]:  # type: ignore[no-untyped-def]
    return [t for t in info["trace"] if t.get("intervention") == name]


def test_removal_of_one_edge_leaves_the_other_delivered() -> None:
    env = RequestRemoval(_env(), edge=("sender", "courier"))
    k = _index(env, "chain")
    info = run_episode(env, make_policy("rule"), index=k)
    ep = env.unwrapped.episodes[k]
    (record,) = _records(info, "RequestRemoval")
    assert record["edge"] == [ep.agent_of["sender"], ep.agent_of["courier"]]
    delivered = [t for t in info["trace"] if t["stage"] == "deliver"]
    assert [t["delivered"] is None for t in delivered] == [False, True]
    assert [e["receiver"] for e in info["metrics"]["edges"]] == [ep.agent_of["crafter"]]


def test_an_edge_no_template_has_is_refused_with_a_suggestion() -> None:
    with pytest.raises(ValueError, match=re.escape("did you mean 'sender>courier'?")):
        RequestRemoval(_env(), edge=("sender", "couriers"))
    with pytest.raises(TypeError, match="edge names a channel"):
        RequestRemoval(_env(), edge="sender>crafter")  # type: ignore[arg-type]


def test_specs_carry_the_edge_and_rebuild_the_same_stack() -> None:
    env = UnreliableChannel(RequestReplacement(_env(), edge=("relay", "receiver")), drop=0.5, seed=3,
                            edge=("sender", "relay"))
    specs = interventions(env)
    assert specs == [{"name": "RequestReplacement", "args": {"edge": ["relay", "receiver"]}},
                     {"name": "UnreliableChannel", "args": {"drop": 0.5, "delay": 0.0, "duplicate": 0.0, "seed": 3,
                                                            "edge": ["sender", "relay"]}}]
    assert interventions(apply(_env(), specs)) == specs
    assert interventions(RequestRemoval(gencoord_env.parallel_env(pool="request", backend="sim"))) == [
        {"name": "RequestRemoval", "args": {}}]  # a two-agent spec is unchanged


def test_replacing_the_relays_request_sends_execution_down_the_alternative() -> None:
    env = RequestReplacement(_env(), edge=("relay", "receiver"))
    info = run_episode(env, make_policy("rule"), index=_index(env, "relay"))
    (record,) = _records(info, "RequestReplacement")
    assert record["replacement_binding"] != record["binding"]
    assert str(info["outcome"]) == "TERMINAL_FAILURE" and info["metrics"]["handoff_verified"]


def test_an_unreliable_edge_draws_its_own_fault() -> None:
    env = UnreliableChannel(_env(), duplicate=1.0, edge=("sender", "crafter"))
    info = run_episode(env, make_policy("rule"), index=_index(env, "chain"))
    assert str(info["outcome"]) == "SUCCESS"
    assert [t.get("copies") for t in info["trace"] if t["stage"] == "deliver"] == [2, None]
    every = UnreliableChannel(_env(), drop=0.5, seed=1)
    faults = {every.fault(e, (e.first, e.second))[0] for e in every.unwrapped.episodes[:40]}
    assert faults == {"drop", "none"}


def test_counterfactual_feedback_of_one_peer_leaves_the_other_edge_true() -> None:
    env = CounterfactualFeedback(_env("team_feedback", route="feedback"), edge=("requester", "second_peer"))
    info = run_episode(env, make_policy("rule"), index=0)
    ep = env.unwrapped.episodes[0]
    (record,) = _records(info, "CounterfactualFeedback")
    assert record["edge"] == [ep.first, ep.agent_of["second_peer"]] and record["injected"] != record["true_response"]
    responses = [t for t in info["trace"] if t["stage"] == "respond"]
    assert len(responses) == 2 and str(info["outcome"]) != "SUCCESS"


def test_a_team_trace_records_and_replays(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gencoord_env.commands.replay import replay_file

    path = tmp_path / "team.jsonl"
    env = TraceRecorder(RequestRemoval(_env(), edge=("wood_sender", "builder")), path)
    for k in range(0, 24, 5):
        run_episode(env, make_policy("rule"), index=k)
    results = replay_file(path)
    assert results and all(r.ok for r in results), [r.mismatches for r in results if not r.ok]
