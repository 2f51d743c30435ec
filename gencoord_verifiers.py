"""The env as a verifiers environment, under its verifiers id ``gencoord_verifiers``.

verifiers 0.4 imports an environment by its id as a top-level module and takes the ``Taskset`` and ``Env``
subclasses it exports; the implementation and its documentation are :mod:`gencoord_env.commands.verifiers_env`.
"""
from __future__ import annotations

from gencoord_env.commands.verifiers_env import GencoordEnv, GencoordTaskset, load_environment

__all__ = ["GencoordEnv", "GencoordTaskset", "load_environment"]
