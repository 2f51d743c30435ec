"""The bounded, model-free response policy of the Goal x Capability suite and its validity check.

The peer's capability is the set of workcell stations that exist in its true world. ACCEPT when every
station the requested path needs exists there; COUNTER with the finished-handoff alternative when the
path needs a transformation the peer cannot perform but the peer can receive the finished item; REJECT
when neither. Every response carries a reason code.

In a team each peer answers the request on its own edge: its capability is the stations of its true world,
the alternative is the other value of the fact its request's branch belongs to (the peer's own factor).
"""
from __future__ import annotations

from gencoord_env.catalog import CATALOG
from gencoord_env.messages import DECISIONS, Response
from gencoord_env.types import PeerRequest, Task
from gencoord_env.tasks.episode import Episode
from gencoord_env.tasks.prior import TemplateSpec


def _needs(request: PeerRequest) -> set[str]:
    """The references the requested path names: its arguments that the catalog types ``reference``."""
    key_types = CATALOG.key_types
    return {v for t in request.requested_plan for k, v in t.args.items()
            if key_types.get(k) == "reference" and isinstance(v, str)}


def _transforms(request: PeerRequest) -> list[Task]:
    """The requested tasks that transform items at a station (their skill's ``transform`` rule)."""
    skills = CATALOG.skills
    return [t for t in request.requested_plan if t.skill in skills and skills[t.skill].transform]


def respond(request: PeerRequest, episode: Episode) -> Response:
    """The peer's bounded response to ``request`` in its true world (no model call)."""
    built = {s.name for s in episode.world.stations}
    missing = _needs(request) - built
    if not missing:
        return Response("ACCEPT", "PEER_CAN_EXECUTE")
    transforms = _transforms(request)
    alternative, finished_route = _alternative(request, episode)
    if transforms and alternative is not None and finished_route <= built:
        return Response("COUNTER", "PEER_RECEIVES_FINISHED_ONLY", alternative)
    return Response("REJECT", "PEER_CANNOT_EXECUTE")


def _alternative(request: PeerRequest, episode: Episode) -> tuple[str | None, set[str]]:
    """(the bounded alternative the peer could take instead, the locations its part of it uses)."""
    template = episode.template
    if not episode.is_team:
        alternative = episode.prior.goal_capability.counter_offer_id
        if alternative not in template.bindings:
            return None, set()
        return alternative, {n.loc for n in episode.branch_nodes(alternative) if n.role == episode.roles[1]}
    others = [v for v in _factor_values(template, requested_branch(request, episode)) if v != requested_branch(request, episode)]
    if not others:
        return None, set()
    return others[0], {n.loc for n in episode.nodes if n.branch == others[0] and n.actor == request.target}


def _factor_values(template: TemplateSpec, branch: str | None) -> tuple[str, ...]:
    k = template.factor_of(branch) if branch is not None else None
    return () if k is None else template.fact_factors[k].bindings


def requested_branch(request: PeerRequest, episode: Episode) -> str | None:
    """The branch a request selects: the ``bind`` of its tasks, else the branch its first task realizes."""
    for t in request.requested_plan:
        b = t.args.get("bind")
        if isinstance(b, str):
            return b
    for t in request.requested_plan:
        for n in episode.nodes:
            if n.branch is not None and n.task == t:
                return n.branch
    return None


def response_valid(response: Response, episode: Episode, request: PeerRequest | None = None) -> str | None:
    """None when the response fits the finite schema, else what is wrong.

    A COUNTER must name exactly one admissible alternative other than the branch ``request`` selects.
    """
    if response.decision not in DECISIONS:
        return f"unknown decision {response.decision!r}; expected one of {DECISIONS}"
    if not response.reason_code:
        return "a response needs a reason code"
    if response.decision == "COUNTER":
        if response.counter_offer_id not in episode.template.branch_ids:
            return f"counter_offer_id {response.counter_offer_id!r} is not an admissible alternative"
        asked = requested_branch(request, episode) if request is not None else None
        if asked is not None and response.counter_offer_id == asked:
            return f"counter_offer_id {response.counter_offer_id!r} names the requested branch itself; a COUNTER offers a different one"
    elif response.counter_offer_id is not None:
        return f"{response.decision} must not carry a counter_offer_id"
    return None
