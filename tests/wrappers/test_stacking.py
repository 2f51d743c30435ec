"""Interventions compose and never change the env they wrap."""
from __future__ import annotations

import io

import gencoord_env
from gencoord_env.agents.rollout import rollout, summarize
from gencoord_env.agents import make_policy
from gencoord_env.envs.gencoord.stages import Stages
from gencoord_env.wrappers import RequestRemoval, RequestReplacement, TraceRecorder, UnreliableChannel, interventions
from wrapper_play import interventions_in, play


def _rate(env) -> float:  # type: ignore[no-untyped-def]
    return summarize(rollout(env, make_policy("rule"), episodes=40))["success_rate"]


def test_the_inner_env_is_unchanged_after_wrapping() -> None:
    base = gencoord_env.parallel_env(backend="sim", pool="request")
    removal = RequestRemoval(base)
    replacement = RequestReplacement(base)  # a second wrapper over the same base env
    assert base.stages == Stages()
    assert _rate(replacement) == 0.0
    assert _rate(removal) == 0.5
    assert _rate(base) == 1.0  # used on its own, the base env delivers every request as sent
    out = play(base, 0)
    assert interventions_in(out["info"]["trace"]) == []


def test_two_interventions_on_one_stage_compose_innermost_first() -> None:
    base = gencoord_env.parallel_env(backend="sim", pool="request")
    env = RequestReplacement(UnreliableChannel(base, duplicate=1.0))
    out = play(env, 0)
    records = interventions_in(out["info"]["trace"])
    assert [r["intervention"] for r in records] == ["UnreliableChannel", "RequestReplacement"]
    assert records[0]["fault"] == "duplicate"
    deliver = next(r for r in out["info"]["trace"] if r["stage"] == "deliver")
    assert deliver["copies"] == 2  # the replacement rewrote both copies the channel delivered
    receiver_ctx = out["steps"][1]["info"]["context"]
    assert [m.request for m in receiver_ctx.messages] == [records[1]["replacement"]] * 2
    assert _rate(RequestReplacement(UnreliableChannel(gencoord_env.parallel_env(backend="sim", pool="request"), duplicate=1.0))) == 0.0


def test_removal_then_replacement_replaces_nothing_left_to_deliver() -> None:
    env = RequestReplacement(RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="request")))
    out = play(env, 0)
    assert [r["intervention"] for r in interventions_in(out["info"]["trace"])] == ["RequestRemoval", "RequestReplacement"]
    assert out["steps"][1]["info"]["context"].request is None
    assert _rate(env) == 0.5


def test_a_recorded_stack_replays_in_the_same_order() -> None:
    import json

    from gencoord_env.commands.replay import replay

    stream = io.StringIO()
    env = TraceRecorder(RequestReplacement(UnreliableChannel(gencoord_env.parallel_env(backend="sim", pool="request"), drop=0.5, seed=1)), stream)
    assert [s["name"] for s in interventions(env)] == ["UnreliableChannel", "RequestReplacement"]
    rollout(env, make_policy("rule"), episodes=6)
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(records) == 6
    assert all(replay(r).ok for r in records)
