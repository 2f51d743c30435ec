"""What crosses the wire between ``gencoord serve`` (:mod:`gencoord_env.commands.serve`) and its clients
(:mod:`gencoord_env.commands.client`): the typed action, observation and state, and the codes a session ends with.

The models follow OpenEnv's (``openenv.core.env_server.types``: ``Action``, ``Observation``, ``State``; the
same base fields and configuration, held equal by the tests) without importing it, so that the server starts
without OpenEnv's client, MCP and web-interface stack (about 10 CPU-seconds of imports):

- :class:`GencoordAction` (``{"text": record}``, the server's ``--actions text``) or :class:`GencoordMenuAction`
  (``{"slot": k}``, ``--actions menu``): each has exactly one required field, so a client that sends a model's
  plain reply as that field (verifiers' OpenEnv taskset does) plays without knowing the schema's details.
- :class:`GencoordObservation`: one turn of the episode (:class:`gencoord_env.turns.Turn`): ``text`` (the
  deciding agent's observation), ``agent``, ``role``, ``stage``, ``episode_id``, ``template``, ``candidates``
  (menu), at the end ``outcome``, ``reason``, ``metrics`` (and ``fault`` after an infrastructure fault with
  ``--on-fault truncate``), ``context`` (the deciding agent's typed context as JSON, for a session that reset
  with ``context=True``); ``reward`` and ``done`` as OpenEnv's ``StepResult`` carries them.
- :class:`GencoordState`: OpenEnv's ``episode_id`` and ``step_count``, plus ``done``, ``agent`` (who decides
  now), ``plays`` (the roles this client plays; the server's partner plays the rest) and ``arena``.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gencoord_env.errors import UsageError

__all__ = [
    "CAPACITY_REACHED",
    "CLOSE_CAPACITY",
    "CLOSE_IDLE",
    "IDLE_TIMEOUT",
    "GencoordAction",
    "GencoordMenuAction",
    "GencoordObservation",
    "GencoordState",
    "agent_info",
]

#: the error code (OpenEnv's) of a session refused because every slot is taken
CAPACITY_REACHED = "CAPACITY_REACHED"
#: the error code of a session the server closed after it sat idle
IDLE_TIMEOUT = "IDLE_TIMEOUT"
#: WebSocket close codes the server ends a session with: 1013 (RFC 6455 "try again later") when it has no
#: room, 4408 (an application code, after HTTP's 408) when the session sat idle past ``--idle-timeout``
CLOSE_CAPACITY = 1013
CLOSE_IDLE = 4408


class _Action(BaseModel):
    """OpenEnv's ``Action``: unknown fields refused, ``metadata`` free."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, arbitrary_types_allowed=True)
    metadata: dict[str, Any] = Field(default_factory=dict, description="Additional metadata for the action")


class GencoordAction(_Action):
    """The deciding agent's record (a server with ``--actions text``, the default)."""

    text: str = Field(description="the deciding agent's record: Short DSL (JSON or English with the server's "
                                  "--surface json|freeform); a malformed one is the env's failure code, as in the env")


class GencoordMenuAction(_Action):
    """The menu slot of the deciding agent's record (a server with ``--actions menu``)."""

    slot: int = Field(strict=True, description="the slot of the deciding agent's record in the observation's candidates")


class GencoordObservation(BaseModel):
    """One turn of the episode (:class:`gencoord_env.turns.Turn`) as it crosses the wire; OpenEnv's ``Observation``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, arbitrary_types_allowed=True)
    done: bool = Field(default=False, description="Whether the episode has terminated")
    reward: bool | int | float | None = Field(default=None, description="Reward signal from the last action")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Additional metadata for the observation")
    text: str = Field("", description="the deciding agent's observation; empty at the end")
    agent: str | None = Field(None, description="the deciding agent; None at the end")
    role: str | None = Field(None, description="the deciding agent's role")
    stage: str = Field("", description="the decision stage; 'done' at the end")
    episode_id: str = ""
    template: str = ""
    candidates: list[str | None] | None = Field(None, description="the menu's records (None where masked), --actions menu")
    outcome: str | None = Field(None, description="the episode's outcome code at the end (SUCCESS, PARSE_FAILURE, ...)")
    reason: str | None = None
    metrics: dict[str, Any] | None = None
    fault: dict[str, Any] | None = Field(None, description="the infrastructure fault that truncated the episode")
    context: dict[str, Any] | None = Field(None, description="the deciding agent's typed context as JSON, for a session "
                                                             "that reset with context=True (context_from_wire reads it)")


class GencoordState(BaseModel):
    """A session's state, OpenEnv's ``State``: its episode, decisions taken, who decides, the roles it plays."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, arbitrary_types_allowed=True)
    episode_id: str | None = Field(default=None, description="Unique identifier for the current episode")
    step_count: int = Field(default=0, ge=0, description="Number of steps taken in the current episode")
    done: bool = False
    agent: str | None = Field(None, description="who decides now; None before the first reset and at the end")
    plays: str = Field("both", description="the roles this session plays; the server's partner plays the others")
    arena: str | None = Field(None, description="the Minecraft arena this session holds; None on the sim")


def agent_info(observation: GencoordObservation) -> dict[str, Any]:
    """The deciding agent's ``info`` as a policy's ``act(observation.text, info)`` reads it in-process (``context``
    typed, ``turn``, ``role``, ``stage``, ``episode_id``, ``template``, ``candidates``), from an observation of a
    session that reset with ``context=True``: the package's rule agents act on it as they act in the env.

    >>> policy = make_policy("rule")                                     # doctest: +SKIP
    >>> result = env.reset(index=0, context=True)
    >>> result = env.step(policy.act(result.observation.text, agent_info(result.observation)))
    """
    from gencoord_env.tasks.context_wire import context_from_wire

    if observation.done:
        raise UsageError("the episode has ended: no agent decides")
    if observation.context is None:
        raise UsageError("this observation carries no context: reset the session with context=True")
    return {"context": context_from_wire(observation.context), "turn": observation.agent, "deciding": True,
            "role": observation.role, "stage": observation.stage, "episode_id": observation.episode_id,
            "template": observation.template, "candidates": observation.candidates}
