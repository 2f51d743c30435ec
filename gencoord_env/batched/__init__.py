"""The coordination game batched: many episodes stepped at once as array work, held equal to the full pipeline.

| module | its one job |
| --- | --- |
| ``tree`` | ``GameTree``: every decision point of an env's episodes, each computed once by the env itself |
| ``store`` | complete trees on disk: a tree the env computed once is read back by later processes |
| ``shared`` | ``shared_tree``: one tree per process for equal env arguments; complete ones from the store |
| ``engine`` | ``BatchedEngine``: ``num_envs`` episodes of a tree stepped as numpy (or torch) array work, autoreset |
| ``partner`` | ``PartnerSlots``: a text policy (a rule agent) playing some roles, its menu slot at each node computed once |
| ``vector`` | ``ParallelVectorEnv``: the PettingZoo-style two-agent API over an engine, dicts of batched arrays |
"""
from __future__ import annotations

from gencoord_env.batched.engine import Batch, BatchedEngine
from gencoord_env.batched.partner import PartnerSlots
from gencoord_env.batched.shared import shared_tree
from gencoord_env.batched.tree import OUTCOMES, GameTree, NotDeterministic
from gencoord_env.batched.vector import ParallelVectorEnv

__all__ = ["Batch", "BatchedEngine", "GameTree", "NotDeterministic", "OUTCOMES", "ParallelVectorEnv", "PartnerSlots",
           "shared_tree"]
