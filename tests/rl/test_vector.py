"""The native vector entry point (SAME_STEP autoreset), the parallel env's episode statistics and the run log."""
from __future__ import annotations

import io
import re

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.agents.vector import GenCoordVectorEnv
from gencoord_env.commands.run_log import RunLog
from gencoord_env.wrappers import EpisodeStatistics, RequestRemoval

VIEW = dict(backend="sim", pool="heldout", actions="menu", observations="bag")


def _episodes_in(vec, steps: int) -> int:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    vec.reset(seed=0)
    ended = 0
    for _ in range(steps):
        masks = vec.action_masks() if hasattr(vec, "action_masks") else np.stack(vec.call("action_masks"))
        _, _, terms, truncs, _ = vec.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
        ended += int((terms | truncs).sum())
    return ended


def test_make_vec_builds_the_native_batch_with_same_step_autoreset() -> None:
    vec = gymnasium.make_vec("gencoord_env/GenCoord-v0", num_envs=3, vectorization_mode="vector_entry_point", **VIEW)
    assert isinstance(vec, GenCoordVectorEnv) and vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    obs, _ = vec.reset(seed=0)
    assert vec.observation_space.contains(obs) and vec.action_masks().shape == (3, vec.single_action_space.n)
    first = obs["observation"].copy()
    obs, rewards, terms, _, infos = vec.step(np.argmax(vec.action_masks()[:, 1:], axis=1) + 1)
    # one sender decision ends each episode; the returned observation is already the next episode's
    assert terms.all() and infos["_final_obs"].all() and vec.observation_space.contains(obs)
    assert all(vec.single_observation_space.contains(o) for o in infos["final_obs"])
    assert not np.array_equal(obs["observation"], first)
    # Gymnasium's default (NEXT_STEP) spends every other step on a reset: half the episodes in as many steps
    sync = gymnasium.make_vec("gencoord_env/GenCoord-v0", num_envs=3, vectorization_mode="sync", **VIEW)
    assert _episodes_in(vec, 20) == 60 and _episodes_in(sync, 20) == 30


def test_the_vector_entry_point_refuses_a_bad_size() -> None:
    with pytest.raises(ValueError, match=re.escape("num_envs must be a positive int, got 0")):
        GenCoordVectorEnv(num_envs=0, **VIEW)


@pytest.mark.parametrize("infos", ["full", "numbers"])
def test_episode_statistics_of_the_parallel_env(infos: str) -> None:
    rule = make_policy("rule")
    env = EpisodeStatistics(RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="request", infos=infos)), window=8)
    for k in range(12):
        obs, step_infos = env.reset(options={"index": k})
        while env.agents:
            turn = next(a for a in env.agents if env.unwrapped.full_infos()[a]["deciding"])
            full = env.unwrapped.full_infos()[turn]
            obs, rewards, _, _, step_infos = env.step({turn: rule.act(env.unwrapped.observation_text(turn), full)})
        stats = step_infos["agent_a"]["episode"] if infos == "full" else {
            "r": step_infos["agent_a"]["episode_r"], "l": step_infos["agent_a"]["episode_l"], "s": step_infos["agent_a"]["episode_s"]}
        assert stats == {"r": rewards["agent_a"], "l": 2, "s": float(rewards["agent_a"] == 1.0)}
    assert env.episodes == 12 and len(env.successes) == 8 and 0.0 < np.mean(env.successes) < 1.0


def test_the_run_log_writes_csv_rows_and_refuses_a_changed_layout() -> None:
    out = io.StringIO()
    log = RunLog(out)
    log.write(10, success=0.25, loss=1.5)
    log.write(20, success=0.5, loss=1.0)
    assert out.getvalue() == "step,success,loss\n10,0.25,1.5\n20,0.5,1.0\n"
    with pytest.raises(ValueError, match=re.escape("RunLog row keys ['step', 'success'] differ from the columns")):
        log.write(30, success=1.0)
