"""``gencoord serve``: the env as an OpenEnv server (``openenv-core``, extra ``openenv``).

One WebSocket session plays one env; on the ``minecraft`` backend each session holds one arena of one
shared ``SidecarPool`` (N sessions = N arenas of one Minecraft server), on ``sim`` its own sim world.

- Action: ``{"text": "<Short DSL record>"}`` (JSON or English with ``--surface json|freeform``), or
  ``{"slot": k}`` with ``--actions menu``. A bad action is the env's failure code (``PARSE_FAILURE``,
  ``CONTRACT_REJECT``, ...) in the final observation, as in the env (both fields at once too); a message
  that is no action (an unknown field, a slot that is no integer) is OpenEnv's ``VALIDATION_ERROR``.
- Observation (:class:`GencoordObservation`): ``text`` (the deciding agent's observation), ``agent`` (who
  decides), ``role``, ``stage``, ``episode_id``, ``template``, ``candidates`` (menu), and at the end
  ``outcome``, ``reason``, ``metrics`` (and ``fault`` after an infrastructure fault with
  ``--on-fault truncate``); ``reward`` and ``done`` travel in OpenEnv's ``StepResult``.
- ``reset(seed=S)`` and ``reset(index=K)`` (the pool's K-th episode) are the env's
  ``reset(seed=S, options={"index": K})``.
- Errors (a step after the end, an unknown reset argument, an infrastructure fault) are OpenEnv error
  replies (``EXECUTION_ERROR``) carrying the env's message; the connection stays open.

Client side, with nothing of this package installed::

    from openenv.core import GenericEnvClient
    with GenericEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(index=0)
        result = env.step({"text": "SELF ...\\nREQ agent_b ..."})
        result.observation["outcome"], result.reward, result.done
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from gencoord_env.turns import Turn, TurnEnv

__all__ = ["GencoordAction", "GencoordEnvironment", "GencoordObservation", "app", "serve"]

#: the reset arguments a client may send (OpenEnv's ``episode_id`` is accepted and ignored: the pool names episodes)
RESET_ARGUMENTS = ("seed", "index", "episode_id")


class GencoordAction(Action):
    """The deciding agent's action: a record as ``text``, or a menu ``slot``."""

    text: str | None = None
    slot: int | None = None

    def value(self) -> Any:
        """What the env receives: the record or the slot. No field is an empty record and both fields are
        no action the env knows; either way the env's ``PARSE_FAILURE``, as for any malformed action."""
        if self.text is not None and self.slot is not None:
            return {"text": self.text, "slot": self.slot}
        return self.slot if self.slot is not None else (self.text if self.text is not None else "")


class GencoordObservation(Observation):
    """One turn of the episode (:class:`gencoord_env.turns.Turn`) as OpenEnv sends it."""

    text: str = ""
    agent: str | None = None
    role: str | None = None
    stage: str = ""
    episode_id: str = ""
    template: str = ""
    candidates: list[str | None] | None = None
    outcome: str | None = None
    reason: str | None = None
    metrics: dict[str, Any] | None = None
    fault: dict[str, Any] | None = None

    @classmethod
    def of(cls, turn: Turn, first: bool = False) -> GencoordObservation:
        return cls(text=turn.text, agent=turn.agent, role=turn.role, stage=turn.stage, episode_id=turn.episode_id,
                   template=turn.template, candidates=turn.candidates, outcome=turn.outcome, reason=turn.reason,
                   metrics=turn.metrics, fault=turn.fault, done=turn.done, reward=None if first else turn.reward)


class GencoordEnvironment(Environment[GencoordAction, GencoordObservation, State]):
    """One session's env: ``gencoord_env.parallel_env(**env_kwargs)``, on an arena of ``pool`` when given."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_kwargs: Mapping[str, Any], pool: Any = None) -> None:
        super().__init__()
        import gencoord_env

        kwargs = dict(env_kwargs)
        if pool is not None:
            from gencoord_env.world.minecraft import MinecraftWorld

            kwargs["world"] = MinecraftWorld(pool=pool)
        self.game = TurnEnv(gencoord_env.parallel_env(**kwargs))

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GencoordObservation:
        unknown = sorted(set(kwargs) - {"index"})
        if unknown:
            raise ValueError(f"reset got unknown argument(s) {unknown}; expected {list(RESET_ARGUMENTS)}")
        index = kwargs.get("index")
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
            raise ValueError(f"reset(index=...) takes an episode number (int), got {index!r}")
        return GencoordObservation.of(self.game.reset(seed=seed, index=index), first=True)

    def step(self, action: GencoordAction, timeout_s: float | None = None, **kwargs: Any) -> GencoordObservation:
        return GencoordObservation.of(self.game.act(action.value()))

    @property
    def state(self) -> State:
        """OpenEnv's ``episode_id`` and ``step_count`` (decisions taken), ``done``, ``agent`` (who decides) and
        ``arena`` (the Minecraft arena this session holds; None on the sim)."""
        turn = self.game.turn
        return State(episode_id=None if turn is None else turn.episode_id, step_count=self.game.steps,
                     done=bool(turn and turn.done), agent=None if turn is None else turn.agent,
                     arena=getattr(self.game.env.world, "arena", None))

    def close(self) -> None:
        self.game.close()


def app(env_kwargs: Mapping[str, Any], max_sessions: int = 4, pool: Any = None) -> Any:
    """The FastAPI app: ``max_sessions`` concurrent WebSocket sessions, each a :class:`GencoordEnvironment`."""
    factory = functools.partial(GencoordEnvironment, dict(env_kwargs), pool)
    return create_app(factory, GencoordAction, GencoordObservation, env_name="gencoord_v0", max_concurrent_envs=max_sessions)


def serve(env_kwargs: Mapping[str, Any], host: str = "127.0.0.1", port: int = 8000, max_sessions: int = 4,
          log_level: str = "warning") -> None:
    """Run the server until interrupted; on ``minecraft`` one sidecar with ``max_sessions`` arenas serves every session."""
    import uvicorn

    pool = None
    if env_kwargs.get("backend", "minecraft") == "minecraft":
        from gencoord_env.world.minecraft import SidecarPool

        pool = SidecarPool(arenas=max_sessions, max_arenas=max(16, max_sessions))
    try:
        uvicorn.run(app(env_kwargs, max_sessions, pool), host=host, port=port, log_level=log_level, ws="websockets-sansio")
    finally:
        if pool is not None:
            pool.close()
