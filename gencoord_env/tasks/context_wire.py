"""A local context across a wire: plain JSON values one way, the same typed ``Context`` back the other.

An agent that acts from the typed context (every rule agent in ``gencoord_env.agents``) can then act on the
far side of a server (``gencoord serve`` sends the deciding agent's context beside its observation text to a
session that asks for it) exactly as it acts in-process.

- :func:`context_to_wire`: the ``Context`` as JSON values; tasks as Short DSL task text, messages as typed
  objects (a request keeps its structured plan beside the payload its surface carried, so a free-form request
  reads back as the env resolved it), the prior's nodes with what the text leaves out (each node's ``loc``).
- :func:`context_from_wire`: the inverse; the rendered parts (the local observation's and the prior's text)
  are rendered again, so ``render`` gives the same text.

``tests/tasks/test_context_wire.py`` holds the round trip equal for every decision of every pool, route,
view and surface the env plays, and the rule agents' records equal from either form.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gencoord_env.dsl.parser import parse_task
from gencoord_env.dsl.serializer import format_task
from gencoord_env.errors import DataError
from gencoord_env.messages import Done, Message, ProposalMessage, RequestMessage, Response, ResponseMessage, Utterance
from gencoord_env.tasks.contexts import (
    Context,
    LocalObservation,
    Private,
    PriorNode,
    PriorView,
    StationView,
    TaskInfo,
    render_observation,
    render_prior,
    skill_lines,
)
from gencoord_env.types import PeerRequest, Proposal, Task

__all__ = ["context_from_wire", "context_to_wire"]


def context_to_wire(ctx: Context, *, prior: bool = True) -> dict[str, Any]:
    """``ctx`` as JSON values (see the module docstring); a peer's uploaded view, which shares the deciding
    agent's prior, is written without it."""
    o = ctx.observation
    wire: dict[str, Any] = {
        "agent": ctx.agent, "role": ctx.role, "peer": ctx.peer, "stage": ctx.stage, "route": ctx.route,
        "task": {"template": ctx.task.template, "family": ctx.task.family, "title": ctx.task.title,
                 "order": ctx.task.order, "quantity": ctx.task.quantity},
        "private": dict(ctx.private.items()),
        "observation": {"position": list(o.position), "inventory": [list(c) for c in o.inventory],
                        "stations": [{"name": s.name, "kind": s.kind, "pos": list(s.pos),
                                      "contents": None if s.contents is None else [list(c) for c in s.contents]}
                                     for s in o.stations]},
        "history": [{"task": format_task(d.task), "ok": d.ok} for d in ctx.history],
        "messages": [_message_to_wire(m) for m in ctx.messages],
    }
    if prior:
        p = ctx.prior
        wire["prior"] = {"view": p.view, "roles": list(p.roles), "codebook": list(p.codebook),
                         "nodes": [{"id": n.id, "actor": n.role, "branch": n.branch, "task": format_task(n.task), "loc": n.loc,
                                    "stage": n.stage, "preds": None if n.preds is None else list(n.preds)} for n in p.nodes],
                         "channels": [list(c) for c in p.channels], "facts": [[h, list(v)] for h, v in p.factors]}
        if p.skills != skill_lines():
            wire["prior"]["skills"] = list(p.skills)
    if ctx.team:
        wire["team"] = [list(t) for t in ctx.team]
    if ctx.peer_view is not None:
        wire["peer_view"] = context_to_wire(ctx.peer_view, prior=False)
    if ctx.peer_views:
        wire["peer_views"] = [context_to_wire(v, prior=False) for v in ctx.peer_views]
    return wire


def context_from_wire(wire: Mapping[str, Any], prior: PriorView | None = None) -> Context:
    """The ``Context`` of :func:`context_to_wire`'s ``wire`` (``prior``: the shared prior of a wire form
    written without one).

    Raises ``ValueError`` for a wire form this module did not write."""
    try:
        if prior is None:
            prior = _prior(wire["prior"])
        t, o = wire["task"], wire["observation"]
        position = _pos(o["position"])
        inventory = _counts(o["inventory"])
        stations = tuple(StationView(s["name"], s["kind"], _pos(s["pos"]), None if s["contents"] is None else _counts(s["contents"]))
                         for s in o["stations"])
        return Context(
            agent=wire["agent"], role=wire["role"], peer=wire["peer"], stage=wire["stage"], route=wire["route"],
            task=TaskInfo(t["template"], t["family"], t["title"], t["order"], int(t["quantity"])),
            private=Private(**wire["private"]),
            observation=LocalObservation(position, inventory, stations, render_observation(position, inventory, stations)),
            history=tuple(Done(_task(d["task"]), bool(d["ok"])) for d in wire["history"]),
            messages=tuple(_message_from_wire(m) for m in wire["messages"]),
            prior=prior,
            peer_view=context_from_wire(wire["peer_view"], prior) if "peer_view" in wire else None,
            team=tuple((r, a) for r, a in wire.get("team", ())),
            peer_views=tuple(context_from_wire(v, prior) for v in wire.get("peer_views", ())),
        )
    except (KeyError, TypeError) as e:
        raise DataError(f"not a context's wire form ({type(e).__name__}: {e}); expected context_to_wire's output") from None


def _prior(p: Mapping[str, Any]) -> PriorView:
    nodes = tuple(PriorNode(n["id"], n["actor"], n["branch"], _task(n["task"]), n["loc"], n["stage"],
                            None if n["preds"] is None else tuple(n["preds"])) for n in p["nodes"])
    roles, codebook, skills = tuple(p["roles"]), tuple(p["codebook"]), tuple(p.get("skills", skill_lines()))
    channels = tuple((a, b) for a, b in p["channels"])
    factors = tuple((h, tuple(v)) for h, v in p["facts"])
    return PriorView(p["view"], roles, codebook, skills, nodes, render_prior(p["view"], roles, codebook, skills, nodes,
                                                                              channels, factors), channels, factors)


def _message_to_wire(m: Message) -> dict[str, Any]:
    if isinstance(m, RequestMessage):
        return {"kind": "request", "sender": m.sender, "target": m.request.target,
                "plan": [format_task(t) for t in m.request.requested_plan], "payload": m.payload}
    if isinstance(m, ProposalMessage):
        p = m.proposal
        return {"kind": "proposal", "self": [format_task(t) for t in p.self_plan],
                "requests": [{"target": r.target, "plan": [format_task(t) for t in r.requested_plan]} for r in p.peer_requests],
                "payload": m.payload}
    if isinstance(m, ResponseMessage):
        r = m.response
        return {"kind": "response", "decision": r.decision, "reason_code": r.reason_code,
                "counter_offer_id": r.counter_offer_id, "sender": m.sender}
    if isinstance(m, Utterance):
        return {"kind": "utterance", "speaker": m.speaker, "text": m.text}
    raise TypeError(f"not a message: {m!r}")


def _message_from_wire(m: Mapping[str, Any]) -> Message:
    kind = m["kind"]
    if kind == "request":
        return RequestMessage(m["sender"], PeerRequest(m["target"], _plan(m["plan"])), m["payload"])
    if kind == "proposal":
        requests = tuple(PeerRequest(r["target"], _plan(r["plan"])) for r in m["requests"])
        return ProposalMessage(Proposal(_plan(m["self"]), requests), m["payload"])
    if kind == "response":
        return ResponseMessage(Response(m["decision"], m["reason_code"], m["counter_offer_id"]), m["sender"])
    if kind == "utterance":
        return Utterance(m["speaker"], m["text"])
    raise DataError(f"unknown message kind {kind!r}; expected request, proposal, response or utterance")


def _task(text: str) -> Task:
    end, task = parse_task(text, 0)
    if end != len(text):
        raise DataError(f"{text!r} is more than one task")
    return task


def _plan(tasks: Sequence[str]) -> tuple[Task, ...]:
    return tuple(_task(t) for t in tasks)


def _pos(xyz: Sequence[int]) -> tuple[int, int, int]:
    x, y, z = xyz
    return (int(x), int(y), int(z))


def _counts(pairs: Sequence[Sequence[Any]]) -> tuple[tuple[str, int], ...]:
    return tuple((str(k), int(v)) for k, v in pairs)
