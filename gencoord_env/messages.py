"""What crosses between agents, and what an agent remembers: typed values, rendered to text in one place.

The session makes these values; ``gencoord_env.tasks.contexts`` puts them into an agent's local context
and renders them (``render_message``); agents and the training-data builder read the typed fields.

| value | made when | rendered as |
| --- | --- | --- |
| ``RequestMessage`` | the deliver stage hands a REQ to its target | ``REQ from <sender>: <payload>`` |
| ``ProposalMessage`` | the feedback route shows the requester its own initial proposal | ``PROPOSAL <payload>`` |
| ``ResponseMessage`` | the bounded response reaches the requester | ``RESPONSE <json>`` (a team: ``RESPONSE from <peer>: <json>``) |
| ``Utterance`` | a free-form dialogue turn reaches both agents | ``<speaker> says: <text>`` |
| ``Done`` (history) | single-step: a SELF task was executed | ``DONE <task> ok`` |
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Union

from gencoord_env.types import PeerRequest, Proposal, Task
from gencoord_env.dsl.serializer import format_task

DECISIONS: tuple[str, ...] = ("ACCEPT", "REJECT", "COUNTER")


@dataclass(frozen=True)
class Response:
    """The bounded response rho: ACCEPT, REJECT or COUNTER(alpha), always with a reason code."""

    decision: str
    reason_code: str
    counter_offer_id: str | None = None

    def wire(self) -> str:
        """The message as it crosses the agent boundary (its UTF-8 length is the wire bytes)."""
        body = {"decision": self.decision, "reason_code": self.reason_code}
        if self.counter_offer_id is not None:
            body["counter_offer_id"] = self.counter_offer_id
        return json.dumps(body, separators=(",", ":"))


@dataclass(frozen=True)
class RequestMessage:
    """A delivered REQ: the structured request and the payload as its surface carried it."""

    sender: str
    request: PeerRequest
    payload: str


@dataclass(frozen=True)
class ProposalMessage:
    """The requester's own initial proposal, shown back to it before its revision."""

    proposal: Proposal
    payload: str


@dataclass(frozen=True)
class ResponseMessage:
    response: Response
    sender: str | None = None  # a team: the peer that answered (each answers the request on its own edge)


@dataclass(frozen=True)
class Utterance:
    """One free-form dialogue turn."""

    speaker: str
    text: str


Message = Union[RequestMessage, ProposalMessage, ResponseMessage, Utterance]


@dataclass(frozen=True)
class Done:
    """An executed SELF task in the agent's history."""

    task: Task
    ok: bool = True


def render_message(m: Message) -> str:
    """The one text form of a message (its line in a context, after ``MESSAGE ``)."""
    if isinstance(m, RequestMessage):
        return f"REQ from {m.sender}: {m.payload}"
    if isinstance(m, ProposalMessage):
        return f"PROPOSAL {m.payload.replace(chr(10), ' | ')}"
    if isinstance(m, ResponseMessage):
        return f"RESPONSE {m.response.wire()}" if m.sender is None else f"RESPONSE from {m.sender}: {m.response.wire()}"
    if isinstance(m, Utterance):
        return f"{m.speaker} says: {m.text}"
    raise TypeError(f"not a message: {m!r}")


def render_done(d: Done) -> str:
    """The one text form of a history entry (its line in a context, after ``HISTORY ``)."""
    return f"DONE {format_task(d.task)} {'ok' if d.ok else 'failed'}"


__all__ = [
    "DECISIONS", "Done", "Message", "ProposalMessage", "RequestMessage", "Response", "ResponseMessage", "Utterance",
    "render_done", "render_message",
]
