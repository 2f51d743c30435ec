"""Reading what an agent may use: its typed local context (``infos[agent]["context"]``).

The rule agents and the env's menu of candidate records (``envs.gencoord.menu``) read only an agent's own
context: its private field, received messages and the public prior as projected by the view, never the
episode object or the hidden binding of another role. It lives in the library so that the env never
imports its consumers (``agents/``).
"""
from __future__ import annotations

from collections.abc import Collection

from gencoord_env.caches import Memo
from gencoord_env.lifecycle import DecisionStage
from gencoord_env.messages import RequestMessage
from gencoord_env.tasks.compose import Team, order_nodes, team_paths, team_requests
from gencoord_env.tasks.contexts import Context, PriorView
from gencoord_env.types import PeerRequest, Proposal, Task


Paths = tuple[tuple[Task, ...], tuple[Task, ...]]

#: Composed paths by (rendered prior, binding, roles): the rendered text determines the prior view and
#: its hash is computed once per string, where hashing the view itself walks every node on each call.
_COMPOSED = Memo("tasks.context_view.compose", maxsize=16384)


def compose(context: Context, binding: str, first_role: str, second_role: str) -> Paths:
    """Both role-local paths of ``binding`` from the public prior, ordered as the context's view allows."""
    key = (context.prior.text, binding, first_role, second_role)
    paths = _COMPOSED.get(key)
    if paths is None:
        paths = _COMPOSED.put(key, _compose(context.prior, binding, first_role, second_role))
    return paths


def _compose(prior: PriorView, binding: str, first_role: str, second_role: str) -> Paths:
    nodes = [n for n in prior.nodes if n.branch in (None, binding)]
    ordered = order_nodes(nodes, prior.view)  # type: ignore[arg-type]
    return (tuple(n.task for n in ordered if n.role == first_role),
            tuple(n.task for n in ordered if n.role == second_role))


def roles(context: Context) -> tuple[str, str]:
    """(first role, second role) names of this template's roles."""
    first, second = context.prior.roles[:2]
    return first, second


def codebook(context: Context) -> tuple[str, ...]:
    return context.prior.codebook


#: the stages at which a team agent writes the one-call joint plan (a REQ with every other agent's whole path)
JOINT_STAGES = frozenset({DecisionStage.CENTRALIZED, DecisionStage.REQUESTER_INITIAL, DecisionStage.REQUESTER_AFTER_RESPONSE})


def team(context: Context) -> Team:
    """The public shape of a team template as its context shows it: roles, channels, fact holders."""
    p = context.prior
    return Team(tuple(p.roles), p.channels, p.factors)


def delivered(context: Context) -> tuple[RequestMessage, ...]:
    """The requests delivered to this agent, in arrival order (a duplicate copy counted once)."""
    out: list[RequestMessage] = []
    for m in context.messages:
        if isinstance(m, RequestMessage) and all(m.request != d.request for d in out):
            out.append(m)
    return tuple(out)


def team_record(context: Context, selected: Collection[str], joint: bool = False) -> Proposal:
    """A team agent's record on the branch ids ``selected``: its SELF path and a REQ along each of its
    channels (``joint``: the one-call planner's record, a REQ with the whole path of every other agent)."""
    p, shape = context.prior, team(context)
    agent_of = dict(context.team)
    if joint:
        paths = team_paths(p.nodes, p.view, shape.roles, selected)
        return Proposal(paths[context.role], tuple(PeerRequest(agent_of[r], paths[r]) for r in shape.roles
                                                   if r != context.role))
    own = team_paths(p.nodes, p.view, (context.role,), selected)[context.role]
    asked = team_requests(p.nodes, p.view, shape, context.role, selected)
    return Proposal(own, tuple(PeerRequest(agent_of[r], path) for r, path in asked))


__all__ = ["JOINT_STAGES", "codebook", "compose", "delivered", "roles", "team", "team_record"]
