"""gencoord_env: a PettingZoo environment for embodied two-agent coordination under private information.

    >>> import gencoord_env
    >>> env = gencoord_env.parallel_env(backend="sim")
"""
from __future__ import annotations

from gencoord_env.outcomes import FailureCode

__version__ = "0.1.0"

__all__ = ["FailureCode", "__version__"]
