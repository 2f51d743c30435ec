"""The ``minecraft`` backend: real Mineflayer bots on a Minecraft 1.21.4 server, driven over ZeroMQ.

    >>> from gencoord_env.world.minecraft import MinecraftWorld
    >>> world = MinecraftWorld()   # embedded server; RuntimeMissing says how to install what is missing
"""
from __future__ import annotations

from .backend import MinecraftWorld
from .errors import (
    MinecraftBackendError,
    ProtocolMismatch,
    RuntimeMissing,
    ServerUnreachable,
    SidecarDied,
    SidecarError,
    SidecarTimeout,
)
from .runtime import locate, setup

__all__ = [
    "MinecraftWorld",
    "MinecraftBackendError",
    "ProtocolMismatch",
    "RuntimeMissing",
    "ServerUnreachable",
    "SidecarDied",
    "SidecarError",
    "SidecarTimeout",
    "locate",
    "setup",
]
