"""CounterfactualFeedback: the feedback route's bounded response comes from the paired workcell mode.

Goal x Capability clusters come in matched pairs that differ only in the peer's private workcell mode.
This intervention answers the requester's initial proposal with the response ``respond()`` gives in the
paired cluster (same goal, same world variant, the other mode), while the requester's view, its initial
proposal, the executable world and the two-call schedule stay those of the true episode. A requester
that follows the response then commits to the actor and handoff of the wrong mode, and the unchanged
world rejects it at terminal verification (paper: 0%).

Trace record: ``{"stage": "intervention", "intervention": "CounterfactualFeedback", "true_mode",
"paired_mode", "true_response": Response, "injected": Response}``.

In a team (``pool="team_feedback"``) each peer answers on its own edge, and ``edge=(requester role, peer
role)`` injects the paired response on that edge only (default: every edge): the response the peer would
give in the world where its own capability is the other one, the other peers' worlds unchanged. The
trace's ``true_mode`` / ``paired_mode`` are then the peer's true and paired branch, and ``edge`` names it.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from gencoord_env.errors import UsageError
from gencoord_env.types import PeerRequest
from gencoord_env.messages import Response
from gencoord_env.pipeline.response import requested_branch, respond
from gencoord_env.tasks.episode import Episode, branch_values
from gencoord_env.tasks.prior import FACTOR_JOIN
from gencoord_env.lifecycle import PipelineStage
from gencoord_env.wrappers.base import StageIntervention, other_binding


def paired_episode(episode: Episode, peer: str | None = None) -> Episode:
    """The same episode in the cluster whose peer has the other workcell mode (a team: the other capability
    of the fact ``peer`` holds, every other fact kept)."""
    if episode.is_team:
        k = next((i for i, f in enumerate(episode.template.fact_factors) if episode.agent_of[f.holder] == peer), None)
        if k is None:
            raise UsageError(f"CounterfactualFeedback: {peer!r} holds no capability in {episode.id}")
        values = list(branch_values(episode.binding))
        values[k] = other_binding(episode.template.fact_factors[k].bindings, values[k])
        return Episode(replace(episode.cluster, binding=FACTOR_JOIN.join(values)), episode.perm, episode.prior)
    if not episode.is_goal_capability or episode.cluster.mode is None:
        raise UsageError(
            f"CounterfactualFeedback needs a Goal x Capability episode (pool='goal_capability'); got {episode.id}"
        )
    modes = episode.prior.goal_capability.modes
    other = next(m for m in modes if m != episode.cluster.mode)
    return Episode(replace(episode.cluster, mode=other, binding=modes[other]), episode.perm, episode.prior)


class CounterfactualFeedback(StageIntervention):
    """Swap ``respond`` for the paired mode's bounded response."""

    stage = PipelineStage.RESPOND

    def rewrite(self, value: Response, episode: Episode, **inputs: Any) -> tuple[Response, dict[str, Any] | None]:
        request: PeerRequest = inputs["request"]
        edge = inputs.get("edge")
        if not self.applies(episode, edge):
            return value, None
        if episode.is_team:
            paired = paired_episode(episode, request.target)
            k = episode.template.factor_of(requested_branch(request, episode) or "")
            true, other = (branch_values(e.binding)[k] if k is not None else None for e in (episode, paired))
        else:
            paired = paired_episode(episode)
            true, other = episode.cluster.mode, paired.cluster.mode
        injected = respond(request, paired)
        return injected, {"true_mode": true, "paired_mode": other, "true_response": value, "injected": injected,
                          **self.edge_fields(episode, edge)}


__all__ = ["CounterfactualFeedback", "paired_episode"]
