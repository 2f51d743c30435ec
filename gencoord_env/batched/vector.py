"""The PettingZoo-style two-agent vector API: ``num_envs`` copies of a menu env, every value a batched array.

    >>> import numpy as np
    >>> from gencoord_env.batched import ParallelVectorEnv
    >>> vec = ParallelVectorEnv(num_envs=4, pool="heldout", observations="bag", seed=0)
    >>> obs, infos = vec.reset()
    >>> sorted(obs["agent_a"]), obs["agent_a"]["action_mask"].shape
    (['action_mask', 'menu_labels', 'observation'], (4, 19))
    >>> actions = {a: np.zeros(4, dtype=np.int64) for a in vec.agents}
    >>> obs, rewards, terminations, truncations, infos = vec.step(actions)
    >>> bool(terminations["agent_a"].all())   # slot 0, the empty record, ends every episode (CONTRACT_REJECT)
    True

What ``parallel_env`` returns per agent, this returns per agent as arrays of ``num_envs`` rows:
``observations[agent]`` a dict of the observation's parts (``observation``, ``observation_mask`` with
tokens) and ``action_mask`` (int8), ``rewards[agent]`` float32, ``terminations[agent]`` and
``truncations[agent]`` bool, and ``infos[agent]``: ``deciding`` (bool: the agent whose action counts in that
row), ``episode`` (the pool index played), ``outcome`` (an index of ``gencoord_env.batched.OUTCOMES`` where
an episode ended in this step, else -1), ``success`` (bool) and ``_final`` (bool: an episode ended in the
row). ``step`` takes ``actions[agent]``: an int array of ``num_envs`` menu slots (a waiting agent's is
ignored, as in the env; an agent left out plays an out-of-range slot: ``PARSE_FAILURE`` where it decides).
Autoreset is same-step (``agents.vector``'s convention): a row whose episode ended holds the next episode's
first observation. ``state()`` is the centralized state of each row (``state=True``).

Built from keyword arguments (``parallel_env``'s, with ``backend="sim"`` and ``actions="menu"`` implied) or
from an env (``env=``, wrappers included), on a ``GameTree`` of its own or one given (``tree=``, shared
between vector envs of the same env). ``device``: as ``BatchedEngine``'s (torch tensors there). Gathering
whole observations costs more than a step: learners that keep the tables (``engine.table``) and index them
with ``engine`` batches skip it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gencoord_env.batched.engine import Batch, BatchedEngine
from gencoord_env.batched.tree import OUTCOMES, GameTree
from gencoord_env.errors import UsageError

_SUCCESS = OUTCOMES.index(next(c for c in OUTCOMES if c.value == "SUCCESS"))


class ParallelVectorEnv:
    metadata = {"name": "gencoord_batched_v0", "is_parallelizable": True, "autoreset_mode": "same_step"}

    def __init__(self, num_envs: int = 64, env: Any = None, tree: GameTree | None = None, seed: int | None = 0,
                 device: Any = None, state: bool = False, episodes: int | None = None, **env_kwargs: Any) -> None:
        if tree is None:
            if env is None:
                from gencoord_env.envs.gencoord_v0 import parallel_env

                env = parallel_env(**{"backend": "sim", "actions": "menu", "infos": "numbers", **env_kwargs})
            elif env_kwargs:
                raise TypeError(f"pass either env= or the env's keyword arguments, not both ({sorted(env_kwargs)})")
            tree = GameTree(env, episodes=episodes, state=state)
        elif env is not None or env_kwargs:
            raise TypeError("tree= brings its own env; pass no env= and no env keyword arguments with it")
        self.tree = tree
        self.engine = BatchedEngine(tree, num_envs, seed=seed, device=device)
        self.num_envs = self.engine.num_envs
        self.possible_agents = list(tree.agents)
        self.agents = list(tree.agents)
        base = tree.env.unwrapped
        self._spaces = {a: base.observation_space(a) for a in self.possible_agents}
        self._actions = {a: base.action_space(a) for a in self.possible_agents}
        self.state_space = base.state_space
        self._batch: Batch | None = None

    def observation_space(self, agent: str) -> Any:
        """One copy's observation space (the env's own object)."""
        return self._spaces[agent]

    def action_space(self, agent: str) -> Any:
        return self._actions[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """``options={"episodes": array}``: the pool index each row starts at (else drawn)."""
        self._batch = self.engine.reset(seed=seed, episodes=(options or {}).get("episodes"))
        return self._observations(), self._infos()

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        if self._batch is None:
            raise RuntimeError("step() called before reset(); call reset() first")
        if not isinstance(actions, dict):
            raise TypeError(f"step() expects a dict agent -> int array of {self.num_envs} slots, got {type(actions).__name__}")
        columns = [self._column(actions.get(a), a) for a in self.possible_agents]
        engine = self.engine
        stacked = (np.stack(columns, axis=1) if engine.device is None
                   else engine.ops.torch.stack([engine.ops.torch.as_tensor(c, device=engine.ops.device) for c in columns], 1))
        self._batch = b = engine.step(stacked)
        rewards = {a: b.reward[:, k] for k, a in enumerate(self.possible_agents)}
        return (self._observations(), rewards, {a: b.terminated for a in self.possible_agents},
                {a: b.truncated for a in self.possible_agents}, self._infos())

    def _column(self, action: Any, agent: str) -> Any:
        if action is None:
            return np.full(self.num_envs, -1, dtype=np.int64)
        if hasattr(action, "shape") and tuple(action.shape) == (self.num_envs,):
            return action
        raise UsageError(f"actions[{agent!r}] must be an int array of shape ({self.num_envs},), got "
                         f"{getattr(action, 'shape', type(action).__name__)}")

    def _observations(self) -> dict[str, Any]:
        b, engine = self._batch, self.engine
        assert b is not None
        masks = engine.masks()
        parts = engine.tree.observations.parts
        out = {}
        for k, agent in enumerate(self.possible_agents):
            rows = b.obs[:, k]
            obs = {p: engine.observations(rows, p) for p in parts}
            obs["action_mask"] = masks[:, k].to(engine.ops.torch.int8) if engine.device is not None else masks[:, k].astype(np.int8)
            out[agent] = obs
        return out

    def _infos(self) -> dict[str, Any]:
        b = self._batch
        assert b is not None
        done = b.terminated | b.truncated
        shared = {"episode": b.episode, "outcome": b.outcome, "success": b.outcome == _SUCCESS, "_final": done}
        return {a: {**shared, "deciding": b.turn == k} for k, a in enumerate(self.possible_agents)}

    def state(self) -> Any:
        """The centralized state of each row (the env's ``state()``; a tree built with ``state=True``)."""
        if self._batch is None:
            raise RuntimeError("state() called before reset(); call reset() first")
        parts = self.tree.states.parts
        if parts == ("",):
            return self.engine.states("")
        return {p: self.engine.states(p) for p in parts}

    def close(self) -> None:
        self.tree.env.close()


__all__ = ["ParallelVectorEnv"]
