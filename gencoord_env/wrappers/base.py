"""The shared shape of an intervention: a ParallelEnv wrapper that rewrites one stage's output.

An intervention never changes the env it wraps. At each ``reset`` it adds itself to
``options["interventions"]``; the base env hands that tuple to the episode's session, which passes the
value the named stage produced through every intervention on that stage, innermost wrapper first, and
writes one ``{"stage": "intervention", "intervention": <name>, ...}`` trace record for each rewrite
(provenance). So interventions stack freely - two on the same stage compose, the outer one rewriting
what the inner one delivered - and the inner env, used without the wrapper, behaves as before.

``spec()`` returns the wrapper's name and arguments as plain JSON values; ``TraceRecorder`` stores it
with each episode and ``gencoord_env.replay`` rebuilds the same wrapper stack from it.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pettingzoo.utils.wrappers import BaseParallelWrapper

from gencoord_env.tasks.episode import Episode


class StageIntervention(BaseParallelWrapper):
    """Base class: subclasses set ``stage`` and ``routes`` and implement ``rewrite``."""

    #: the stage whose output this intervention rewrites (``Stages`` field name)
    stage: str = ""
    #: the routes in which that stage runs; other routes are refused at construction
    routes: tuple[str, ...] = ()

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        base = env.unwrapped
        if not hasattr(base, "setup") or not hasattr(base, "stages"):
            raise TypeError(f"{type(self).__name__} wraps a gencoord env, got {type(base).__name__}")
        route = base.route
        if route not in self.routes:
            raise ValueError(
                f"{type(self).__name__} rewrites the {self.stage!r} stage, which only runs in the routes "
                f"{list(self.routes)}; this env uses route={route!r}"
            )

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        options = dict(options or {})
        options["interventions"] = (*options.get("interventions", ()), self)
        return self.env.reset(seed=seed, options=options)

    def rewrite(self, value: Any, episode: Episode, **inputs: Any) -> tuple[Any, dict[str, Any]]:
        """(the rewritten stage output, the fields of this intervention's trace record)."""
        raise NotImplementedError

    def spec(self) -> dict[str, Any]:
        """``{"name": <class name>, "args": {...}}``: enough to rebuild this wrapper on a fresh env."""
        return {"name": type(self).__name__, "args": {}}


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
        raise ValueError(f"binding {binding!r} has no paired alternative among {options}")
    return options[(options.index(binding) + 1) % len(options)]
