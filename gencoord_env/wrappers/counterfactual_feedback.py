"""CounterfactualFeedback: the feedback route's bounded response comes from the paired workcell mode.

Goal x Capability clusters come in matched pairs that differ only in the peer's private workcell mode.
This intervention answers the requester's initial proposal with the response ``respond()`` gives in the
paired cluster (same goal, same world variant, the other mode), while the requester's view, its initial
proposal, the executable world and the two-call schedule stay those of the true episode. A requester
that follows the response then commits to the actor and handoff of the wrong mode, and the unchanged
world rejects it at terminal verification (paper: 0%).

Trace record: ``{"stage": "intervention", "intervention": "CounterfactualFeedback", "true_mode",
"paired_mode", "true_response": Response, "injected": Response}``.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from gencoord_env.types import PeerRequest
from gencoord_env.pipeline.response import Response, respond
from gencoord_env.tasks.episode import Episode
from gencoord_env.wrappers.base import StageIntervention


def paired_episode(episode: Episode) -> Episode:
    """The same episode in the cluster whose peer has the other workcell mode."""
    if not episode.is_goal_capability or episode.cluster.mode is None:
        raise ValueError(
            f"CounterfactualFeedback needs a Goal x Capability episode (pool='goal_capability'); got {episode.id}"
        )
    modes = episode.prior.goal_capability.modes
    other = next(m for m in modes if m != episode.cluster.mode)
    return Episode(replace(episode.cluster, mode=other, binding=modes[other]), episode.perm, episode.prior)


class CounterfactualFeedback(StageIntervention):
    """Swap ``respond`` for the paired mode's bounded response."""

    stage = "respond"
    routes = ("feedback",)

    def rewrite(self, value: Response, episode: Episode, **inputs: Any) -> tuple[Response, dict[str, Any]]:
        request: PeerRequest = inputs["request"]
        paired = paired_episode(episode)
        injected = respond(request, paired)
        return injected, {"true_mode": episode.cluster.mode, "paired_mode": paired.cluster.mode,
                          "true_response": value, "injected": injected}


__all__ = ["CounterfactualFeedback", "paired_episode"]
