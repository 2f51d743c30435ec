"""Task layer: the shared prior K, templates, clusters, pools, local contexts and reference commitments."""
from __future__ import annotations

from gencoord_env.tasks.episode import AGENTS, TEAM_AGENTS, Cluster, Episode, GroundedNode, TerminalCheck
from gencoord_env.tasks.pools import POOL_SIZES, TEAM_POOLS, pool, pool_episodes
from gencoord_env.tasks.prior import Prior, TemplateSpec, prior

__all__ = [
    "AGENTS", "Cluster", "Episode", "GroundedNode", "POOL_SIZES", "Prior", "TEAM_AGENTS", "TEAM_POOLS", "TemplateSpec",
    "TerminalCheck", "pool", "pool_episodes", "prior",
]
