"""The batched engine's API: autoreset, ended episodes without it, actions in either shape, errors that say
what was expected, torch tensors equal to numpy's, and the two-agent vector API in the env's spaces."""
from __future__ import annotations

import re

import numpy as np
import pytest

import gencoord_env
from gencoord_env.batched import OUTCOMES, BatchedEngine, GameTree, ParallelVectorEnv


def tree(pool: str = "heldout", **kwargs: object) -> GameTree:
    return GameTree(gencoord_env.parallel_env(backend="sim", pool=pool, actions="menu", observations="tokens",
                                              infos="numbers", **kwargs))


def test_same_step_autoreset_draws_the_next_episode_and_keeps_the_ended_ones_outcome() -> None:
    engine = BatchedEngine(tree(), 64, seed=3)
    first = engine.reset()
    before = first.episode.copy()
    batch = engine.step(np.zeros(64, dtype=np.int64))  # the empty record: CONTRACT_REJECT at once
    assert batch.terminated.all() and not batch.truncated.any()
    assert {OUTCOMES[k].value for k in batch.outcome} == {"CONTRACT_REJECT"}
    assert (batch.final >= 0).all() and (engine.tree.turn[batch.final] == -1).all()
    assert np.array_equal(first.episode, before)  # arrays handed out earlier are not written to
    assert (engine.tree.turn[engine.node] >= 0).all() and not np.array_equal(batch.episode, before)
    # the same seed draws the same episodes
    again = BatchedEngine(engine.tree, 64, seed=3)
    assert np.array_equal(again.reset().episode, before)


def test_without_autoreset_an_ended_episode_stays_and_earns_nothing_more() -> None:
    engine = BatchedEngine(tree(), 4, autoreset=False)
    roots = engine.reset(episodes=[0, 1, 2, 3])
    # a slot after which the receiver decides (the request was delivered), for each episode
    def delivers(row: int, slot: int) -> bool:
        child = engine.tree.expand([engine.node[row]], [slot])
        return bool(engine.tree.turn[child][0] >= 0)

    going = [next(s for s in np.flatnonzero(roots.action_mask[row]) if delivers(row, s)) for row in range(4)]
    ended = engine.step(np.array([0, 0, going[2], going[3]]))
    assert ended.terminated.tolist() == [True, True, False, False]
    later = engine.step(engine.sample(np.zeros(4)))
    assert later.terminated.tolist() == [False, False, True, True]
    assert (later.reward[:2] == 0).all() and (later.outcome[:2] == -1).all() and (later.final[:2] == -1).all()
    assert np.array_equal(later.episode, [0, 1, 2, 3])


def test_actions_by_row_or_by_agent_and_bad_arrays_are_refused() -> None:
    t = tree()
    a, b = BatchedEngine(t, 8, seed=0), BatchedEngine(t, 8, seed=0)
    a.reset(), b.reset()
    slots = np.arange(8) % 3
    by_agent = np.stack([slots, np.full(8, 99)], axis=1)  # agent_b's column: ignored where it waits
    turn = a.reset().turn
    by_agent[turn == 1] = np.stack([np.full(8, 99), slots], axis=1)[turn == 1]
    b.reset()
    x, y = a.step(slots), b.step(by_agent)
    assert np.array_equal(x.outcome, y.outcome) and np.array_equal(x.obs, y.obs)
    with pytest.raises(TypeError, match=re.escape("actions must be integer menu slots, got an array of float64")):
        a.step(np.zeros(8))
    with pytest.raises(ValueError, match=re.escape("actions must have shape (8,)")):
        a.step(np.zeros(7, dtype=np.int64))
    with pytest.raises(RuntimeError, match="before reset"):
        BatchedEngine(t, 2).step(np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match=re.escape("reset(episodes=...) takes 2 pool indices in 0 .. 255")):
        BatchedEngine(t, 2).reset(episodes=[0, 256])
    with pytest.raises(ValueError, match="num_envs must be a positive int"):
        BatchedEngine(t, 0)


def test_a_tree_needs_a_menu_env_on_the_sim_world_and_a_finite_pool() -> None:
    with pytest.raises(ValueError, match="actions='menu'"):
        GameTree(gencoord_env.parallel_env(backend="sim", pool="heldout"))
    with pytest.raises(ValueError, match="backend='sim'"):
        GameTree(gencoord_env.parallel_env(backend="minecraft", pool="heldout", actions="menu"))
    with pytest.raises(ValueError, match=re.escape("pool 'procedural' is endless: pass episodes=N")):
        GameTree(gencoord_env.parallel_env(backend="sim", pool="procedural", actions="menu"))


def test_sampled_slots_are_valid_and_cover_the_menu() -> None:
    engine = BatchedEngine(tree(), 256, seed=0, episodes=range(16))
    batch = engine.reset()
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(20):
        slots = engine.sample(rng.random(256))
        assert batch.action_mask[np.arange(256), slots].all()
        seen |= set(slots.tolist())
        batch = engine.step(slots)
    assert len(seen) >= 5  # a heldout sender has 4 or more cuts besides the empty record


def test_torch_tensors_step_as_numpy_arrays_do() -> None:
    torch = pytest.importorskip("torch")
    t = tree(menu="branches")
    n, c = BatchedEngine(t, 16, autoreset=False), BatchedEngine(t, 16, autoreset=False, device="cpu")
    episodes = np.arange(16) * 7
    a, b = n.reset(episodes=episodes), c.reset(episodes=torch.as_tensor(episodes))
    rng = np.random.default_rng(0)
    for _ in range(3):
        slots = n.sample(rng.random(16))
        a, b = n.step(slots), c.step(torch.as_tensor(slots))
        for x, y in zip(a, b):
            assert isinstance(y, torch.Tensor) and np.array_equal(np.asarray(x), y.numpy())
    assert torch.equal(c.observations(b.obs), torch.as_tensor(n.observations(a.obs)))


def test_the_vector_api_is_the_parallel_envs_batched() -> None:
    vec = ParallelVectorEnv(num_envs=6, pool="heldout", observations="tokens", menu="branches", state=True)
    single = vec.tree.env
    assert vec.possible_agents == single.possible_agents
    assert vec.observation_space("agent_a") is single.observation_space("agent_a")
    obs, infos = vec.reset(options={"episodes": np.arange(6)})
    space = vec.observation_space("agent_a")
    for agent in vec.agents:
        for row in range(6):
            assert space.contains({part: value[row] for part, value in obs[agent].items()})
    assert (infos["agent_a"]["deciding"] ^ infos["agent_b"]["deciding"]).all()
    assert vec.state()["observation"].shape == (6, 1024)
    deciding = {a: np.where(infos[a]["deciding"], 1, 0) for a in vec.agents}
    obs, rewards, terms, truncs, infos = vec.step(deciding)
    assert rewards["agent_a"].dtype == np.float32 and terms["agent_a"].shape == (6,)
    with pytest.raises(ValueError, match=re.escape("actions['agent_a'] must be an int array of shape (6,)")):
        vec.step({"agent_a": np.zeros(5, dtype=np.int64)})
    with pytest.raises(TypeError, match="pass either env= or the env's keyword arguments"):
        ParallelVectorEnv(env=single, pool="heldout")


def test_the_vector_api_on_torch_gives_the_same_values() -> None:
    torch = pytest.importorskip("torch")
    shared = tree(menu="branches")
    on_numpy = ParallelVectorEnv(num_envs=4, tree=shared)
    on_torch = ParallelVectorEnv(num_envs=4, tree=shared, device="cpu")
    start = {"episodes": np.array([0, 1, 2, 3])}
    on_numpy.reset(options=start), on_torch.reset(options=start)
    last = on_numpy.engine.sample(np.full(4, 0.99))  # each deciding agent's last valid slot
    slots = {agent: last for agent in on_numpy.agents}
    obs, rewards, terms, truncs, infos = on_numpy.step(slots)
    t_obs, t_rewards, t_terms, t_truncs, t_infos = on_torch.step({a: torch.as_tensor(v) for a, v in slots.items()})
    going = ~infos["agent_a"]["_final"]  # an ended row starts an episode each backend draws on its own
    assert going.any()
    for agent in on_numpy.agents:
        for mine, theirs in ((rewards, t_rewards), (terms, t_terms), (truncs, t_truncs)):
            assert np.array_equal(mine[agent], theirs[agent].numpy())
        for key in ("outcome", "success", "_final"):
            assert np.array_equal(infos[agent][key], t_infos[agent][key].numpy())
        for part, value in obs[agent].items():
            assert isinstance(t_obs[agent][part], torch.Tensor)
            assert np.array_equal(value[going], t_obs[agent][part].numpy()[going]), (agent, part)
