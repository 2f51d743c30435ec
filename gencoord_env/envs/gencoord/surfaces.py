"""Communication surfaces: how an agent's action string becomes a proposal, and what crosses the wire.

``dsl`` is the Short DSL (default); ``json`` serializes the same canonical fields (GenCoord-JSON). Wire
bytes count the REQ payload for structured surfaces (supplement, "Metrics and Statistics").
``freeform`` is controlled natural language (``gencoord_env.freeform``); it is a *dialogue* surface: the
env runs it as a multi-turn conversation (``dialogue.DialogueSession``) whose wire bytes are all of it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gencoord_env import dsl, freeform
from gencoord_env.types import PeerRequest, Proposal


@dataclass(frozen=True)
class Surface:
    name: str
    parse: Callable[..., Proposal]
    show: Callable[..., str]
    dialogue: bool = False  # True: decisions are utterances, the commitment is extracted from the dialogue

    def read(self, text: str, max_requests: int = 1) -> Proposal:
        """A record of an agent that may address ``max_requests`` peers (a team of n: n - 1)."""
        return self.parse(text) if max_requests == 1 else self.parse(text, max_requests=max_requests)

    def write(self, proposal: Proposal, max_requests: int = 1) -> str:
        return self.show(proposal) if max_requests == 1 else self.show(proposal, max_requests=max_requests)

    def request_payload(self, request: PeerRequest) -> str:
        """The delivered request as this surface writes it (what the receiver reads)."""
        text = self.show(Proposal((), (request,)))
        return text.split("\n", 1)[1] if self.name == "dsl" else text


SURFACES: dict[str, Surface] = {
    "dsl": Surface("dsl", dsl.parse, dsl.format),
    "json": Surface("json", dsl.from_json, dsl.to_json),
    "freeform": Surface("freeform", freeform.parse, freeform.say, dialogue=True),
}
