"""The pipeline stages of one episode, and how interventions rewrite them.

``Stages`` holds the pure stage functions the session calls (parse and check happen through the
surface and ``check``; then deliver / respond, resolve, materialize, compile, verify). An env is built
with one ``Stages`` value and never changes it.

Interventions (``gencoord_env.wrappers``) do not replace stages: they *rewrite a stage's output* for
one episode. The session hands the value a stage produced to every intervention on that stage,
innermost wrapper first; each returns the rewritten value and the fields of its trace record. Any stack
composes: a second rewrite of ``deliver`` sees what the first one delivered. Every stage of ``Stages`` is
rewritable (``REWRITABLE`` names the inputs each is given); an intervention that names any other stage is
refused when it is built, and so is one on a stage that no episode of its env runs: its route, its pool or
its surface never reach it (``routes.stages_running``: ``resolve_edges`` runs only in team pools, ``deliver``
not in the free-form dialogue).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol, runtime_checkable

from gencoord_env import contract
from gencoord_env.errors import UsageError
from gencoord_env.lifecycle import PipelineStage
from gencoord_env.messages import Response
from gencoord_env.pipeline import (
    compile_plan,
    materialize,
    resolve_feedback,
    resolve_forward,
    resolve_joint,
    respond,
    verify,
)
from gencoord_env.pipeline.resolve import resolve_edges
from gencoord_env.pipeline.types import Delivery
from gencoord_env.suggest import close_matches
from gencoord_env.tasks.episode import Episode
from gencoord_env.types import PeerRequest


def deliver_as_sent(request: PeerRequest, episode: Episode) -> Delivery:
    """Reliable messaging, as in the paper: the receiver gets exactly what was sent."""
    return Delivery(request, (request,))


def respond_truthfully(request: PeerRequest, episode: Episode) -> Response:
    """The transparent capability policy of the peer's true world."""
    return respond(request, episode)


@dataclass(frozen=True)
class Stages:
    check: Callable[..., Any] = contract.check
    deliver: Callable[[PeerRequest, Episode], Delivery] = deliver_as_sent
    respond: Callable[[PeerRequest, Episode], Response] = respond_truthfully
    resolve_forward: Callable[..., Any] = resolve_forward
    resolve_feedback: Callable[..., Any] = resolve_feedback
    resolve_joint: Callable[..., Any] = resolve_joint
    resolve_edges: Callable[..., Any] = resolve_edges  # a team's forward route: every edge at once
    materialize: Callable[..., Any] = materialize
    compile: Callable[..., Any] = compile_plan
    verify: Callable[..., Any] = verify

    def replace(self, **stages: Callable[..., Any]) -> Stages:
        """A copy with some stage functions swapped (fault injection, tests); unknown names raise."""
        names = [f.name for f in fields(self)]
        unknown = sorted(set(stages) - set(names))
        if unknown:
            raise UsageError(f"unknown stage(s) {unknown}; expected some of {names}")
        return replace(self, **stages)


if [f.name for f in fields(Stages)] != [s.value for s in PipelineStage]:  # one name per stage, in one order
    raise ImportError(f"Stages fields {[f.name for f in fields(Stages)]} differ from PipelineStage {list(PipelineStage)}")

#: The stages whose output an intervention may rewrite - every stage of ``Stages`` - and the inputs its
#: ``rewrite`` is given besides the value and the episode. ``edge`` is the (sender agent, target agent) a
#: request travels (in a team one of several); ``records`` each agent's latest record by agent.
REWRITABLE: Mapping[PipelineStage, tuple[str, ...]] = {
    PipelineStage.CHECK: ("proposal", "agent"),  # value: the contract's violations
    PipelineStage.DELIVER: ("request", "edge"),  # value: the Delivery
    PipelineStage.RESPOND: ("request", "edge"),  # value: the bounded Response
    PipelineStage.RESOLVE_FORWARD: ("records",),  # value: the Resolution
    PipelineStage.RESOLVE_FEEDBACK: ("records",),
    PipelineStage.RESOLVE_JOINT: ("records",),
    PipelineStage.RESOLVE_EDGES: ("records",),
    PipelineStage.MATERIALIZE: ("commitment",),  # value: the DispatchPlan
    PipelineStage.COMPILE: ("plan",),  # value: the skill calls
    PipelineStage.VERIFY: ("plan", "events", "ground_truth"),  # value: the Verdict
}


def rewritable(stage: object, who: str) -> PipelineStage:
    """``stage`` as a ``PipelineStage`` an intervention may rewrite; ``ValueError`` naming the valid ones.

    >>> rewritable("verify", "X")
    <PipelineStage.VERIFY: 'verify'>
    >>> rewritable("verfy", "X")
    Traceback (most recent call last):
    ...
    ValueError: X rewrites stage 'verfy', which is not a rewritable stage (did you mean 'verify'?); the rewritable stages are check, deliver, respond, resolve_forward, resolve_feedback, resolve_joint, resolve_edges, materialize, compile, verify
    """
    if isinstance(stage, str) and stage in REWRITABLE:
        return PipelineStage(stage)
    names = [s.value for s in REWRITABLE]
    hint = close_matches(str(stage), names, n=1)
    raise UsageError(f"{who} rewrites stage {stage!r}, which is not a rewritable stage"
                     + (f" (did you mean {hint[0]!r}?)" if hint else "") + f"; the rewritable stages are {', '.join(names)}")


@runtime_checkable
class Intervention(Protocol):
    """Rewrites the output of one stage for one episode (``gencoord_env.wrappers.StageIntervention``)."""

    stage: PipelineStage | str  # a key of REWRITABLE

    def rewrite(self, value: Any, episode: Episode, **inputs: Any) -> tuple[Any, dict[str, Any] | None]:
        """(rewritten value, the fields of this intervention's trace record; ``None``: left alone, no record)."""
        ...


__all__ = ["REWRITABLE", "Intervention", "Stages", "deliver_as_sent", "respond_truthfully", "rewritable"]
