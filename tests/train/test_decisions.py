"""Decision points of the pools the env serves, and the env-replay reward that scores completions at them."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import gencoord_env
from gencoord_env import FailureCode
from gencoord_env.outcomes import STAGED_REWARD
from gencoord_env.train.decisions import DecisionPoint, Replay, decision_points, load_points, write_points


@pytest.fixture(scope="module")
def points() -> list[DecisionPoint]:
    return decision_points("train", "forward", episodes=8)


@pytest.fixture(scope="module")
def replay() -> Replay:
    return Replay("train", "forward", partial_credit=True)


def test_every_decision_of_every_episode_with_its_prefix_and_observation(points: list[DecisionPoint]) -> None:
    assert len(points) == 16 and len({p.id for p in points}) == 16
    env = gencoord_env.parallel_env(pool="train", backend="sim", route="forward")
    for sender, receiver in zip(points[::2], points[1::2]):
        assert (sender.stage, receiver.stage) == ("sender_initial", "receiver_after_request")
        assert sender.index == receiver.index and sender.prefix == () and receiver.prefix == (sender.reference,)
        assert sender.agent != receiver.agent
        # The prompt is exactly what the env shows the decider after the prefix.
        obs, infos = env.reset(options={"index": receiver.index})
        assert obs[sender.agent] == sender.prompt and infos[sender.agent]["deciding"]
        obs, _, _, _, infos = env.step({sender.agent: sender.reference})
        assert obs[receiver.agent] == receiver.prompt and infos[receiver.agent]["stage"] == "receiver_after_request"


def test_stage_filter_keeps_the_full_prefixes(points: list[DecisionPoint]) -> None:
    receivers = decision_points("train", "forward", stages={"receiver_after_request"}, episodes=8)
    assert receivers == [p for p in points if p.stage == "receiver_after_request"]


def test_unknown_stages_are_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("route 'forward' has no decision stage 'sender_inital'; "
                                                   "its stages are sender_initial, receiver_after_request")):
        decision_points("train", "forward", stages=["sender_inital"])


def test_single_step_prefixes_hold_both_agents_actions() -> None:
    pts = decision_points("heldout", "single_step", episodes=2)
    assert [p.stage for p in pts[:3]] == ["sender_initial", "sender_after_obtain", "receiver_after_request"]
    assert pts[2].prefix == (pts[0].reference, pts[1].reference)


def test_points_round_trip_through_jsonl(points: list[DecisionPoint], tmp_path: Path) -> None:
    write_points(points, tmp_path / "points.jsonl")
    assert load_points(tmp_path / "points.jsonl") == points


def test_the_references_own_actions_succeed(points: list[DecisionPoint], replay: Replay) -> None:
    assert [replay.score_point(p, p.reference) for p in points] == [1.0] * len(points)
    assert replay.score_point(points[1], "\n  " + points[1].reference + "\n") == 1.0  # surrounding whitespace


def test_partial_credit_is_the_envs_staged_reward(points: list[DecisionPoint], replay: Replay) -> None:
    sender, receiver = points[0], points[1]
    other = "SITE_A" if "SITE_B" in receiver.reference else "SITE_B"
    wrong_branch = re.sub(r"SITE_[AB]", other, receiver.reference).replace("site_a", "site_x").replace("site_b", "site_a").replace("site_x", "site_b")
    cases = {
        "": (FailureCode.PARSE_FAILURE, 0.0),
        receiver.reference + "\ntrailing words": (FailureCode.PARSE_FAILURE, 0.0),
        receiver.reference.replace("REQ -", f"REQ {receiver.agent} control.wait()"): (FailureCode.CONTRACT_REJECT, 0.2),
        wrong_branch: (FailureCode.RESOLUTION_CONFLICT, 0.4),
        receiver.reference: (FailureCode.SUCCESS, 1.0),
    }
    binary = Replay("train", "forward")
    for completion, (outcome, credit) in cases.items():
        played = replay.play(receiver.index, receiver.prefix, completion)
        assert (played.outcome, played.reward) == (outcome, credit), (completion, played.reason)
        assert STAGED_REWARD[outcome] == credit
        assert binary.score(receiver.index, receiver.prefix, completion) == float(outcome is FailureCode.SUCCESS)
    # At the sender's decision the rule partner answers whatever request arrives; the whole episode is scored.
    assert replay.play(sender.index, (), sender.reference).actions == (sender.reference, receiver.reference)


def test_replay_is_deterministic(points: list[DecisionPoint], replay: Replay) -> None:
    a = replay.play(points[2].index, points[2].prefix, points[2].reference)
    b = replay.play(points[2].index, points[2].prefix, points[2].reference)
    assert (a.reward, a.outcome, a.actions, a.metrics) == (b.reward, b.outcome, b.actions, b.metrics)


def test_misplaced_decisions_fail_early(points: list[DecisionPoint], replay: Replay) -> None:
    with pytest.raises(ValueError, match=re.escape("episode index 960 is outside pool 'train' (0..959)")):
        replay.score(960, (), "")
    with pytest.raises(ValueError, match=re.escape("the 1 prefix actions end episode 0 of 'train' (PARSE_FAILURE)")):
        replay.score(0, ("nonsense",), "")
    stale = DecisionPoint(**{**points[1].__dict__, "prompt": points[1].prompt.replace("POSITION", "POS")})
    with pytest.raises(ValueError, match="another observation than the decision point's prompt"):
        replay.score_point(stale, stale.reference)
    with pytest.raises(ValueError, match=re.escape("is from 'heldout'/'forward', this replay runs 'train'/'forward'")):
        replay.score_point(DecisionPoint(**{**points[1].__dict__, "pool": "heldout"}), "")
