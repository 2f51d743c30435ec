"""The centralized state (``state()``, ``state_space``): what the centralized route's planner would see, in
the env's observation mode, with nothing the agents' own views and their messages do not hold."""
from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test.state_test import state_test

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.tokens import as_tokenizer, bag_of_words


@pytest.mark.parametrize("observations", ["text", "tokens", "bag"])
def test_pettingzoos_state_test_passes_in_every_observation_mode(observations: str) -> None:
    kw = dict(backend="sim", pool="heldout", actions="menu", observations=observations)
    state_test(gencoord_env.env(**kw), gencoord_env.parallel_env(**kw), num_cycles=20)


@pytest.mark.parametrize("pool", ["heldout", "teams", "goal_capability"])
def test_at_reset_the_state_is_the_centralized_routes_first_observation(pool: str) -> None:
    forward = gencoord_env.parallel_env(backend="sim", pool=pool, route="feedback" if pool == "goal_capability" else "forward")
    central = gencoord_env.parallel_env(backend="sim", pool=pool, route="centralized")
    for k in range(0, len(forward.episodes), 7):
        forward.reset(options={"index": k})
        obs, infos = central.reset(options={"index": k})
        planner = next(a for a, i in infos.items() if i["deciding"])
        assert forward.state() == obs[planner]


def test_the_state_holds_only_what_the_agents_saw_and_sent() -> None:
    """Every PRIVATE and MESSAGE line of the state, at every step, is in some agent's own observation of the
    episode so far: the state never shows the hidden binding to a critic beyond its holder's view."""
    env = gencoord_env.parallel_env(backend="sim", pool="heldout", route="single_step")
    rule = make_policy("rule")
    for k in range(0, 128, 5):
        obs, infos = env.reset(options={"index": k})
        seen = {line for text in obs.values() for line in text.splitlines()}
        while True:
            facts = [line for line in env.state().splitlines() if line.startswith(("PRIVATE", "MESSAGE", "HISTORY"))]
            assert all(line in seen or line.endswith(" -") for line in facts), [f for f in facts if f not in seen]
            if not env.agents:
                break
            turn = next(a for a, i in infos.items() if i["deciding"])
            obs, _, _, _, infos = env.step({turn: rule.act(obs[turn], infos[turn])})
            seen |= {line for text in obs.values() for line in text.splitlines()}


def test_the_bag_state_counts_the_prior_apart() -> None:
    text = gencoord_env.parallel_env(backend="sim", pool="heldout")
    bag = gencoord_env.parallel_env(backend="sim", pool="heldout", observations="bag")
    text.reset(options={"index": 3})
    bag.reset(options={"index": 3})
    tokenizer = as_tokenizer(None)
    state = bag.state()
    prior = next(p for p in text.state().split("\nPRIOR ", 1)[1:])
    v = tokenizer.vocab_size
    assert state.shape == bag.state_space.shape and state[v:].sum() > 0
    assert np.array_equal(state[v:], bag_of_words(tokenizer, (), "PRIOR " + prior.split("\nAGENT ", 1)[0])[v:])
