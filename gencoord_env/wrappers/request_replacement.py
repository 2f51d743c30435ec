"""RequestReplacement: the delivered REQ is the same-template executable alternative.

The replacement is the request that would be correct under the other private fact: the second-role path
of the paired binding, composed by the public composer (``compose.role_paths(episode, other_binding)``).
Message presence, protocol schedule, schema (same surface, same target) and call count are unchanged;
only the delivered task content differs. With the rule receiver, which realizes whatever it is asked,
success falls to 0% (paper: "receiver follows delivered alternative").

Trace record: ``{"stage": "intervention", "intervention": "RequestReplacement", "binding": <true>,
"replacement_binding": <other>, "original": PeerRequest, "replacement": PeerRequest}``.
"""
from __future__ import annotations

from gencoord_env.dsl.model import PeerRequest
from gencoord_env.tasks.compose import role_paths
from gencoord_env.tasks.episode import Episode
from gencoord_env.wrappers.base import Record, StageIntervention, other_binding


def alternative_request(request: PeerRequest, episode: Episode) -> tuple[str, PeerRequest]:
    """(other binding, the request that binding's composer would send to the same target)."""
    other = other_binding(episode.template.bindings, episode.binding)
    _, second_path = role_paths(episode, other)
    return other, PeerRequest(request.target, second_path)


class RequestReplacement(StageIntervention):
    """Swap ``deliver`` for a channel that delivers the paired binding's request instead."""

    stage = "deliver"
    routes = ("forward", "single_step")

    def __call__(self, request: PeerRequest, episode: Episode, record: Record) -> PeerRequest:
        other, replacement = alternative_request(request, episode)
        self.provenance(record, binding=episode.binding, replacement_binding=other, original=request, replacement=replacement)
        return replacement


__all__ = ["RequestReplacement", "alternative_request"]
