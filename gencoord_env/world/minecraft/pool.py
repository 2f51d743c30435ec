"""``SidecarPool``: one sidecar whose arenas several ``MinecraftWorld`` instances share.

A sidecar's Minecraft server holds several arenas, disjoint regions of one world, each with its own
stations, sites and bots (``<arena>_<agent>`` in the game; ``agent_a``/``agent_b`` everywhere else). Each
world holds one arena: it resets, executes and reads ground truth there only, so K worlds run K episodes
at once on one server.

- In one process: ``pool = SidecarPool(arenas=4)``, then ``MinecraftWorld(pool=pool)`` per env (each world gets its
  own socket, so each may run in its own thread).
- In other processes: ``MinecraftWorld(endpoint=pool.endpoint)`` (the ipc endpoint of a sidecar this
  process started: a socket in a folder only this user may enter) opens an arena of that sidecar. A tcp
  sidecar admits only clients holding its per-launch CURVE keys: ``MinecraftWorld(endpoint=pool.endpoint,
  secret=pool.secret)``.

Faults stay local. An ``ArenaFault`` ends one world's episode and the sidecar rebuilds that arena at the
world's next reset. A dead or hung sidecar is restarted once for all its worlds, by whichever world
notices first; each world opens a fresh arena at its next reset (``generation`` tells them apart). So is
one whose ipc socket file is gone: the connections it has go on, but no world could open an arena there.

    >>> with SidecarPool(arenas=2) as pool:
    ...     a, b = MinecraftWorld(pool=pool), MinecraftWorld(pool=pool)
    ...     a.reset(spec_a); b.reset(spec_b)      # two episodes, one server
"""
from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .client import CurveKeys, Identity, SidecarClient, unreachable
from .errors import SidecarDied, SidecarTimeout
from .probe import check_server
from .protocol import check_hello
from .runtime import Runtime, locate
from .supervisor import Sidecar, SidecarOptions, free_tcp_port
from .vanilla import VanillaServer

from gencoord_env.errors import UsageError


SERVERS = ("embedded", "external", "vanilla")
#: Agents whose bots a sidecar connects at start in each of its first arenas.
DEFAULT_AGENTS = ("agent_a", "agent_b")


class SidecarPool:
    """One sidecar (started here, or attached by ``endpoint``) and the arenas its worlds hold.

    ``arenas``: arenas made (and their bots connected) when the sidecar starts, so the first resets are
    fast; worlds may open more, up to ``max_arenas``. The server options are those of ``MinecraftWorld``.
    """

    def __init__(
        self,
        arenas: int = 1,
        *,
        server: str = "embedded",
        host: str | None = None,
        port: int | None = None,
        jar: str | os.PathLike[str] | None = None,
        accept_eula: bool = False,
        operators: Sequence[str] = (),
        endpoint: str | None = None,
        secret: str | None = None,
        max_arenas: int = 16,
        arena_x0: int = 0,
        agents: Sequence[str] = DEFAULT_AGENTS,
        log_dir: str | os.PathLike[str] | None = None,
        transport: str | None = None,
        timeouts: Mapping[str, float] | None = None,
        ready_timeout_s: float | None = None,
        runtime: Runtime | None = None,
        sidecar_args: Sequence[str] = (),
    ) -> None:
        if server not in SERVERS:
            raise UsageError(f"server must be one of {SERVERS}, got {server!r}")
        if endpoint is not None:
            if not endpoint.startswith(("tcp://127.0.0.1:", "tcp://localhost:", "ipc://")):
                raise UsageError(f"endpoint must be tcp://127.0.0.1:<port> or ipc://<path> of a running sidecar, got {endpoint!r}")
            if server != "embedded" or host or port or jar:
                raise UsageError("endpoint attaches to a running sidecar: its server options were given where it was started")
            if endpoint.startswith("tcp://") and secret is None:
                raise UsageError(f"endpoint {endpoint} is tcp: a tcp sidecar admits only clients holding its per-launch "
                                 "keys; pass secret=pool.secret of the SidecarPool that started it")
            if endpoint.startswith("ipc://") and secret is not None:
                raise UsageError("secret applies to a tcp endpoint; an ipc sidecar is guarded by its private folder")
        elif secret is not None:
            raise UsageError("secret goes with endpoint=... (attaching to a tcp sidecar another process started)")
        if server == "external" and (not host or not port):
            raise UsageError("server='external' needs host=... and port=... of a Minecraft 1.21.4 server in offline mode")
        if server == "vanilla":
            if jar is None:
                raise UsageError("server='vanilla' needs jar=PATH to the official Minecraft 1.21.4 server.jar")
            if not accept_eula:
                raise UsageError(
                    "server='vanilla' runs Mojang's Minecraft server, whose EULA you must accept yourself: "
                    "read https://aka.ms/MinecraftEULA and pass accept_eula=True"
                )
        if server == "embedded" and (host or port or jar):
            raise UsageError("host, port and jar apply to server='external' or 'vanilla', not 'embedded'")
        if not 1 <= max_arenas <= 64 or not 0 <= arenas <= max_arenas:
            raise UsageError(f"need 0 <= arenas <= max_arenas <= 64, got arenas={arenas}, max_arenas={max_arenas}")
        self.server = server
        self.host = host or "127.0.0.1"
        self.port = port
        self.jar = jar
        self.accept_eula = accept_eula
        self.operators = tuple(operators)
        self.arenas = arenas
        self.max_arenas = max_arenas
        self.arena_x0 = arena_x0
        self.agents = tuple(agents)
        self.log_dir = Path(log_dir) if log_dir else None
        self.transport = transport
        self.timeouts = dict(timeouts or {})
        self.ready_timeout_s = ready_timeout_s
        self.sidecar_args = tuple(sidecar_args)
        self._endpoint = endpoint
        self._curve = CurveKeys.from_token(secret) if secret is not None else None
        # an attached pool runs nothing here; a started one fails now, with the fixing command, not at a reset
        self.runtime = None if endpoint is not None else (runtime or locate())
        self._sidecar: Sidecar | None = None
        self._vanilla: VanillaServer | None = None
        self._attached: SidecarClient | None = None
        self._lock = threading.RLock()
        #: Counts sidecar (re)starts; a world whose arena belongs to an older generation opens a new one.
        self.generation = 0
        self.restarts = 0

    # ---- the sidecar ------------------------------------------------------------------------------

    @property
    def attached(self) -> bool:
        """True when this pool uses a sidecar started elsewhere (``endpoint=``)."""
        return self._endpoint is not None and self.runtime is None

    @property
    def sidecar(self) -> Sidecar | None:
        """The sidecar this pool started (its ``process``, ``log_path``, ``ready_info``), None if attached or not yet started."""
        return self._sidecar

    @property
    def endpoint(self) -> str:
        """Where the sidecar listens (starts it if need be); other processes attach with ``MinecraftWorld(endpoint=...)``."""
        self.start()
        assert self._endpoint is not None
        return self._endpoint

    @property
    def secret(self) -> str | None:
        """What another process needs besides ``endpoint`` to attach to this tcp sidecar (None on ipc).

        It grants full control of the sidecar: hand it only to processes you trust, never log it.
        """
        if self.attached:
            return self._curve.token if self._curve else None
        self.start()
        curve = self._sidecar.curve if self._sidecar else None
        return curve.token if curve else None

    @property
    def log_path(self) -> Path | None:
        return self._sidecar.log_path if self._sidecar else None

    def start(self) -> int:
        """Start the sidecar unless it runs and new clients can reach it (or check an attached one answers);
        returns the generation."""
        with self._lock:
            if self.attached:
                assert self._endpoint is not None
                why = unreachable(self._endpoint)
                if why:
                    raise SidecarDied(f"the sidecar at {self._endpoint} cannot be reached: {why}; it was started by "
                                      "another process: restart it there")
                if self._attached is None:
                    self._attached = SidecarClient(self._endpoint, timeouts=self.timeouts, curve=self._curve)
                    try:
                        check_hello(self._attached.call("hello"))
                    except SidecarTimeout:
                        self._attached.close()
                        self._attached = None
                        keys = (" with the secret given (a tcp sidecar ignores clients without its keys: pass the "
                                "secret of the pool that started this one)") if self._curve else ""
                        raise SidecarTimeout(f"no sidecar answers at {self._endpoint}{keys}: start it first "
                                             f"(SidecarPool(...).endpoint in the process that owns it)") from None
                    self.generation += 1
                return self.generation
            if self._sidecar is not None and self._sidecar.alive and not self._sidecar.unreachable:
                return self.generation
            if self._sidecar is not None:
                self._sidecar.kill()
                self._sidecar = None
                self.restarts += 1
            if self.server == "vanilla":
                self._start_vanilla()
            if self.server != "embedded":  # a server of another version, or none, is refused before any Node starts
                check_server(self.host, int(self.port or 0))
            self._sidecar = Sidecar.start(self.runtime, self._options())  # type: ignore[arg-type]
            self._endpoint = self._sidecar.endpoint
            self.generation += 1
            return self.generation

    def recover(self, generation: int) -> int:
        """After a world saw the sidecar die or hang: restart it unless it answers a ping on a new connection (or
        another world already restarted it). Returns the generation to use.

        The ping goes over a fresh socket: a sidecar whose old connections still answer while new ones never
        reach it (its ipc socket file deleted) is of no use to a world that must connect anew.
        """
        with self._lock:
            if generation != self.generation:
                return self.generation
            if self.attached:
                assert self._attached is not None
                try:
                    self._attached.call("ping")
                except SidecarTimeout:
                    raise SidecarDied(f"the sidecar at {self._endpoint} does not answer; it was started by another "
                                      "process: restart it there") from None
                return self.generation
            sidecar = self._sidecar
            if sidecar is not None and sidecar.alive and not sidecar.unreachable:
                probe = sidecar.new_client()
                try:
                    probe.call("ping", timeout=5.0)
                    return self.generation
                except Exception:  # noqa: BLE001 - any failure to answer means: replace it
                    pass
                finally:
                    probe.close()
            if sidecar is not None:
                sidecar.kill()
                self._sidecar = None
                self.restarts += 1
            return self.start()

    def client(self, identity: Identity | None = None) -> SidecarClient:
        """A new client (its own socket) of the running sidecar, for one world; ``identity``: the world's own, so
        the arena it opened stays its own across clients (a fresh one if None)."""
        with self._lock:
            self.start()
            sidecar = self._sidecar
            assert self._endpoint is not None
            if sidecar is None:
                return SidecarClient(self._endpoint, timeouts=self.timeouts, curve=self._curve, identity=identity)
            return sidecar.new_client(identity)

    def hello(self) -> dict[str, Any]:
        """The sidecar's ``hello``: versions and its arenas (``{name, slot, origin, held, agents}`` each): every
        arena for a pool that started the sidecar, none for one attached to another process's (the sidecar lists
        a connection only the arenas it holds, and this pool's own connection holds none)."""
        with self._lock:
            self.start()
            if self.attached:
                assert self._attached is not None
                return check_hello(self._attached.call("hello"))
            assert self._sidecar is not None and self._sidecar.client is not None
            return check_hello(self._sidecar.client.call("hello", self._sidecar.owner_args()))


    def _options(self) -> SidecarOptions:
        kw: dict[str, Any] = {"agents": self.agents, "arenas": self.arenas, "max_arenas": self.max_arenas,
                              "arena_x0": self.arena_x0}
        if self.transport:
            kw["transport"] = self.transport
        if self.server != "embedded":
            kw.update(server="external", mc_host=self.host, mc_port=int(self.port or 0))
        return SidecarOptions(log_dir=self.log_dir, timeouts=self.timeouts, ready_timeout_s=self.ready_timeout_s,
                              extra_args=self.sidecar_args, **kw)

    def _start_vanilla(self) -> None:
        if self._vanilla is not None and self._vanilla.alive:
            return
        if self._vanilla is not None:
            self._vanilla.close()
        workdir = (self.log_dir or Path(tempfile.mkdtemp(prefix="gencoord-vanilla-"))) / "vanilla-server"
        self.port = self.port or free_tcp_port()
        assert self.jar is not None
        # the bots join as <arena>_<agent>: every arena's bots must be operators
        names = self.operators or tuple(f"a{k}_{a}" for k in range(self.max_arenas) for a in self.agents)
        self._vanilla = VanillaServer(self.jar, accept_eula=self.accept_eula, workdir=workdir, port=self.port,
                                      operators=names)

    def close(self) -> None:
        """Stop the sidecar (and a vanilla server) this pool started; an attached one is left running. A
        later ``start()`` (e.g. a world's next reset) starts a fresh one."""
        with self._lock:
            if self._sidecar is not None:
                self._sidecar.close()
                self._sidecar = None
            if self._attached is not None:
                self._attached.close()
                self._attached = None
            if self._vanilla is not None:
                self._vanilla.close()
                self._vanilla = None

    def __enter__(self) -> SidecarPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
