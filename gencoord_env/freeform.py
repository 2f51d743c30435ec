"""Controlled free-form surface: plans said in English, and the shared extractor that reads them back.

The paper's representation comparison pits the Short DSL and JSON against "controlled multi-turn
free-form" communication: the two agents talk in natural language until a shared extractor recovers
the commitment. This module is that language and that extractor; ``envs/gencoord/dialogue.py`` runs
the conversation.

**Clauses.** Each skill has one English clause (its catalog row's ``say``, ``gencoord_env/data/catalog.json``), e.g.
``resource.obtain(q=3,item=oak_planks)`` is "take 3 oak_planks" and
``build.component(bind=SITE_A,q=3,item=oak_planks,site=site_a)`` is
"place 3 oak_planks blocks at site_a for option SITE_A": the head, then the skill's optional phrases,
then the generic ones (``bind``, ``loc``). A path is its clauses joined by ", then ".

**Statements.** The extractor splits an utterance into sentences (at ``.``, ``?`` or ``!`` followed by
white space or the end) and reads two kinds; every other sentence is conversation and is ignored:

- ``I will <path>.``: the speaker's own SELF path;
- ``<agent>, please <path>.``: a request that ``<agent>`` run the path.

A lead-in ending in ": " may precede either ("My plan: I will ..."). A sentence that has a statement
form but a clause that is not in the table is *unreadable*: it is reported, not guessed at.

**Any text is read.** ``statements``, ``extract`` and ``parse`` take any Python ``str`` (lone surrogates,
other scripts, megabytes of it): the extractor never raises for what an agent says (``parse`` raises
only ``DSLSyntaxError``). Quantities are ASCII digits ``0-9``; digits of other scripts (``"٣"``) are
just text, so a clause with them is unreadable, and so is one whose number is too long for ``int``.

**Extraction** (``extract``), over the dialogue so far, for a forward commitment between the first role
(sender) and the second role (receiver): the sender's latest SELF statement, the sender's latest
request to the receiver, and the receiver's latest SELF statement made *after* that request. When all
three exist the commitment is recovered as the two proposals ``(SELF sender-path, REQ receiver
request)`` and ``(SELF receiver-path, REQ -)``, which then go through the same contract check and
forward resolution as the structured surfaces. The extractor is a pure function of the dialogue.

**Turns** (``say_opening`` .. ``say_commit``; wording in the table's ``dialogue`` section), shared by the
free-form rule agent and the training-data builder. A dialogue has two turns (the sender's opening with
its plan and request, the receiver's commitment) or, when ``clarifies(family)``, four: after the
opening the receiver asks what the handed-over material should become (a question, no statement), the
sender names the output and restates the same request, and the receiver commits. The clarifying
families are those whose hidden fact decides the transformation (``recipe``: two of the eight core
templates, so 2.5 turns per episode on average). Since the restated request has the same path and the
extractor reads the latest request and the receiver's SELF after it, the four-turn dialogue yields
exactly the commitment of the two-turn one.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from gencoord_env.caches import cache
from typing import Any

from gencoord_env.catalog import CATALOG
from gencoord_env.data_files import data_path
from gencoord_env.dsl.errors import DSLSyntaxError
from gencoord_env.errors import UsageError
from gencoord_env.types import Args, PeerRequest, Proposal, Task, Value

_INT_KEYS = frozenset({"q", "ticks"})
_WORD = r"[A-Za-z0-9_:/+\-]+"
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")
_LEAD_IN = re.compile(r"^[^:]*:\s+")


@cache(maxsize=1)
def table() -> Mapping[str, Any]:
    """The surface's markers and dialogue wording (``gencoord_env/data/freeform.json``)."""
    text = data_path("freeform.json").read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def _pattern(template: str) -> str:
    parts = re.split(r"\{(\w+)\}", template)
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(re.escape(part))
        else:
            out.append(f"(?P<{part}>[0-9]+)" if part in _INT_KEYS else f"(?P<{part}>{_WORD})")
    return "".join(out)


@cache(maxsize=1)
def _clause_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    out = []
    for skill, spec in CATALOG.skills.items():
        assert spec.say is not None  # the catalog refuses a row without one
        optional = "".join(f"(?:{_pattern(p)})?" for _, p in spec.say.optional)
        out.append((skill, re.compile(f"^{_pattern(spec.say.head)}{optional}$")))
    return tuple(out)


def say_task(task: Task) -> str:
    """One task as its English clause."""
    spec = CATALOG.skills.get(task.skill)
    if spec is None or spec.say is None:
        raise UsageError(f"skill {task.skill!r} is not in the catalog (gencoord_env/data/catalog.json)")
    args = dict(task.args)
    text = spec.say.head.format(**args)
    for key, phrase in spec.say.optional:
        if key in args:
            text += phrase.format(**{key: args[key]})
    return text


def read_task(clause: str) -> Task | None:
    """The task an English clause says, or None when the clause is not in the table.

    >>> read_task("take 3 oak_planks").args["q"], read_task("take \u0663 oak_planks")
    (3, None)
    """
    for skill, pattern in _clause_patterns():
        m = pattern.match(clause.strip())
        if m:
            args: dict[str, Value] = {k: v for k, v in m.groupdict().items() if v is not None}
            for key in _INT_KEYS & args.keys():
                try:
                    args[key] = int(str(args[key]))
                except ValueError:  # more digits than int() converts: no task says that
                    return None
            return Task(skill, Args(args))
    return None


def say_path(tasks: Sequence[Task]) -> str:
    separator: str = table()["clause_separator"]
    return separator.join(say_task(t) for t in tasks)


def read_path(text: str) -> tuple[Task, ...] | None:
    clauses = text.split(table()["clause_separator"])
    tasks = [t for t in (read_task(c) for c in clauses) if t is not None]
    return tuple(tasks) if len(tasks) == len(clauses) else None


@dataclass(frozen=True)
class Statement:
    """One plan sentence of an utterance: ``kind`` is ``self``, ``request`` or ``unreadable``."""

    kind: str
    text: str
    tasks: tuple[Task, ...] = ()
    target: str = ""


def sentences(utterance: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(utterance.strip()) if s.strip()]


def statements(utterance: str) -> list[Statement]:
    """The SELF and request statements of one utterance, in order (conversation is skipped)."""
    self_marker = table()["self_marker"]
    request = re.compile(f"^(?P<target>{_WORD}), please (?P<path>.+)$")
    out = []
    for sentence in sentences(utterance):
        body = sentence.rstrip(".?!")
        for candidate in (body, _LEAD_IN.sub("", body, count=1)):
            if candidate.startswith(self_marker):
                path = read_path(candidate[len(self_marker):])
                out.append(Statement("self", sentence, path) if path else Statement("unreadable", sentence))
                break
            m = request.match(candidate)
            if m:
                path = read_path(m.group("path"))
                out.append(Statement("request", sentence, path, m.group("target")) if path else Statement("unreadable", sentence))
                break
    return out


@dataclass(frozen=True)
class Extraction:
    """The commitment the dialogue expresses, as the two proposals forward resolution takes."""

    sender: Proposal
    receiver: Proposal
    turns: tuple[int, int, int]  # utterance index of the sender SELF, the request, the receiver SELF


def extract(dialogue: Sequence[tuple[str, str]], first: str, second: str) -> Extraction | None:
    """The commitment of ``dialogue`` (``(speaker, utterance)`` pairs) between ``first`` and ``second``.

    >>> d = [("agent_a", "I will take 1 oak_planks, then bring 1 oak_planks to agent_b. "
    ...                  "agent_b, please place 1 oak_planks blocks at site_a for option SITE_A."),
    ...      ("agent_b", "Sure. I will place 1 oak_planks blocks at site_a for option SITE_A.")]
    >>> extract(d, "agent_a", "agent_b").receiver.self_plan[0].skill
    'build.component'
    """
    sender_self: tuple[int, tuple[Task, ...]] | None = None
    request: tuple[int, tuple[Task, ...]] | None = None
    receiver_self: tuple[int, tuple[Task, ...]] | None = None
    for k, (speaker, utterance) in enumerate(dialogue):
        for s in statements(utterance):
            if speaker == first and s.kind == "self":
                sender_self = (k, s.tasks)
            elif speaker == first and s.kind == "request" and s.target == second:
                request, receiver_self = (k, s.tasks), None  # a new request needs a new answer
            elif speaker == second and s.kind == "self" and request is not None:
                receiver_self = (k, s.tasks)
    if sender_self is None or request is None or receiver_self is None:
        return None
    return Extraction(
        Proposal(sender_self[1], (PeerRequest(second, request[1]),)),
        Proposal(receiver_self[1], ()),
        (sender_self[0], request[0], receiver_self[0]),
    )


# --- dialogue turns: what the rule agent says, and what the free-form training rows teach ------------
def _line(name: str, **fields: str) -> str:
    return str(table()["dialogue"][name]).format(**fields)


def clarifies(family: str) -> bool:
    """Whether the receiver asks before committing on a task of ``family`` (the clarification rule).

    The rule is content-based and public: a family clarifies when its hidden fact decides what the
    handed-over material is turned into (``recipe``), so the receiver confirms the output it must
    produce. With the eight core templates that is two of eight, one episode in four.
    """
    return family in table()["dialogue"]["clarify_families"]


def say_opening(peer: str, order: str, mine: Sequence[Task], theirs: Sequence[Task]) -> str:
    """The sender's first turn: the order, its own plan and its request to ``peer``."""
    return _line("opening", peer=peer, order=order, mine=say_path(mine), theirs=say_path(theirs))


def say_question(peer: str, handoff: Task) -> str:
    """The receiver's clarification question about the material ``handoff`` brings it (no statement)."""
    return _line("question", peer=peer, q=str(handoff.args.get("q", "")), item=str(handoff.args.get("item", "")))


def say_answer(peer: str, theirs: Sequence[Task]) -> str:
    """The sender's answer: the output its request makes (or that nothing is crafted), then the request again.

    Restating the request keeps the commitment exactly the one of the two-turn form: the extractor reads
    the latest request, which has the same path.
    """
    craft = next((t for t in theirs if t.skill == "craft.item"), None)
    bind = str(next((t.args["bind"] for t in theirs if "bind" in t.args), "-"))
    if craft is not None:
        return _line("answer_transform", peer=peer, q=str(craft.args["q"]), item=str(craft.args["item"]), bind=bind,
                     theirs=say_path(theirs))
    item = str(theirs[0].args.get("item", "")) if theirs else ""
    return _line("answer_unchanged", peer=peer, item=item, bind=bind, theirs=say_path(theirs))


def say_commit(peer: str, path: Sequence[Task]) -> str:
    """The receiver's commitment: its own plan, the requested path."""
    return _line("commit", peer=peer, path=say_path(path))


def say_ask_for_request(peer: str) -> str:
    return _line("ask_for_request", peer=peer)


def say_idle() -> str:
    return _line("idle")


def handoff_to(receiver: str, tasks: Sequence[Task]) -> Task | None:
    """The task of ``tasks`` that hands material to ``receiver`` (what the clarification asks about)."""
    return next((t for t in tasks if t.skill == "resource.deliver" and t.args.get("to") == receiver), None)


def is_question(utterance: str) -> bool:
    """A turn that asks and states nothing: it ends with "?" and has no plan sentence."""
    return utterance.rstrip().endswith("?") and not statements(utterance)


# --- the Surface view: one statement-only utterance <-> one proposal ----------------------------------
def say(proposal: Proposal) -> str:
    """A proposal as controlled English: "I will <path>." and "<agent>, please <path>." sentences."""
    out = []
    if proposal.self_plan:
        out.append(f"{table()['self_marker']}{say_path(proposal.self_plan)}.")
    out += [f"{r.target}, please {say_path(r.requested_plan)}." for r in proposal.peer_requests]
    return " ".join(out)


def parse(utterance: str, max_requests: int = 1) -> Proposal:
    """The proposal one utterance states (its last SELF and its requests); raises ``DSLSyntaxError``.

    As in the Short DSL, at most ``max_requests`` requests (a team of n: n - 1).
    """
    found = statements(utterance)
    bad = next((s for s in found if s.kind == "unreadable"), None)
    if bad is not None:
        raise DSLSyntaxError(f"a clause of {bad.text!r} is not in the controlled clause table", utterance, utterance.find(bad.text))
    if not found:
        raise DSLSyntaxError("expected an 'I will ...' or '<agent>, please ...' sentence", utterance, 0)
    own = [s for s in found if s.kind == "self"]
    requests = [s for s in found if s.kind == "request"]
    if len(requests) > max_requests:
        extra = requests[max_requests]
        raise DSLSyntaxError(f"at most {max_requests} '<agent>, please ...' request(s); found {len(requests)}",
                             utterance, utterance.find(extra.text))
    return Proposal(own[-1].tasks if own else (), tuple(PeerRequest(s.target, s.tasks) for s in requests))


__all__ = ["Extraction", "Statement", "clarifies", "extract", "handoff_to", "is_question", "parse", "read_path",
           "read_task", "say", "say_answer", "say_ask_for_request", "say_commit", "say_idle", "say_opening", "say_path",
           "say_question", "say_task", "sentences", "statements", "table"]
