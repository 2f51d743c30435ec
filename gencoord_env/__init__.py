"""gencoord_env: a PettingZoo environment for embodied two-agent coordination under private information.

    >>> import gencoord_env
    >>> env = gencoord_env.parallel_env(backend="sim")
    >>> observations, infos = env.reset(seed=0)
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gencoord_env.outcomes import FailureCode
from gencoord_env.pickling import install as _install_pickling

if TYPE_CHECKING:
    from gencoord_env.agents.single_agent import GenCoordGym
    from gencoord_env.batched import ParallelVectorEnv
    from gencoord_env.envs.gencoord_v0 import env, parallel_env, raw_env

_install_pickling()  # a live sim env pickles and deep-copies (gencoord_env.pickling)

__version__ = "0.2.0"

#: The environment's constructors, re-exported from ``envs.gencoord_v0`` as PettingZoo's ``rps_v2`` re-exports its
#: module, but loaded on first use (PEP 562): importing any module of the package runs this file, and loading the
#: env here would load the whole pipeline for ``gencoord --help`` or a table lookup. The names are the real
#: functions, so ``help(gencoord_env.parallel_env)`` shows their typed arguments and the Arguments section.
_ENV_NAMES = ("env", "parallel_env", "raw_env")


def __getattr__(name: str) -> Any:
    if name in _ENV_NAMES:
        value = getattr(importlib.import_module("gencoord_env.envs.gencoord_v0"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_ENV_NAMES})


def gym_env(role: str | int = "first", partner: Any = "rule", **kwargs: Any) -> GenCoordGym:
    """The single-agent Gymnasium view: the learner plays ``role``, ``partner`` the other role
    (``gencoord_env.agents.single_agent``; registered as ``gencoord_env/GenCoord-v0``)."""
    from gencoord_env.agents.single_agent import gym_env as make

    return make(role=role, partner=partner, **kwargs)


def vector_env(num_envs: int = 64, **kwargs: Any) -> ParallelVectorEnv:
    """``num_envs`` copies of the menu env stepped as one, both agents learning: PettingZoo's parallel API with
    every value a batched array (``gencoord_env.batched``; ``parallel_env``'s arguments, ``backend="sim"`` and
    ``actions="menu"`` implied)."""
    from gencoord_env.batched import ParallelVectorEnv as make

    return make(num_envs=num_envs, **kwargs)


def _register() -> None:
    import gymnasium

    if "gencoord_env/GenCoord-v0" not in gymnasium.registry:
        # No default wrappers: gymnasium.make(...).action_masks() must reach the env (single_agent's docstring)
        gymnasium.register(id="gencoord_env/GenCoord-v0", entry_point="gencoord_env.agents.single_agent:GenCoordGym",
                           vector_entry_point="gencoord_env.agents.vector:GenCoordVectorEnv",
                           order_enforce=False, disable_env_checker=True)


_register()

__all__ = ["FailureCode", "__version__", "env", "gym_env", "parallel_env", "raw_env", "vector_env"]
