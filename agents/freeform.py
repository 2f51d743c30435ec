"""Rule agent for the controlled free-form surface: Rule-Minimal-Request, said in English.

The sender opens with the order, its own plan ("I will ...") and its request ("<peer>, please ...");
the receiver reads the request with the shared extractor's reader and answers by restating it as its own
plan ("I will ..."), which completes the commitment. If a turn comes round again (the peer said nothing
the extractor could use) the sender restates its plan and request and the receiver asks for them.
Paths are composed exactly as ``RuleMinimalRequest`` composes them, so the commitment is the same one
the structured surfaces carry; only the surface differs.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents.context_view import compose, roles
from agents.rules import RuleMinimalRequest
from gencoord_env import freeform


def _dialogue(ctx: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    for m in ctx["messages"]:
        speaker, sep, text = m.partition(" says: ")
        if sep:
            out.append((speaker, text))
    return out


class FreeformRule(RuleMinimalRequest):
    """Speaks the ``freeform`` surface (``parallel_env(surface="freeform")``)."""

    name = "freeform"

    def __init__(self) -> None:
        super().__init__("dsl")

    def act(self, observation: str, info: dict[str, Any]) -> str:
        ctx = info.get("context")
        if not ctx:
            return "I have nothing to add."
        return self.say(ctx)

    def say(self, ctx: Mapping[str, Any]) -> str:
        first, second = roles(ctx)
        peer, me = ctx["peer"], ctx["agent"]
        if ctx["role"] == first:
            mine, theirs = compose(ctx, self.binding(ctx) or self.guess(ctx), first, second)
            return (f"Hi {peer}, we need to {ctx['task']['order']}. "
                    f"My plan: I will {freeform.say_path(mine)}. {peer}, please {freeform.say_path(theirs)}.")
        asked = [s for speaker, text in _dialogue(ctx) if speaker == peer
                 for s in freeform.statements(text) if s.kind == "request" and s.target == me]
        if not asked:
            return f"{peer}, what should I do for this order?"
        return f"Understood, {peer}, I will wait for your handoff. I will {freeform.say_path(asked[-1].tasks)}."


__all__ = ["FreeformRule"]
