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
"replacement_binding": <other>, "original": PeerRequest, "replacement": PeerRequest, "sender_plan": [...]}``
(in a team also the ``edge``).

In a team the replacement acts per channel (``edge=(sender role, receiver role)``; default every channel):
the alternative flips the fact the request carries (the factor of its ``bind`` values) and is the request
the sender would send along that channel under it, with the sender's path under it substituted as above.
Downstream of the receiver everything that agent decides follows the alternative (a relay passes it on);
where another channel told another agent the true fact, the resolver finds the two inconsistent and
names the edge (``chain``: replacing one of the sender's two requests is a conflict on that edge,
replacing both sends execution down the alternative).
"""
from __future__ import annotations

from typing import Any

from gencoord_env.types import PeerRequest, Task
from gencoord_env.pipeline.types import Delivery
from gencoord_env.tasks.compose import Team, role_paths, team_record_paths
from gencoord_env.tasks.episode import Episode, branch_values
from gencoord_env.tasks.prior import FACTOR_JOIN
from gencoord_env.lifecycle import PipelineStage
from gencoord_env.wrappers.base import StageIntervention, other_binding


def alternative_request(request: PeerRequest, episode: Episode) -> tuple[str, PeerRequest]:
    """(other binding, the request that binding's composer would send to the same target)."""
    other = other_binding(episode.template.bindings, episode.binding)
    _, second_path = role_paths(episode, other)
    return other, PeerRequest(request.target, second_path)


def team_alternative(request: PeerRequest, episode: Episode, sender: str) -> tuple[str, PeerRequest, tuple[Task, ...]]:
    """(other binding, the request ``sender`` sends ``request.target`` under it, ``sender``'s path under it):
    the factors the request carries (its ``bind`` values; none: every fact the sender knows) flipped."""
    template = episode.template
    carried = {template.factor_of(b) for t in request.requested_plan if isinstance(b := t.args.get("bind"), str)}
    carried = (carried - {None}) or set(Team.of(template).known(episode.role_of[sender]))
    values = branch_values(episode.binding)
    other = FACTOR_JOIN.join(other_binding(f.bindings, v) if k in carried else v
                             for k, (f, v) in enumerate(zip(template.fact_factors, values)))
    own, asked = team_record_paths(episode, other, episode.role_of[sender])
    path = dict(asked).get(request.target, request.requested_plan)
    return other, PeerRequest(request.target, path), own


class RequestReplacement(StageIntervention):
    """Swap ``deliver`` for a channel that delivers the paired binding's request instead."""

    stage = PipelineStage.DELIVER

    def rewrite(self, value: Delivery, episode: Episode, **inputs: Any) -> tuple[Delivery, dict[str, Any] | None]:
        edge = inputs.get("edge")
        if not self.applies(episode, edge):
            return value, None
        request = value.sent
        if episode.is_team and edge is not None:
            other, replacement, sender_plan = team_alternative(request, episode, edge[0])
        else:
            other, replacement = alternative_request(request, episode)
            sender_plan, _ = role_paths(episode, other)
        fields = {"binding": episode.binding, "replacement_binding": other, "original": request,
                  "replacement": replacement, "sender_plan": list(sender_plan), **self.edge_fields(episode, edge)}
        return Delivery(request, (replacement,) * len(value.received), sender_plan=sender_plan), fields


__all__ = ["RequestReplacement", "alternative_request"]
