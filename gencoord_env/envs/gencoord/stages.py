"""The swappable stages of one episode. Interventions replace exactly one of these (see ``wrappers/``)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from gencoord_env import contract
from gencoord_env.dsl.model import PeerRequest
from gencoord_env.pipeline import (
    compile_plan,
    materialize,
    resolve_feedback,
    resolve_forward,
    resolve_joint,
    respond,
    verify,
)
from gencoord_env.pipeline.response import Response
from gencoord_env.pipeline.types import Delivery
from gencoord_env.tasks.episode import Episode


def deliver_as_sent(request: PeerRequest, episode: Episode, record: Callable[[dict[str, Any]], None]) -> Delivery:
    """Reliable messaging, as in the paper: the receiver gets exactly what was sent."""
    return Delivery(request, (request,))


def respond_truthfully(request: PeerRequest, episode: Episode, record: Callable[[dict[str, Any]], None]) -> Response:
    return respond(request, episode)


@dataclass(frozen=True)
class Stages:
    check: Callable[..., Any] = contract.check
    deliver: Callable[[PeerRequest, Episode, Callable[[dict[str, Any]], None]], Delivery] = deliver_as_sent
    respond: Callable[[PeerRequest, Episode, Callable[[dict[str, Any]], None]], Response] = respond_truthfully
    resolve_forward: Callable[..., Any] = resolve_forward
    resolve_feedback: Callable[..., Any] = resolve_feedback
    resolve_joint: Callable[..., Any] = resolve_joint
    materialize: Callable[..., Any] = materialize
    compile: Callable[..., Any] = compile_plan
    verify: Callable[..., Any] = verify

    def replace(self, name: str, fn: Callable[..., Any]) -> Stages:
        names = [f.name for f in fields(self)]
        if name not in names:
            raise ValueError(f"unknown stage {name!r}; expected one of {names}")
        return replace(self, **{name: fn})
