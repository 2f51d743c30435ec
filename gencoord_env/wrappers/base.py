"""The shared shape of an intervention: a ParallelEnv wrapper that swaps exactly one named stage.

An intervention never touches the env's private state. It installs its stage function through the
public ``set_stage`` hook once, at construction, and its stage function writes one
``{"stage": "intervention", "intervention": <name>, ...}`` record into the episode trace each time it
acts, so that every changed message can be traced back to the wrapper that changed it (provenance).

``spec()`` returns the wrapper's name and arguments as plain JSON values; ``TraceRecorder`` stores it
with each episode and ``gencoord_env.replay`` rebuilds the same wrapper stack from it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pettingzoo.utils.wrappers import BaseParallelWrapper

from gencoord_env.envs.gencoord.stages import Stages

Record = Callable[[dict[str, Any]], None]


class StageIntervention(BaseParallelWrapper):
    """Base class: subclasses set ``stage`` and ``routes`` and implement ``__call__`` (the new stage)."""

    #: the ``Stages`` field this intervention replaces
    stage: str = ""
    #: the routes in which that stage runs; other routes are refused at construction
    routes: tuple[str, ...] = ()

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        base = env.unwrapped
        if not hasattr(base, "set_stage") or not hasattr(base, "stages"):
            raise TypeError(f"{type(self).__name__} wraps a gencoord env (with set_stage), got {type(base).__name__}")
        route = getattr(base, "route", None)
        if route not in self.routes:
            raise ValueError(
                f"{type(self).__name__} changes the {self.stage!r} stage, which only runs in the routes "
                f"{list(self.routes)}; this env uses route={route!r}"
            )
        current = getattr(base.stages, self.stage)
        if current is not getattr(Stages(), self.stage):
            owner = getattr(current, "__self__", current)
            raise ValueError(
                f"the {self.stage!r} stage is already replaced by {type(owner).__name__}; "
                "stack interventions that change different stages"
            )
        base.set_stage(self.stage, self)

    def __call__(self, *args: Any) -> Any:  # the replacement stage function
        raise NotImplementedError

    def spec(self) -> dict[str, Any]:
        """``{"name": <class name>, "args": {...}}``: enough to rebuild this wrapper on a fresh env."""
        return {"name": type(self).__name__, "args": {}}

    def provenance(self, record: Record, **fields: Any) -> None:
        """Write this intervention's trace record."""
        record({"stage": "intervention", "intervention": type(self).__name__, **fields})


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
