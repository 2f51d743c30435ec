"""The shared shape of an intervention: a ParallelEnv wrapper that rewrites one stage's output.

An intervention never changes the env it wraps. At each ``reset`` it adds itself to
``options["interventions"]``; the base env hands that tuple to the episode's session, which passes the
value the named stage produced through every intervention on that stage, innermost wrapper first, and
writes one ``{"stage": "intervention", "intervention": <name>, ...}`` trace record for each rewrite
(provenance). So interventions stack freely - two on the same stage compose, the outer one rewriting
what the inner one delivered - and the inner env, used without the wrapper, behaves as before.

``spec()`` returns the wrapper's name and arguments as plain JSON values; ``TraceRecorder`` stores it
with each episode and ``gencoord_env.commands.replay`` rebuilds the same wrapper stack from it.

In a team an intervention acts per edge: ``edge=(sender role, receiver role)`` names one channel by its
roles (roles, not agents: the agents holding them rotate between episodes), and only the messages on that
channel are rewritten; without ``edge`` every channel is. An episode whose template has no such channel
passes unchanged.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pettingzoo.utils.wrappers import BaseParallelWrapper

from gencoord_env.envs.gencoord.routes import routes_running
from gencoord_env.envs.gencoord.stages import rewritable
from gencoord_env.errors import UsageError
from gencoord_env.lifecycle import PipelineStage
from gencoord_env.suggest import close_matches
from gencoord_env.tasks.episode import Episode


class StageIntervention(BaseParallelWrapper):
    """Base class: subclasses set ``stage`` and implement ``rewrite``.

    A ``stage`` outside ``stages.REWRITABLE``, or one that no episode of the env runs (its route, its pool or
    its surface never reach it: ``raw_env.check_reachable``), is refused here, so an intervention cannot
    silently do nothing.
    """

    #: the stage whose output this intervention rewrites (a key of ``stages.REWRITABLE``)
    stage: PipelineStage | str = ""

    def __init__(self, env: Any, edge: Sequence[str] | None = None) -> None:
        super().__init__(env)
        base = env.unwrapped
        if not hasattr(base, "setup") or not hasattr(base, "stages"):
            raise TypeError(f"{type(self).__name__} wraps a gencoord env, got {type(base).__name__}")
        stage = rewritable(self.stage, type(self).__name__)
        base.check_reachable(stage, type(self).__name__)
        self.edge: tuple[str, str] | None = None if edge is None else _edge(edge, base)

    @classmethod
    def routes(cls) -> tuple[str, ...]:
        """The routes in which this intervention's stage runs (``routes.ROUTES`` says)."""
        return routes_running(rewritable(cls.stage, cls.__name__))

    def applies(self, episode: Episode, edge: tuple[str, str] | None) -> bool:
        """Whether this intervention rewrites the message on ``edge`` (agents) of ``episode``."""
        if self.edge is None:
            return True
        return edge is not None and (episode.role_of.get(edge[0]), episode.role_of.get(edge[1])) == self.edge

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        options = dict(options or {})
        options["interventions"] = (*options.get("interventions", ()), self)
        observations, infos = self.env.reset(seed=seed, options=options)
        return observations, infos

    def rewrite(self, value: Any, episode: Episode, **inputs: Any) -> tuple[Any, dict[str, Any] | None]:
        """(the rewritten stage output, the fields of this intervention's trace record; ``None`` when the
        message is on an edge this intervention leaves alone)."""
        raise NotImplementedError

    def edge_fields(self, episode: Episode, edge: tuple[str, str] | None) -> dict[str, Any]:
        """The trace record's ``edge`` (agents) in a team; nothing in a two-agent episode."""
        return {"edge": list(edge)} if episode.is_team and edge is not None else {}

    def spec(self) -> dict[str, Any]:
        """``{"name": <class name>, "args": {...}}``: enough to rebuild this wrapper on a fresh env."""
        return {"name": type(self).__name__, "args": self.edge_args()}

    def edge_args(self) -> dict[str, Any]:
        return {} if self.edge is None else {"edge": list(self.edge)}


def _edge(edge: Sequence[str], base: Any) -> tuple[str, str]:
    """``edge`` as (sender role, receiver role), checked against the channels of the env's templates and the
    prior's team templates (a replayed episode may be one whose template lacks it)."""
    from gencoord_env.tasks.prior import prior

    if isinstance(edge, str) or len(edge) != 2 or not all(isinstance(r, str) for r in edge):
        raise TypeError(f"edge names a channel as (sender role, receiver role), e.g. ('sender', 'crafter'); got {edge!r}")
    pair = (edge[0], edge[1])
    channels = {c for t in base.pool.templates() for c in t.message_edges}
    if pair not in channels | {c for t in prior().teams.values() for c in t.message_edges}:
        names = [f"{a}>{b}" for a, b in sorted(channels)]
        hint = close_matches(f"{pair[0]}>{pair[1]}", names, n=1)
        raise UsageError(f"no template of this env has a channel {pair[0]} -> {pair[1]}; its channels are {names}"
                         + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    return pair


def interventions(env: Any) -> list[dict[str, Any]]:
    """The specs of every ``StageIntervention`` in ``env``'s wrapper stack, innermost first."""
    out: list[dict[str, Any]] = []
    layer = env
    while hasattr(layer, "env"):
        if isinstance(layer, StageIntervention):
            out.append(layer.spec())
        layer = layer.env
    return out[::-1]


def other_binding(bindings: Sequence[str], binding: str) -> str:
    """The paired binding: the next admissible binding of the template after ``binding`` (cyclic)."""
    options = list(bindings)
    if binding not in options or len(options) < 2:
        raise UsageError(f"binding {binding!r} has no paired alternative among {options}")
    return options[(options.index(binding) + 1) % len(options)]
