"""The episode trace as typed records, and the one place trace values become JSON.

The session writes one record per thing that happened, in order: a decision (its stage, the agent, what
it saw, its action, the parse and the contract's violations), a delivery, a response, an intervention's
rewrite, the resolution, the dispatch plan, the compiled calls, the world's events, the verdict, a fault.
Each is a frozen value whose ``layout()`` is its JSON object - the keys a version-1 trace record has
always had, ``"stage"`` first among them - and each reads as that mapping (``record["stage"]``,
``record.get("edge")``, ``record == {...}``), so code that reads ``infos[agent]["trace"]`` as dicts reads
these the same.

``jsonable`` turns any trace value into plain JSON types and ``dumps`` writes one JSONL line; the trace
recorder, replay, accounting and the arena runner all go through them. ``what_happened`` is the one rule for
comparing two runs of one episode (a replay against its record, arenas or workers against a serial run): the
JSON less what measures time or motion rather than the world. The records:

- a ``Task`` becomes its Short DSL text; a value with a ``trace_record()`` method (these records;
  commitments, resolutions and dispatch plans) the object it returns;
- other frozen dataclasses (proposals, requests, violations, skill calls, world events, verdicts,
  ``GroundTruth``) objects of their fields, enums their value, tuples lists, sets sorted lists;
- an exception ``{"error": type name, "message": str}``.

>>> dumps(FaultRecord("SidecarDied", "the sidecar exited"))
'{"message":"the sidecar exited","stage":"fault","type":"SidecarDied"}'
"""
from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from gencoord_env.dsl.serializer import format_task
from gencoord_env.lifecycle import DecisionStage
from gencoord_env.types import Task

if TYPE_CHECKING:  # the values a record holds; the records themselves import nothing above this module
    from gencoord_env.contract import Violation
    from gencoord_env.freeform import Extraction, Statement
    from gencoord_env.messages import Response
    from gencoord_env.pipeline.types import DispatchPlan, Resolution, Verdict
    from gencoord_env.types import Proposal
    from gencoord_env.world.types import GroundTruth, SkillCall, WorldEvent


class _Absent:
    """A key the record leaves out of its layout (``None`` is a value: a delivery of nothing)."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:  # one sentinel, also after pickling (records cross to Ray workers)
        return "ABSENT"


ABSENT: Any = _Absent()


class TraceRecord(Mapping[str, Any]):
    """One record of an episode's trace; reads as its JSON layout."""

    #: the record's ``"stage"`` key: a decision stage, or what the pipeline did
    kind: ClassVar[str] = ""

    def layout(self) -> dict[str, Any]:
        """The record's JSON object (values still live: ``jsonable`` writes them)."""
        out: dict[str, Any] = {"stage": self.kind}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is not ABSENT:
                out[f.name] = value
        return out

    def trace_record(self) -> dict[str, Any]:
        return self.layout()

    def __getitem__(self, key: str) -> Any:
        return self.layout()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.layout())

    def __len__(self) -> int:
        return len(self.layout())


@dataclass(frozen=True, eq=False)
class DecisionRecord(TraceRecord):
    """An agent's decision: ``parse`` is the ``Proposal`` read, or ``{"error": why}``; ``violations`` the
    contract's (only once parsed); ``statements`` what the free-form extractor read from an utterance."""

    stage: DecisionStage
    agent: str
    observation: str
    action: Any  # as ``session.traced`` keeps it
    parse: Proposal | dict[str, str] = ABSENT
    violations: Sequence[Violation] = ABSENT
    statements: Sequence[Statement] = ABSENT


@dataclass(frozen=True, eq=False)
class DeliverRecord(TraceRecord):
    """A REQ crossed its edge: the payload sent, the first delivered (None: nothing arrived), how many copies."""

    kind = "deliver"
    sent: str
    delivered: str | None
    copies: int = ABSENT  # only when more than one arrived
    edge: list[str] = ABSENT  # a team: [sender, target]


@dataclass(frozen=True, eq=False)
class RespondRecord(TraceRecord):
    kind = "respond"
    response: Response
    edge: list[str] = ABSENT


@dataclass(frozen=True, eq=False)
class InterventionRecord(TraceRecord):
    """An intervention's rewrite: its class name and the fields it chose to record."""

    kind = "intervention"
    intervention: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    def layout(self) -> dict[str, Any]:
        return {"stage": self.kind, "intervention": self.intervention, **self.fields}


@dataclass(frozen=True, eq=False)
class ResolveRecord(TraceRecord):
    kind = "resolve"
    resolution: Resolution


@dataclass(frozen=True, eq=False)
class MaterializeRecord(TraceRecord):
    """The dispatch plan, or why none could be made."""

    kind = "materialize"
    plan: DispatchPlan = ABSENT
    error: str = ABSENT


@dataclass(frozen=True, eq=False)
class CompileRecord(TraceRecord):
    kind = "compile"
    calls: Sequence[SkillCall]


@dataclass(frozen=True, eq=False)
class ExecuteRecord(TraceRecord):
    kind = "execute"
    events: Sequence[WorldEvent]


@dataclass(frozen=True, eq=False)
class VerifyRecord(TraceRecord):
    kind = "verify"
    verdict: Verdict
    ground_truth: GroundTruth


@dataclass(frozen=True, eq=False)
class FaultRecord(TraceRecord):
    """An infrastructure fault that truncated the episode."""

    kind = "fault"
    type: str
    message: str


@dataclass(frozen=True, eq=False)
class MaxCyclesRecord(TraceRecord):
    """The episode reached the env's ``max_cycles`` without an outcome: a truncation."""

    kind = "max_cycles"
    reason: str


@dataclass(frozen=True, eq=False)
class ExtractRecord(TraceRecord):
    """The free-form surface: the commitment the extractor read from the dialogue."""

    kind = "extract"
    extraction: Extraction


@dataclass(frozen=True, eq=False)
class CheckRecord(TraceRecord):
    """The free-form surface: an extracted proposal the contract rejected."""

    kind = "check"
    agent: str
    violations: Sequence[Violation]


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON types (see the module docstring for how each type is written)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value.value if isinstance(value, enum.Enum) else value
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, Task):
        return format_task(value)
    if hasattr(value, "trace_record") and not isinstance(value, type):  # a value that chooses its own layout
        return jsonable(value.trace_record())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [jsonable(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, BaseException):
        return {"error": type(value).__name__, "message": str(value)}
    raise TypeError(f"cannot write a {type(value).__name__} into a trace record: {value!r:.120}")


#: Keys whose values are wall-clock measurements, wherever they sit in a record or an info (an episode's seconds,
#: its time to commitment, the ``timings`` that carry them).
WALL_CLOCK: frozenset[str] = frozenset({"episode_seconds", "time_to_commitment", "timings"})
#: What a world event says about how its skill ran rather than what it did to the world: the executor's action
#: counts (walks, clicks: pathfinding takes another route on another run; ``WorldEvent.actions``) and, in its
#: data, the call's duration in milliseconds.
EVENT_MEASURES: frozenset[str] = frozenset({"actions"})
EVENT_DATA_MEASURES: frozenset[str] = frozenset({"ms"})


def what_happened(value: Any) -> Any:
    """``value`` (a trace record, an info, a trace) as JSON less what differs between two runs of one episode
    that did the same to the world: ``WALL_CLOCK`` keys at any depth, each event's ``EVENT_MEASURES`` and
    ``EVENT_DATA_MEASURES``, and the order of one execution's events (two bots' calls finish in either order:
    they are put in call order). Outcomes, metrics, observations, every stage, every event's call, actor, op,
    result, reason and data, and the final ground truth are all kept.

    >>> what_happened({"events": [{"call_id": "c2", "kind": "skill", "ok": True, "data": {"ms": 40}, "actions": {}},
    ...                           {"call_id": "c1", "kind": "skill", "ok": True, "data": {"ms": 9}}],
    ...                "timings": {"episode_seconds": 1.5}})
    {'events': [{'call_id': 'c1', 'kind': 'skill', 'ok': True, 'data': {}}, {'call_id': 'c2', 'kind': 'skill', 'ok': True, 'data': {}}]}
    """
    return _untimed(jsonable(value))


def _untimed(value: Any) -> Any:
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _untimed(v) for k, v in value.items() if k not in WALL_CLOCK}
    events = out.get("events")
    if isinstance(events, list) and all(isinstance(e, dict) and "call_id" in e for e in events):
        out["events"] = sorted((_event(e) for e in events), key=lambda e: (str(e["call_id"]), str(e.get("kind"))))
    return out


def _event(event: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in event.items() if k not in EVENT_MEASURES}
    if isinstance(out.get("data"), dict):
        out["data"] = {k: v for k, v in out["data"].items() if k not in EVENT_DATA_MEASURES}
    return out


def dumps(record: Mapping[str, Any]) -> str:
    """One JSONL line: sorted keys, no whitespace, ASCII-only."""
    return json.dumps(jsonable(record), sort_keys=True, separators=(",", ":"))


__all__ = [
    "ABSENT", "CheckRecord", "CompileRecord", "DecisionRecord", "DeliverRecord", "ExecuteRecord", "ExtractRecord",
    "FaultRecord", "InterventionRecord", "MaterializeRecord", "MaxCyclesRecord", "ResolveRecord", "RespondRecord", "TraceRecord",
    "VerifyRecord", "EVENT_DATA_MEASURES", "EVENT_MEASURES", "WALL_CLOCK", "dumps", "jsonable", "what_happened",
]
