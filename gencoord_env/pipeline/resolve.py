"""Resolve-> (forward) and Resolve<- (bounded feedback), supplement "Resolver semantics", over every edge.

Paths carry no explicit actor: Actorize assigns the proposing agent to its SELF path and the target to
the requested path. Tasks are already in canonical form (compact keys, typed values), which is the path
normalization N_K^path of this schema.

A two-agent episode has one edge. In a team each check runs per edge - every receiver realizes each request
addressed to it, every handoff is compatible, every feedback response is honoured by the revision of the
request it answered - and one acyclic merge joins all agents' paths; a failure's ``Resolution.edge`` names
the (sender, receiver) agents of the edge it is attributed to.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from gencoord_env.types import PeerRequest, Proposal, Task
from gencoord_env.dsl.serializer import format_task
from gencoord_env.outcomes import FailureCode
from gencoord_env.pipeline.merge import MergeConflict, merge, merge_paths
from gencoord_env.messages import Response
from gencoord_env.pipeline.types import Resolution
from gencoord_env.tasks.compose import binding_of_tasks
from gencoord_env.tasks.episode import Episode

_CONFLICT = FailureCode.RESOLUTION_CONFLICT

Edge = tuple[str, str]


def _conflict(reason: str, edge: Edge | None = None) -> Resolution:
    if edge is not None:
        reason = f"edge {edge[0]}->{edge[1]}: {reason}"
    return Resolution(None, _CONFLICT, reason, edge)


def _joint(first_path, second_path, episode: Episode) -> Resolution:  # type: ignore[no-untyped-def]
    try:
        return Resolution(merge(first_path, second_path, episode))
    except MergeConflict as e:
        return _conflict(str(e))


def _merged(paths: Mapping[str, Sequence[Task]], episode: Episode) -> Resolution:
    try:
        return Resolution(merge_paths(paths, episode))
    except MergeConflict as e:
        return _conflict(str(e), e.edge)


def _mismatch(u: Sequence[Task], r: Sequence[Task]) -> str:
    k = next((i for i, (a, b) in enumerate(zip(u, r)) if a != b), min(len(u), len(r)))
    got = format_task(u[k]) if k < len(u) else "nothing"
    want = format_task(r[k]) if k < len(r) else "nothing"
    return f"task {k} is {got}, requested {want}"


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
        return _conflict(f"the receiver's SELF path does not realize the request: {_mismatch(u, r)}")
    return _joint(q_snd.self_plan, u, episode)


def realizes(path: Sequence[Task], requests: Sequence[Sequence[Task]], own: bool = False) -> bool:
    """Realizes_K for several requests: ``path`` interleaves the requested paths, each in its order, each task
    used once (one request: equality). ``own``: tasks no request asks for are allowed too (the receiver was
    left to decide part of its path because a request never arrived)."""
    requests = [tuple(r) for r in requests]
    seen: set[tuple[int, ...]] = set()

    def fits(i: int, at: tuple[int, ...]) -> bool:
        if (i, *at) in seen:
            return False
        seen.add((i, *at))
        if i == len(path):
            return all(k == len(r) for k, r in zip(at, requests))
        for j, r in enumerate(requests):
            if at[j] < len(r) and r[at[j]] == path[i] and fits(i + 1, at[:j] + (at[j] + 1,) + at[j + 1:]):
                return True
        return own and fits(i + 1, at)

    return fits(0, (0,) * len(requests))


def _subsequence(path: Sequence[Task], request: Sequence[Task]) -> bool:
    it = iter(path)
    return all(any(t == u for u in it) for t in request)


def resolve_edges(records: Mapping[str, Proposal], obligations: Mapping[Edge, PeerRequest | None],
                  episode: Episode, plans: Mapping[str, Sequence[Task]] | None = None) -> Resolution:
    """Resolve-> over every channel of a team.

    ``records``: each agent's record (its SELF path is its obligation); ``obligations``: for each channel
    (sender, receiver) the request the receiver was given, ``None`` when none arrived (the receiver then
    decides that part of its path itself); ``plans``: the paths the commitment is formed from, where an
    intervention substituted a sender's path (default: every record's SELF path).
    """
    for agent in (episode.agent_of[r] for r in episode.roles):
        incoming = [e for e in episode.message_edges if e[1] == agent]
        if not incoming:
            continue
        own = records[agent].self_plan
        if not own:
            return _conflict(f"{agent} must answer with a non-empty SELF path", incoming[0])
        given = [(e, obligations.get(e)) for e in incoming]
        asked = [(e, r) for e, r in given if r is not None]
        for e, r in asked:
            if r.target != agent:
                return _conflict(f"the request targets {r.target} but the channel reaches {agent}", e)
        if realizes(own, [r.requested_plan for _, r in asked], own=len(asked) < len(given)):
            continue
        for e, r in asked:
            if len(asked) == 1 and len(given) == 1:
                return _conflict(f"{agent}'s SELF path does not realize the request: {_mismatch(own, r.requested_plan)}", e)
            if not _subsequence(own, r.requested_plan):
                return _conflict(f"{agent}'s SELF path does not realize the request from {e[0]}: it lacks "
                                 f"{next(format_task(t) for t in r.requested_plan if t not in own)} or has it out of order", e)
        return _conflict(f"{agent}'s SELF path is not the requested paths interleaved: a task no request asks for, "
                         "or one asked twice", asked[0][0] if asked else incoming[0])
    return _merged(plans if plans is not None else {a: q.self_plan for a, q in records.items()}, episode)


def resolve_step(done: Sequence[Task], task: Task, actor: str, episode: Episode) -> Resolution | None:
    """Single-step: ``None`` when ``task``, run by ``actor`` after the tasks ``done``, is a task of its role on
    a branch of the public task DAG whose predecessors have all run; else the conflict.

    The route runs the task before any commitment, so it is matched here the way the merge matches every
    task of a commitment (``merge``), and one that is not a next task of the plan never reaches the world.
    """
    role = episode.role_of[actor]
    path = (*done, task)
    chosen = {b for b in (t.args.get("bind") for t in path) if isinstance(b, str)}
    expected: set[str] = set()
    for binding in episode.template.bindings:
        if chosen and binding not in chosen:
            continue
        nodes = [n for n in episode.branch_nodes(binding) if n.role == role]
        used: list[str] = []
        for t in path:
            ready = [n for n in nodes if n.id not in used and all(p in used for p in n.preds)]
            hit = next((n for n in ready if n.task == t), None)
            if hit is None:
                if t is task:
                    expected.update(format_task(n.task) for n in ready)
                break
            used.append(hit.id)
        else:
            return None
    return _conflict(f"single-step task {len(done)} {format_task(task)} is not a next {role} task of the public task "
                     f"DAG (expected one of: {', '.join(sorted(expected)) or 'none'})")


def resolve_joint(q: Proposal, episode: Episode) -> Resolution:
    """One-call routes (centralized, requester-only): the proposal itself is the joint plan (a team: one
    request to each other agent)."""
    if episode.is_team:
        others = [a for a in (episode.agent_of[r] for r in episode.roles) if a != episode.first]
        targets = [r.target for r in q.peer_requests]
        if sorted(targets) != sorted(others) or not all(r.requested_plan for r in q.peer_requests):
            return _conflict(f"a joint plan needs one non-empty request to each of {', '.join(others)}; "
                             f"got requests to {', '.join(targets) or 'nobody'}")
        paths = {episode.first: q.self_plan, **{r.target: r.requested_plan for r in q.peer_requests}}
        return _merged(paths, episode)
    if len(q.peer_requests) != 1 or not q.peer_requests[0].requested_plan:
        return _conflict("a joint plan needs exactly one non-empty request")
    if q.peer_requests[0].target != episode.second:
        return _conflict(f"the request targets {q.peer_requests[0].target} but the peer is {episode.second}")
    return _joint(q.self_plan, q.peer_requests[0].requested_plan, episode)


def _goal_fields(request: PeerRequest) -> tuple[object, object]:
    last = request.requested_plan[-1]
    return last.args.get("item"), last.args.get("q")


def branch_of(q: Proposal, target: str | None = None) -> str | None:
    """B(q): the branch a proposal selects (along the request to ``target``; default: its first request)."""
    request = next((r for r in q.peer_requests if target is None or r.target == target), None)
    b = binding_of_tasks(request.requested_plan) if request is not None else None
    return b or binding_of_tasks(q.self_plan)


def resolve_feedback(q0: Proposal, response: Response | Mapping[str, Response], q1: Proposal | None,
                     episode: Episode) -> Resolution:
    """ACCEPT keeps B(q0), COUNTER(alpha) must realize alpha, REJECT is NO_COMMITMENT - on each edge.

    ``response``: the peer's response, or in a team each peer's (target agent -> response).
    """
    responses = response if isinstance(response, Mapping) else {q0.peer_requests[0].target: response}
    requester = episode.first
    team = episode.is_team
    for target, r in responses.items():
        if r.decision == "REJECT":
            edge = (requester, target) if team else None
            return Resolution(None, FailureCode.NO_COMMITMENT, r.reason_code, edge)
    if q1 is None:
        return _conflict("no revised proposal")
    for target, r in responses.items():
        edge = (requester, target) if team else None
        expected = branch_of(q0, target) if r.decision == "ACCEPT" else r.counter_offer_id
        got = branch_of(q1, target)
        if got != expected:
            return _conflict(f"the revision selects branch {got} but the {r.decision} response asks for {expected}", edge)
        before = next(x for x in q0.peer_requests if x.target == target)
        after = next((x for x in q1.peer_requests if x.target == target), None)
        if after is None:
            return _conflict("the revision changed the target peer", edge)
        if _goal_fields(after) != _goal_fields(before):
            return _conflict(f"the revision changed the goal fields {_goal_fields(before)} -> {_goal_fields(after)}", edge)
    return resolve_joint(q1, episode)
