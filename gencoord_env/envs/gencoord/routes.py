"""Resolution routes as data: which role decides at each stage, and how the commitment is formed.

| route | decisions | commitment |
| --- | --- | --- |
| ``forward`` | sender_initial (first), receiver_after_request (second) | Resolve-> |
| ``feedback`` | requester_initial (first), bounded response, requester_after_response (first) | Resolve<- |
| ``requester_only`` | requester_initial (first) | the initial proposal as the joint plan (A-only) |
| ``single_step`` | sender_initial: one task, executed (first); sender_after_obtain (first); receiver_after_request (second) | Resolve-> |
| ``centralized`` | centralized (first, merged contexts) | the joint plan |
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    stage: str
    role: int  # 0: first role (sender / requester), 1: second role


ROUTES: dict[str, tuple[Decision, ...]] = {
    "forward": (Decision("sender_initial", 0), Decision("receiver_after_request", 1)),
    "feedback": (Decision("requester_initial", 0), Decision("requester_after_response", 0)),
    "requester_only": (Decision("requester_initial", 0),),
    "single_step": (Decision("sender_initial", 0), Decision("sender_after_obtain", 0), Decision("receiver_after_request", 1)),
    "centralized": (Decision("centralized", 0),),
}
