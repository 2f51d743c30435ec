"""Resolve-> (forward) and Resolve<- (bounded feedback), supplement "Resolver semantics".

Paths carry no explicit actor: Actorize assigns the proposing agent to its SELF path and the target to
the requested path. Tasks are already in canonical form (compact keys, typed values), which is the path
normalization N_K^path of this schema.
"""
from __future__ import annotations

from gencoord_env.types import Proposal
from gencoord_env.dsl.serializer import format_task
from gencoord_env.outcomes import FailureCode
from gencoord_env.pipeline.merge import MergeConflict, merge
from gencoord_env.pipeline.response import Response
from gencoord_env.pipeline.types import Resolution
from gencoord_env.tasks.compose import binding_of_tasks
from gencoord_env.tasks.episode import Episode

_CONFLICT = FailureCode.RESOLUTION_CONFLICT


def _conflict(reason: str) -> Resolution:
    return Resolution(None, _CONFLICT, reason)


def _joint(first_path, second_path, episode: Episode) -> Resolution:  # type: ignore[no-untyped-def]
    try:
        return Resolution(merge(first_path, second_path, episode))
    except MergeConflict as e:
        return _conflict(str(e))


def resolve_forward(q_snd: Proposal, q_rcv: Proposal, episode: Episode) -> Resolution:
    """Commitment when the receiver's SELF realizes the delivered request exactly; else a conflict."""
    if len(q_snd.peer_requests) != 1 or not q_snd.peer_requests[0].requested_plan:
        return _conflict("the sender proposal has no single non-empty request")
    request = q_snd.peer_requests[0]
    if request.target != episode.second:
        return _conflict(f"the request targets {request.target} but the receiver is {episode.second}")
    if not q_rcv.self_plan or q_rcv.peer_requests:
        return _conflict("the receiver must answer with a non-empty SELF path and REQ -")
    u, r = q_rcv.self_plan, request.requested_plan
    if u != r:
        k = next((i for i, (a, b) in enumerate(zip(u, r)) if a != b), min(len(u), len(r)))
        got = format_task(u[k]) if k < len(u) else "nothing"
        want = format_task(r[k]) if k < len(r) else "nothing"
        return _conflict(f"the receiver's SELF path does not realize the request: task {k} is {got}, requested {want}")
    return _joint(q_snd.self_plan, u, episode)


def resolve_joint(q: Proposal, episode: Episode) -> Resolution:
    """One-call routes (centralized, requester-only): the proposal itself is the joint plan."""
    if len(q.peer_requests) != 1 or not q.peer_requests[0].requested_plan:
        return _conflict("a joint plan needs exactly one non-empty request")
    if q.peer_requests[0].target != episode.second:
        return _conflict(f"the request targets {q.peer_requests[0].target} but the peer is {episode.second}")
    return _joint(q.self_plan, q.peer_requests[0].requested_plan, episode)


def _goal_fields(q: Proposal) -> tuple[object, object]:
    last = q.peer_requests[0].requested_plan[-1]
    return last.args.get("item"), last.args.get("q")


def branch_of(q: Proposal) -> str | None:
    """B(q): the branch a proposal selects."""
    b = binding_of_tasks(q.peer_requests[0].requested_plan) if q.peer_requests else None
    return b or binding_of_tasks(q.self_plan)


def resolve_feedback(q0: Proposal, response: Response, q1: Proposal | None, episode: Episode) -> Resolution:
    """ACCEPT keeps B(q0), COUNTER(alpha) must realize alpha, REJECT is NO_COMMITMENT."""
    if response.decision == "REJECT":
        return Resolution(None, FailureCode.NO_COMMITMENT, response.reason_code)
    if q1 is None:
        return _conflict("no revised proposal")
    expected = branch_of(q0) if response.decision == "ACCEPT" else response.counter_offer_id
    got = branch_of(q1)
    if got != expected:
        return _conflict(f"the revision selects branch {got} but the {response.decision} response asks for {expected}")
    if q1.peer_requests[0].target != q0.peer_requests[0].target:
        return _conflict("the revision changed the target peer")
    if _goal_fields(q1) != _goal_fields(q0):
        return _conflict(f"the revision changed the goal fields {_goal_fields(q0)} -> {_goal_fields(q1)}")
    return resolve_joint(q1, episode)
