from __future__ import annotations

import re

import pytest
from wrapper_play import interventions_in, play

import gencoord_env
from gencoord_env.agents.rollout import rollout, summarize
from gencoord_env.types import PeerRequest
from gencoord_env.wrappers import RequestRemoval


def test_receiver_gets_no_request_and_sender_is_untouched():
    plain = play(gencoord_env.parallel_env(backend="sim", pool="request"), 0)
    removed = play(RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="request")), 0)
    (s0, r0), (s1, r1) = plain["steps"], removed["steps"]
    sender, receiver = s0["turn"], r0["turn"]
    # the sender's observation and action are byte-identical; only the receiver's messages change
    assert s1["obs"] == s0["obs"] and s1["action"] == s0["action"]
    assert "MESSAGE REQ from" in r0["obs"][receiver]
    assert "MESSAGE -" in r1["obs"][receiver] and "REQ from" not in r1["obs"][receiver]
    assert r1["obs"][sender] == r0["obs"][sender]
    strip = lambda text: re.sub(r"MESSAGE .*", "MESSAGE", text)  # noqa: E731
    assert strip(r1["obs"][receiver]) == strip(r0["obs"][receiver])
    assert removed["info"]["metrics"]["wire_bytes"] == 0
    assert plain["info"]["metrics"]["wire_bytes"] > 0


def test_trace_records_the_removed_request():
    out = play(RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="request")), 3)
    trace = out["info"]["trace"]
    [rec] = interventions_in(trace)
    assert rec["intervention"] == "RequestRemoval"
    [removed] = rec["removed"]
    assert isinstance(removed, PeerRequest) and removed.requested_plan
    deliver = next(r for r in trace if r["stage"] == "deliver")
    assert deliver["sent"] and deliver["delivered"] is None
    # the intervention record precedes the delivery it changed
    assert trace.index(rec) < trace.index(deliver)


def test_rule_receiver_success_is_the_paired_ambiguity_ceiling():
    summary = summarize(rollout(RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="request")), _rule()))
    assert summary["episodes"] == 320
    assert summary["success_rate"] == 0.5
    assert summary["decisions_per_episode"] == 2.0  # schedule unchanged


def test_refuses_routes_without_a_request():
    with pytest.raises(ValueError, match=re.escape("RequestRemoval rewrites the 'deliver' stage, which only runs in the routes ['forward', 'single_step']; this env uses route='feedback'")):
        RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="goal_capability", route="feedback"))


def _rule():
    from gencoord_env.agents import make_policy

    return make_policy("rule")
