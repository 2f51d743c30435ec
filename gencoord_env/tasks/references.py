"""Canonical reference commitments for every decision stage, as ``Proposal`` objects.

These are the supervision targets (``train/``) and what the rule agents produce. Each maps back to its
binding (``binding_of``) and, executed, satisfies that binding's terminal predicate.
"""
from __future__ import annotations

from gencoord_env.types import PeerRequest, Proposal
from gencoord_env.tasks.compose import all_paths, binding_of_tasks, role_paths, team_record_paths
from gencoord_env.tasks.episode import Episode

def joint(episode: Episode, binding: str, view: str = "full") -> Proposal:
    """First role's SELF path plus the REQ carrying the second role's path (a team: one REQ per other agent)."""
    if episode.is_team:
        paths = all_paths(episode, binding, view)
        return Proposal(paths[episode.first], tuple(PeerRequest(a, p) for a, p in paths.items() if a != episode.first))
    first, second = role_paths(episode, binding, view)
    return Proposal(first, (PeerRequest(episode.second, second),))


def team_record(episode: Episode, role: str, binding: str | None = None, view: str = "full") -> Proposal:
    """A team role's record on the forward route: its SELF path and a REQ along each of its channels that
    asks for something (the true binding by default)."""
    own, asked = team_record_paths(episode, binding or episode.binding, role, view)
    return Proposal(own, tuple(PeerRequest(agent, path) for agent, path in asked))


def sender_initial(episode: Episode, view: str = "full") -> Proposal:
    return joint(episode, episode.binding, view)


def receiver_after_request(request: PeerRequest) -> Proposal:
    """The receiver's downstream SELF realizes the delivered REQ exactly; ``REQ -``."""
    return Proposal(request.requested_plan, ())


def sender_single_step(episode: Episode, view: str = "full") -> Proposal:
    """Single-step route, first decision: only the next local task, no request yet."""
    first, _ = role_paths(episode, episode.binding, view)
    return Proposal(first[:1], ())


def sender_after_obtain(episode: Episode, view: str = "full") -> Proposal:
    """Single-step route, after the first task ran: the rest of the SELF path plus the REQ."""
    first, second = role_paths(episode, episode.binding, view)
    return Proposal(first[1:], (PeerRequest(episode.second, second),))


def requester_initial(episode: Episode, view: str = "full") -> Proposal:
    """Goal x Capability: the requester proposes the default branch; its view is mode-independent."""
    return joint(episode, episode.prior.goal_capability.initial_branch, view)


def requester_after_response(episode: Episode, decision: str, counter_offer_id: str | None, view: str = "full") -> Proposal | None:
    """The revision a response asks for: ACCEPT keeps the initial branch, COUNTER realizes alpha."""
    if decision == "ACCEPT":
        return requester_initial(episode, view)
    if decision == "COUNTER" and counter_offer_id:
        return joint(episode, counter_offer_id, view)
    return None


def centralized(episode: Episode, view: str = "full") -> Proposal:
    """One decision from the merged contexts: the true branch's joint plan."""
    return joint(episode, episode.binding, view)


def factor_codes(episode: Episode) -> dict[str, str]:
    """Factor-Code targets: the sender's ``active_binding_id`` and the receiver's ``accepted_binding_id``."""
    return {"active_binding_id": episode.binding, "accepted_binding_id": episode.binding}


def binding_of(proposal: Proposal) -> str | None:
    """The branch a proposal selects, from its requested path first, else its self path."""
    for req in proposal.peer_requests:
        b = binding_of_tasks(req.requested_plan)
        if b:
            return b
    return binding_of_tasks(proposal.self_plan)
