"""``gencoord serve``: the env as an OpenEnv server (extra ``openenv``).

One session plays one env: a WebSocket connection to ``/ws`` is a session for as long as it stays open, and
``POST /reset`` without a ``session_id`` opens one over plain HTTP. On the ``minecraft`` backend each session
holds one arena of one shared ``SidecarPool`` (N sessions = N arenas of one Minecraft server), on ``sim`` its
own sim world. The wire types (actions, observations, state) are in :mod:`gencoord_env.commands.wire`, the typed
client in :mod:`gencoord_env.commands.client`. The server imports no OpenEnv module (OpenEnv's package imports its
client, MCP and web-interface stack, about 10 CPU-seconds): it speaks OpenEnv's protocol, which the tests
hold it to with OpenEnv's own clients and ``openenv validate``.

- Action: ``{"text": "<record>"}`` (Short DSL; JSON or English with ``--surface json|freeform``), or
  ``{"slot": k}`` with ``--actions menu``. A bad record is the env's failure code (``PARSE_FAILURE``,
  ``CONTRACT_REJECT``, ...) in the final observation, as in the env; a message that is no action (an unknown
  field, a slot that is no integer) is OpenEnv's ``VALIDATION_ERROR``.
- ``reset(seed=S)`` and ``reset(index=K)`` (the pool's K-th episode; outside the pool an error naming the
  range) are the env's ``reset(seed=S, options={"index": K})``. ``reset(context=True)``: from then on the
  session's observations carry ``context``, the deciding agent's typed context as JSON
  (:func:`gencoord_env.tasks.context_wire.context_to_wire`), so that an agent that acts from it (the rule
  agents) acts on the client's side as it acts in-process (:func:`gencoord_env.commands.client.agent_info`).
- ``--plays ROLE --partner NAME``: the session plays one role (``sender``, ``receiver``, ...), and the
  server's partner (a rule agent, ``gencoord_env.agents.make_policy`` name; ``model:PATH`` for a learned one)
  plays every other decision, in the server, before the session sees the next one. ``--plays both``
  (default): the session decides every turn of every agent (self-play).
- Errors (a step after the end, an unknown reset argument, an infrastructure fault) are OpenEnv error replies
  (``EXECUTION_ERROR``) carrying the env's message; the connection stays open.

Capacity (every route, every backend): at most ``--max-sessions`` sessions at once, WebSocket and HTTP
together. A newcomer beyond them waits in a queue of ``--queue`` places for up to ``--queue-timeout`` seconds
(the default queue has no place: it is refused at once); a refused one gets ``CAPACITY_REACHED`` with a
message naming the limits, and its WebSocket closes with code 1013 (try again later). A session that sends
nothing for ``--idle-timeout`` seconds (between a reply and its next message) is closed and its env (and
arena) released: a WebSocket gets an ``IDLE_TIMEOUT`` error and closes with code 4408 and the reason; an HTTP
session's next request answers 410 with it.

HTTP routes (each answers 2xx, or 4xx/503 with a ``detail`` message): ``POST /reset`` (body: ``seed``,
``index``, ``session_id``; answers ``observation``, ``reward``, ``done``, ``session_id``), ``POST /step``
(``action``, ``session_id``), ``GET /state?session_id=...``, ``POST /close`` (``session_id``), ``GET /health``
(``status``, ``sessions``, ``max_sessions``, ``waiting``), ``GET /metadata``, ``GET /schema``, ``POST /mcp``
(JSON-RPC; the env has no MCP tools), ``GET /openapi.json``.

Sim sessions run in the server's event loop (a sim step takes about 0.2 ms, less than a hop to a thread);
Minecraft sessions each run in a thread of their own (a step waits seconds on the sidecar).
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import Body, FastAPI, HTTPException, Query, WebSocket
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gencoord_env.agents import make_policy
from gencoord_env.errors import UsageError
from gencoord_env.tasks.context_wire import context_to_wire
from gencoord_env.turns import Turn, TurnEnv
from gencoord_env.commands.wire import (
    CAPACITY_REACHED,
    CLOSE_CAPACITY,
    CLOSE_IDLE,
    IDLE_TIMEOUT,
    GencoordAction,
    GencoordMenuAction,
    GencoordObservation,
    GencoordState,
)

__all__ = ["GencoordEnvironment", "GencoordServer", "ServeConfig", "config_from_args", "make_app", "serve", "serve_argv",
           "sidecar_pool"]

#: the reset arguments a client may send (OpenEnv's ``episode_id`` is accepted and ignored: the pool names episodes;
#: ``context=True``: the session's observations carry the deciding agent's typed context from then on)
RESET_ARGUMENTS = ("seed", "index", "episode_id", "context")
ENV_NAME = "gencoord_v0"


@dataclasses.dataclass(frozen=True)
class ServeConfig:
    """What one ``gencoord serve`` serves, and to how many at once."""

    env: Mapping[str, Any]
    """``gencoord_env.parallel_env`` arguments of every session's env."""
    max_sessions: int = 4
    """sessions at once, WebSocket and HTTP together (on minecraft: arenas of one server, at most 64)."""
    queue: int = 0
    """newcomers that may wait for a session beyond ``max_sessions``; 0: refused at once."""
    queue_timeout_s: float = 30.0
    """how long a newcomer waits in the queue before it is refused."""
    idle_timeout_s: float | None = 300.0
    """a session silent this long is closed and its env released; None: never."""
    plays: str = "both"
    """the role each session plays (``both``: every decision of every agent)."""
    partner: str = "rule"
    """the policy of the decisions a session does not make (``plays`` a role): a ``make_policy`` name or ``model:PATH``."""

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise UsageError(f"max_sessions must be at least 1, got {self.max_sessions}")
        if self.queue < 0:
            raise UsageError(f"queue must be 0 or more, got {self.queue}")
        if self.queue_timeout_s <= 0:
            raise UsageError(f"queue_timeout_s must be positive, got {self.queue_timeout_s}")
        if self.idle_timeout_s is not None and self.idle_timeout_s <= 0:
            raise UsageError(f"idle_timeout_s must be positive (None: no timeout), got {self.idle_timeout_s}")

    @property
    def menu(self) -> bool:
        return bool(self.env.get("actions", "text") == "menu")

    @property
    def action_cls(self) -> type[GencoordAction] | type[GencoordMenuAction]:
        return GencoordMenuAction if self.menu else GencoordAction


def episode_roles(env: Any) -> set[str]:
    """The roles of a pool's episodes (its first two: both role permutations of its first public instance)."""
    return {role for episode in env.episodes[:2] for role in episode.role_of.values()}


class GencoordEnvironment:
    """One session's env: ``gencoord_env.parallel_env(**env)``, on an arena of ``pool`` when given, played by
    the client for ``plays`` and by ``partner`` for the other roles. OpenEnv's ``Environment`` interface
    (``reset``, ``step``, ``state``, ``close``)."""

    def __init__(self, env: Mapping[str, Any], pool: Any = None, plays: str = "both", partner: Any = None) -> None:
        import gencoord_env

        kwargs = dict(env)
        if pool is not None:
            from gencoord_env.world.minecraft import MinecraftWorld

            kwargs["world"] = MinecraftWorld(pool=pool)
        self.game = TurnEnv(gencoord_env.parallel_env(**kwargs))
        #: whether observations carry the deciding agent's context (``reset(context=True)``)
        self.send_context = False
        self.plays = plays
        self.partner = make_policy(partner) if isinstance(partner, str) else partner
        if plays != "both":
            roles = episode_roles(self.game.env)
            if plays not in roles:
                raise UsageError(f"plays={plays!r} is no role of pool {self.game.env.pool_name!r}'s episodes (its roles: "
                                 f"{', '.join(sorted(roles))}); give one of them, or 'both'")

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GencoordObservation:
        unknown = sorted(set(kwargs) - {"index", "context"})
        if unknown:
            raise UsageError(f"reset got unknown argument(s) {unknown}; expected {list(RESET_ARGUMENTS)}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"reset(seed=...) takes an int, got {seed!r}")
        index = kwargs.get("index")
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
            raise TypeError(f"reset(index=...) takes an episode number (int), got {index!r}")
        context = kwargs.get("context", self.send_context)
        if not isinstance(context, bool):
            raise TypeError(f"reset(context=...) takes true or false, got {context!r}")
        self.send_context = context
        return self._observe(self._advance(self.game.reset(seed=seed, index=index)), first=True)

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> GencoordObservation:
        value = action.slot if isinstance(action, GencoordMenuAction) else action.text
        return self._observe(self._advance(self.game.act(value)))

    def _observe(self, turn: Turn, first: bool = False) -> GencoordObservation:
        context = context_to_wire(self.game.info["context"]) if self.send_context and not turn.done else None
        return observation(turn, first, context)

    def _advance(self, turn: Turn) -> Turn:
        """The partner plays every decision that is not the session's."""
        while not turn.done and self.plays != "both" and turn.role != self.plays:
            turn = self.game.act(self.partner.act(turn.text, self.game.info))
        return turn

    @property
    def state(self) -> GencoordState:
        turn = self.game.turn
        return GencoordState(episode_id=None if turn is None else turn.episode_id, step_count=self.game.steps,
                             done=bool(turn and turn.done), agent=None if turn is None else turn.agent, plays=self.plays,
                             arena=getattr(self.game.env.world, "arena", None))

    def close(self) -> None:
        self.game.close()


def observation(turn: Turn, first: bool = False, context: dict[str, Any] | None = None) -> GencoordObservation:
    """The wire form of one turn (``reward`` None on the first, as OpenEnv's reset has it)."""
    return GencoordObservation(text=turn.text, agent=turn.agent, role=turn.role, stage=turn.stage, episode_id=turn.episode_id,
                               template=turn.template, candidates=turn.candidates, outcome=turn.outcome, reason=turn.reason,
                               metrics=turn.metrics, fault=turn.fault, context=context, done=turn.done,
                               reward=None if first else turn.reward)


def payload(obs: GencoordObservation) -> dict[str, Any]:
    """OpenEnv's step-result payload: ``observation`` (without ``reward``, ``done``, ``metadata``), ``reward``, ``done``."""
    return {"observation": obs.model_dump(exclude={"reward", "done", "metadata"}), "reward": obs.reward, "done": obs.done}


class ResetBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    seed: int | None = Field(default=None, strict=True, description="seeds the env's RNG, which draws the episode")
    index: int | None = Field(default=None, strict=True, description="the pool's episode to play")
    context: bool | None = Field(default=None, strict=True, description="observations carry the deciding agent's typed context")
    episode_id: str | None = Field(default=None, description="accepted and ignored (the pool names its episodes)")
    session_id: str | None = Field(default=None, description="an open HTTP session to reset; none: open a new one")


class ResetReply(BaseModel):
    observation: dict[str, Any]
    reward: float | None = None
    done: bool = False
    session_id: str = Field(description="pass it to /step, /state, /reset and /close")


class StepBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    action: dict[str, Any]
    session_id: str | None = None


class StepReply(BaseModel):
    observation: dict[str, Any]
    reward: float | None = None
    done: bool = False


class CloseBody(BaseModel):
    session_id: str | None = None


class AtCapacity(Exception):
    """Every session is taken and the queue is full (or the wait ran out); the message says which limits."""


class Session:
    """One client's env, its clock, and (minecraft) the thread its env runs in."""

    def __init__(self, sid: str, kind: str, executor: ThreadPoolExecutor | None) -> None:
        self.id = sid
        self.kind = kind
        self.executor = executor
        self.env: GencoordEnvironment | None = None
        self.last = time.monotonic()
        self.busy = False


class Slots:
    """At most ``n`` held; beyond them up to ``queue`` waiters, first come first served, each for ``timeout_s``."""

    def __init__(self, n: int, queue: int, timeout_s: float) -> None:
        self.n, self.queue, self.timeout_s = n, queue, timeout_s
        self.held = 0
        self.waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def refusal(self) -> str:
        return (f"all {self.n} sessions of this server are taken (--max-sessions {self.n}) and "
                + (f"its wait queue of {self.queue} is full (--queue {self.queue})" if self.queue else "it queues no one (--queue 0)")
                + "; retry later, or start the server with a larger --max-sessions or --queue")

    async def acquire(self) -> None:
        if self.held < self.n and not self.waiters:
            self.held += 1
            return
        if len(self.waiters) >= self.queue:
            raise AtCapacity(self.refusal())
        ticket: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(ticket)
        await asyncio.wait({ticket}, timeout=self.timeout_s)
        if ticket.done():  # released to us (the slot passed over without being counted free)
            return
        self.waiters.remove(ticket)
        ticket.cancel()
        raise AtCapacity(f"waited {self.timeout_s:g} s (--queue-timeout) for one of the {self.n} sessions of this server "
                         f"(--max-sessions {self.n}), all taken; retry later, or start the server with a larger --max-sessions")

    def release(self) -> None:
        while self.waiters:
            ticket = self.waiters.popleft()
            if not ticket.done():
                ticket.set_result(None)
                return
        self.held -= 1


class GencoordServer:
    """The sessions of one ``gencoord serve`` and the app that serves them; see the module docstring."""

    def __init__(self, config: ServeConfig, pool: Any = None) -> None:
        self.config = config
        self.pool = pool
        self.slots = Slots(config.max_sessions, config.queue, config.queue_timeout_s)
        self.http: dict[str, Session] = {}
        #: closed HTTP sessions -> why (the newest 4096), so a late request learns what became of its session
        self.ended: collections.OrderedDict[str, str] = collections.OrderedDict()
        self.active = 0
        #: one partner for every session (a learned one is loaded once)
        self.partner = make_policy(config.partner) if config.plays != "both" else None

    # --- sessions -------------------------------------------------------------------------------

    def _factory(self) -> GencoordEnvironment:
        return GencoordEnvironment(self.config.env, self.pool, self.config.plays, self.partner)

    async def open(self, kind: str) -> Session:
        """A new session with its env, once a slot is free (raises :class:`AtCapacity`)."""
        await self.slots.acquire()
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gencoord-session") if self.pool is not None else None
        session = Session(uuid.uuid4().hex, kind, executor)
        try:
            session.env = await self.call(session, self._factory)
        except BaseException:
            self.slots.release()
            if executor is not None:
                executor.shutdown(wait=False)
            raise
        self.active += 1
        return session

    async def close(self, session: Session, why: str = "closed by the client") -> None:
        if session.env is None:
            return
        env, session.env = session.env, None
        if self.http.pop(session.id, None) is not None:
            self.ended[session.id] = why
            while len(self.ended) > 4096:
                self.ended.popitem(last=False)
        try:
            await self.call(session, env.close)
        finally:
            if session.executor is not None:
                session.executor.shutdown(wait=False)
            self.active -= 1
            self.slots.release()

    async def call(self, session: Session, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` for ``session``: here on the sim, in the session's thread on Minecraft."""
        if session.executor is None:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(session.executor, fn, *args)

    def idle_message(self) -> str:
        return (f"this session sent nothing for {self.config.idle_timeout_s:g} s (the server's --idle-timeout): "
                "it was closed and its env released")

    async def reap_http(self) -> None:
        """Close HTTP sessions idle past the timeout (WebSocket sessions time their own reads)."""
        timeout = self.config.idle_timeout_s
        assert timeout is not None
        while True:
            await asyncio.sleep(min(max(timeout / 4, 0.05), 5.0))
            now = time.monotonic()
            for session in [s for s in self.http.values() if not s.busy and now - s.last > timeout]:
                await self.close(session, self.idle_message())

    # --- one request of a session -----------------------------------------------------------------

    async def reset(self, session: Session, data: Mapping[str, Any]) -> GencoordObservation:
        assert session.env is not None
        observation: GencoordObservation = await self.call(session, lambda: session.env.reset(**data))  # type: ignore[union-attr]
        return observation

    async def step(self, session: Session, action: Any) -> GencoordObservation:
        assert session.env is not None
        observation: GencoordObservation = await self.call(session, session.env.step, action)
        return observation

    # --- the WebSocket protocol (OpenEnv's) ------------------------------------------------------------

    async def message(self, session: Session, raw: str) -> dict[str, Any] | None:
        """The reply to one client message (None: the client closes the session)."""
        try:
            msg = json.loads(raw)
        except json.JSONDecodeError as e:
            return error("INVALID_JSON", f"Invalid JSON: {e}")
        if not isinstance(msg, dict):
            return error("INVALID_JSON", f"a message is a JSON object with a 'type', got {type(msg).__name__}")
        kind = msg.get("type")
        data = msg.get("data", {})
        try:
            if kind == "reset":
                if not isinstance(data, dict):
                    return error("VALIDATION_ERROR", f"reset's data is an object of reset arguments, got {data!r}")
                return {"type": "observation", "data": payload(await self.reset(session, data))}
            if kind == "step":
                action = self.config.action_cls.model_validate(data)
                return {"type": "observation", "data": payload(await self.step(session, action))}
            if kind == "state":
                assert session.env is not None
                return {"type": "state", "data": session.env.state.model_dump()}
            if kind == "close":
                return None
            if kind == "mcp":
                return {"type": "mcp", "data": NO_MCP | {"id": data.get("id") if isinstance(data, dict) else None}}
            return error("UNKNOWN_TYPE", f"Unknown message type: {kind!r}; expected reset, step, state or close")
        except ValidationError as e:
            return error("VALIDATION_ERROR", f"Invalid message: {e.errors(include_url=False)}",
                         errors=json.loads(e.json(include_url=False)))
        except Exception as e:  # noqa: BLE001 - the env's error, sent to its client; the session goes on
            return error("EXECUTION_ERROR", str(e))

    async def websocket(self, websocket: Any) -> None:
        from starlette.websockets import WebSocketDisconnect

        await websocket.accept()
        try:
            session = await self.open("ws")
        except AtCapacity as e:
            await refuse(websocket, str(e), self.slots)
            return
        timeout = self.config.idle_timeout_s
        try:
            while True:
                session.busy = False
                try:
                    received = await (asyncio.wait_for(websocket.receive(), timeout) if timeout else websocket.receive())
                except asyncio.TimeoutError:
                    why = self.idle_message()
                    await websocket.send_text(json.dumps(error(IDLE_TIMEOUT, why)))
                    await websocket.close(code=CLOSE_IDLE, reason=f"idle for {timeout:g} s (--idle-timeout); connect again")
                    await self.close(session, why)
                    return
                session.busy = True
                if received["type"] == "websocket.disconnect":
                    return
                raw = received.get("text")
                if raw is None:
                    raw = (received.get("bytes") or b"").decode("utf-8", errors="replace")
                reply = await self.message(session, raw)
                if reply is None:
                    return
                await websocket.send_text(json.dumps(reply))
        except (WebSocketDisconnect, OSError):  # the client went away
            return
        finally:
            await self.close(session)

    # --- HTTP --------------------------------------------------------------------------------------

    def http_session(self, sid: str | None, route: str) -> Session:
        if not sid:
            raise HTTPException(400, f"{route} needs the session_id that POST /reset answered (HTTP sessions are named; "
                                     "a WebSocket to /ws holds its session for as long as it is open)")
        session = self.http.get(sid)
        if session is None:
            if sid in self.ended:
                raise HTTPException(410, f"session {sid} was closed: {self.ended[sid]}; POST /reset without a session_id "
                                         "opens a new one")
            raise HTTPException(404, f"no session {sid} on this server; POST /reset without a session_id opens one")
        return session

    async def http_call(self, session: Session, work: Callable[[], Any]) -> Any:
        from gencoord_env.world.minecraft.errors import MinecraftBackendError

        session.busy = True
        try:
            return await work()
        except MinecraftBackendError as e:
            raise HTTPException(503, str(e)) from None
        except (ValueError, TypeError) as e:
            raise HTTPException(400, str(e)) from None
        except RuntimeError as e:
            raise HTTPException(409, str(e)) from None
        finally:
            session.busy = False
            session.last = time.monotonic()

    def app(self) -> Any:
        from contextlib import asynccontextmanager

        import gencoord_env

        server = self
        config = self.config

        @asynccontextmanager
        async def lifespan(_: FastAPI) -> Any:
            reaper = asyncio.create_task(server.reap_http()) if config.idle_timeout_s else None
            yield
            if reaper is not None:
                reaper.cancel()
            for session in list(server.http.values()):
                await server.close(session, "the server stopped")

        app = FastAPI(title=f"{ENV_NAME} (gencoord serve)", version=gencoord_env.__version__, lifespan=lifespan,
                      description=__doc__)

        @app.websocket("/ws")
        async def ws(websocket: WebSocket) -> None:
            await server.websocket(websocket)

        @app.post("/reset", tags=["Environment Control"], response_model=ResetReply)
        async def reset(request: ResetBody = Body(default_factory=lambda: ResetBody())) -> ResetReply:
            extra = request.model_extra or {}
            args = {k: v for k, v in {"seed": request.seed, "index": request.index, "context": request.context,
                                      **extra}.items() if v is not None}
            if request.session_id is not None:
                session = server.http_session(request.session_id, "POST /reset with a session_id")
                obs = await server.http_call(session, lambda: server.reset(session, args))
                return ResetReply(**payload(obs), session_id=session.id)
            try:
                session = await server.open("http")
            except AtCapacity as e:
                raise HTTPException(503, str(e)) from None
            server.http[session.id] = session
            try:
                obs = await server.http_call(session, lambda: server.reset(session, args))
            except BaseException:  # its id was never answered: nobody could use or close it
                await server.close(session, "its first reset failed")
                raise
            return ResetReply(**payload(obs), session_id=session.id)

        @app.post("/step", tags=["Environment Control"], response_model=StepReply)
        async def step(request: StepBody) -> StepReply:
            session = server.http_session(request.session_id, "POST /step")
            try:
                action = config.action_cls.model_validate(request.action)
            except ValidationError as e:
                raise HTTPException(422, f"the action is no {config.action_cls.__name__}: {e.errors(include_url=False)}") from None
            obs = await server.http_call(session, lambda: server.step(session, action))
            return StepReply(**payload(obs))

        @app.get("/state", tags=["State Management"], response_model=GencoordState)
        async def state(session_id: str | None = Query(None)) -> GencoordState:
            session = server.http_session(session_id, "GET /state")
            assert session.env is not None
            return session.env.state

        @app.post("/close", tags=["Environment Control"])
        async def close(request: CloseBody) -> dict[str, Any]:
            session = server.http_session(request.session_id, "POST /close")
            await server.close(session)
            return {"session_id": session.id, "closed": True}

        @app.get("/health", tags=["Health"])
        async def health() -> dict[str, Any]:
            return {"status": "healthy", "sessions": server.active, "max_sessions": config.max_sessions,
                    "waiting": len(server.slots.waiters), "http_sessions": len(server.http)}

        @app.get("/metadata", tags=["Environment Info"])
        async def metadata() -> dict[str, Any]:
            return {"name": ENV_NAME, "description": DESCRIPTION, "version": gencoord_env.__version__,
                    "readme_content": None, "author": None, "documentation_url": None}

        @app.get("/schema", tags=["Schema"])
        async def schema() -> dict[str, Any]:
            return {"action": config.action_cls.model_json_schema(), "observation": GencoordObservation.model_json_schema(),
                    "state": GencoordState.model_json_schema()}

        @app.post("/mcp", tags=["MCP"])
        async def mcp(body: Any = Body(None)) -> dict[str, Any]:
            return NO_MCP | {"id": body.get("id") if isinstance(body, dict) else None}

        return app


DESCRIPTION = ("Two agents coordinate a Minecraft build under private information: each observes its local context, one "
               "holds the binding fact, they exchange one bounded request, and the world verifies the handoff.")

#: the JSON-RPC answer to every MCP request: this env is played over /ws or /reset and /step
NO_MCP: dict[str, Any] = {"jsonrpc": "2.0", "error": {
    "code": -32601, "message": f"{ENV_NAME} has no MCP tools: play it over the WebSocket /ws, or POST /reset and /step"}}


def error(code: str, message: str, **more: Any) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code, **more}}


async def refuse(websocket: Any, why: str, slots: Slots) -> None:
    from starlette.websockets import WebSocketDisconnect

    with contextlib.suppress(WebSocketDisconnect, OSError, RuntimeError):  # a newcomer that stopped waiting is gone
        await websocket.send_text(json.dumps(error(CAPACITY_REACHED, why, active_sessions=slots.held, max_sessions=slots.n)))
        await websocket.close(code=CLOSE_CAPACITY, reason=f"all {slots.n} sessions taken (--max-sessions); retry later")




def make_app(config: ServeConfig, pool: Any = None) -> Any:
    """The FastAPI app of ``config`` (on minecraft, its sessions' arenas come from ``pool``)."""
    return GencoordServer(config, pool).app()


def config_from_args(args: Any) -> ServeConfig:
    """The ``ServeConfig`` of parsed ``gencoord serve`` arguments, checked: a bad combination of env arguments,
    a role the pool has not or an unknown partner raises ``ValueError`` here, before any port opens."""
    env = dict(backend=args.backend, pool=args.pool, route=args.route, view=args.view, surface=args.surface,
               private_fact=args.private_fact, actions=args.actions, reward=args.reward, seed=args.seed,
               pool_seed=args.pool_seed, on_fault=args.on_fault)
    if args.plays == "both" and args.partner is not None:
        raise UsageError(f"--partner {args.partner} plays the roles a session does not, but --plays both has every session "
                         "play every role: give --plays a role (sender, receiver, ...) or leave --partner out")
    if args.backend == "minecraft" and args.max_sessions > 64:
        raise UsageError(f"--max-sessions {args.max_sessions}: on minecraft each session holds an arena of one Minecraft "
                         "server, which holds at most 64")
    config = ServeConfig(env=env, max_sessions=args.max_sessions, queue=args.queue, queue_timeout_s=args.queue_timeout,
                         idle_timeout_s=args.idle_timeout or None, plays=args.plays, partner=args.partner or "rule")
    GencoordEnvironment({**env, "backend": "sim"}, plays=config.plays,
                        partner=config.partner if config.plays != "both" else None).close()
    return config


#: what a deployment serves without ``$GENCOORD_SERVE`` (a Space or container has no Minecraft server of its own)
DEPLOYED = "--backend sim --pool heldout"


def serve_argv(argv: Sequence[str] = ()) -> list[str]:
    """``gencoord serve``'s arguments in a deployment: those in ``$GENCOORD_SERVE`` (default :data:`DEPLOYED`),
    then ``argv``, and ``--port $PORT`` (else 8000) unless they name a port."""
    import os
    import shlex

    out = [*shlex.split(os.environ.get("GENCOORD_SERVE", DEPLOYED)), *argv]
    if not any(a == "--port" or a.startswith("--port=") for a in out):
        out += ["--port", os.environ.get("PORT", "8000")]
    return out


def sidecar_pool(config: ServeConfig) -> Any:
    """On minecraft the one sidecar whose arenas the sessions hold, one each (at most ``max_sessions``); None on the sim."""
    if config.env.get("backend", "minecraft") != "minecraft":
        return None
    from gencoord_env.world.minecraft import SidecarPool

    if config.max_sessions > 64:
        raise UsageError(f"on minecraft each session holds an arena of one server, which holds at most 64; "
                         f"got --max-sessions {config.max_sessions}")
    return SidecarPool(arenas=config.max_sessions, max_arenas=config.max_sessions)


#: Seconds a WebSocket client has to answer the server's keep-alive ping (uvicorn's default), before GENCOORD_TIMEOUT_SCALE.
WS_PING_TIMEOUT_S = 20.0


def uvicorn_config(app: Any, config: ServeConfig, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning") -> Any:
    """How ``gencoord serve`` runs ``app`` under uvicorn (the tests run it the same way, in a thread)."""
    import uvicorn

    # no per-message deflate: on loopback or a LAN, compressing every observation costs both ends more CPU than
    # the bytes it saves; a backlog for every session and queued newcomer connecting at once. A client has uvicorn's
    # 20 s to answer a keep-alive ping, stretched by GENCOORD_TIMEOUT_SCALE (a loaded machine's clients answer late)
    from gencoord_env.world.minecraft.client import timeout_scale

    return uvicorn.Config(app, host=host, port=port, log_level=log_level, ws="websockets-sansio", ws_per_message_deflate=False,
                          access_log=False, backlog=max(2048, 2 * (config.max_sessions + config.queue)),
                          ws_ping_timeout=WS_PING_TIMEOUT_S * timeout_scale())


def serve(config: ServeConfig, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning") -> None:
    """Run the server until interrupted; on ``minecraft`` one sidecar with ``max_sessions`` arenas serves every session."""
    import uvicorn

    pool = sidecar_pool(config)
    try:
        uvicorn.Server(uvicorn_config(make_app(config, pool), config, host, port, log_level)).run()
    finally:
        if pool is not None:
            pool.close()
