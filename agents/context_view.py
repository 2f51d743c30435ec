"""Reading what a rule agent may use: the structured local context (``infos[agent]["context"]``).

Rule agents only read their own context: their private field, received messages and the public prior
as projected by the view. They never see the episode object or the hidden binding of the other role.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gencoord_env import dsl
from gencoord_env.dsl.model import PeerRequest, Task
from gencoord_env.tasks.compose import order_nodes


@dataclass(frozen=True)
class PriorNode:
    """A public prior node as a context shows it (fields a view hides get neutral defaults)."""

    id: str
    role: str
    branch: str | None
    task: Task
    stage: str = "acquire"
    preds: tuple[str, ...] = ()


@lru_cache(maxsize=4096)
def _task(text: str) -> Task:
    return dsl.parse(f"SELF {text}\nREQ -").self_plan[0]


#: Parsed prior nodes keyed by the identity of the context's prior part (the env shares that part
#: between the steps of an episode, so an agent parses the public prior once per episode).
_PARSED: dict[int, tuple[object, list[PriorNode]]] = {}


def prior_nodes(context: Mapping[str, Any]) -> list[PriorNode]:
    part = context["prior"]
    hit = _PARSED.get(id(part))
    if hit is not None and hit[0] is part:
        return hit[1]
    nodes = _parse_prior(context)
    if len(_PARSED) > 8192:
        _PARSED.clear()
    _PARSED[id(part)] = (part, nodes)
    return nodes


def _parse_prior(context: Mapping[str, Any]) -> list[PriorNode]:
    return [
        PriorNode(n["id"], n["actor"], None if n["branch"] == "*" else n["branch"], _task(n["task"]),
                  n.get("stage", "acquire"), tuple(n.get("preds", ())))
        for n in context["prior"]["nodes"]
    ]


def compose(context: Mapping[str, Any], binding: str, first_role: str, second_role: str) -> tuple[tuple[Task, ...], tuple[Task, ...]]:
    """Both role-local paths of ``binding`` from the public prior, ordered as the context's view allows."""
    part = context["prior"]
    hit = _COMPOSED.get((id(part), binding, first_role, second_role))
    if hit is not None and hit[0] is part:
        return hit[1]
    paths = _compose(context, binding, first_role, second_role)
    if len(_COMPOSED) > 8192:
        _COMPOSED.clear()
    _COMPOSED[(id(part), binding, first_role, second_role)] = (part, paths)
    return paths


_COMPOSED: dict[tuple[int, str, str, str], tuple[object, tuple[tuple[Task, ...], tuple[Task, ...]]]] = {}


def _compose(context: Mapping[str, Any], binding: str, first_role: str, second_role: str) -> tuple[tuple[Task, ...], tuple[Task, ...]]:
    nodes = [n for n in prior_nodes(context) if n.branch in (None, binding)]
    ordered = order_nodes(nodes, context["prior"]["view"])  # type: ignore[arg-type]
    return (tuple(n.task for n in ordered if n.role == first_role),
            tuple(n.task for n in ordered if n.role == second_role))


def delivered_request(context: Mapping[str, Any]) -> PeerRequest | None:
    """The REQ received in this context, if any (DSL or JSON surface)."""
    for m in context["messages"]:
        if m.startswith("REQ from "):
            payload = m.split(": ", 1)[1]
            if payload.startswith("{"):
                return dsl.from_json(payload).peer_requests[0]
            return dsl.parse("SELF -\n" + payload).peer_requests[0]
    return None


def response(context: Mapping[str, Any]) -> dict[str, Any] | None:
    for m in context["messages"]:
        if m.startswith("RESPONSE "):
            return json.loads(m[len("RESPONSE "):])  # type: ignore[no-any-return]
    return None


def roles(context: Mapping[str, Any]) -> tuple[str, str]:
    """(first role, second role) names of this template's roles."""
    first, second = context["prior"]["roles"]
    return first, second


def codebook(context: Mapping[str, Any]) -> Sequence[str]:
    return context["prior"]["codebook"]  # type: ignore[no-any-return]
