"""The protocol's stage names as types, one meaning per name.

- ``DecisionStage``: where an agent decides (the paper's lifecycle stages). The ``STAGE`` line of a
  context, ``infos[agent]["stage"]`` and a decision's trace record name one.
- ``Step``: what the session does with the record of a decision (``routes.Decision.then``); each is a
  method of ``EpisodeSession``.
- ``PipelineStage``: a pure stage function of ``envs.gencoord.stages.Stages``, the unit an intervention
  rewrites (``stages.REWRITABLE``).

Each is a ``str`` enum, like ``FailureCode``: a member equals, hashes and prints as its name, so traces and
infos written with plain strings read the same.

>>> DecisionStage("sender_initial") is DecisionStage.SENDER_INITIAL, f"{Step.DELIVER}"
(True, 'deliver')
"""
from __future__ import annotations

import enum


class _Name(str, enum.Enum):
    def __str__(self) -> str:
        return str.__str__(self)


class DecisionStage(_Name):
    """A decision of a route (supplement, "Lifecycle stages")."""

    SENDER_INITIAL = "sender_initial"
    RECEIVER_AFTER_REQUEST = "receiver_after_request"
    SENDER_AFTER_OBTAIN = "sender_after_obtain"
    REQUESTER_INITIAL = "requester_initial"
    REQUESTER_AFTER_RESPONSE = "requester_after_response"
    CENTRALIZED = "centralized"
    DIALOGUE = "dialogue"  # the free-form surface: one utterance, either agent in turn


class Step(_Name):
    """What the session does with a decision's record."""

    DELIVER = "deliver"  # the REQ crosses to its target
    RESPOND = "respond"  # the bounded response comes back to the requester
    EXECUTE = "execute"  # single-step: the one SELF task runs in the world now
    RESOLVE_FORWARD = "resolve_forward"
    RESOLVE_FEEDBACK = "resolve_feedback"
    RESOLVE_JOINT = "resolve_joint"
    HOLD = "hold"  # a team's record waits for the last decision
    RESOLVE_EDGES = "resolve_edges"  # a team's forward route: every edge at once


class PipelineStage(_Name):
    """A stage function of ``Stages``, in the order an episode runs them."""

    CHECK = "check"
    DELIVER = "deliver"
    RESPOND = "respond"
    RESOLVE_FORWARD = "resolve_forward"
    RESOLVE_FEEDBACK = "resolve_feedback"
    RESOLVE_JOINT = "resolve_joint"
    RESOLVE_EDGES = "resolve_edges"
    MATERIALIZE = "materialize"
    COMPILE = "compile"
    VERIFY = "verify"


#: The stages every committed episode runs, whatever its route: each decision's contract check, and the
#: commitment's materialize -> compile -> verify.
EVERY_ROUTE: frozenset[PipelineStage] = frozenset({PipelineStage.CHECK, PipelineStage.MATERIALIZE,
                                                   PipelineStage.COMPILE, PipelineStage.VERIFY})


def stage_of(step: Step) -> PipelineStage | None:
    """The pipeline stage a session step runs by that name (``deliver`` runs ``deliver``), or None
    (``execute``, ``hold``)."""
    return PipelineStage._value2member_map_.get(step.value)  # type: ignore[return-value]


__all__ = ["DecisionStage", "EVERY_ROUTE", "PipelineStage", "Step", "stage_of"]
