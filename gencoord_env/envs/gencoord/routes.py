"""Resolution routes as data: who decides at each stage, what a valid record looks like there, and
which step of the session consumes it.

| route | decisions (role: shape -> then) | commitment |
| --- | --- | --- |
| ``forward`` | sender_initial (first: one REQ -> deliver), receiver_after_request (second: SELF only -> resolve_forward) | Resolve-> |
| ``feedback`` | requester_initial (first: one REQ -> respond), requester_after_response (first: one REQ -> resolve_feedback) | Resolve<- |
| ``requester_only`` | requester_initial (first: one REQ -> resolve_joint) | the initial proposal as the joint plan (A-only) |
| ``single_step`` | sender_initial (first: one task -> execute), sender_after_obtain (first: one REQ -> deliver), receiver_after_request (second: SELF only -> resolve_forward) | Resolve-> |
| ``centralized`` | centralized (first, merged contexts: one REQ -> resolve_joint) | the joint plan |

A record that fails its decision's shape ends the episode with ``CONTRACT_REJECT`` (paper, Algorithms 1
and 2: "|peer_requests| != 1 or requested_plan = []", "self_plan = [] or peer_requests != []").
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gencoord_env.types import Proposal


@dataclass(frozen=True)
class Shape:
    """What a valid record at one decision looks like."""

    name: str
    expected: str  # says what was expected when a record fails
    holds: Callable[[Proposal], bool]


SHAPES: dict[str, Shape] = {s.name: s for s in (
    Shape("one_request", "exactly one non-empty REQ", lambda q: len(q.peer_requests) == 1 and bool(q.peer_requests[0].requested_plan)),
    Shape("self_only", "a non-empty SELF path and REQ -", lambda q: bool(q.self_plan) and not q.peer_requests),
    Shape("one_task", "exactly one SELF task and REQ -", lambda q: len(q.self_plan) == 1 and not q.peer_requests),
)}

#: The session steps a decision can hand its record to (``EpisodeSession`` implements each one).
STEPS: tuple[str, ...] = ("deliver", "respond", "execute", "resolve_forward", "resolve_feedback", "resolve_joint")


@dataclass(frozen=True)
class Decision:
    stage: str
    role: int  # 0: first role (sender / requester), 1: second role
    shape: Shape
    then: str  # one of STEPS

    def __post_init__(self) -> None:
        if self.then not in STEPS:
            raise ValueError(f"decision {self.stage!r}: unknown step {self.then!r}; expected one of {STEPS}")


def _d(stage: str, role: int, shape: str, then: str) -> Decision:
    return Decision(stage, role, SHAPES[shape], then)


ROUTES: dict[str, tuple[Decision, ...]] = {
    "forward": (_d("sender_initial", 0, "one_request", "deliver"),
                _d("receiver_after_request", 1, "self_only", "resolve_forward")),
    "feedback": (_d("requester_initial", 0, "one_request", "respond"),
                 _d("requester_after_response", 0, "one_request", "resolve_feedback")),
    "requester_only": (_d("requester_initial", 0, "one_request", "resolve_joint"),),
    "single_step": (_d("sender_initial", 0, "one_task", "execute"),
                    _d("sender_after_obtain", 0, "one_request", "deliver"),
                    _d("receiver_after_request", 1, "self_only", "resolve_forward")),
    "centralized": (_d("centralized", 0, "one_request", "resolve_joint"),),
}

__all__ = ["Decision", "ROUTES", "SHAPES", "STEPS", "Shape"]
