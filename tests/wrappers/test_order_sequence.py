"""OrderSequence: K orders in one episode, paid only at its end; every order a real episode of the pool."""
from __future__ import annotations

import re

import pytest
from pettingzoo.test import parallel_api_test

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.wrappers import EpisodeStatistics, OrderSequence


def _play(env, sender_policy) -> tuple[list[float], list[str], dict]:  # type: ignore[no-untyped-def]
    """Play one sequence: (the deciding agent's reward at each step, the orders' episode ids, the last infos)."""
    rule = make_policy("rule")
    obs, infos = env.reset(options={"index": 6})
    rewards, ids = [], [env.unwrapped.session.episode.id]
    while env.agents:
        turn = next(a for a, i in infos.items() if i["deciding"])
        full = env.unwrapped.full_infos()[turn]
        policy = sender_policy if full["role"] == "sender" else rule
        obs, reward, _, _, infos = env.step({turn: policy.act(env.unwrapped.observation_text(turn), full)})
        rewards.append(reward[turn])
        if env.agents and env.unwrapped.session.episode.id != ids[-1]:
            ids.append(env.unwrapped.session.episode.id)
    return rewards, ids, infos


@pytest.mark.parametrize("reward", ["all", "mean"])
def test_the_sequence_pays_at_its_end_for_its_orders(reward: str) -> None:
    inner = EpisodeStatistics(gencoord_env.parallel_env(backend="sim", pool="heldout"))
    env = OrderSequence(inner, orders=4, reward=reward)
    rewards, ids, infos = _play(env, make_policy("rule"))
    assert ids == [env.unwrapped.episodes[k].id for k in range(6, 10)]  # orders 6 .. 9, each a real episode
    assert len(rewards) == 8 and rewards[:-1] == [0.0] * 7 and rewards[-1] == 1.0  # eight decisions, one payment
    assert list(inner.successes) == [1.0] * 4  # inside the sequence, each order is an episode
    assert all(i["order"] == 3 and i["orders_succeeded"] == 4 for i in infos.values())
    guesses = [_play(env, make_policy("random", seed=s)) for s in range(6)]
    for rewards, _, infos in guesses:
        won = infos["agent_a"]["orders_succeeded"]
        assert won == sum(str(o) == "SUCCESS" for o in infos["agent_a"]["order_outcomes"])
        assert rewards[-1] == (won / 4 if reward == "mean" else float(won == 4)) and rewards[:-1] == [0.0] * 7
    assert len({infos["agent_a"]["orders_succeeded"] for _, _, infos in guesses}) > 1


def test_numeric_infos_stay_numbers_and_arguments_are_checked() -> None:
    env = OrderSequence(gencoord_env.parallel_env(backend="sim", pool="heldout", infos="numbers", actions="menu"), orders=2)
    _, infos = env.reset(seed=0)
    assert all(isinstance(v, (int, float)) for i in infos.values() for v in i.values())
    with pytest.raises(ValueError, match=re.escape("orders must be a positive int, got 0")):
        OrderSequence(env, orders=0)
    with pytest.raises(ValueError, match=re.escape("unknown reward 'sum' for a sequence of orders; expected one of ['all', 'mean']")):
        OrderSequence(env, reward="sum")


def test_pettingzoos_parallel_api_test_passes() -> None:
    parallel_api_test(OrderSequence(gencoord_env.parallel_env(backend="sim", pool="heldout", actions="menu",
                                                              observations="bag"), orders=3), num_cycles=60)
