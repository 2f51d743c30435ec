"""A native batch of single-agent views: ``gymnasium.make_vec("gencoord_env/GenCoord-v0", num_envs=n,
vectorization_mode="vector_entry_point", **view_kwargs)``.

    >>> import gymnasium, gencoord_env
    >>> vec = gymnasium.make_vec("gencoord_env/GenCoord-v0", num_envs=4, vectorization_mode="vector_entry_point",
    ...                          backend="sim", actions="menu", observations="bag")
    >>> obs, infos = vec.reset(seed=0)
    >>> obs["observation"].shape[0], vec.action_masks().shape[0]
    (4, 4)

``n`` views (``gencoord_env.agents.single_agent``, same keyword arguments; the ``sim`` backend by default,
copy ``i`` seeded ``seed + i``) stepped one after another in this process, observations batched in
``single_observation_space``'s batch space. Autoreset is ``SAME_STEP`` (``metadata["autoreset_mode"]``):
an episode that ends in a step is reset in that same step, the returned observation is the next episode's
first, and the ended episode's last observation and infos are in ``infos["final_obs"]`` and
``infos["final_info"]`` (masked by ``infos["_final_obs"]``). A sender's episode is one step, so Gymnasium's
default ``NEXT_STEP`` autoreset (one step that only resets after each ending) spends half the steps on
resets; ``SAME_STEP`` spends none. ``action_masks()`` is the batch's masks (``actions="menu"``), what
sb3-contrib and masked samplers read.
"""
from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from gencoord_env.agents.single_agent import GenCoordGym
from gencoord_env.errors import UsageError


class GenCoordVectorEnv(VectorEnv):
    metadata = {"render_modes": list(GenCoordGym.metadata["render_modes"]), "autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int = 1, **view_kwargs: Any) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise UsageError(f"num_envs must be a positive int, got {num_envs!r}")
        view_kwargs.setdefault("backend", "sim")
        seed = view_kwargs.pop("seed", 0)
        self.envs = [GenCoordGym(seed=None if seed is None else seed + i, **view_kwargs) for i in range(num_envs)]
        self.num_envs = num_envs
        self.render_mode = self.envs[0].render_mode
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._obs: Any = create_empty_array(self.single_observation_space, num_envs)

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        seeds = seed if isinstance(seed, list) else [None if seed is None else seed + i for i in range(self.num_envs)]
        if len(seeds) != self.num_envs:
            raise UsageError(f"reset(seed=[...]) needs {self.num_envs} seeds, one per env; got {len(seeds)}")
        observations: list[Any] = []
        infos: dict[str, Any] = {}
        for i, (env, s) in enumerate(zip(self.envs, seeds)):
            obs, info = env.reset(seed=s, options=options)
            observations.append(obs)
            infos = self._add_info(infos, info, i)
        return self._batch(observations), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        observations: list[Any] = []
        infos: dict[str, Any] = {}
        for i, (env, action) in enumerate(zip(self.envs, gymnasium.vector.utils.iterate(self.action_space, actions))):
            obs, reward, terminated, truncated, info = env.step(action)
            rewards[i], terminations[i], truncations[i] = reward, terminated, truncated
            if terminated or truncated:  # SAME_STEP: the next episode starts now
                ended = {"final_obs": obs, "final_info": info}
                obs, info = env.reset()
                info = {**info, **ended}
            observations.append(obs)
            infos = self._add_info(infos, info, i)
        return self._batch(observations), rewards, terminations, truncations, infos

    def _batch(self, observations: list[Any]) -> Any:
        if isinstance(self.single_observation_space, gymnasium.spaces.Text):
            return tuple(observations)
        return concatenate(self.single_observation_space, observations, self._obs)

    def action_masks(self) -> np.ndarray:
        """(num_envs, N) booleans: each env's current menu mask."""
        return np.stack([env.action_masks() for env in self.envs])

    def render(self) -> tuple[Any, ...] | None:
        if self.render_mode is None:
            return None
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


__all__ = ["GenCoordVectorEnv"]
