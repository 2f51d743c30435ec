"""gencoord_env: a PettingZoo environment for embodied two-agent coordination under private information.

    >>> import gencoord_env
    >>> env = gencoord_env.parallel_env(backend="sim")
    >>> observations, infos = env.reset(seed=0)
"""
from __future__ import annotations

from typing import Any

from gencoord_env.outcomes import FailureCode
from gencoord_env.pickling import install as _install_pickling

_install_pickling()  # a live sim env pickles and deep-copies (gencoord_env.pickling)

__version__ = "0.2.0"


def parallel_env(**kwargs: Any):  # type: ignore[no-untyped-def]
    """``gencoord_v0.parallel_env``: see ``gencoord_env.envs.gencoord.gencoord`` for the arguments."""
    from gencoord_env.envs.gencoord_v0 import parallel_env as make

    return make(**kwargs)


def env(**kwargs: Any):  # type: ignore[no-untyped-def]
    """The AEC form of the environment."""
    from gencoord_env.envs.gencoord_v0 import env as make

    return make(**kwargs)


def raw_env(**kwargs: Any):  # type: ignore[no-untyped-def]
    from gencoord_env.envs.gencoord_v0 import raw_env as make

    return make(**kwargs)


def gym_env(role: str | int = "first", partner: Any = "rule", **kwargs: Any):  # type: ignore[no-untyped-def]
    """The single-agent Gymnasium view: the learner plays ``role``, ``partner`` the other role
    (``gencoord_env.agents.single_agent``; registered as ``gencoord_env/GenCoord-v0``)."""
    from gencoord_env.agents.single_agent import gym_env as make

    return make(role=role, partner=partner, **kwargs)


def _register() -> None:
    import gymnasium

    if "gencoord_env/GenCoord-v0" not in gymnasium.registry:
        # No default wrappers: gymnasium.make(...).action_masks() must reach the env (single_agent's docstring)
        gymnasium.register(id="gencoord_env/GenCoord-v0", entry_point="gencoord_env.agents.single_agent:GenCoordGym",
                           vector_entry_point="gencoord_env.agents.vector:GenCoordVectorEnv",
                           order_enforce=False, disable_env_checker=True)


_register()

__all__ = ["FailureCode", "__version__", "env", "gym_env", "parallel_env", "raw_env"]
