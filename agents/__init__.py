"""Agents behind one ``act(observation, info) -> action`` interface: rule agents (zero model calls,
``gencoord_env.agents.rules``, by name through ``make_policy``) and learned policies
(``gencoord_env.agents.lm``, which need the ``lm`` extra)."""
from __future__ import annotations

from gencoord_env.agents.base import Policy, RulePolicy
from gencoord_env.agents.registry import POLICIES, make_policy

__all__ = ["POLICIES", "Policy", "RulePolicy", "make_policy"]
