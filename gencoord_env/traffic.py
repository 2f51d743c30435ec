"""The paper's architecture-level traffic accounting (Discussion and supplement E2), from a team episode's edges.

    B_central = sum_{t=1..R_c} sum_{i in A_t} [ b(m_i,up^t) + b(m_i,down^t) ]
    B_local   = sum_{t=1..R_l} sum_{(i,j) in E_t} sum_{m in M_ij^t} b(m)

``b(m)`` counts canonical UTF-8 payload bytes (here the delivered surface text: a ``REQ`` line, a response's
JSON, an uploaded local view), no transport framing. A team episode's metrics list every message under
``edges`` (``{sender, receiver, kind, bytes, round}``): on the forward and feedback routes the requests
(``request``) and responses (``response``, on the reverse edge ``(j, i)``) are the local exchange
gamma_ij^t; on the centralized route each agent other than the planner uploads its current local view
(``upload``, u_i) and receives its dispatched decision (``download``, d_i: the planner's ``REQ`` line to it).
The planner's own view and decision never cross a wire, so A_t is the other n - 1 agents.

>>> local([{"sender": "agent_a", "receiver": "agent_b", "kind": "request", "bytes": 80, "round": 1}]).bytes
80
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LOCAL_KINDS = frozenset({"request", "response"})
CENTRAL_KINDS = frozenset({"upload", "download"})


@dataclass(frozen=True)
class Traffic:
    """One equation's value for an episode, with the terms it sums over."""

    bytes: int  # B
    rounds: int  # R_l or R_c
    edges: int  # distinct directed edges that carried a message (local: |union E_t|; central: 2 |A_t|)
    participants: int  # agents that sent or received (central: |A_t|, the agents other than the planner)
    messages: int


def _traffic(messages: Sequence[Mapping[str, Any]], kinds: frozenset[str]) -> Traffic:
    mine = [m for m in messages if m.get("kind") in kinds]
    edges = {(m["sender"], m["receiver"]) for m in mine}
    agents = {a for e in edges for a in e}
    rounds = {int(m.get("round", 1)) for m in mine}
    return Traffic(sum(int(m["bytes"]) for m in mine), len(rounds), len(edges), len(agents), len(mine))


def local(messages: Sequence[Mapping[str, Any]]) -> Traffic:
    """B_local: every request and response on the directed edge it crossed, summed over rounds."""
    return _traffic(messages, LOCAL_KINDS)


def central(messages: Sequence[Mapping[str, Any]]) -> Traffic:
    """B_central: every upload and download of the agents around the planner, summed over rounds."""
    t = _traffic(messages, CENTRAL_KINDS)
    planners = {m["receiver"] for m in messages if m.get("kind") == "upload"}
    return Traffic(t.bytes, t.rounds, t.edges, t.participants - len(planners), t.messages)


def per_edge(messages: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Wire bytes per directed edge, ``"sender>receiver"`` -> bytes (every kind)."""
    out: dict[str, int] = {}
    for m in messages:
        key = f"{m['sender']}>{m['receiver']}"
        out[key] = out.get(key, 0) + int(m["bytes"])
    return out


__all__ = ["CENTRAL_KINDS", "LOCAL_KINDS", "Traffic", "central", "local", "per_edge"]
