"""Team episodes on Minecraft: three (to five) bots in one arena, every team template x binding x rotation
solved by the rule agents, and parity with the sim (same outcome, same final ground truth)."""
from __future__ import annotations

import pytest

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.agents.rollout import run_episode
from gencoord_env.tasks import Episode, pool_episodes

pytestmark = pytest.mark.usefixtures("mc_world")


def _matched_set(pool: str, template: str) -> list[Episode]:
    """Every binding x rotation of the first public instance of ``template`` in ``pool``."""
    episodes = [e for e in pool_episodes(pool) if e.template.id == template]
    first = episodes[0].cluster.pair_key
    return [e for e in episodes if e.cluster.pair_key == first]


EPISODES = [
    *(e for t in ("chain", "relay", "fan_in") for e in _matched_set("teams", t)),
    *_matched_set("team_feedback", "workcells"),
    *(e for n in (4, 5) for e in _matched_set(f"chain{n}", f"chain_{n}") if e.binding == "TABLE_TO_B"),
]


def _final(env) -> tuple[str, str, dict]:  # type: ignore[no-untyped-def]
    info = run_episode(env, make_policy("rule"), index=0)
    truth = next(t for t in info["trace"] if t["stage"] == "verify")["ground_truth"]
    return str(info["outcome"]), info["reason"], truth.to_dict()


def test_every_team_template_binding_and_rotation_is_covered() -> None:
    templates = {e.template.id for e in EPISODES}
    assert templates == {"chain", "relay", "fan_in", "workcells", "chain_4", "chain_5"}
    for t in ("chain", "relay", "fan_in", "workcells"):
        mine = [e for e in EPISODES if e.template.id == t]
        assert len(mine) == len(mine[0].template.bindings) * 3


@pytest.mark.parametrize("episode", EPISODES, ids=lambda e: e.id)
def test_team_episode_succeeds_on_minecraft_as_on_the_sim(mc_world, episode: Episode) -> None:  # type: ignore[no-untyped-def]
    route = "feedback" if episode.template.id == "workcells" else "forward"
    sim = _final(gencoord_env.parallel_env(pool=[episode], backend="sim", route=route))
    mc = _final(gencoord_env.parallel_env(pool=[episode], backend="minecraft", route=route, world=mc_world))
    assert sim[0] == "SUCCESS", sim[1]
    assert mc[0] == "SUCCESS", mc[1]
    assert set(mc[2]["inventories"]) == set(episode.agents)
    for part in ("inventories", "containers", "sites"):
        assert sim[2][part] == mc[2][part], part


def test_a_two_agent_episode_after_a_team_one_has_two_bots_again(mc_world) -> None:  # type: ignore[no-untyped-def]
    from gencoord_env.tasks import pool

    team = gencoord_env.parallel_env(pool=EPISODES[:1], backend="minecraft", world=mc_world)
    assert str(run_episode(team, make_policy("rule"), index=0)["outcome"]) == "SUCCESS"
    pair = gencoord_env.parallel_env(pool=[Episode(pool("request")[0], 0)], backend="minecraft", world=mc_world)
    info = run_episode(pair, make_policy("rule"), index=0)
    truth = next(t for t in info["trace"] if t["stage"] == "verify")["ground_truth"]
    assert str(info["outcome"]) == "SUCCESS" and set(truth.inventories) == {"agent_a", "agent_b"}
