"""Rule agent for the controlled free-form surface: Rule-Minimal-Request, said in English.

The sender opens with the order, its own plan ("I will ...") and its request ("<peer>, please ...").
The receiver reads the request with the shared extractor's reader and answers by restating it as its own
plan ("I will ..."), which completes the commitment, except when the task clarifies
(``freeform.clarifies``: the recipe family, where the hidden fact decides what the handed-over material
becomes): then it first asks what the material should become, the sender names the output and restates
its request, and the receiver commits. So a dialogue has two turns, or four for one episode in four.
Every choice is deterministic and read from the agent's own context.

If a turn comes round again (the peer said nothing the extractor could use) the sender restates its plan
and request and the receiver asks for them. Paths are composed exactly as ``RuleMinimalRequest``
composes them, and the wording is the surface's (``gencoord_env/data/freeform.json``, ``dialogue``),
so the commitment is the same one the structured surfaces carry and the utterances are those of the
free-form training set.
"""
from __future__ import annotations

from typing import Any

from gencoord_env.tasks.context_view import compose, roles
from gencoord_env.agents.rules import RuleMinimalRequest
from gencoord_env import freeform
from gencoord_env.messages import Utterance
from gencoord_env.tasks.contexts import Context


def dialogue(ctx: Context) -> list[tuple[str, str]]:
    """The ``(speaker, utterance)`` pairs of the conversation so far, from the context's messages."""
    return [(m.speaker, m.text) for m in ctx.messages if isinstance(m, Utterance)]


class FreeformRule(RuleMinimalRequest):
    """Speaks the ``freeform`` surface (``parallel_env(surface="freeform")``)."""

    name = "freeform"

    def __init__(self) -> None:
        super().__init__("dsl")

    def act(self, observation: str, info: dict[str, Any]) -> str:
        ctx = info.get("context")
        if ctx is None:
            return freeform.say_idle()
        return self.say(ctx)

    def say(self, ctx: Context) -> str:
        first, second = roles(ctx)
        peer, me = ctx.peer, ctx.agent
        said = dialogue(ctx)
        if ctx.role == first:
            mine, theirs = compose(ctx, self.binding(ctx) or self.guess(ctx), first, second)
            if said and said[-1][0] == peer and freeform.is_question(said[-1][1]):
                return freeform.say_answer(peer, theirs)
            return freeform.say_opening(peer, ctx.task.order, mine, theirs)
        heard = [s for speaker, text in said if speaker == peer for s in freeform.statements(text)]
        asked = [s for s in heard if s.kind == "request" and s.target == me]
        if not asked:
            return freeform.say_ask_for_request(peer)
        asked_before = any(freeform.is_question(text) for speaker, text in said if speaker == me)
        if freeform.clarifies(ctx.task.family) and not asked_before:
            handoff = next((t for s in reversed(heard) if s.kind == "self"
                            for t in [freeform.handoff_to(me, s.tasks)] if t is not None), None)
            if handoff is not None:
                return freeform.say_question(peer, handoff)
        return freeform.say_commit(peer, asked[-1].tasks)


__all__ = ["FreeformRule", "dialogue"]
