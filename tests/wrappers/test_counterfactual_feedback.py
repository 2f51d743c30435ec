from __future__ import annotations

import re

import pytest
from gencoord_env.agents.rollout import rollout, summarize
from gencoord_env.agents import make_policy
from wrapper_play import interventions_in, play

import gencoord_env
from gencoord_env.pipeline.response import Response, respond
from gencoord_env.wrappers import CounterfactualFeedback
from gencoord_env.wrappers.counterfactual_feedback import paired_episode


def _env(**kw):
    return gencoord_env.parallel_env(backend="sim", pool="goal_capability", route="feedback", **kw)


def test_requester_view_initial_proposal_and_world_are_unchanged():
    plain, cf = play(_env(), 0), play(CounterfactualFeedback(_env()), 0)
    (i0, a0), (i1, a1) = plain["steps"], cf["steps"]
    assert i1["obs"] == i0["obs"] and i1["action"] == i0["action"]  # requester input + initial proposal
    # only the RESPONSE message differs in the revision context
    assert i1["turn"] == a1["turn"]
    lines0, lines1 = a0["obs"][a0["turn"]].splitlines(), a1["obs"][a1["turn"]].splitlines()
    changed = [(x, y) for x, y in zip(lines0, lines1) if x != y]
    assert len(lines0) == len(lines1) and len(changed) == 1 and changed[0][0].startswith("MESSAGE RESPONSE ")
    # the executable world is the true episode's
    reset0 = [r for r in plain["info"]["trace"] if r["stage"] == "verify"][0]["verdict"]
    assert reset0.code.value == "SUCCESS"
    assert cf["info"]["outcome"].value != "SUCCESS"


def test_injected_response_is_the_paired_modes_and_recorded():
    env = CounterfactualFeedback(_env())
    out = play(env, 2)
    episode = env.unwrapped.session.episode
    [rec] = interventions_in(out["info"]["trace"])
    paired = paired_episode(episode)
    assert paired.cluster.goal == episode.cluster.goal and paired.cluster.variant == episode.cluster.variant
    assert {rec["true_mode"], rec["paired_mode"]} == {"RAW_PROCESSOR", "FINISHED_RECEIVER"}
    assert isinstance(rec["injected"], Response) and rec["injected"] != rec["true_response"]
    sent = out["steps"][0]["action"]
    from gencoord_env import dsl

    request = dsl.parse(sent).peer_requests[0]
    assert rec["injected"] == respond(request, paired) and rec["true_response"] == respond(request, episode)
    responded = next(r for r in out["info"]["trace"] if r["stage"] == "respond")
    assert responded["response"] == rec["injected"]


def test_rates_feedback_100_counterfactual_0_on_all_40_clusters():
    rule = make_policy("rule")
    assert summarize(rollout(_env(), rule))["success_rate"] == 1.0
    cf = summarize(rollout(CounterfactualFeedback(_env()), rule))
    assert cf["episodes"] == 80 and cf["success_rate"] == 0.0 and cf["decisions_per_episode"] == 2.0


def test_needs_the_feedback_route():
    with pytest.raises(ValueError, match=re.escape("only runs in the routes ['feedback']; this env uses route='forward'")):
        CounterfactualFeedback(gencoord_env.parallel_env(backend="sim", pool="goal_capability"))
