"""RequestRemoval: the receiver gets no REQ; the sender's SELF plan is kept.

The sender still decides and its proposal is still read and checked; only the delivery of its request is
suppressed, so the receiver decides from a context that is identical across the two paired bindings.
With the rule receiver (which then takes the first admissible branch) this exposes the construction's
paired-ambiguity ceiling: 50% (paper, "Delivered Binding Determines Peer Execution").

Trace record: ``{"stage": "intervention", "intervention": "RequestRemoval", "removed": [PeerRequest, ...]}``
(every copy that would have arrived; in a team also the ``edge``).

In a team ``edge=(sender role, receiver role)`` removes the request of one channel: that receiver decides
without it (the rule receiver takes the first value of the fact it lacks: the paired ceiling on that
receiver), everything else is delivered.
"""
from __future__ import annotations

from typing import Any

from gencoord_env.pipeline.types import Delivery
from gencoord_env.tasks.episode import Episode
from gencoord_env.lifecycle import PipelineStage
from gencoord_env.wrappers.base import StageIntervention


class RequestRemoval(StageIntervention):
    """Swap ``deliver`` for a channel that delivers nothing.

    >>> import gencoord_env
    >>> env = RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="request"))
    >>> team = RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="teams"), edge=("sender", "crafter"))
    """

    stage = PipelineStage.DELIVER

    def rewrite(self, value: Delivery, episode: Episode, **inputs: Any) -> tuple[Delivery, dict[str, Any] | None]:
        edge = inputs.get("edge")
        if not self.applies(episode, edge):
            return value, None
        return Delivery(value.sent, (), value.sender_plan), {"removed": list(value.received), **self.edge_fields(episode, edge)}


__all__ = ["RequestRemoval"]
