"""Frozen values passed between pipeline stages."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gencoord_env.types import PeerRequest, Task
from gencoord_env.dsl.serializer import format_task
from gencoord_env.outcomes import FailureCode


Handoff = tuple[str, str, str, int]  # (producer, receiver, item, count)


@dataclass(frozen=True)
class Commitment:
    """C = (S_1, ..., S_n, b, P_C): every agent's normalized role-local path, the binding and the merged relation.

    ``agents`` are in role order (the first role first); ``edges`` are (predecessor, successor) pairs over the
    public node ids the paths realize; ``handoffs`` one (producer, receiver, item, count) per handoff edge.
    """

    agents: tuple[str, ...]
    paths: tuple[tuple[Task, ...], ...]
    binding: str
    node_ids: tuple[tuple[str, ...], ...]  # node id realized by each task of each path
    edges: tuple[tuple[str, str], ...]
    handoffs: tuple[Handoff, ...]

    @property
    def first(self) -> str:
        return self.agents[0]

    @property
    def second(self) -> str:
        return self.agents[1]

    @property
    def first_path(self) -> tuple[Task, ...]:
        return self.paths[0]

    @property
    def second_path(self) -> tuple[Task, ...]:
        return self.paths[1]

    @property
    def handoff(self) -> Handoff:
        """The (first) handoff: a two-agent commitment has exactly one."""
        return self.handoffs[0]

    def path(self, agent: str) -> tuple[Task, ...]:
        return self.paths[self.agents.index(agent)]

    def trace_record(self) -> dict[str, Any]:
        """The trace layout: a two-agent commitment keeps that of record version 1 (first/second paths, one
        handoff), so recorded episodes replay unchanged; a team's names every agent's path."""
        if len(self.agents) == 2:
            return {"first": self.first, "second": self.second, "first_path": self.first_path,
                    "second_path": self.second_path, "binding": self.binding, "node_ids": self.node_ids,
                    "edges": self.edges, "handoff": self.handoff}
        return {"agents": self.agents, "paths": self.paths, "binding": self.binding, "node_ids": self.node_ids,
                "edges": self.edges, "handoffs": self.handoffs}

    def to_dict(self) -> dict[str, Any]:
        if len(self.agents) == 2:
            return {
                "first": self.first, "second": self.second, "binding": self.binding,
                "first_path": [format_task(t) for t in self.first_path],
                "second_path": [format_task(t) for t in self.second_path],
                "edges": [list(e) for e in self.edges], "handoff": list(self.handoff),
            }
        return {"agents": list(self.agents), "binding": self.binding,
                "paths": {a: [format_task(t) for t in p] for a, p in zip(self.agents, self.paths)},
                "edges": [list(e) for e in self.edges], "handoffs": [list(h) for h in self.handoffs]}


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
    """A commitment, or the failure code and reason why none was formed.

    ``edge``: the (sender, receiver) agents of the channel or handoff the failure is attributed to, when the
    episode has several (a team); ``None`` otherwise.
    """

    commitment: Commitment | None
    code: FailureCode | None = None
    reason: str = ""
    edge: tuple[str, str] | None = None

    def trace_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"commitment": self.commitment, "code": self.code, "reason": self.reason}
        if self.edge is not None:
            out["edge"] = self.edge
        return out


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
    handoffs: tuple[Handoff, ...]  # (producer, receiver, item, count) per handoff edge; (): a single-step plan
    terminal: tuple[Any, ...]  # TerminalCheck values of the episode's true binding

    @property
    def handoff(self) -> Handoff | None:
        """The (first) handoff; ``None`` for a single-step plan."""
        return self.handoffs[0] if self.handoffs else None

    def trace_record(self) -> dict[str, Any]:
        """The trace layout: with at most one handoff that of record version 1 (``handoff``), else ``handoffs``."""
        if len(self.handoffs) <= 1:
            return {"tasks": self.tasks, "handoff": self.handoff, "terminal": self.terminal}
        return {"tasks": self.tasks, "handoffs": self.handoffs, "terminal": self.terminal}

    def to_dict(self) -> dict[str, Any]:
        handoffs: dict[str, Any] = (
            {"handoff": list(self.handoff) if self.handoff is not None else None} if len(self.handoffs) <= 1
            else {"handoffs": [list(h) for h in self.handoffs]})
        return {
            "tasks": [
                {"id": t.id, "node": t.node, "actor": t.actor, "task": format_task(t.task), "loc": t.loc,
                 "deps": list(t.deps), "checks": list(t.checks)}
                for t in self.tasks
            ],
            **handoffs,
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
