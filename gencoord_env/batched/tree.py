"""The game tree of a menu env: every decision point its episodes reach, computed by the env itself.

A node is one point of one episode: the episode (its index in the pool) and the menu choices made so far.
``GameTree`` keeps, for every node met, what the env showed there: each agent's observation and action
mask (as rows of de-duplicated tables), who decides, the rewards, whether the episode ended and how
(``outcome``) and, when asked for, the centralized ``state()``. The node a choice leads to (``child``) is
computed the first time it is asked for by the full pipeline: the env is reset to the episode
(``options={"index": k}``) and stepped along the node's choices and then the new one, through whatever
wrappers the env has. Nothing here models the game: a change to the env (its menus, its observations, an
intervention) is what the tree holds.

Each node has ``slots + 1`` children: one per menu slot (a masked slot's child is where the env's
``PARSE_FAILURE`` for it leads) and one, column ``slots``, for any action outside ``0 .. slots - 1``.
The env must be deterministic given the episode and the choices (``backend="sim"``; interventions are
seeded by episode): replaying a node checks that the same agent decides at each step and raises
``NotDeterministic`` otherwise.

    >>> import gencoord_env
    >>> tree = GameTree(gencoord_env.parallel_env(backend="sim", pool="heldout", actions="menu", observations="bag"))
    >>> root = tree.roots([0])[0]
    >>> int(tree.turn[root]), bool(tree.terminated[root])
    (0, False)
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from gencoord_env.errors import UsageError
from gencoord_env.outcomes import FailureCode

#: outcome codes by index (``GameTree.outcome``; -1: none yet, or a truncation)
OUTCOMES: tuple[FailureCode, ...] = tuple(FailureCode)
_OUTCOME_INDEX = {code: k for k, code in enumerate(OUTCOMES)}


class NotDeterministic(RuntimeError):
    """Replaying a node's choices in the env did not lead where they led before."""


class Rows:
    """Values stored once each (observations, masks, states): ``add`` gives a value's row, ``table(part)``
    the rows of one part as an array (a Dict observation has several parts; text rows are an object array)."""

    def __init__(self) -> None:
        self._index: dict[Any, int] = {}
        self._arrays: dict[str, np.ndarray] = {}  # each part's rows, with room to grow

    def __len__(self) -> int:
        return len(self._index)

    def add(self, value: Any) -> int:
        parts = value if isinstance(value, dict) else {"": value}
        key = tuple((k, v.dtype.str, v.shape, v.tobytes()) if isinstance(v, np.ndarray) else (k, v)
                    for k, v in parts.items())
        row = self._index.get(key)
        if row is not None:
            return row
        row = len(self._index)
        if self._arrays and parts.keys() != self._arrays.keys():
            raise UsageError(f"an observation with the parts {sorted(parts)}, expected {sorted(self._arrays)}")
        for k, v in parts.items():
            table = self._arrays.get(k)
            if table is None or row == len(table):
                grown = (np.empty((max(64, 2 * row), *v.shape), dtype=v.dtype) if isinstance(v, np.ndarray)
                         else np.empty(max(64, 2 * row), dtype=object))
                if table is not None:
                    grown[:row] = table
                table = self._arrays[k] = grown
            table[row] = v
        self._index[key] = row
        return row

    @property
    def parts(self) -> tuple[str, ...]:
        """The parts' names (``""``: a value that is not a dict)."""
        return tuple(self._arrays)

    def table(self, part: str = "") -> np.ndarray:
        """Every row of ``part`` (rows x the part's shape), a read-only view."""
        view = self._arrays[part][: len(self)]
        view.flags.writeable = False
        return view


class GameTree:
    """The nodes of ``env``'s episodes met so far (see the module docstring); arrays indexed by node.

    ``env``: a ParallelEnv of this package with ``actions="menu"`` (wrappers allowed), owned by the tree from
    now on. ``episodes``: how many of the pool's episodes (default: all; an endless pool needs a number).
    ``state``: also keep ``env.state()`` at every node (``state_rows``; a centralized critic reads it).
    """

    def __init__(self, env: Any, episodes: int | None = None, state: bool = False) -> None:
        base = env.unwrapped
        if getattr(getattr(base, "interface", None), "actions", None) != "menu":
            raise UsageError("a game tree needs an env with actions='menu' (a Discrete menu of records); got "
                             f"{type(base).__name__} with actions={getattr(getattr(base, 'interface', None), 'actions', None)!r}")
        if base.backend != "sim":
            raise UsageError(f"a game tree replays episodes many times: use backend='sim' (got {base.backend!r}); the "
                             "sim world is held equal to Minecraft by the parity tests")
        if base.pool.endless and episodes is None:
            raise UsageError(f"pool {base.pool_name!r} is endless: pass episodes=N (its first N episodes)")
        size = len(base.episodes) if episodes is None else int(episodes)
        if not 0 < size <= (len(base.episodes) if not base.pool.endless else size):
            raise UsageError(f"episodes must be in 1 .. {len(base.episodes)}, got {episodes!r}")
        self.env = env
        self.agents: tuple[str, ...] = tuple(base.possible_agents)
        self.slots: int = base.interface.n
        self.episodes = size
        self.keeps_state = bool(state)
        self.observations, self.masks, self.states = Rows(), Rows(), Rows()
        self._root = np.full(size, -1, dtype=np.int32)
        self._size = 0
        self._arrays: dict[str, np.ndarray] = {}
        self.replays = 0  # env resets made to compute nodes
        self.restored = False  # its nodes were read from a store (``restore``), not computed in this process
        self.version = 0  # grows whenever nodes are added (engines refresh their copies)
        self._grow(1024)

    # --- the arrays ---------------------------------------------------------------------------------------
    def _grow(self, capacity: int) -> None:
        a, n = len(self.agents), self.slots + 1
        shapes: dict[str, tuple[tuple[int, ...], Any, Any]] = {
            "episode": ((), np.int32, -1), "parent": ((), np.int32, -1), "action": ((), np.int32, -1),
            "turn": ((), np.int8, -1), "child": ((n,), np.int32, -1), "obs": ((a,), np.int32, -1),
            "mask": ((a,), np.int32, -1), "reward": ((a,), np.float32, 0.0), "terminated": ((), np.bool_, False),
            "truncated": ((), np.bool_, False), "outcome": ((), np.int8, -1), "state": ((), np.int32, -1),
            "role": ((), np.int8, -1),
        }
        for name, (shape, dtype, fill) in shapes.items():
            new = np.full((capacity, *shape), fill, dtype=dtype)
            old = self._arrays.get(name)
            if old is not None:
                new[: self._size] = old[: self._size]
            self._arrays[name] = new

    def __len__(self) -> int:
        return self._size

    def _view(self, name: str) -> np.ndarray:
        return self._arrays[name][: self._size]

    @property
    def episode(self) -> np.ndarray:
        """The episode index of each node."""
        return self._view("episode")

    @property
    def turn(self) -> np.ndarray:
        """The index (in ``agents``) of the agent deciding at each node; -1 where the episode has ended."""
        return self._view("turn")

    @property
    def role(self) -> np.ndarray:
        """The role index (0: the first role, the sender or requester) of the agent deciding at each node; -1 at an end."""
        return self._view("role")

    @property
    def child(self) -> np.ndarray:
        """(nodes, slots + 1): the node each choice leads to; -1 where not computed yet."""
        return self._view("child")

    @property
    def obs(self) -> np.ndarray:
        """(nodes, agents): each agent's observation, a row of ``observations``."""
        return self._view("obs")

    @property
    def mask(self) -> np.ndarray:
        """(nodes, agents): each agent's action mask, a row of ``masks``."""
        return self._view("mask")

    @property
    def reward(self) -> np.ndarray:
        """(nodes, agents): the reward each agent got on arriving at the node."""
        return self._view("reward")

    @property
    def terminated(self) -> np.ndarray:
        return self._view("terminated")

    @property
    def truncated(self) -> np.ndarray:
        return self._view("truncated")

    @property
    def outcome(self) -> np.ndarray:
        """Index into ``OUTCOMES`` of an ended episode's outcome; -1 elsewhere (and for a truncation)."""
        return self._view("outcome")

    @property
    def state_rows(self) -> np.ndarray:
        """The row of ``states`` of each node (``state=True``), else -1."""
        return self._view("state")

    @property
    def root_nodes(self) -> np.ndarray:
        """The first node of each episode; -1 where not computed yet (``roots`` computes them)."""
        return self._root

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """Every per-node array by name, with room to grow (an engine keeps them; ``len(self)`` rows are used)."""
        return self._arrays

    def path(self, node: int) -> list[int]:
        """The choices (columns of ``child``) that lead from the episode's root to ``node``."""
        out: list[int] = []
        parent, action = self._arrays["parent"], self._arrays["action"]
        while parent[node] >= 0:
            out.append(int(action[node]))
            node = int(parent[node])
        return out[::-1]

    def restore(self, nodes: dict[str, np.ndarray], root: np.ndarray, tables: dict[str, list[dict[str, np.ndarray]]],
                replays: int = 0) -> None:
        """Take the nodes of a tree of the same env computed before (``store.load``): every per-node array (as
        ``arrays`` names them), each episode's first node, and each table's rows in their order. Only a tree with
        no node yet takes them."""
        n = len(nodes.get("episode", ()))
        if len(self) or set(nodes) != set(self._arrays) or root.shape != self._root.shape:
            raise UsageError(f"restore() fills a fresh tree of the same shape: this one has {len(self)} nodes, arrays "
                             f"{sorted(self._arrays)} and {len(self._root)} episodes; given {sorted(nodes)} and {len(root)}")
        self._grow(max(1024, n))
        for name, a in nodes.items():
            self._arrays[name][:n] = a
        self._root[:] = root
        for name, rows in tables.items():
            target: Rows = getattr(self, name)
            for value in rows:
                target.add(value)
            if len(target) != len(rows):
                raise UsageError(f"restore(): the {name} table repeats rows ({len(rows)} given, {len(target)} distinct)")
        self._size, self.replays, self.restored = n, replays, True
        self.version += 1

    # --- computing nodes with the env ---------------------------------------------------------------------
    def roots(self, episodes: Iterable[int]) -> np.ndarray:
        """The first node of each of ``episodes`` (computed where not yet)."""
        episodes = np.asarray(list(episodes) if not isinstance(episodes, np.ndarray) else episodes, dtype=np.int64)
        if episodes.size and (episodes.min() < 0 or episodes.max() >= self.episodes):
            raise IndexError(f"episode indices must be in 0 .. {self.episodes - 1}")
        for k in np.unique(episodes[self._root[episodes] < 0]):
            self._root[k] = self._play(int(k), [], -1, -1)
        return self._root[episodes]

    def expand(self, nodes: Sequence[int] | np.ndarray, columns: Sequence[int] | np.ndarray) -> np.ndarray:
        """The child of each (node, column) pair, computed by the env where not yet."""
        nodes, columns = np.asarray(nodes, dtype=np.int64), np.asarray(columns, dtype=np.int64)
        todo = self._arrays["child"][nodes, columns] < 0
        for node, column in sorted(set(zip(nodes[todo].tolist(), columns[todo].tolist()))):
            if self._arrays["turn"][node] < 0:
                raise UsageError(f"node {node} ends its episode: it has no children")
            made = self._play(int(self._arrays["episode"][node]), [*self.path(node), column], node, column)
            self._arrays["child"][node, column] = made  # after _play: it may have grown the arrays
        children: np.ndarray = self._arrays["child"][nodes, columns]
        return children

    def expand_all(self, episodes: Iterable[int] | None = None, masked: bool = False) -> int:
        """Compute every node reachable from the roots of ``episodes`` (default: all) through unmasked slots
        (with ``masked``, through every column); the number of nodes. Each replay goes on from the node it
        computes to a leaf along first choices, so one reset computes a whole line of nodes."""
        stack = self.roots(range(self.episodes) if episodes is None else episodes).tolist()
        seen = set(stack)
        while stack:
            node = stack.pop()
            if self._arrays["turn"][node] < 0:
                continue
            for column in self.choices(np.array([node]), masked)[1].tolist():
                child = int(self._arrays["child"][node, column])
                made = [child] if child >= 0 else self._descend(node, column, masked)
                stack += [n for n in made if n not in seen]
                seen.update(made)
        return len(self)

    def _descend(self, node: int, column: int, masked: bool) -> list[int]:
        """Compute ``node``'s child through ``column`` and, stepping on in the same replay, its first-choice
        descendants down to the end of the episode; the nodes made, the child first."""
        episode = int(self._arrays["episode"][node])
        obs, infos, rewards, terms, truncs = self._replay(episode, [*self.path(node), column])
        made: list[int] = []
        while True:
            new = self._store(episode, node, column, obs, infos, rewards, terms, truncs)
            self._arrays["child"][node, column] = new  # after _store: it may have grown the arrays
            made.append(new)
            turn = self._deciding(infos)
            if turn is None:
                return made
            node, column = new, int(self.choices(np.array([new]), masked)[1][0])
            obs, rewards, terms, truncs, infos = self.env.step({turn: column})

    def choices(self, nodes: np.ndarray, masked: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(node, column) of every unmasked slot of the deciding agent at ``nodes`` (with ``masked``: every
        column, the out-of-range one included)."""
        if masked:
            cols = np.arange(self.slots + 1)
            return np.repeat(nodes, cols.size), np.tile(cols, nodes.size)
        deciding = self._arrays["mask"][nodes, self._arrays["turn"][nodes]]
        valid = self.masks.table("")[deciding] != 0
        at, cols = np.nonzero(valid)
        return nodes[at], cols

    def replay(self, node: int) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Put the env where ``node`` is (reset to its episode, stepped along its choices); its observations and
        infos there, as the env returned them. The env is the tree's: what it is used for must not step it."""
        return self._replay(int(self._arrays["episode"][node]), self.path(node))[:2]

    def _play(self, episode: int, path: list[int], parent: int, action: int) -> int:
        """Reset the env to ``episode``, step along ``path`` and store where it led as a new node."""
        obs, infos, rewards, terms, truncs = self._replay(episode, path)
        return self._store(episode, parent, action, obs, infos, rewards, terms, truncs)

    def _replay(self, episode: int, path: list[int]) -> tuple[Any, Any, Any, Any, Any]:
        env = self.env
        self.replays += 1
        obs, infos = env.reset(options={"index": episode})
        rewards: dict[str, float] = {}
        terms: dict[str, bool] = {}
        truncs: dict[str, bool] = {}
        node = int(self._root[episode])  # known whenever the path is not empty
        for k, column in enumerate(path):
            turn = self._deciding(infos)
            if turn is None or self.agents.index(turn) != self._arrays["turn"][node]:
                raise NotDeterministic(f"episode {episode}, choices {path[:k]}: {turn!r} decides now when replayed, "
                                       f"{self.agents[self._arrays['turn'][node]]!r} did before; the env must be "
                                       "deterministic given the episode and the choices (backend='sim', interventions "
                                       "seeded by episode)")
            obs, rewards, terms, truncs, infos = env.step({turn: int(column)})  # column == slots: out of range
            if k < len(path) - 1:
                node = int(self._arrays["child"][node, column])
        return obs, infos, rewards, terms, truncs

    @staticmethod
    def _deciding(infos: dict[str, dict[str, Any]]) -> str | None:
        return next((a for a, i in infos.items() if i.get("deciding")), None)

    def _store(self, episode: int, parent: int, action: int, obs: dict[str, Any], infos: dict[str, dict[str, Any]],
               rewards: dict[str, float], terms: dict[str, bool], truncs: dict[str, bool]) -> int:
        if self._size == len(self._arrays["episode"]):
            self._grow(2 * self._size)
        node, a = self._size, self._arrays
        missing = [agent for agent in self.agents if agent not in obs]
        if missing:
            raise UsageError(f"episode {episode} has no observation for {missing}: the batched engine needs every "
                             "agent of the pool in every episode")
        turn = self._deciding(infos)
        a["episode"][node], a["parent"][node], a["action"][node] = episode, parent, action
        a["turn"][node] = -1 if turn is None else self.agents.index(turn)
        a["role"][node] = -1 if turn is None else self.env.unwrapped.session.episode.role_agents.index(turn)
        for k, agent in enumerate(self.agents):
            parts = {p: v for p, v in obs[agent].items() if p != "action_mask"}
            a["obs"][node, k] = self.observations.add(parts)
            a["mask"][node, k] = self.masks.add(np.asarray(obs[agent]["action_mask"], dtype=np.int8))
            a["reward"][node, k] = rewards.get(agent, 0.0)
        a["terminated"][node] = any(terms.values())
        a["truncated"][node] = any(truncs.values()) and not any(terms.values())
        if turn is None:
            outcome = next(iter(self.env.unwrapped.full_infos().values())).get("outcome")
            a["outcome"][node] = _OUTCOME_INDEX.get(outcome, -1)
            a["child"][node] = node  # an ended episode stays where it is
        if self.keeps_state:
            a["state"][node] = self.states.add(self.env.state())
        self._size += 1
        self.version += 1
        return node


__all__ = ["GameTree", "NotDeterministic", "OUTCOMES", "Rows"]
