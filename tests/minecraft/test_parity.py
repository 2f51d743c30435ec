"""Parity: the same episodes on ``sim`` and ``minecraft`` give the same outcome and final ground truth."""
from __future__ import annotations

import pytest

import gencoord_env
from gencoord_env.agents.rollout import run_episode
from gencoord_env.agents import make_policy
from gencoord_env.tasks import Episode, pool

pytestmark = pytest.mark.usefixtures("mc_world")

EPISODES = [Episode(c, perm) for c, perm in zip(pool("request")[::20], (0, 1) * 8)] + [
    Episode(pool("goal_capability")[0], 0), Episode(pool("goal_capability")[1], 1)]


def _final(env, route: str) -> tuple[str, dict]:  # type: ignore[no-untyped-def]
    info = run_episode(env, make_policy("rule"), index=0)
    truth = next(t for t in info["trace"] if t["stage"] == "verify")["ground_truth"]
    return str(info["outcome"]), truth.to_dict()


@pytest.mark.parametrize("episode", EPISODES, ids=lambda e: e.id)
def test_same_outcome_and_ground_truth(mc_world, episode: Episode) -> None:  # type: ignore[no-untyped-def]
    route = "feedback" if episode.is_goal_capability else "forward"
    sim = _final(gencoord_env.parallel_env(pool=[episode], backend="sim", route=route), route)
    mc = _final(gencoord_env.parallel_env(pool=[episode], backend="minecraft", route=route, world=mc_world), route)
    assert sim[0] == mc[0] == "SUCCESS"
    assert sim[1]["inventories"] == mc[1]["inventories"]
    assert sim[1]["containers"] == mc[1]["containers"]
    assert sim[1]["sites"] == mc[1]["sites"]
