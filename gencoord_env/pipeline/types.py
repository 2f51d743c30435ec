"""Frozen values passed between pipeline stages."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gencoord_env.types import PeerRequest, Task
from gencoord_env.dsl.serializer import format_task
from gencoord_env.outcomes import FailureCode


@dataclass(frozen=True)
class Commitment:
    """C = (S_i, S_j, b, P_C): the two normalized role-local paths, the binding and the merged relation.

    ``edges`` are (predecessor, successor) pairs over the public node ids the paths realize.
    """

    first: str
    second: str
    first_path: tuple[Task, ...]
    second_path: tuple[Task, ...]
    binding: str
    node_ids: tuple[tuple[str, ...], tuple[str, ...]]  # node id realized by each task of each path
    edges: tuple[tuple[str, str], ...]
    handoff: tuple[str, str, str, int]  # (producer, receiver, item, count)

    def to_dict(self) -> dict[str, Any]:
        return {
            "first": self.first, "second": self.second, "binding": self.binding,
            "first_path": [format_task(t) for t in self.first_path],
            "second_path": [format_task(t) for t in self.second_path],
            "edges": [list(e) for e in self.edges], "handoff": list(self.handoff),
        }


@dataclass(frozen=True)
class Delivery:
    """What the ``deliver`` stage hands the receiver for one sent REQ.

    ``received`` is every copy the receiver reads, in order: ``()`` when nothing arrives, one request on a
    reliable channel, several when a channel duplicates. ``sender_plan`` is set only when an intervention
    substitutes the sender-local consequence itself (the same-template alternative): the sender path that
    goes with the substituted request, so that the joint plan stays executable.
    """

    sent: PeerRequest
    received: tuple[PeerRequest, ...]
    sender_plan: tuple[Task, ...] | None = None

    @property
    def operative(self) -> PeerRequest | None:
        """The request the commitment is formed from: the first copy received, if any."""
        return self.received[0] if self.received else None


@dataclass(frozen=True)
class Resolution:
    """A commitment, or the failure code and reason why none was formed."""

    commitment: Commitment | None
    code: FailureCode | None = None
    reason: str = ""


@dataclass(frozen=True)
class DispatchTask:
    """A task instance of the dispatch plan, with its checker attachments."""

    id: str
    node: str
    actor: str
    task: Task
    loc: str
    deps: tuple[str, ...]
    checks: tuple[str, ...] = ()  # "handoff" on the producer of the handoff, "terminal" on the last task


@dataclass(frozen=True)
class DispatchPlan:
    tasks: tuple[DispatchTask, ...]
    handoff: tuple[str, str, str, int] | None  # (producer, receiver, item, count); None: a single-step plan
    terminal: tuple[Any, ...]  # TerminalCheck values of the episode's true binding

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": [
                {"id": t.id, "node": t.node, "actor": t.actor, "task": format_task(t.task), "loc": t.loc,
                 "deps": list(t.deps), "checks": list(t.checks)}
                for t in self.tasks
            ],
            "handoff": list(self.handoff) if self.handoff is not None else None,
            "terminal": [c.__dict__ for c in self.terminal],
        }


@dataclass(frozen=True)
class Verdict:
    """What the verifier decided from world truth."""

    code: FailureCode
    handoff_verified: bool
    terminal_ok: bool
    reasons: tuple[str, ...] = ()
    checks: Mapping[str, Any] = field(default_factory=dict)
