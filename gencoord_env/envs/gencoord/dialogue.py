"""The controlled free-form route: the two agents talk until the shared extractor recovers a commitment.

Used when ``surface="freeform"`` (forward route only). Turns alternate, first role first; every decision
is a ``dialogue`` stage and its action is one utterance of plain English. Each utterance reaches both
agents as an ``Utterance`` message, so contexts grow with the conversation, and all of it counts as wire
bytes (paper: "for controlled free-form, they sum all agent-to-agent dialogue before commitment
extraction"). After every utterance ``gencoord_env.freeform.extract`` reads the dialogue so far; once it
recovers the sender and receiver proposals, both are contract-checked and resolved with forward
resolution, and the episode continues exactly as on the structured surfaces (materialize, compile,
execute, verify). Without a commitment after ``max_turns`` utterances the episode ends with
``NO_COMMITMENT``.

The session imposes no script: a clarification exchange (the receiver asks, the sender answers and
restates its request) is ordinary dialogue, and the extractor simply waits for the receiver's SELF after
the latest request. The rule agent and the free-form training set clarify on the recipe family
(``freeform.clarifies``), so their dialogues take two or four of the ``max_turns`` utterances.

Trace: one ``{"stage": "dialogue", "agent", "observation", "action", "statements"}`` record per
utterance, then ``{"stage": "extract", "extraction"}`` and the usual resolve .. verify records.
Raw validity is false when an utterance contains an unreadable plan sentence (a statement form whose
clause is not in the table); such sentences are ignored by the extractor, not guessed at.
"""
from __future__ import annotations

from typing import Any

from gencoord_env import freeform
from gencoord_env.envs.gencoord.routes import SHAPES, Decision
from gencoord_env.envs.gencoord.session import EpisodeSession
from gencoord_env.messages import Utterance
from gencoord_env.outcomes import FailureCode

MAX_TURNS = 6

#: A dialogue turn: any utterance is a valid record (the extractor decides when a commitment exists).
_TURN = (Decision("dialogue", 0, SHAPES["self_only"], "resolve_forward"),
         Decision("dialogue", 1, SHAPES["self_only"], "resolve_forward"))


class DialogueSession(EpisodeSession):
    """``EpisodeSession`` whose decisions are dialogue turns ended by the shared extractor."""

    max_turns = MAX_TURNS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.setup.route != "forward":
            raise ValueError(f"the freeform surface runs the forward route only; got route={self.setup.route!r}")
        self.dialogue: list[tuple[str, str]] = []

    @property
    def decision(self) -> Decision:
        return _TURN[len(self.dialogue) % 2]

    @property
    def turn(self) -> str:
        return self.episode.first if len(self.dialogue) % 2 == 0 else self.episode.second

    def act(self, action: Any, observation: str = "") -> None:
        if self.done:
            return
        agent = self.turn
        self.metrics.values["decisions"] += 1
        entry: dict[str, Any] = {"stage": "dialogue", "agent": agent, "observation": observation, "action": action}
        self.trace.append(entry)
        if not isinstance(action, str):
            entry["parse"] = {"error": f"expected the utterance to be a str, got {type(action).__name__}"}
            self._parse_failure(entry["parse"]["error"])
            return
        said = freeform.statements(action)
        entry["statements"] = said
        if any(s.kind == "unreadable" for s in said):
            self.metrics.values["raw_validity"] = False
        self.dialogue.append((agent, action))
        self.metrics.wire(action)
        for a in self.progress.inbox:
            self.progress = self.progress.receive(a, Utterance(agent, action))
        found = freeform.extract(self.dialogue, self.episode.first, self.episode.second)
        if found is None:
            if len(self.dialogue) >= self.max_turns:
                self._end(FailureCode.NO_COMMITMENT, f"no commitment could be extracted after {self.max_turns} utterances")
            return
        self.trace.append({"stage": "extract", "extraction": found})
        for who, proposal in ((self.episode.first, found.sender), (self.episode.second, found.receiver)):
            violations = self.stages.check(proposal, self.episode.scope(who))
            if violations:
                self.trace.append({"stage": "check", "agent": who, "violations": violations})
                self._end(FailureCode.CONTRACT_REJECT, "; ".join(f"{v.where}: {v.message}" for v in violations))
                return
        self._commit(self.stages.resolve_forward(found.sender, found.receiver, self.episode))


__all__ = ["MAX_TURNS", "DialogueSession"]
