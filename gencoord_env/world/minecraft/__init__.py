"""The ``minecraft`` backend: real Mineflayer bots on a Minecraft 1.21.4 server, driven over ZeroMQ.

    >>> from gencoord_env.world.minecraft import MinecraftWorld
    >>> world = MinecraftWorld()   # embedded server; RuntimeMissing says how to install what is missing
"""
from __future__ import annotations

from .backend import MinecraftWorld
from .errors import (
    ArenaBusy,
    ArenaFault,
    EpisodeLost,
    MinecraftBackendError,
    ProtocolMismatch,
    RequestRefused,
    RequestTooLarge,
    RuntimeMissing,
    ServerFault,
    ServerRefused,
    ServerTimeout,
    ServerUnreachable,
    ServerVersionMismatch,
    SidecarDied,
    SidecarError,
    SidecarStalled,
    SidecarTimeout,
    SpecRefused,
)
from .pool import SidecarPool
from .runtime import locate, setup

__all__ = [
    "ArenaBusy",
    "ArenaFault",
    "EpisodeLost",
    "MinecraftWorld",
    "SidecarPool",
    "MinecraftBackendError",
    "ProtocolMismatch",
    "RequestRefused",
    "RequestTooLarge",
    "RuntimeMissing",
    "ServerFault",
    "ServerRefused",
    "ServerTimeout",
    "ServerUnreachable",
    "ServerVersionMismatch",
    "SidecarDied",
    "SidecarError",
    "SidecarStalled",
    "SidecarTimeout",
    "SpecRefused",
    "locate",
    "setup",
]
