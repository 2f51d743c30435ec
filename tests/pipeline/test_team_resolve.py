"""Resolution over every edge of a team: realization per receiver, handoffs per edge, one acyclic merge, and
failure codes that name the edge; feedback per edge; the verifier checks each handoff edge."""
from __future__ import annotations

from dataclasses import replace

from gencoord_env.messages import Response
from gencoord_env.outcomes import FailureCode
from gencoord_env.pipeline import compile_plan, materialize, resolve_edges, resolve_feedback, resolve_joint, verify
from gencoord_env.pipeline.resolve import realizes
from gencoord_env.tasks import pool_episodes
from gencoord_env.tasks import references as R
from gencoord_env.types import PeerRequest, Proposal, Task
from gencoord_env.world.sim import SimWorld


def _episode(template: str, perm: int = 0, pool: str = "teams"):  # type: ignore[no-untyped-def]
    return next(e for e in pool_episodes(pool) if e.template.id == template and e.perm == perm)


def _records(ep):  # type: ignore[no-untyped-def]
    records = {ep.agent_of[r]: R.team_record(ep, r) for r in ep.roles}
    obligations = {(a, r.target): r for a, q in records.items() for r in q.peer_requests}
    return records, obligations


def test_the_reference_records_resolve_over_every_edge() -> None:
    for template in ("chain", "relay", "fan_in"):
        ep = _episode(template, perm=1)
        records, obligations = _records(ep)
        res = resolve_edges(records, obligations, ep)
        assert res.commitment is not None, res.reason
        assert res.commitment.agents == tuple(ep.agent_of[r] for r in ep.roles)
        assert [h[:2] for h in res.commitment.handoffs] == list(ep.handoff_edges)
        plan = materialize(res.commitment, ep)
        assert sum("handoff" in t.checks for t in plan.tasks) == len(ep.handoff_edges)


def test_a_receiver_that_does_not_realize_its_request_fails_on_that_edge() -> None:
    ep = _episode("chain")
    records, obligations = _records(ep)
    courier = ep.agent_of["courier"]
    wrong = Task("resource.deliver", {"bind": "CHEST_TO_A", "q": 99, "item": "chest", "dst": "chest_a"})
    res = resolve_edges({**records, courier: Proposal((wrong,), ())}, obligations, ep)
    assert res.code is FailureCode.RESOLUTION_CONFLICT and res.edge == (ep.agent_of["sender"], courier)
    assert res.reason.startswith(f"edge {ep.agent_of['sender']}->{courier}: {courier}'s SELF path does not realize")


def test_a_fan_in_receiver_must_interleave_both_requests() -> None:
    ep = _episode("fan_in")
    records, obligations = _records(ep)
    builder = ep.agent_of["builder"]
    asked = [obligations[e].requested_plan for e in ep.message_edges]
    assert realizes(asked[1] + asked[0], asked) and not realizes(asked[0], asked)
    assert realizes(asked[0] + (Task("control.wait", {}),), asked[:1], own=True)
    res = resolve_edges({**records, builder: Proposal(asked[0], ())}, obligations, ep)
    assert res.edge == ep.message_edges[1]  # the stone sender's request is the one left undone


def test_paths_on_different_branches_conflict_on_the_edge_where_they_meet() -> None:
    ep = _episode("chain")
    records, obligations = _records(ep)
    crafter, courier = ep.agent_of["crafter"], ep.agent_of["courier"]
    other = "TABLE_TO_B" if ep.binding == "CHEST_TO_A" else "CHEST_TO_A"
    alt = R.team_record(ep, "courier", other)
    res = resolve_edges({**records, courier: alt}, {**obligations, (ep.agent_of["sender"], courier): None}, ep)
    assert res.code is FailureCode.RESOLUTION_CONFLICT and res.edge == (crafter, courier)  # the crafter's handoff


def test_a_path_that_does_not_fit_its_branch_names_the_channel_into_its_agent() -> None:
    ep = _episode("relay")
    records, obligations = _records(ep)
    relay = ep.agent_of["relay"]
    path = tuple(replace(t, args={**t.args, "q": 1}) if t.skill == "resource.deliver" else t for t in records[relay].self_plan)
    plans = {a: q.self_plan for a, q in records.items()} | {relay: path}
    res = resolve_edges(records, obligations, ep, plans)
    assert res.code is FailureCode.RESOLUTION_CONFLICT and res.edge == (ep.agent_of["sender"], relay)
    assert "is not a relay task of branch" in res.reason


def test_a_centralized_team_plan_needs_one_request_per_other_agent() -> None:
    ep = _episode("chain")
    joint = R.joint(ep, ep.binding)
    assert len(joint.peer_requests) == 2 and resolve_joint(joint, ep).commitment is not None
    res = resolve_joint(Proposal(joint.self_plan, joint.peer_requests[:1]), ep)
    assert res.commitment is None and "one non-empty request to each of" in res.reason


def test_feedback_is_checked_per_edge() -> None:
    ep = _episode("workcells", pool="team_feedback")
    q0 = R.joint(ep, "CRAFT_AT_FIRST_PEER+CRAFT_AT_SECOND_PEER")
    first, second = ep.agent_of["first_peer"], ep.agent_of["second_peer"]
    accept, counter = Response("ACCEPT", "PEER_CAN_EXECUTE"), Response("COUNTER", "PEER_RECEIVES_FINISHED_ONLY", "FINISHED_TO_SECOND_PEER")
    q1 = R.joint(ep, "CRAFT_AT_FIRST_PEER+FINISHED_TO_SECOND_PEER")
    assert resolve_feedback(q0, {first: accept, second: counter}, q1, ep).commitment is not None
    res = resolve_feedback(q0, {first: accept, second: counter}, q0, ep)
    assert res.code is FailureCode.RESOLUTION_CONFLICT and res.edge == (ep.first, second)
    rejected = resolve_feedback(q0, {first: Response("REJECT", "PEER_CANNOT_EXECUTE"), second: accept}, q1, ep)
    assert rejected.code is FailureCode.NO_COMMITMENT and rejected.edge == (ep.first, first)


def test_the_verifier_checks_each_handoff_edge() -> None:
    ep = _episode("relay")
    records, obligations = _records(ep)
    plan = materialize(resolve_edges(records, obligations, ep).commitment, ep)
    world = SimWorld()
    world.reset(ep.world)
    events = world.run(compile_plan(plan))
    assert verify(plan, events, world.observe()).code is FailureCode.SUCCESS
    last = ep.handoff_edges[-1]
    dropped = [e for e in events if not (e.kind == "handoff" and (e.data.get("from"), e.data.get("to")) == last)]
    verdict = verify(plan, dropped, world.observe())
    assert verdict.code is FailureCode.HANDOFF_FAILURE and not verdict.handoff_verified
    assert [h["ok"] for h in verdict.checks["handoffs"]] == [True, False]
    assert verdict.reasons[0].endswith(f"from {last[0]} to {last[1]}")


def test_requests_sent_to_a_non_receiver_do_not_realize() -> None:
    ep = _episode("relay")
    records, obligations = _records(ep)
    edge = ep.message_edges[0]
    res = resolve_edges(records, {**obligations, edge: PeerRequest(ep.agent_of["receiver"], obligations[edge].requested_plan)}, ep)
    assert res.edge == edge and "the request targets" in res.reason
