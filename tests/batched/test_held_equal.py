"""The batched engine is held equal to the full pipeline, over every pool, route and menu kind the env serves.

``test_every_joint_choice_matches_the_env``: for each (pool, route, menu) the env accepts, a pipeline env that
the engine never touches is walked through every reachable joint choice (every unmasked slot of every
decision, to the end of the episode) of the first cluster of each template under each role order (a team:
each rotation); the engine, stepped in lockstep through the same choices (a batch per depth), must
show at every node the same observation tokens, every agent's action mask, the same deciding agent,
rewards, ending and outcome. At the first decision of the first two episodes every masked slot and two
out-of-range actions are played too. ``GENCOORD_PARITY=all`` walks every episode of every pool (the figure in the engine's report).

``test_random_play_matches_the_env``: 10^5 decision steps of random play (mostly valid slots, some masked or
out of range), each batch row mirrored by a pipeline env reset to the episode the engine drew.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import gencoord_env
from gencoord_env.batched import OUTCOMES, BatchedEngine, GameTree
from gencoord_env.envs.gencoord.menu import MENUS
from gencoord_env.envs.gencoord.routes import ROUTES
from gencoord_env.tasks.pool_value import POOL_NAMES

EVERY_EPISODE = os.environ.get("GENCOORD_PARITY") == "all"
PROCEDURAL_EPISODES = 8


def make(pool: str, route: str, menu: str, observations: str = "tokens", **kwargs: Any) -> Any:
    return gencoord_env.parallel_env(backend="sim", pool=pool, route=route, menu=menu, actions="menu",
                                     observations=observations, infos="numbers", **kwargs)


def sample(env: Any) -> list[int]:
    """Each template under each role order (a team's: each rotation): its first cluster's episodes."""
    if env.pool.endless:
        return list(range(PROCEDURAL_EPISODES))
    if EVERY_EPISODE:
        return list(range(len(env.episodes)))
    seen: dict[str, list[int]] = {}
    for k, e in enumerate(env.episodes):
        picked = seen.setdefault(e.template.id, [])
        if len(picked) < len(e.roles):
            picked.append(k)
    return sorted(k for ks in seen.values() for k in ks)


def replay(env: Any, episode: int, path: tuple[int, ...]) -> dict[str, Any]:
    """What the env shows after ``path`` (menu slots) from the start of ``episode``."""
    obs, infos = env.reset(options={"index": episode})
    rewards: dict[str, float] = {}
    terms = truncs = {a: False for a in obs}
    for slot in path:
        turn = next(a for a, i in infos.items() if i["deciding"])
        obs, rewards, terms, truncs, infos = env.step({turn: slot})
    turn = next((a for a, i in infos.items() if i["deciding"]), None)
    outcome = env.unwrapped.full_infos()[next(iter(obs))]["outcome"] if turn is None else None
    return {"obs": obs, "turn": turn, "rewards": rewards, "terminated": any(terms.values()),
            "truncated": any(truncs.values()) and not any(terms.values()), "outcome": outcome}


def check_row(engine: BatchedEngine, batch: Any, masks: np.ndarray, row: int, want: dict[str, Any], where: str) -> None:
    """Row ``row`` of the engine's ``batch`` (``masks``: ``engine.masks()`` then) shows what the env showed."""
    agents = engine.agents
    turn = int(batch.turn[row])
    assert (agents[turn] if turn >= 0 else None) == want["turn"], where
    for k, agent in enumerate(agents):
        seen = want["obs"][agent]
        for part, value in seen.items():
            if part == "action_mask":
                assert np.array_equal(masks[row, k], value == 1), (where, agent)
            else:
                got = engine.observations(batch.obs[row, k], part)
                assert (np.array_equal(got, value) if isinstance(value, np.ndarray) else got == value), (where, agent, part)
        assert batch.reward[row, k] == np.float32(want["rewards"].get(agent, 0.0)), (where, agent)
    assert bool(batch.terminated[row]) == want["terminated"] and bool(batch.truncated[row]) == want["truncated"], where
    code = int(batch.outcome[row])
    if want["turn"] is None and (want["terminated"] or want["truncated"]):
        assert (OUTCOMES[code] if code >= 0 else None) == want["outcome"], where


def walk(make_env: Callable[[], Any], episodes: list[int] | None = None) -> dict[str, int]:
    """Every joint choice of ``episodes`` (default: ``sample``) in a fresh env and in the engine; counts."""
    env = make_env()
    episodes = sample(env) if episodes is None else episodes
    tree = GameTree(make_env(), episodes=max(episodes) + 1)
    slots = tree.slots
    counts = {"episodes": len(episodes), "nodes": 0, "leaves": 0, "masked": 0}
    paths: list[tuple[int, tuple[int, ...]]] = [(k, ()) for k in episodes]
    depth = 0
    while paths:
        wants = [replay(env, k, path) for k, path in paths]
        engine = BatchedEngine(tree, len(paths), autoreset=False)
        batch = engine.reset(episodes=[k for k, _ in paths])
        for d in range(depth):
            batch = engine.step(np.array([path[d] for _, path in paths]))
        masks = engine.masks()
        following = []
        for row, ((k, path), want) in enumerate(zip(paths, wants)):
            check_row(engine, batch, masks, row, want, f"episode {k}, choices {path}")
            counts["nodes"] += 1
            if want["turn"] is None:
                counts["leaves"] += 1
                continue
            mask = want["obs"][want["turn"]]["action_mask"]
            following += [(k, (*path, int(s))) for s in np.flatnonzero(mask)]
            if depth == 0 and row < 2:  # the masked slots and two out-of-range actions of a first decision
                for slot in [*np.flatnonzero(mask == 0).tolist(), -1, slots + 3]:
                    one = BatchedEngine(tree, 1, autoreset=False)
                    one.reset(episodes=[k])
                    after = one.step(np.array([slot]))
                    check_row(one, after, one.masks(), 0, replay(env, k, (slot,)), f"episode {k}, slot {slot}")
                    counts["masked"] += 1
        paths, depth = following, depth + 1
    return counts


def combos() -> list[tuple[str, str, str]]:
    return [(p, r, m) for p in POOL_NAMES for r in sorted(ROUTES) for m in MENUS]


@pytest.mark.parametrize(("pool", "route", "menu"), combos())
def test_every_joint_choice_matches_the_env(pool: str, route: str, menu: str) -> None:
    try:
        make(pool, route, menu)
    except ValueError as e:  # the env refuses the combination (a team pool off its routes, an unsolvable pool)
        pytest.skip(f"the env refuses it: {e}")
    counts = walk(lambda: make(pool, route, menu))
    print(f"\n{pool} {route} {menu}: {counts}")
    assert counts["leaves"] > counts["episodes"] and counts["masked"] > 0


@pytest.mark.parametrize("observations", ["bag", "text"])
def test_the_other_observation_forms_and_the_state_match(observations: str) -> None:
    counts = walk(lambda: make("heldout", "forward", "branches", observations), list(range(8)))
    assert counts["leaves"] > 8
    env, tree = make("heldout", "forward", "default", observations), GameTree(make("heldout", "forward", "default", observations), state=True)
    engine = BatchedEngine(tree, 4, autoreset=False)
    batch = engine.reset(episodes=[0, 1, 2, 3])
    batch = engine.step(np.ones(4, dtype=np.int64))
    for row, k in enumerate([0, 1, 2, 3]):
        _, infos = env.reset(options={"index": k})
        env.step({next(a for a, i in infos.items() if i["deciding"]): 1})
        state, got = env.state(), engine.states("observation")[row]
        assert np.array_equal(got, state) if isinstance(state, np.ndarray) else got == state


def test_a_truncation_matches_the_env() -> None:
    """``max_cycles=1``: the forward route's first decision ends the episode as a truncation, without an outcome."""
    counts = walk(lambda: make("heldout", "forward", "default", max_cycles=1), list(range(4)))
    tree = GameTree(make("heldout", "forward", "default", max_cycles=1), episodes=4)
    tree.expand_all()
    assert tree.truncated.any() and (tree.outcome[tree.truncated] == -1).all() and counts["leaves"] > 4


#: (pool, route, menu): 12,500 decision steps each, 10^5 in all
RANDOM_PLAY = [("train", "forward", "default"), ("heldout", "forward", "branches"), ("heldout", "single_step", "branches"),
               ("request", "feedback", "default"), ("horizon", "requester_only", "branches"),
               ("visibility", "centralized", "default"), ("chain3", "forward", "branches"), ("teams", "feedback", "default")]
STEPS = 12_500


@pytest.mark.parametrize(("pool", "route", "menu"), RANDOM_PLAY)
def test_random_play_matches_the_env(pool: str, route: str, menu: str, steps: int = STEPS) -> None:
    rows = 16
    envs = [make(pool, route, menu) for _ in range(rows)]
    engine = BatchedEngine(GameTree(make(pool, route, menu)), rows, seed=1, episodes=sample(envs[0]))
    batch = engine.reset()
    rng = np.random.default_rng(0)
    current = [env.reset(options={"index": int(k)}) for env, k in zip(envs, batch.episode)]
    ended = 0
    for step in range(steps // rows):
        actions = engine.sample(rng.random(rows))
        odd = rng.random(rows) < 0.05  # a masked or out-of-range slot now and then
        actions[odd] = rng.integers(-2, engine.slots + 2, size=int(odd.sum()))
        batch = engine.step(actions)
        masks = engine.masks()
        for row, env in enumerate(envs):
            obs, infos = current[row]
            turn = next(a for a, i in infos.items() if i["deciding"])
            obs, rewards, terms, truncs, infos = env.step({turn: int(actions[row])})
            where = f"step {step}, row {row}"
            for k, agent in enumerate(engine.agents):
                assert batch.reward[row, k] == np.float32(rewards[agent]), where
            done = not env.agents
            assert bool(batch.terminated[row] | batch.truncated[row]) == done, where
            if done:
                ended += 1
                code = env.unwrapped.full_infos()[turn]["outcome"]
                assert OUTCOMES[int(batch.outcome[row])] == code, where
                final = engine.tree.obs[int(batch.final[row])]
                for k, agent in enumerate(engine.agents):
                    assert np.array_equal(engine.observations(final[k]), obs[agent]["observation"]), where
                obs, infos = env.reset(options={"index": int(batch.episode[row])})
            current[row] = (obs, infos)
            for k, agent in enumerate(engine.agents):
                assert np.array_equal(engine.observations(batch.obs[row, k]), obs[agent]["observation"]), where
                assert np.array_equal(masks[row, k], obs[agent]["action_mask"] == 1), where
    assert ended > steps // 4
