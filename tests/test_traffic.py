"""The paper's B_local and B_central equations over a team episode's per-edge messages."""
from __future__ import annotations

import gencoord_env
from gencoord_env import traffic
from gencoord_env.agents import make_policy
from gencoord_env.agents.rollout import run_episode
from gencoord_env.tasks.contexts import build_context, render, uploads

MESSAGES = [
    {"sender": "agent_a", "receiver": "agent_b", "kind": "request", "bytes": 100, "round": 1},
    {"sender": "agent_b", "receiver": "agent_c", "kind": "request", "bytes": 60, "round": 2},
    {"sender": "agent_b", "receiver": "agent_a", "kind": "response", "bytes": 40, "round": 1},
    {"sender": "agent_b", "receiver": "agent_a", "kind": "upload", "bytes": 900, "round": 1},
    {"sender": "agent_a", "receiver": "agent_b", "kind": "download", "bytes": 70, "round": 1},
]


def test_the_equations_sum_their_own_messages() -> None:
    local = traffic.local(MESSAGES)
    assert (local.bytes, local.rounds, local.edges, local.messages) == (200, 2, 3, 3)
    central = traffic.central(MESSAGES)
    assert (central.bytes, central.rounds, central.participants) == (970, 1, 1)  # the planner is not in A_t
    assert traffic.per_edge(MESSAGES) == {"agent_a>agent_b": 170, "agent_b>agent_c": 60, "agent_b>agent_a": 940}


def test_b_central_is_every_uploaded_view_and_dispatched_request() -> None:
    env = gencoord_env.parallel_env(pool="chain4", backend="sim", route="centralized")
    info = run_episode(env, make_policy("rule"), index=0)
    ep = env.episodes[0]
    views = uploads(build_context(ep, ep.first, "centralized", route="centralized"))
    assert [a for a, _ in views] == [a for a in (ep.agent_of[r] for r in ep.roles) if a != ep.first]
    edges = info["metrics"]["edges"]
    assert sum(e["bytes"] for e in edges if e["kind"] == "upload") == sum(len(t.encode()) for _, t in views)
    assert sum(e["kind"] == "download" for e in edges) == 3
    assert traffic.central(edges).bytes == sum(e["bytes"] for e in edges)
    # the uploads are the wire bytes the two-agent metrics already counted; downloads come on top
    assert info["metrics"]["upload_bytes"] == info["metrics"]["wire_bytes"] < traffic.central(edges).bytes
    assert render(build_context(ep, ep.first, "centralized", route="centralized")).endswith(views[-1][1])
