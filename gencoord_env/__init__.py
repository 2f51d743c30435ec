"""gencoord_env: a PettingZoo environment for embodied two-agent coordination under private information.

    >>> import gencoord_env
    >>> env = gencoord_env.parallel_env(backend="sim")
    >>> observations, infos = env.reset(seed=0)
"""
from __future__ import annotations

from typing import Any

from gencoord_env.outcomes import FailureCode

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


__all__ = ["FailureCode", "__version__", "env", "parallel_env", "raw_env"]
