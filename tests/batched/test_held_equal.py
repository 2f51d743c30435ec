"""The batched engine is held equal to the full pipeline, over every pool, route and menu kind the env serves.

``test_every_joint_choice_matches_the_env``: for each (pool, route, menu) the env accepts, a pipeline env that
the engine never touches (``Reference``) is walked through every reachable joint choice (every unmasked slot of
every decision, to the end of the episode) of sampled episodes: the first cluster of each template, its role
orders (a team's: its rotations) shared between the two menus (the default menu walks the first, third, ...,
the branches menu the second, fourth, ...). The engine, reset to each of those points' episodes and stepped
along their choices (a batch per depth), must show at every one the same observation tokens, every agent's
action mask, the same deciding agent, rewards, ending and outcome. At the first decision of the first two
episodes every masked slot and two out-of-range actions are played too. ``GENCOORD_PARITY=all`` walks every
episode of every pool under both menus.

``test_random_play_matches_the_env``: 10^5 decision steps of random play (mostly valid slots, some masked or
out of range) with autoreset; each row's choices are followed in the reference env from the episode the
engine drew, and every step is compared as arrays.
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


def sample(env: Any, part: int = 0, parts: int = 1) -> list[int]:
    """The first cluster of each template under each role order (a team's: each rotation); of each template's,
    the ``part``-th of every ``parts`` (each menu walks its share)."""
    if env.pool.endless:
        return list(range(part, PROCEDURAL_EPISODES, parts))
    if EVERY_EPISODE:
        return list(range(len(env.episodes)))
    seen: dict[str, list[int]] = {}
    for k, e in enumerate(env.episodes):
        picked = seen.setdefault(e.template.id, [])
        if len(picked) < len(e.roles):
            picked.append(k)
    return sorted(k for ks in seen.values() for k in ks[part::parts])


def shown(env: Any, obs: dict[str, Any], infos: dict[str, Any], rewards: dict[str, float], terms: dict[str, bool],
          truncs: dict[str, bool]) -> dict[str, Any]:
    """What the env shows now: observations, the deciding agent, the last step's rewards, ending and outcome."""
    turn = next((a for a, i in infos.items() if i["deciding"]), None)
    outcome = env.unwrapped.full_infos()[next(iter(obs))]["outcome"] if turn is None else None
    return {"obs": obs, "turn": turn, "rewards": rewards, "terminated": any(terms.values()),
            "truncated": any(truncs.values()) and not any(terms.values()), "outcome": outcome}


class Reference:
    """What a pipeline env of its own (the engine never touches it) shows at each point (episode, choices),
    computed once per point; ``index``: point -> its number in ``values``."""

    def __init__(self, env: Any) -> None:
        self.env, self.index, self.values = env, {}, []

    def _keep(self, episode: int, path: tuple[int, ...], value: dict[str, Any]) -> int:
        k = self.index[(episode, path)] = len(self.values)
        self.values.append(value)
        return k

    def _start(self, episode: int, path: tuple[int, ...]) -> tuple[Any, ...]:
        obs, infos = self.env.reset(options={"index": episode})
        rewards: dict[str, float] = {}
        terms = truncs = {a: False for a in obs}
        for slot in path:
            turn = next(a for a, i in infos.items() if i["deciding"])
            obs, rewards, terms, truncs, infos = self.env.step({turn: slot})
        return obs, infos, rewards, terms, truncs

    def __call__(self, episode: int, path: tuple[int, ...]) -> int:
        """The point's number, the env replayed to it the first time."""
        k = self.index.get((episode, path))
        if k is None:
            obs, infos, rewards, terms, truncs = self._start(episode, path)
            k = self._keep(episode, path, shown(self.env, obs, infos, rewards, terms, truncs))
        return k

    def explore(self, episode: int) -> None:
        """Every point reachable through unmasked slots; each replay goes on along first choices to an end."""
        todo: list[tuple[int, ...]] = [()]
        while todo:
            path = todo.pop()
            obs, infos, rewards, terms, truncs = self._start(episode, path)
            while True:
                value = shown(self.env, obs, infos, rewards, terms, truncs)
                self._keep(episode, path, value)
                if value["turn"] is None:
                    break
                valid = np.flatnonzero(obs[value["turn"]]["action_mask"]).tolist()
                todo += [(*path, s) for s in valid[1:]]
                path = (*path, valid[0])
                obs, rewards, terms, truncs, infos = self.env.step({value["turn"]: valid[0]})

    def arrays(self, agents: tuple[str, ...]) -> dict[str, np.ndarray]:
        """Every point's deciding agent, rewards, ending, outcome and masks, indexed by its number."""
        v = self.values
        return {"turn": np.array([agents.index(x["turn"]) if x["turn"] else -1 for x in v]),
                "reward": np.array([[x["rewards"].get(a, 0.0) for a in agents] for x in v], dtype=np.float32),
                "terminated": np.array([x["terminated"] for x in v]), "truncated": np.array([x["truncated"] for x in v]),
                "outcome": np.array([OUTCOMES.index(x["outcome"]) if x["outcome"] else -1 for x in v]),
                "mask": np.array([[x["obs"][a]["action_mask"] == 1 for a in agents] for x in v])}


def same_observations(engine: BatchedEngine, rows: np.ndarray, refs: np.ndarray, reference: Reference) -> None:
    """Engine observation rows ``rows`` (N, agents) show what the reference's points ``refs`` (N,) showed; each
    distinct (row, point, agent) compared once."""
    agents = engine.agents
    pairs = np.unique(np.stack([rows.reshape(-1), np.repeat(refs, len(agents)), np.tile(np.arange(len(agents)), len(refs))],
                               axis=1), axis=0)
    for row, ref, k in pairs.tolist():
        for part, value in reference.values[ref]["obs"][agents[k]].items():
            if part != "action_mask":
                got = engine.observations(row, part)
                assert np.array_equal(got, value) if isinstance(value, np.ndarray) else got == value, (
                    reference.values[ref]["turn"], agents[k], part)


def walk(make_env: Callable[[], Any], episodes: list[int]) -> dict[str, int]:
    """Every joint choice of ``episodes`` in the reference and in the engine; counts."""
    reference = Reference(make_env())
    for k in episodes:
        reference.explore(k)
    tree = GameTree(make_env(), episodes=max(episodes) + 1)
    tree.expand_all(episodes)
    masked = 0
    for k in episodes[:2]:  # the masked slots and two out-of-range actions of a first decision
        first = reference.values[reference(k, ())]
        mask = first["obs"][first["turn"]]["action_mask"]
        for slot in [*np.flatnonzero(mask == 0).tolist(), -1, tree.slots + 3]:
            reference(k, (slot,))
            masked += 1
    want = reference.arrays(tree.agents)
    points = list(reference.index.items())
    for depth in sorted({len(path) for (_, path), _ in points}):
        rows = [(k, path, ref) for (k, path), ref in points if len(path) == depth]
        refs = np.array([ref for _, _, ref in rows])
        engine = BatchedEngine(tree, len(rows), autoreset=False)
        batch = engine.reset(episodes=[k for k, _, _ in rows])
        for d in range(depth):
            batch = engine.step(np.array([path[d] for _, path, _ in rows]))
        ended = want["turn"][refs] < 0
        assert np.array_equal(batch.turn, want["turn"][refs]), depth
        assert np.array_equal(engine.masks(), want["mask"][refs]), depth
        if depth:  # the step that led there
            assert np.array_equal(batch.reward, want["reward"][refs]), depth
            assert np.array_equal(batch.terminated, want["terminated"][refs] & ended), depth
            assert np.array_equal(batch.truncated, want["truncated"][refs] & ended), depth
            assert np.array_equal(batch.outcome, np.where(ended, want["outcome"][refs], -1)), depth
        same_observations(engine, batch.obs, refs, reference)
    return {"episodes": len(episodes), "nodes": len(points), "leaves": int((want["turn"] < 0).sum()), "masked": masked}


def combos() -> list[tuple[str, str, str]]:
    return [(p, r, m) for p in POOL_NAMES for r in sorted(ROUTES) for m in MENUS]


@pytest.mark.parametrize(("pool", "route", "menu"), combos())
def test_every_joint_choice_matches_the_env(pool: str, route: str, menu: str) -> None:
    try:
        env = make(pool, route, menu)
    except ValueError as e:  # the env refuses the combination (a team pool off its routes, an unsolvable pool)
        pytest.skip(f"the env refuses it: {e}")
    share = (0, 1) if EVERY_EPISODE else (MENUS.index(menu), len(MENUS))
    counts = walk(lambda: make(pool, route, menu), sample(env, *share))
    print(f"\n{pool} {route} {menu}: {counts}")
    assert counts["leaves"] > counts["episodes"] and counts["masked"] > 0


@pytest.mark.parametrize("observations", ["bag", "text"])
def test_the_other_observation_forms_and_the_state_match(observations: str) -> None:
    counts = walk(lambda: make("heldout", "forward", "branches", observations), list(range(8)))
    assert counts["leaves"] > 8
    env, tree = make("heldout", "forward", "default", observations), GameTree(make("heldout", "forward", "default", observations), state=True)
    engine = BatchedEngine(tree, 4, autoreset=False)
    engine.reset(episodes=[0, 1, 2, 3])
    engine.step(np.ones(4, dtype=np.int64))
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
ROWS, STEPS, PLAYED = 500, 25, 4  # a batch of ROWS for STEPS steps over PLAYED episodes of the pool


@pytest.mark.parametrize(("pool", "route", "menu"), RANDOM_PLAY)
def test_random_play_matches_the_env(pool: str, route: str, menu: str) -> None:
    """ROWS episodes at once for STEPS steps (autoreset): mostly valid slots, 5% a masked or out-of-range one.
    Each row's choices are followed in a pipeline env (``Reference``); the step's rewards, endings, outcomes
    and final observations and the next observations, masks and deciding agents are compared as arrays."""
    reference = Reference(make(pool, route, menu))
    picked = sample(reference.env)
    episodes = picked[:: max(1, len(picked) // PLAYED)][:PLAYED]
    engine = BatchedEngine(GameTree(make(pool, route, menu), episodes=max(episodes) + 1), ROWS, seed=1, episodes=episodes)
    batch = engine.reset()
    rng = np.random.default_rng(0)
    paths = [(int(k), ()) for k in batch.episode]
    now = [reference(k, p) for k, p in paths]
    seen: dict[str, list[np.ndarray]] = {k: [] for k in ("obs", "now", "mask", "turn", "reward", "terminated",
                                                         "truncated", "outcome", "final", "after")}
    for _ in range(STEPS):
        seen["obs"].append(batch.obs), seen["now"].append(np.array(now)), seen["turn"].append(batch.turn)
        seen["mask"].append(engine.masks())
        actions = engine.sample(rng.random(ROWS))
        odd = np.flatnonzero(rng.random(ROWS) < 0.05)
        masked = np.argmin(batch.action_mask[odd], axis=1)  # the first masked slot (slot 0, valid, where none is)
        actions[odd] = np.where(rng.random(odd.size) < 0.5, masked, rng.choice([-1, engine.slots + 1], odd.size))
        batch = engine.step(actions)
        after = [reference(k, (*p, int(a))) for (k, p), a in zip(paths, actions.tolist())]
        paths = [(k, (*p, int(a))) for (k, p), a in zip(paths, actions.tolist())]
        for row, ref in enumerate(after):
            if reference.values[ref]["turn"] is None:  # ended: the row plays the episode the engine drew next
                paths[row] = (int(batch.episode[row]), ())
        now = [reference(k, p) for k, p in paths]
        for key in ("reward", "terminated", "truncated", "outcome", "final"):
            seen[key].append(getattr(batch, key))
        seen["after"].append(np.array(after))
    got = {k: np.stack(v) for k, v in seen.items()}
    want = reference.arrays(engine.agents)
    after = got["after"]
    ended = want["turn"][after] < 0
    assert np.array_equal(got["reward"], want["reward"][after])
    assert np.array_equal(got["terminated"], want["terminated"][after] & ended)
    assert np.array_equal(got["truncated"], want["truncated"][after] & ended)
    assert np.array_equal(got["outcome"], np.where(ended, want["outcome"][after], -1))
    assert np.array_equal(got["final"] >= 0, ended)
    assert np.array_equal(got["turn"], want["turn"][got["now"]])
    assert np.array_equal(got["mask"], want["mask"][got["now"]])
    same_observations(engine, got["obs"].reshape(-1, len(engine.agents)), got["now"].reshape(-1), reference)
    same_observations(engine, engine.tree.obs[got["final"][ended]], after[ended], reference)
    assert ended.sum() > ROWS * STEPS // 4 and ROWS * STEPS * len(RANDOM_PLAY) == 10**5
