"""The contract in a team's scope: one request per peer, up to n - 1; the two-agent limit is unchanged."""
from __future__ import annotations

from gencoord_env.contract import PublicScope, check
from gencoord_env.dsl import PeerRequest, Proposal, Task, parse
from gencoord_env.tasks import pool_episodes

WAIT = Task("control.wait", {})
TEAM = PublicScope(agents=("agent_a", "agent_b", "agent_c"), agent="agent_a", references=frozenset(), bindings=frozenset())


def test_a_team_record_may_address_every_peer_once() -> None:
    both = Proposal((), (PeerRequest("agent_b", (WAIT,)), PeerRequest("agent_c", (WAIT,))))
    assert check(both, TEAM) == ()
    twice = Proposal((), (PeerRequest("agent_b", (WAIT,)), PeerRequest("agent_b", (WAIT,))))
    assert [(v.where, v.code, v.message) for v in check(twice, TEAM)] == [
        ("peer_requests", "too_many_requests", "more than one request to agent_b; one request per peer")]
    three = Proposal((), tuple(PeerRequest(a, (WAIT,)) for a in ("agent_b", "agent_c", "agent_d")))
    assert [(v.code, v.message) for v in check(three, TEAM)][0] == (
        "too_many_requests", "at most 2 peer requests (one per peer) per proposal; got 3")


def test_two_agents_still_allow_one_request() -> None:
    scope = PublicScope(agents=("agent_a", "agent_b"), agent="agent_a", references=frozenset(), bindings=frozenset())
    two = Proposal((), (PeerRequest("agent_b", (WAIT,)), PeerRequest("agent_c", (WAIT,))))
    assert [v.message for v in check(two, scope)][0] == "at most one peer request per proposal; got 2"


def test_every_reference_record_of_a_team_passes_its_scope() -> None:
    from gencoord_env.tasks import references as R

    for ep in pool_episodes("teams")[::5] + pool_episodes("chain5")[::7]:
        for role in ep.roles:
            q = R.team_record(ep, role)
            assert check(q, ep.scope(ep.agent_of[role])) == (), (ep.id, role)
        assert check(R.joint(ep, ep.binding), ep.scope(ep.first)) == ()
        assert parse("SELF -\nREQ -", max_requests=len(ep.agents) - 1) == Proposal()
