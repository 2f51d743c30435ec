"""Resolution routes as data: who decides at each stage, what a valid record looks like there, and
which step of the session consumes it.

| route | decisions (role: shape -> then) | commitment |
| --- | --- | --- |
| ``forward`` | sender_initial (first: one REQ -> deliver), receiver_after_request (second: SELF only -> resolve_forward) | Resolve-> |
| ``feedback`` | requester_initial (first: one REQ -> respond), requester_after_response (first: one REQ -> resolve_feedback) | Resolve<- |
| ``requester_only`` | requester_initial (first: one REQ -> resolve_joint) | the initial proposal as the joint plan (A-only) |
| ``single_step`` | sender_initial (first: one task -> execute), sender_after_obtain (first: one REQ -> deliver), receiver_after_request (second: SELF only -> resolve_forward) | Resolve-> |
| ``centralized`` | centralized (first, merged contexts: one REQ -> resolve_joint) | the joint plan |

A record that fails its decision's shape ends the episode with ``CONTRACT_REJECT`` (paper, Algorithms 1
and 2: "|peer_requests| != 1 or requested_plan = []", "self_plan = [] or peer_requests != []").

A team template's rows come from its channels (``route_rows``): one decision per role, in dependency order
(a role decides after every role with a channel to it). A role with channels out sends one non-empty REQ
along each (``sends``: to those roles, no others) and its requests are delivered; a role without them
answers with its SELF path; the last decision resolves every edge at once (``resolve_edges``), the ones
before it are held until then (``hold``). So ``chain`` is sender -> crafter -> courier, ``relay`` is
sender -> relay (which sends on) -> receiver, ``fan_in`` is wood sender, stone sender -> builder. The
one-call routes have one row: the planner (first role) writes one REQ to every other agent, and the team
feedback route asks every peer at once and revises once.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

from gencoord_env.caches import cache
from gencoord_env.errors import DataError, UsageError
from gencoord_env.lifecycle import EVERY_ROUTE, DecisionStage, PipelineStage, Step, stage_of
from gencoord_env.tasks.prior import TemplateSpec, prior
from gencoord_env.types import Proposal


@dataclass(frozen=True)
class Shape:
    """What a valid record at one decision looks like."""

    name: str
    expected: str  # says what was expected when a record fails
    holds: Callable[[Proposal], bool]


# Module-level predicates, not lambdas, so that a live session (and the env holding it) pickles.
def _requests(q: Proposal, k: int = 1) -> bool:
    return len(q.peer_requests) == k and all(r.requested_plan for r in q.peer_requests)


def _self_only(q: Proposal) -> bool:
    return bool(q.self_plan) and not q.peer_requests


def _one_task(q: Proposal) -> bool:
    return len(q.self_plan) == 1 and not q.peer_requests


SHAPES: dict[str, Shape] = {s.name: s for s in (
    Shape("one_request", "exactly one non-empty REQ", _requests),
    Shape("self_only", "a non-empty SELF path and REQ -", _self_only),
    Shape("one_task", "exactly one SELF task and REQ -", _one_task),
)}

#: The session steps a decision can hand its record to (``EpisodeSession`` implements each one).
STEPS: tuple[Step, ...] = tuple(Step)


@dataclass(frozen=True)
class Decision:
    stage: DecisionStage
    role: int  # index into the template's roles: 0 first role (sender / requester), 1 second role, ...
    shape: Shape
    then: Step
    sends: tuple[int, ...] = ()  # a team row: the roles its REQ lines go to (its channels); () : not checked here

    def __post_init__(self) -> None:
        for kind, value in ((DecisionStage, self.stage), (Step, self.then)):
            if not isinstance(value, kind):
                raise TypeError(f"decision {self.stage}: expected a {kind.__name__}, got {value!r}")


S, T = DecisionStage, Step


def _d(stage: DecisionStage, role: int, shape: str, then: Step) -> Decision:
    return Decision(stage, role, SHAPES[shape], then)


ROUTES: dict[str, tuple[Decision, ...]] = {
    "forward": (_d(S.SENDER_INITIAL, 0, "one_request", T.DELIVER),
                _d(S.RECEIVER_AFTER_REQUEST, 1, "self_only", T.RESOLVE_FORWARD)),
    "feedback": (_d(S.REQUESTER_INITIAL, 0, "one_request", T.RESPOND),
                 _d(S.REQUESTER_AFTER_RESPONSE, 0, "one_request", T.RESOLVE_FEEDBACK)),
    "requester_only": (_d(S.REQUESTER_INITIAL, 0, "one_request", T.RESOLVE_JOINT),),
    "single_step": (_d(S.SENDER_INITIAL, 0, "one_task", T.EXECUTE),
                    _d(S.SENDER_AFTER_OBTAIN, 0, "one_request", T.DELIVER),
                    _d(S.RECEIVER_AFTER_REQUEST, 1, "self_only", T.RESOLVE_FORWARD)),
    "centralized": (_d(S.CENTRALIZED, 0, "one_request", T.RESOLVE_JOINT),),
}



def requests_shape(k: int) -> Shape:
    """A team row's shape: one non-empty REQ to each of ``k`` channel peers."""
    return Shape(f"requests_{k}", f"one non-empty REQ to each of its {k} channel peers", partial(_requests, k=k))


#: The team routes; a team has no single-step form (its sender decides all it asks at once).
TEAM_ROUTES: tuple[str, ...] = ("forward", "feedback", "requester_only", "centralized")


def route_rows(route: str, template: TemplateSpec) -> tuple[Decision, ...]:
    """The decisions of ``route`` for ``template``: ``ROUTES[route]`` for two roles, else built from its channels."""
    if len(template.roles) == 2:
        return ROUTES[route]
    return _team_rows(route, tuple(template.roles), template.message_edges)


@cache(maxsize=64)
def _team_rows(route: str, team_roles: tuple[str, ...], channels: tuple[tuple[str, str], ...]) -> tuple[Decision, ...]:
    if route not in TEAM_ROUTES:
        raise UsageError(f"route {route!r} has no team form; a team runs the routes {list(TEAM_ROUTES)}")
    roles = list(team_roles)
    index = {r: i for i, r in enumerate(roles)}
    others = tuple(range(1, len(roles)))
    if route == "centralized":
        return (Decision(S.CENTRALIZED, 0, requests_shape(len(others)), T.RESOLVE_JOINT, others),)
    if route == "requester_only":
        return (Decision(S.REQUESTER_INITIAL, 0, requests_shape(len(others)), T.RESOLVE_JOINT, others),)
    if route == "feedback":
        return (Decision(S.REQUESTER_INITIAL, 0, requests_shape(len(others)), T.RESPOND, others),
                Decision(S.REQUESTER_AFTER_RESPONSE, 0, requests_shape(len(others)), T.RESOLVE_FEEDBACK, others))
    rows = []
    for role in _dependency_order(roles, channels):
        incoming = [a for a, b in channels if b == role]
        outgoing = tuple(index[b] for a, b in channels if a == role)
        stage = S.RECEIVER_AFTER_REQUEST if incoming else S.SENDER_INITIAL
        if outgoing:
            rows.append(Decision(stage, index[role], requests_shape(len(outgoing)), T.DELIVER, outgoing))
        else:
            rows.append(Decision(stage, index[role], SHAPES["self_only"], T.HOLD))
    last = rows[-1]
    if last.then is not T.HOLD:
        raise DataError(f"channels {channels}: the last decision ({roles[last.role]}) must have no channel out")
    rows[-1] = Decision(last.stage, last.role, last.shape, T.RESOLVE_EDGES)
    return tuple(rows)


def unsolvable(route: str, template: TemplateSpec) -> str | None:
    """Why no record can succeed on ``route`` for ``template``, or None when some can.

    On a team's forward route facts travel only along the channels, and a record may name only the branches
    its author holds or was sent (the contract's scope). A role that must send requests while no fact
    reaches it can write no request that passes the contract: every episode ends in ``CONTRACT_REJECT``
    (the workcells template, whose facts sit with the peers the requester sends to).
    """
    if len(template.roles) == 2 or route != "forward":
        return None
    from gencoord_env.tasks.compose import Team

    team = Team.of(template)
    for role in template.roles:
        if team.receivers(role) and team.factors and not team.known(role):
            holders = sorted({holder for holder, _ in team.factors})
            return (f"on the forward route the {role!r} role of template {template.id!r} must send requests, but no "
                    f"fact reaches it (the facts sit with {', '.join(holders)}, who have no channel to it)")
    return None


def route_stages(rows: tuple[Decision, ...]) -> frozenset[PipelineStage]:
    """The pipeline stages an episode of these decisions runs: every route's, and those its steps name."""
    return EVERY_ROUTE | {s for d in rows if (s := stage_of(d.then)) is not None}


@cache(maxsize=16)
def stages_of_route(route: str) -> frozenset[PipelineStage]:
    """The pipeline stages ``route`` runs, in its two-agent form or its team form (``resolve_edges``)."""
    out = route_stages(ROUTES[route])
    if route in TEAM_ROUTES:  # the smallest team: one channel, first role -> second role
        out |= route_stages(_team_rows(route, ("first", "second"), (("first", "second"),)))
    return out


def routes_running(stage: PipelineStage) -> tuple[str, ...]:
    """The routes whose episodes run ``stage`` (an intervention on it elsewhere would never fire)."""
    return tuple(r for r in ROUTES if stage in stages_of_route(r))


#: The stages the free-form dialogue runs (``DialogueSession``): the extracted records' checks, their forward
#: resolution and the commitment's; nothing is delivered (each utterance reaches both agents as it was said).
DIALOGUE_STAGES: frozenset[PipelineStage] = EVERY_ROUTE | {PipelineStage.RESOLVE_FORWARD}


def stages_running(route: str, templates: Iterable[TemplateSpec] | None, dialogue: bool = False) -> frozenset[PipelineStage]:
    """The pipeline stages that some episode runs on ``route``: an episode of a team pool of ``templates``, or
    of a two-agent pool (``None``: every two-agent template runs the same rows, ``ROUTES[route]``); in the
    free-form dialogue when ``dialogue``. What an env of those episodes can hand an intervention.

    >>> from gencoord_env.tasks.prior import prior
    >>> PipelineStage.RESOLVE_EDGES in stages_running("forward", [prior().template("chain")])
    True
    >>> PipelineStage.RESOLVE_EDGES in stages_running("forward", None)
    False
    """
    if dialogue:
        return DIALOGUE_STAGES
    if templates is None:
        return route_stages(ROUTES[route])
    out: frozenset[PipelineStage] = frozenset()
    for template in templates:
        if len(template.roles) > 2 and (route not in TEAM_ROUTES or unsolvable(route, template)):
            continue  # an env refuses such a pool on this route
        out |= route_stages(route_rows(route, template))
    return out


def pools_running(stage: PipelineStage, route: str) -> tuple[str, ...]:
    """The named pools some episode of which runs ``stage`` on ``route`` (``dsl`` / ``json`` surfaces)."""
    from gencoord_env.tasks.pools import TEAM_POOLS
    from gencoord_env.tasks.pool_value import POOL_NAMES

    return tuple(name for name in POOL_NAMES if stage in stages_running(
        route, [prior().template(t) for t in TEAM_POOLS[name]] if name in TEAM_POOLS else None))


def second_role_decides(route: str) -> bool:
    """Whether the second role decides on ``route`` (on the others the peer answers through the bounded
    response policy, or never speaks)."""
    return any(d.role != 0 for d in ROUTES[route])


def _dependency_order(roles: list[str], channels: tuple[tuple[str, str], ...]) -> list[str]:
    """The roles ordered so that each comes after every role with a channel to it (ties: role order)."""
    out: list[str] = []
    while len(out) < len(roles):
        ready = [r for r in roles if r not in out and all(a in out for a, b in channels if b == r)]
        if not ready:
            raise DataError(f"the channels {channels} have a cycle")
        out.append(ready[0])
    return out


__all__ = ["DIALOGUE_STAGES", "Decision", "ROUTES", "SHAPES", "STEPS", "Shape", "TEAM_ROUTES", "pools_running", "requests_shape",
           "route_rows", "route_stages", "routes_running", "second_role_decides", "stages_of_route", "stages_running",
           "unsolvable"]
