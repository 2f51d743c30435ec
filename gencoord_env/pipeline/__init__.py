"""The grounded pipeline after parsing and contract checking, one small pure function per stage:

    resolve (forward / feedback / joint; a team's every edge) -> materialize -> compile -> World.run -> verify
"""
from __future__ import annotations

from gencoord_env.pipeline.compile import compile_plan
from gencoord_env.pipeline.materialize import materialize
from gencoord_env.pipeline.resolve import resolve_edges, resolve_feedback, resolve_forward, resolve_joint
from gencoord_env.messages import Response
from gencoord_env.pipeline.response import respond, response_valid
from gencoord_env.pipeline.types import Commitment, DispatchPlan, DispatchTask, Resolution, Verdict
from gencoord_env.pipeline.verify import verify

__all__ = [
    "Commitment", "DispatchPlan", "DispatchTask", "Resolution", "Response", "Verdict", "compile_plan",
    "materialize", "resolve_edges", "resolve_feedback", "resolve_forward", "resolve_joint", "respond", "response_valid",
    "verify",
]
