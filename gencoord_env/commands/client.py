"""``GencoordEnvClient``: OpenEnv's typed client of ``gencoord serve`` (extra ``openenv``).

It speaks OpenEnv's WebSocket protocol with the typed action, observation and state of :mod:`gencoord_env.commands.wire`::

    from gencoord_env.commands.client import GencoordAction, GencoordEnvClient
    with GencoordEnvClient(base_url="http://127.0.0.1:8000") as env:    # sync; `async with` works too
        result = env.reset(index=0)
        result = env.step(GencoordAction(text="SELF ...\\nREQ agent_b ..."))   # or env.step("SELF ...")
        result.observation.outcome, result.reward, result.done

When the server ends a session (it sat idle past the server's ``--idle-timeout``, or the server stopped), the
next call raises :class:`SessionClosed` with the server's reason, and the call after it opens a new session;
a server whose sessions are all taken (and whose wait queue is full, or whose wait ran out) answers
:class:`ServerAtCapacity`. Both are ``RuntimeError``, as OpenEnv's other error replies are.

The package's rule agents act from the wire: a session that resets with ``context=True`` receives the
deciding agent's typed context with each observation, and :func:`agent_info` gives it to a policy as the
env's ``info`` would::

    policy = make_policy("rule")
    result = env.reset(index=0, context=True)
    while not result.done:
        result = env.step(policy.act(result.observation.text, agent_info(result.observation)))
"""
from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from pydantic import BaseModel

from gencoord_env.commands.wire import (
    CAPACITY_REACHED,
    CLOSE_CAPACITY,
    IDLE_TIMEOUT,
    GencoordAction,
    GencoordMenuAction,
    GencoordObservation,
    GencoordState,
    agent_info,
)
from gencoord_env.turns import Turn

__all__ = [
    "GencoordAction",
    "GencoordEnvClient",
    "GencoordMenuAction",
    "GencoordObservation",
    "GencoordState",
    "RemoteTurnEnv",
    "ServerAtCapacity",
    "SessionClosed",
    "agent_info",
]


class SessionClosed(RuntimeError):
    """The server closed this session (idle past its ``--idle-timeout``, or it stopped); the message says why."""


class ServerAtCapacity(RuntimeError):
    """Every session of the server is taken (and its wait queue is full, or the wait ran out)."""


class GencoordEnvClient(EnvClient[Any, GencoordObservation, GencoordState]):
    """OpenEnv's WebSocket client of ``gencoord serve``, typed; see the module docstring.

    ``step`` takes a :class:`GencoordAction` / :class:`GencoordMenuAction`, or the bare record (``str``) or
    slot (``int``). ``reset(index=K)`` plays the pool's episode K, ``reset(seed=S)`` one the server's RNG
    draws; either answers the first decision of the roles this session plays.
    """

    _ws: Any  # EnvClient's WebSocket (None: not connected)

    def _step_payload(self, action: Any) -> dict[str, Any]:
        if isinstance(action, (GencoordAction, GencoordMenuAction)):
            return action.model_dump(exclude_defaults=True)
        if isinstance(action, BaseModel):
            raise TypeError(f"step() takes a GencoordAction or a GencoordMenuAction, got a {type(action).__name__}")
        if isinstance(action, str):
            return {"text": action}
        if isinstance(action, int) and not isinstance(action, bool):
            return {"slot": action}
        raise TypeError(f"step() takes a GencoordAction, a GencoordMenuAction, a record (str) or a slot (int), got {action!r}")

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[GencoordObservation]:
        reward, done = payload.get("reward"), bool(payload.get("done", False))
        observation = GencoordObservation(**payload.get("observation", {}), reward=reward, done=done)
        return StepResult(observation=observation, reward=reward, done=done)

    def _parse_state(self, payload: dict[str, Any]) -> GencoordState:
        return GencoordState(**payload)

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed

        try:
            response: dict[str, Any] = await super()._send_and_receive(message)
        except ConnectionClosed as e:
            ws: Any = self._ws
            self._ws = None  # the next call connects again: a new session
            frame = e.rcvd
            why = await _last_word(ws) or (frame.reason if frame is not None and frame.reason else "it gave no reason")
            if frame is not None and frame.code == CLOSE_CAPACITY:
                raise ServerAtCapacity(f"the server refused this session: {why}") from None
            raise SessionClosed(f"the server closed this session: {why}; the next call opens a new session") from None
        except RuntimeError as e:
            if f"(code: {CAPACITY_REACHED})" in str(e):
                self._ws = None
                raise ServerAtCapacity(str(e)) from None
            if f"(code: {IDLE_TIMEOUT})" in str(e):
                self._ws = None
                raise SessionClosed(f"{e}; the next call opens a new session") from None
            raise
        return response


async def _last_word(ws: Any) -> str | None:
    """The message of the error the server sent before it closed the connection (a close frame's reason holds
    123 bytes at most), if it arrived."""
    import asyncio
    import json

    try:
        raw = await asyncio.wait_for(ws.recv(), timeout=1.0)
        data = json.loads(raw).get("data", {})
    except Exception:  # noqa: BLE001 - nothing buffered, or not an error message: the close frame's reason will do
        return None
    return data.get("message") if isinstance(data, dict) else None


class RemoteTurnEnv:
    """:class:`gencoord_env.turns.TurnEnv`'s interface (``reset``, ``act``, ``turn``, ``info``, ``steps``,
    ``close``) over one session of a running ``gencoord serve``: what plays in-process plays against a server.

    ``context=True`` asks the server for the deciding agent's typed context with each observation, so that
    ``info`` holds it as the env's own info does (a rule agent can then decide for the client); otherwise
    ``info`` is empty. A session the server closed while it sat idle between episodes is opened again at the
    next ``reset``.
    """

    def __init__(self, base_url: str, context: bool = False, **client: Any) -> None:
        self.base_url = base_url
        self.client = GencoordEnvClient(base_url=base_url, **client)
        self.context = context
        self.turn: Turn | None = None
        self.info: dict[str, Any] = {}
        self.steps = 0

    def reset(self, seed: int | None = None, index: int | None = None) -> Turn:
        args: dict[str, Any] = {k: v for k, v in (("seed", seed), ("index", index)) if v is not None}
        if self.context:
            args["context"] = True
        try:
            result = self.client.reset(**args)
        except SessionClosed:  # closed while idle between episodes: this reset opens a new session
            result = self.client.reset(**args)
        self.steps = 0
        return self._turn(result)

    def act(self, action: Any) -> Turn:
        result = self.client.step(action)
        self.steps += 1
        return self._turn(result)

    def _turn(self, result: Any) -> Turn:
        o: GencoordObservation = result.observation
        self.turn = Turn(o.text, o.agent, o.role, o.stage, o.episode_id, o.template, done=result.done,
                         reward=float(result.reward or 0.0), candidates=o.candidates, outcome=o.outcome, reason=o.reason,
                         metrics=o.metrics, fault=o.fault)
        self.info = agent_info(o) if o.context is not None and not result.done else {}
        return self.turn

    def close(self) -> None:
        self.client.close()
