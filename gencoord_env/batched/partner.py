"""A scripted partner on the batched engine: a text policy's menu slot at every node where it plays, computed once.

``PartnerSlots(tree, policy, roles)``: ``policy`` is any object with ``act(observation, info) -> str`` (a rule
agent, ``gencoord_env.agents.make_policy("rule")``) that plays the decisions of the role indices ``roles``
(0: the first role). ``slots(nodes)`` gives its menu slot at each node: the first time a node is asked
for, the tree's env is put there (``GameTree.replay``), the policy reads the deciding agent's observation
text and full infos as it would in the env, and its record is found among the menu's candidates; a record
that is not on the menu raises ``ValueError`` naming it (the menus hold every record a rule agent writes:
``tests/rl/test_menus.py``). ``plays(nodes)``: which nodes are the partner's.

    >>> import numpy as np
    >>> from gencoord_env.agents import make_policy
    >>> from gencoord_env.batched import BatchedEngine, shared_tree
    >>> tree = shared_tree(pool="heldout", observations="bag")
    >>> engine, rule = BatchedEngine(tree, 8, autoreset=False), PartnerSlots(tree, make_policy("rule"), roles=(0, 1))
    >>> batch = engine.reset(episodes=np.arange(8))
    >>> while not (batch.terminated | batch.truncated).all():
    ...     batch = engine.step(rule.slots(engine.node))
    >>> [OUTCOMES[k].value for k in batch.outcome[:2]]
    ['SUCCESS', 'SUCCESS']
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gencoord_env.batched.tree import OUTCOMES, GameTree  # noqa: F401 - OUTCOMES: the docstring's example
from gencoord_env.errors import UsageError


class PartnerSlots:
    def __init__(self, tree: GameTree, policy: Any, roles: Sequence[int]) -> None:
        if not callable(getattr(policy, "act", None)):
            raise TypeError(f"a partner is an object with act(observation, info) -> str, got {type(policy).__name__}")
        self.tree, self.policy, self.roles = tree, policy, tuple(int(r) for r in roles)
        self._slots = np.full(0, -1, dtype=np.int32)

    def plays(self, nodes: np.ndarray) -> np.ndarray:
        """Whether each of ``nodes`` is a decision of one of the partner's roles."""
        return np.isin(self.tree.role[nodes], self.roles)

    def slots(self, nodes: np.ndarray) -> np.ndarray:
        """The partner's menu slot at each of ``nodes`` (0 where the episode has ended or another role decides)."""
        nodes = np.asarray(nodes, dtype=np.int64)
        if len(self._slots) < len(self.tree):
            grown = np.full(max(len(self.tree), 2 * len(self._slots)), -1, dtype=np.int32)
            grown[: len(self._slots)] = self._slots
            self._slots = grown
        mine = self.plays(nodes)
        out = np.zeros(len(nodes), dtype=np.int64)
        for node in np.unique(nodes[mine & (self._slots[nodes] < 0)]):
            self._slots[node] = self._choose(int(node))
        out[mine] = self._slots[nodes[mine]]
        return out

    def _choose(self, node: int) -> int:
        self.tree.replay(node)
        base = self.tree.env.unwrapped
        turn = self.tree.agents[self.tree.turn[node]]
        info = base.full_infos()[turn]
        record = self.policy.act(base.observation_text(turn), info)
        try:
            return int(info["candidates"].index(record))
        except ValueError:
            raise UsageError(f"the partner's record {record!r} at episode {int(self.tree.episode[node])}, choices "
                             f"{self.tree.path(node)} is not on the menu; a batched partner plays menu records only") from None


__all__ = ["PartnerSlots"]
