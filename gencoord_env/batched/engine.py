"""Stepping many episodes at once: each a node of a ``GameTree``, a step a handful of array operations.

``BatchedEngine(tree, num_envs)`` holds ``num_envs`` episodes, each at one node of ``tree``. ``step(actions)``
takes the deciding agent's menu slot in each (an int array of ``num_envs``; or ``(num_envs, agents)``, from
which each episode's deciding agent's column is read) and moves every episode to the node its choice leads
to: a lookup in ``tree.child``, computed by the env the first time a choice is met and a lookup from then
on. Observations are rows of the tree's tables (``obs``: one row index per agent), gathered by the caller
when and where it wants them (``observations``; a learner on a GPU gathers there).

Autoreset (default): an episode that ends in a step is replaced in that same step by one drawn uniformly
from ``episodes`` (all of the tree's by default) with the engine's seeded generator; the step's ``reward``,
``terminated``, ``truncated`` and ``outcome`` are the ended episode's, ``final`` its last node (-1 where
none ended), ``obs`` and ``turn`` the new episode's first. With ``autoreset=False`` an ended episode stays
at its last node: later steps give it no reward and no ending until ``reset``.

``device``: ``None`` for numpy arrays; a torch device (``"cpu"``, ``"cuda"``) for torch tensors there (torch
is needed only then). Every array the engine returns lives on that device.

    >>> import numpy as np, gencoord_env
    >>> from gencoord_env.batched import GameTree
    >>> tree = GameTree(gencoord_env.parallel_env(backend="sim", pool="heldout", actions="menu", observations="bag"))
    >>> engine = BatchedEngine(tree, num_envs=8, seed=0)
    >>> batch = engine.reset()
    >>> batch = engine.step(np.zeros(8, dtype=np.int64))   # slot 0, the empty record: CONTRACT_REJECT
    >>> bool(batch.terminated.all()), float(batch.reward.sum())
    (True, 0.0)
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from gencoord_env.batched.tree import GameTree
from gencoord_env.errors import UsageError


class Batch(NamedTuple):
    """What ``reset`` and ``step`` return; arrays of ``num_envs`` rows (numpy, or torch on the engine's device)."""

    #: (B, agents) each agent's observation: a row of the tree's observation table (``engine.observations``)
    obs: Any
    #: (B,) the index of the deciding agent in each episode (in ``tree.agents``)
    turn: Any
    #: (B, slots) bool: the deciding agent's valid menu slots
    action_mask: Any
    #: (B, agents) float32: the rewards of this step
    reward: Any
    #: (B,) bool: an episode ended in this step with an outcome / without one (``max_cycles``)
    terminated: Any
    truncated: Any
    #: (B,) int8: the outcome of an episode that ended in this step (an index of ``tree.OUTCOMES``), else -1
    outcome: Any
    #: (B,) the last node of an episode that ended in this step, else -1 (``tree.obs[final]``: its final observations)
    final: Any
    #: (B,) the episode (pool index) each row plays now
    episode: Any


class _Numpy:
    """The array operations a step needs, in numpy."""

    def __init__(self, seed: int | None) -> None:
        self.rng = np.random.default_rng(seed)

    def put(self, a: np.ndarray, dtype: Any = None) -> np.ndarray:
        return a if dtype is None else a.astype(dtype, copy=False)

    def host(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def draw(self, pool: np.ndarray, k: int) -> np.ndarray:
        return pool[self.rng.integers(len(pool), size=k)]

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    @staticmethod
    def take(a: np.ndarray, index: np.ndarray) -> np.ndarray:
        return np.take(a, index, axis=0)  # faster than a[index] for a row index

    where, nonzero, zeros = staticmethod(np.where), staticmethod(np.flatnonzero), staticmethod(np.zeros)
    index, float32, boolean = np.int32, np.float32, np.bool_


class _Torch:
    """The same operations in torch on ``device``."""

    def __init__(self, seed: int | None, device: Any) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.gen = torch.Generator(device=self.device)
        if seed is not None:
            self.gen.manual_seed(seed)
        self.index, self.float32, self.boolean = torch.int64, torch.float32, torch.bool

    def put(self, a: np.ndarray, dtype: Any = None) -> Any:
        t = self.torch.as_tensor(np.require(a, requirements=["C", "W"]), device=self.device)  # copies a read-only table
        return t if dtype is None else t.to(dtype)

    def host(self, a: Any) -> np.ndarray:
        return a.detach().cpu().numpy() if hasattr(a, "detach") else np.asarray(a)

    def draw(self, pool: Any, k: int) -> Any:
        return pool[self.torch.randint(len(pool), (k,), generator=self.gen, device=self.device)]

    def seed(self, seed: int) -> None:
        self.gen.manual_seed(seed)

    def where(self, c: Any, a: Any, b: Any) -> Any:
        return self.torch.where(c, a, b)

    def nonzero(self, mask: Any) -> Any:
        return self.torch.nonzero(mask).flatten()

    def take(self, a: Any, index: Any) -> Any:
        return a.index_select(0, index)

    def zeros(self, shape: Any, dtype: Any) -> Any:
        return self.torch.zeros(shape, dtype=dtype, device=self.device)


#: the per-node arrays a step reads, copied to the engine's device
_STEPPED = ("child", "turn", "obs", "mask", "reward", "terminated", "truncated", "outcome", "state")


class BatchedEngine:
    """``num_envs`` episodes of ``tree`` stepped at once (see the module docstring)."""

    # the tree's arrays of _STEPPED on the engine's device, set by _refresh
    _child: Any
    _turn: Any
    _obs: Any
    _mask: Any
    _reward: Any
    _terminated: Any
    _truncated: Any
    _outcome: Any
    _state: Any

    def __init__(self, tree: GameTree, num_envs: int, seed: int | None = 0, autoreset: bool = True,
                 episodes: Sequence[int] | np.ndarray | None = None, device: Any = None) -> None:
        if not isinstance(tree, GameTree):
            raise TypeError(f"expected a GameTree, got {type(tree).__name__}")
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise UsageError(f"num_envs must be a positive int, got {num_envs!r}")
        self.tree = tree
        self.num_envs = int(num_envs)
        self.autoreset = bool(autoreset)
        self.agents = tree.agents
        self.slots = tree.slots
        self.ops: Any = _Numpy(seed) if device is None else _Torch(seed, device)
        self.device = device
        pool = np.arange(tree.episodes) if episodes is None else np.unique(np.asarray(episodes, dtype=np.int64))
        if pool.size == 0 or pool.min() < 0 or pool.max() >= tree.episodes:
            raise UsageError(f"episodes must be pool indices in 0 .. {tree.episodes - 1}, got {episodes!r}")
        self.pool = self.ops.put(pool, self.ops.index)
        self._version = -1
        self._tables: dict[tuple[str, str], tuple[int, Any]] = {}
        self.node: Any = None
        self.episode: Any = None
        self._rows = self.ops.put(np.arange(self.num_envs), self.ops.index)

    # --- the tree's arrays on the engine's device ------------------------------------------------------
    def _refresh(self) -> None:
        if self._version == self.tree.version:
            return
        arrays, n, ops = self.tree.arrays, len(self.tree), self.ops
        for name in _STEPPED:
            if isinstance(ops, _Numpy):  # the tree's own arrays (read only here)
                setattr(self, f"_{name}", arrays[name])
            else:  # torch indexes with int64
                a = arrays[name][:n]
                setattr(self, f"_{name}", ops.put(a, ops.index if a.dtype.kind == "i" and name != "outcome" else None))
        masks = self.tree.masks
        valid = masks.table("") != 0 if len(masks) else np.zeros((0, self.slots), dtype=np.bool_)
        self._mask_table = ops.put(valid)
        # each mask's valid slots packed to the left, and how many: uniform sampling is two lookups
        packed = np.argsort(~valid, axis=1, kind="stable")
        self._valid_count, self._valid_slots = ops.put(valid.sum(1)), ops.put(packed, ops.index)
        self._root = ops.put(self.tree.root_nodes, None if isinstance(ops, _Numpy) else ops.index)
        # flat forms for one-dimensional takes: (node, column) -> node * columns + column; the deciding
        # agent's mask row of each node (the first agent's where the episode has ended)
        self._columns = self.slots + 1
        self._child_flat = self._child.reshape(-1)
        turn = np.maximum(arrays["turn"][:n], 0)
        self._decider_mask = ops.put(arrays["mask"][np.arange(n), turn], ops.index)
        self._version = self.tree.version

    def _roots(self, episodes: Any) -> Any:
        roots = self._root[episodes]
        if bool((roots < 0).any()):
            self.tree.roots(self.ops.host(episodes))
            self._refresh()
            roots = self._root[episodes]
        return roots

    # --- the API -----------------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, episodes: Sequence[int] | np.ndarray | None = None) -> Batch:
        """Start ``num_envs`` episodes: ``episodes`` (one pool index per row) or drawn from the engine's pool."""
        if seed is not None:
            self.ops.seed(seed)
        self._refresh()
        if episodes is None:
            chosen = self.ops.draw(self.pool, self.num_envs)
        else:
            host = np.asarray(self.ops.host(episodes), dtype=np.int64)
            if host.shape != (self.num_envs,) or host.min() < 0 or host.max() >= self.tree.episodes:
                raise UsageError(f"reset(episodes=...) takes {self.num_envs} pool indices in 0 .. {self.tree.episodes - 1}")
            chosen = self.ops.put(host, self.ops.index)
        self.episode = chosen
        self.node = self._roots(chosen)
        b = self.num_envs
        ops = self.ops
        none = ops.zeros(b, ops.boolean)
        return self._batch(ops.zeros((b, len(self.agents)), ops.float32), none, none,
                           ops.put(np.full(b, -1, dtype=np.int8)), ops.put(np.full(b, -1), ops.index))

    def step(self, actions: Any) -> Batch:
        """Move every episode by its deciding agent's choice (see the module docstring)."""
        if self.node is None:
            raise RuntimeError("step() called before reset(); call reset() first")
        self._refresh()  # another engine on the same tree may have added nodes
        ops, node = self.ops, self.node
        act = self._deciding_actions(actions)
        column = ops.where((act >= 0) & (act < self.slots), act, self.slots)
        flat = node * self._columns + column
        nxt = ops.take(self._child_flat, flat)
        if bool((nxt < 0).any()):  # met for the first time: the env computes it
            missing = ops.nonzero(nxt < 0)
            self.tree.expand(ops.host(node[missing]), ops.host(column[missing]))
            self._refresh()
            nxt = ops.take(self._child_flat, flat)
        take = ops.take
        reward, terminated, truncated = take(self._reward, nxt), take(self._terminated, nxt), take(self._truncated, nxt)
        if not self.autoreset:  # an episode that had ended stays: nothing more happens to it
            live = self._turn[node] >= 0
            reward, terminated, truncated = reward * live[:, None], terminated & live, truncated & live
        done = terminated | truncated
        outcome = ops.where(done, take(self._outcome, nxt), -1)
        final = ops.where(done, nxt, -1)
        if self.autoreset and bool(done.any()):
            ended = ops.nonzero(done)
            fresh = ops.draw(self.pool, len(ended))
            nxt = nxt.copy() if isinstance(ops, _Numpy) else nxt.clone()
            nxt[ended] = self._roots(fresh)
            episode = self.episode.copy() if isinstance(ops, _Numpy) else self.episode.clone()
            episode[ended] = fresh  # a copy: the arrays returned before stay as they were
            self.episode = episode
        self.node = nxt
        return self._batch(reward, terminated, truncated, outcome, final)

    def _deciding_actions(self, actions: Any) -> Any:
        ops = self.ops
        act: Any = actions if not isinstance(ops, _Numpy) or isinstance(actions, np.ndarray) else np.asarray(actions)
        if isinstance(ops, _Torch):
            act = ops.torch.as_tensor(act, device=ops.device)
            integral = not (act.is_floating_point() or act.is_complex() or act.dtype == ops.torch.bool)
        else:
            integral = act.dtype.kind in "iu"
        if not integral:
            raise TypeError(f"actions must be integer menu slots, got an array of {act.dtype}")
        if act.ndim == 2 and act.shape == (self.num_envs, len(self.agents)):
            turn = self._turn[self.node]
            act = act[self._rows, ops.where(turn >= 0, turn, 0)]
        if tuple(act.shape) != (self.num_envs,):
            raise UsageError(f"actions must have shape ({self.num_envs},) (the deciding agent's slot in each episode) or "
                             f"({self.num_envs}, {len(self.agents)}) (every agent's), got {tuple(act.shape)}")
        return act.astype(np.int64, copy=False) if isinstance(ops, _Numpy) else act.long()

    def _batch(self, reward: Any, terminated: Any, truncated: Any, outcome: Any, final: Any) -> Batch:
        node, take = self.node, self.ops.take
        mask = take(self._mask_table, take(self._decider_mask, node))
        return Batch(take(self._obs, node), take(self._turn, node), mask, reward, terminated, truncated, outcome, final,
                     self.episode)

    def sample(self, uniform: Any) -> Any:
        """A uniformly random valid slot of each episode's deciding agent, from ``uniform``: (B,) floats in
        [0, 1) (``rng.random(num_envs)``; a torch engine: a tensor on its device)."""
        self._refresh()
        take = self.ops.take
        rows = take(self._decider_mask, self.node)
        count = take(self._valid_count, rows)
        pick = (uniform * count).astype(np.int64) if isinstance(self.ops, _Numpy) else (uniform * count).long()
        return take(self._valid_slots.reshape(-1), rows * self.slots + pick)

    # --- observations --------------------------------------------------------------------------------------
    def table(self, part: str = "observation", rows: str = "observations") -> Any:
        """Every row of one part of the tree's ``observations`` (or ``states``) on the engine's device; a batch's
        ``obs`` indexes it. Rows are added as nodes are met: ask again after steps that met new ones."""
        source = getattr(self.tree, rows)
        part = part if part in source.parts else ""
        cached = self._tables.get((rows, part))
        if cached is None or cached[0] != len(source):
            table = source.table(part)
            cached = (len(source), table if isinstance(self.ops, _Numpy) or table.dtype == object else self.ops.put(table))
            self._tables[(rows, part)] = cached
        return cached[1]

    def observations(self, obs: Any, part: str = "observation") -> Any:
        """The observations whose rows are ``obs`` (any shape of row indices), as one array of that shape
        followed by the part's shape."""
        return self.table(part)[obs]

    def masks(self) -> Any:
        """(B, agents, slots) bool: every agent's action mask now (a waiting agent's: slot 0 only)."""
        self._refresh()
        return self._mask_table[self._mask[self.node]]

    def states(self, part: str = "observation") -> Any:
        """(B, ...) the centralized state of each episode now (a tree built with ``state=True``)."""
        if not self.tree.keeps_state:
            raise UsageError("states() needs a tree built with GameTree(env, state=True)")
        self._refresh()
        return self.table(part, "states")[self._state[self.node]]


__all__ = ["Batch", "BatchedEngine"]
