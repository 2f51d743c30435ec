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

What the peers see of an utterance (``shown``) is bounded, so every observation stays inside the env's
observation space (``Text(max_length=MAX_OBSERVATION)``, printable ASCII): characters outside it are
escaped (``\\u0663``, ``\\ud800``; a line break as ``\\n``, so an utterance is one ``MESSAGE`` line and
cannot pose as a context line), and an utterance longer than ``MAX_ECHO`` characters (the observation
less ``CONTEXT_RESERVE`` for the task facts, shared by ``max_turns`` utterances) is cut with a marker
saying how much was left out. The task facts are never cut. The extractor, the trace and the wire bytes
read the utterance as the agent wrote it. An utterance that is not a ``str`` or is longer than the action
space's ``max_length`` ends the episode with ``PARSE_FAILURE`` before anything reads it.

Trace: one ``{"stage": "dialogue", "agent", "observation", "action", "statements"}`` record per
utterance, then ``{"stage": "extract", "extraction"}`` and the usual resolve .. verify records.
Raw validity is false when an utterance contains an unreadable plan sentence (a statement form whose
clause is not in the table); such sentences are ignored by the extractor, not guessed at.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from gencoord_env import freeform
from gencoord_env.envs.gencoord.interface import CHARSET, MAX_OBSERVATION
from gencoord_env.envs.gencoord.routes import SHAPES, Decision
from gencoord_env.envs.gencoord.session import EpisodeSession, traced, unreadable
from gencoord_env.errors import UsageError
from gencoord_env.lifecycle import DecisionStage, PipelineStage, Step
from gencoord_env.messages import Utterance
from gencoord_env.outcomes import FailureCode
from gencoord_env.trace import CheckRecord, DecisionRecord, ExtractRecord

MAX_TURNS = 6
#: the characters of an observation left for a two-agent context's task facts (the largest measured is
#: under 2,000: ``tests/envs/test_limits.py``); the rest is the dialogue's
CONTEXT_RESERVE = 8192
#: the most characters of one utterance its peers see (4,096 with six turns)
MAX_ECHO = (MAX_OBSERVATION - CONTEXT_RESERVE) // MAX_TURNS
_PLAIN = frozenset(CHARSET) - {"\n"}
_ESCAPES = {"\n": "\\n", "\r": "\\r"}


def _escape(char: str) -> str:
    """A character outside the observation's charset as Python writes it in a string literal."""
    code = ord(char)
    if char in _ESCAPES:
        return _ESCAPES[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(utterance: str, limit: int = MAX_ECHO) -> str:
    """What the peers see of ``utterance``: printable ASCII on one line, at most ``limit`` characters.

    >>> print(shown("I will take \\u0663 oak_planks.\\nPRIVATE -"))
    I will take \\u0663 oak_planks.\\nPRIVATE -
    >>> shown("x" * 100, limit=40)
    'xxxxxxxxx [... 91 characters not shown]'
    """
    if len(utterance) <= limit and all(c in _PLAIN for c in utterance):
        return utterance
    text = "".join(c if c in _PLAIN else _escape(c) for c in utterance)
    if len(text) <= limit:
        return text
    marker = f" [... {len(text)} characters not shown]"  # an upper bound of its length once cut
    keep = max(0, limit - len(marker))
    return text[:keep] + f" [... {len(text) - keep} characters not shown]"


#: A dialogue turn: any utterance is a valid record (the extractor decides when a commitment exists).
_TURN = (Decision(DecisionStage.DIALOGUE, 0, SHAPES["self_only"], Step.RESOLVE_FORWARD),
         Decision(DecisionStage.DIALOGUE, 1, SHAPES["self_only"], Step.RESOLVE_FORWARD))


class DialogueSession(EpisodeSession):
    """``EpisodeSession`` whose decisions are dialogue turns ended by the shared extractor."""

    max_turns = MAX_TURNS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.setup.route != "forward":
            raise UsageError(f"the freeform surface runs the forward route only; got route={self.setup.route!r}")
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
        entry = DecisionRecord(DecisionStage.DIALOGUE, agent, observation, traced(action))
        why = unreadable(action)
        if why is not None:
            self.trace.append(replace(entry, parse={"error": why}))
            self._parse_failure(why)
            return
        said = freeform.statements(action)
        self.trace.append(replace(entry, statements=said))
        if any(s.kind == "unreadable" for s in said):
            self.metrics.values["raw_validity"] = False
        self.dialogue.append((agent, action))
        self.metrics.wire(action)
        heard = Utterance(agent, shown(action, (MAX_OBSERVATION - CONTEXT_RESERVE) // self.max_turns))
        for a in self.progress.inbox:
            self.progress = self.progress.receive(a, heard)
        found = freeform.extract(self.dialogue, self.episode.first, self.episode.second)
        if found is None:
            if len(self.dialogue) >= self.max_turns:
                self._end(FailureCode.NO_COMMITMENT, f"no commitment could be extracted after {self.max_turns} utterances")
            return
        self.trace.append(ExtractRecord(found))
        for who, proposal in ((self.episode.first, found.sender), (self.episode.second, found.receiver)):
            violations = self._rewritten(PipelineStage.CHECK, self.stages.check(proposal, self.episode.scope(who)),
                                         proposal=proposal, agent=who)
            if violations:
                self.trace.append(CheckRecord(who, violations))
                self._end(FailureCode.CONTRACT_REJECT, "; ".join(f"{v.where}: {v.message}" for v in violations))
                return
        resolution = self.stages.resolve_forward(found.sender, found.receiver, self.episode)
        self._commit(self._rewritten(PipelineStage.RESOLVE_FORWARD, resolution,
                                     records={self.episode.first: found.sender, self.episode.second: found.receiver}))


__all__ = ["CONTEXT_RESERVE", "MAX_ECHO", "MAX_TURNS", "DialogueSession", "shown"]
