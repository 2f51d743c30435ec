from __future__ import annotations

import io
import json

import pytest
from gencoord_env.agents.rollout import rollout
from gencoord_env.agents import make_policy

import gencoord_env
from gencoord_env.commands.replay import ReplayError, replay, replay_file
from gencoord_env.wrappers import CounterfactualFeedback, TraceRecorder, UnreliableChannel


def test_round_trip_through_a_file(tmp_path):
    path = tmp_path / "t.jsonl"
    env = TraceRecorder(UnreliableChannel(gencoord_env.parallel_env(backend="sim", pool="request"), drop=0.3, duplicate=0.3, seed=2), path)
    rollout(env, make_policy("rule"), episodes=8)
    results = replay_file(path)
    assert len(results) == 8 and all(r.ok for r in results), [r.mismatches for r in results]


def test_round_trip_feedback_route_with_counterfactual_response():
    buf = io.StringIO()
    env = TraceRecorder(CounterfactualFeedback(gencoord_env.parallel_env(backend="sim", pool="goal_capability", route="feedback")), buf)
    rollout(env, make_policy("rule"), episodes=2)
    for line in buf.getvalue().splitlines():
        result = replay(json.loads(line))
        assert result.ok, result.mismatches


def _record() -> dict:
    buf = io.StringIO()
    rollout(TraceRecorder(gencoord_env.parallel_env(backend="sim", pool="heldout"), buf), make_policy("rule"), episodes=1)
    return json.loads(buf.getvalue())


def test_a_changed_action_is_reported():
    rec = _record()
    rec["actions"][1]["action"] = "SELF -\nREQ -"  # the receiver now answers nothing
    result = replay(rec)
    assert not result.ok
    assert any(m.startswith("outcome:") for m in result.mismatches)
    assert any(m.startswith("trace") for m in result.mismatches)


def test_a_missing_intervention_is_reported():
    buf = io.StringIO()
    from gencoord_env.wrappers import RequestRemoval

    rollout(TraceRecorder(RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="request")), buf), make_policy("rule"), episodes=1)
    rec = json.loads(buf.getvalue())
    rec["interventions"] = []
    assert not replay(rec).ok


def test_unsupported_version_raises():
    rec = _record()
    rec["version"] = 99
    with pytest.raises(ReplayError, match="version 99 is not supported"):
        replay(rec)
