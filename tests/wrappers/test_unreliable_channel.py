from __future__ import annotations

import re
from collections import Counter

import pytest
from gencoord_env.agents.rollout import rollout, summarize
from gencoord_env.agents import make_policy
from wrapper_play import interventions_in, play

import gencoord_env
from gencoord_env.wrappers import UnreliableChannel


def _env(**kw):
    return UnreliableChannel(gencoord_env.parallel_env(backend="sim", pool="request"), **kw)


@pytest.mark.parametrize("fault", ["drop", "delay"])
def test_lost_or_late_request_never_reaches_the_receiver(fault):
    out = play(_env(**{fault: 1.0}), 0)
    receiver_obs = out["steps"][1]["obs"][out["steps"][1]["turn"]]
    assert "REQ from" not in receiver_obs
    [rec] = interventions_in(out["info"]["trace"])
    assert rec["fault"] == fault and rec["request"].requested_plan
    assert out["info"]["metrics"]["wire_bytes"] == 0  # nothing crossed before the commitment


def test_duplicate_shows_two_copies_and_counts_both():
    plain = play(gencoord_env.parallel_env(backend="sim", pool="request"), 0)
    dup = play(_env(duplicate=1.0), 0)
    receiver_obs = dup["steps"][1]["obs"][dup["steps"][1]["turn"]]
    assert receiver_obs.count("MESSAGE REQ from") == 2
    assert dup["info"]["metrics"]["wire_bytes"] == 2 * plain["info"]["metrics"]["wire_bytes"]
    assert dup["info"]["metrics"]["wire_messages"] == 2
    assert next(r for r in dup["info"]["trace"] if r["stage"] == "deliver")["copies"] == 2
    assert dup["info"]["outcome"].value == "SUCCESS"  # the rule receiver is idempotent


def test_no_fault_leaves_the_episode_byte_identical():
    plain = play(gencoord_env.parallel_env(backend="sim", pool="request"), 4)
    clean = play(_env(seed=5), 4)
    assert [s["obs"] for s in clean["steps"]] == [s["obs"] for s in plain["steps"]]
    assert interventions_in(clean["info"]["trace"])[0]["fault"] == "none"
    assert clean["info"]["outcome"] == plain["info"]["outcome"]


def test_faults_follow_their_probabilities_and_the_seed():
    env = _env(drop=0.25, delay=0.25, duplicate=0.25, seed=11)
    faults = Counter(env.fault(e)[0] for e in env.unwrapped.episodes)
    assert set(faults) == {"drop", "delay", "duplicate", "none"}
    assert all(40 <= n <= 120 for n in faults.values())  # 320 episodes, 80 expected each
    same = _env(drop=0.25, delay=0.25, duplicate=0.25, seed=11)
    other = _env(drop=0.25, delay=0.25, duplicate=0.25, seed=12)
    eps = env.unwrapped.episodes
    assert [env.fault(e) for e in eps] == [same.fault(e) for e in eps]
    assert [env.fault(e) for e in eps] != [other.fault(e) for e in eps]
    # lost requests cost success through the paired ambiguity; duplicates cost nothing
    s = summarize(rollout(env, make_policy("rule")))
    lost = faults["drop"] + faults["delay"]
    assert 320 - lost <= s["successes"] < 320


def test_rejects_bad_probabilities():
    with pytest.raises(ValueError, match=re.escape("drop must be a probability in [0, 1], got 1.5")):
        _env(drop=1.5)
    with pytest.raises(ValueError, match="at most 1"):
        _env(drop=0.6, duplicate=0.6)
