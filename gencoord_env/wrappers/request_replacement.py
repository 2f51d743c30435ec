"""RequestReplacement: the delivered REQ is the same-template executable alternative.

The replacement is the request that would be correct under the other private fact: the second-role path
of the paired binding, composed by the public composer (``compose.role_paths(episode, other_binding)``).
Message presence, protocol schedule, schema (same surface, same target) and call count are unchanged;
only the delivered task content differs.

The alternative must form an executable plan that fails only at the terminal check (paper: "every
alternative forms an executable plan"). Where the binding also changes the sender's own path (Recipe:
the handoff item; Allocation: who builds), the sender-local consequence as a whole is substituted: the
commitment pairs the delivered alternative with the sender path that goes with it under the other
fact. The receiver still decides from the delivered request alone. With the rule receiver, which
realizes whatever it is asked, every episode resolves, executes and ends in ``TERMINAL_FAILURE`` (paper:
"receiver follows delivered alternative", 0%). On the single-step route the sender has already executed
its first task when the request is sent; its path is then kept, and the alternative may not resolve.

Trace record: ``{"stage": "intervention", "intervention": "RequestReplacement", "binding": <true>,
"replacement_binding": <other>, "original": PeerRequest, "replacement": PeerRequest, "sender_plan": [...]}``.
"""
from __future__ import annotations

from typing import Any

from gencoord_env.types import PeerRequest
from gencoord_env.pipeline.types import Delivery
from gencoord_env.tasks.compose import role_paths
from gencoord_env.tasks.episode import Episode
from gencoord_env.wrappers.base import StageIntervention, other_binding


def alternative_request(request: PeerRequest, episode: Episode) -> tuple[str, PeerRequest]:
    """(other binding, the request that binding's composer would send to the same target)."""
    other = other_binding(episode.template.bindings, episode.binding)
    _, second_path = role_paths(episode, other)
    return other, PeerRequest(request.target, second_path)


class RequestReplacement(StageIntervention):
    """Swap ``deliver`` for a channel that delivers the paired binding's request instead."""

    stage = "deliver"
    routes = ("forward", "single_step")

    def rewrite(self, value: Delivery, episode: Episode, **inputs: Any) -> tuple[Delivery, dict[str, Any]]:
        request = value.sent
        other, replacement = alternative_request(request, episode)
        sender_plan, _ = role_paths(episode, other)
        fields = {"binding": episode.binding, "replacement_binding": other, "original": request,
                  "replacement": replacement, "sender_plan": list(sender_plan)}
        return Delivery(request, (replacement,) * len(value.received), sender_plan=sender_plan), fields


__all__ = ["RequestReplacement", "alternative_request"]
