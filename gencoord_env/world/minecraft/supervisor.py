"""Start, watch and stop one sidecar process.

Each sidecar gets a private endpoint (an ipc path in its own temporary directory, or a free TCP port on
127.0.0.1) so several environments coexist on one machine. The sidecar prints ``READY <json>`` on
stdout once its socket is bound and its bots are in the world (or ``FAULT <json>`` before it exits, when the
Minecraft server failed those bots: raised as its ``ServerFault``); everything else it prints goes to a log
file whose path fault messages quote: by default in the per-user cache (``~/.cache/gencoord_env/logs/``),
without terminal escape codes, where only the newest ``LOG_KEEP`` logs of the last ``LOG_MAX_AGE_S`` are
kept. The process is shut down by ``close()``; a Sidecar dropped without ``close()`` is stopped when it is
collected (SIGTERM at once, then a background thread reaps it, with SIGKILL after 2 s: collecting it never
blocks), and any still running at interpreter exit are stopped then (SIGTERM, SIGKILL after 2 s). Nothing
that stops or describes the process refers back to its Sidecar, so a dropped one is freed by reference
counting alone. The sidecar is also told our pid (``--parent-pid``) and exits by itself within a second if
this process dies without stopping it (SIGKILL, a crash), removing its socket's folder first; a folder left
all the same (the sidecar killed too) is removed by the next sidecar start of this user
(``remove_orphaned_workdirs``).

Security of the socket: on ipc it lies in a per-launch folder only this user can enter (mode 0700); on tcp
(loopback only) the sidecar admits nothing but a CURVE client holding the key pair generated here for this
launch (``--client-key`` names its public key; the sidecar reports its own public key in READY). The sidecar
belongs to this process: a per-launch token, given in its environment (``GENCOORD_SIDECAR_TOKEN``; a command
line is readable by every local user), is what ``shutdown`` and a ``hello`` listing every arena must carry, so
the other clients of a shared sidecar (worlds of other processes attached by its endpoint) can neither stop it
nor see arenas not theirs.
"""
from __future__ import annotations

import atexit
import functools
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .client import TIMEOUT_SCALE_ENV, CurveKeys, Identity, SidecarClient, timeout_scale, unreachable
from .errors import SERVER_FAULTS, SETUP_HINT, ProtocolMismatch, RuntimeMissing, SidecarDied, SidecarTimeout
from .protocol import check_hello
from .runtime import Runtime, cache_dir

from gencoord_env.errors import UsageError

READY_PREFIX = "READY "
#: A sidecar whose first arenas' bots the server failed prints ``FAULT {"type", "message"}`` before it exits.
FAULT_PREFIX = "FAULT "
#: The environment variable that gives the sidecar its launch token.
TOKEN_ENV = "GENCOORD_SIDECAR_TOKEN"
#: A sidecar's private folder (its ipc socket) is ``<temp dir>/gencoord-sidecar-<owner pid>-<random>``.
WORKDIR_PREFIX = "gencoord-sidecar-"
LOG_TAIL_LINES = 15
#: Sidecar logs kept in the log folder: the newest LOG_KEEP, none older than LOG_MAX_AGE_S.
LOG_KEEP = 50
LOG_MAX_AGE_S = 7 * 24 * 3600.0
#: A log younger than this is never removed for the count (its sidecar may still be writing it).
LOG_GRACE_S = 3600.0
#: CSI, OSC and two-byte escape sequences: flying-squid's console redraws its prompt with them.
_ESCAPES = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


#: Seconds a sidecar may take to print READY, unless the caller names its own (stretched by GENCOORD_TIMEOUT_SCALE).
READY_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class SidecarOptions:
    """How to launch the sidecar.

    ``server="embedded"`` runs flying-squid inside the sidecar; ``"external"`` connects the bots to
    ``mc_host:mc_port`` (a running Minecraft 1.21.4 server in offline mode). ``arenas`` arenas exist from
    the start, each with the ``agents``' bots connected; clients may open up to ``max_arenas``, arena k at
    block x = ``arena_x0`` + 64 k.
    """

    server: str = "embedded"
    agents: tuple[str, ...] = ()  # agents whose bots each arena connects at start (reset connects any others)
    mc_host: str = ""
    mc_port: int = 0
    arenas: int = 1
    max_arenas: int = 16
    arena_x0: int = 0
    transport: str = "ipc" if os.name == "posix" else "tcp"
    ready_timeout_s: float | None = None  # None: READY_TIMEOUT_S stretched by GENCOORD_TIMEOUT_SCALE
    kill_after_s: float = 5.0
    log_dir: Path | None = None
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    timeouts: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.server not in ("embedded", "external"):
            raise UsageError(f"sidecar server must be 'embedded' or 'external', got {self.server!r}")
        if self.server == "external" and not (self.mc_host and self.mc_port):
            raise UsageError("server='external' needs mc_host and mc_port")
        if self.transport not in ("ipc", "tcp"):
            raise UsageError(f"transport must be 'ipc' or 'tcp', got {self.transport!r}")
        if not 1 <= self.max_arenas <= 64 or not 0 <= self.arenas <= self.max_arenas:
            raise UsageError(f"need 0 <= arenas <= max_arenas <= 64, got arenas={self.arenas}, max_arenas={self.max_arenas}")


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def sidecar_argv(
    runtime: Runtime, endpoint: str, options: SidecarOptions, parent_pid: int | None = None, client_key: str = ""
) -> list[str]:
    """The command line that starts the sidecar.

    ``--rules`` names the directory of the rule tables the sidecar reads (``runtime.rules_dir``);
    ``--parent-pid`` lets the sidecar exit by itself if this process dies without closing it;
    ``--client-key`` (tcp) is the public CURVE key (hex) of the only client it admits.

    >>> argv = sidecar_argv(rt, "ipc:///run/gencoord/s.sock", SidecarOptions(agents=("A", "B")), 42)
    >>> argv[2:4], argv[6:]
    (['--endpoint', 'ipc:///run/gencoord/s.sock'], ['--agents', 'A,B', '--parent-pid', '42'])
    >>> argv[4:6] == ["--rules", str(rt.rules_dir)]
    True
    """
    argv = [str(runtime.node), str(runtime.entry), "--endpoint", endpoint, "--rules", str(runtime.rules_dir)]
    if options.agents:
        argv += ["--agents", ",".join(options.agents)]
    if parent_pid is not None:
        argv += ["--parent-pid", str(parent_pid)]
    if client_key:
        argv += ["--client-key", client_key]
    if options.server == "external":
        argv += ["--server", "external", "--mc-host", options.mc_host, "--mc-port", str(options.mc_port)]
    defaults = SidecarOptions()
    for flag, value, default in (("--arenas", options.arenas, defaults.arenas),
                                 ("--max-arenas", options.max_arenas, defaults.max_arenas),
                                 ("--arena-x0", options.arena_x0, defaults.arena_x0)):
        if value != default:
            argv += [flag, str(value)]
    return argv + list(options.extra_args)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (as anyone's: a pid of another user's process counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _listening(sock_path: Path) -> bool:
    """Whether a process accepts connections on the ipc socket at ``sock_path`` (a sidecar still serving)."""
    if not hasattr(socket, "AF_UNIX") or not sock_path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        try:
            s.connect(str(sock_path))
        except OSError:
            return False
    return True


def remove_orphaned_workdirs(temp_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove the sidecar folders (``gencoord-sidecar-<owner pid>-*``: socket and nothing else) whose owner
    process is gone; returns the removed paths.

    A parent killed with SIGKILL cannot remove its sidecar's folder (the sidecar exits by itself, within
    250 ms, and leaves it); the next start of any sidecar of this user does. A folder of a live owner, of
    another user, without an owner pid in its name, or whose socket still accepts connections (an owner in
    another pid namespace sharing this temp folder) is left alone.
    """
    removed = []
    root = Path(temp_dir if temp_dir is not None else tempfile.gettempdir())
    uid = os.getuid() if hasattr(os, "getuid") else None
    for d in root.glob(f"{WORKDIR_PREFIX}*"):
        m = re.fullmatch(rf"{re.escape(WORKDIR_PREFIX)}(\d+)-[^/]+", d.name)
        try:
            if not m or _alive(int(m[1])) or not d.is_dir() or (uid is not None and d.stat().st_uid != uid):
                continue
            if _listening(d / "sidecar.sock"):
                continue
        except OSError:
            continue  # removed meanwhile
        shutil.rmtree(d, ignore_errors=True)
        if not d.exists():
            removed.append(d)
    return removed


def default_log_dir() -> Path:
    """``logs/`` in the per-user cache (see ``runtime.cache_dir``)."""
    return cache_dir() / "logs"


def prune_logs(log_dir: Path, keep: int = LOG_KEEP, max_age_s: float = LOG_MAX_AGE_S, now: float | None = None) -> list[Path]:
    """Remove old ``sidecar-*.log`` files from ``log_dir``; returns the removed paths.

    A log goes when it is older than ``max_age_s``, or when ``keep`` newer logs exist and it is older
    than ``LOG_GRACE_S``.
    """
    now = time.time() if now is None else now
    aged: list[tuple[float, Path]] = []
    for p in log_dir.glob("sidecar-*.log"):
        try:
            aged.append((now - p.stat().st_mtime, p))
        except OSError:
            continue  # removed by another process meanwhile
    removed = []
    for rank, (age, p) in enumerate(sorted(aged, key=lambda t: t[0])):
        if age > max_age_s or (rank >= keep and age > LOG_GRACE_S):
            try:
                p.unlink()
                removed.append(p)
            except OSError:
                pass
    return removed


def strip_escapes(raw: bytes) -> bytes:
    r"""``raw`` without terminal escape sequences: ``b"\x1b[1G> READY"`` -> ``b"> READY"``."""
    return _ESCAPES.sub(b"", raw)


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class _Running:
    """What stopping one sidecar process needs: its process, socket path, folder and log pumps.

    It holds nothing of the Sidecar, so it can be the Sidecar's finalizer and outlive it. ``stop`` blocks
    (at most ~2 s for SIGTERM, then SIGKILL); ``stop_soon`` never does: it sends SIGTERM and leaves the
    rest to a daemon thread. Every running one is stopped at interpreter exit (``_stop_all``). A forked
    child never stops its parent's sidecars: only the process that started one does.
    """

    def __init__(self, proc: subprocess.Popen[bytes], sock_path: str, workdir: str,
                 pumps: Sequence[threading.Thread]) -> None:
        self.proc = proc
        self.sock_path = sock_path
        self.workdir = workdir
        self.pumps = pumps
        self.owner = os.getpid()
        self._lock = threading.Lock()
        self.done = False
        _RUNNING.add(self)

    def stop(self) -> None:
        """Terminate (the sidecar shuts down cleanly on SIGTERM), kill if that takes over 2 s, clean up."""
        if os.getpid() != self.owner:
            return
        with self._lock:
            if self.done:
                return
            try:
                _terminate(self.proc)
                for pump in self.pumps:  # the log is complete once they have copied the last lines
                    if pump is not threading.current_thread():
                        pump.join(2.0)
                for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                    if stream is not None:
                        stream.close()
            finally:
                self.done = True
                _RUNNING.discard(self)
                if self.sock_path:
                    try:
                        os.unlink(self.sock_path)
                    except OSError:
                        pass
                if self.workdir:
                    shutil.rmtree(self.workdir, ignore_errors=True)

    def stop_soon(self) -> None:
        """SIGTERM now; waiting, SIGKILL and clean-up in a daemon thread. Safe inside garbage collection."""
        if self.done or os.getpid() != self.owner:
            return
        try:
            if self.proc.poll() is None:
                self.proc.terminate()
        except OSError:
            pass
        try:
            threading.Thread(target=self.stop, name="sidecar-stop", daemon=True).start()
        except RuntimeError:  # no new threads at interpreter shutdown: _stop_all (atexit) stops it
            pass


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(2.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5.0)


_RUNNING: set[_Running] = set()


@atexit.register
def _stop_all() -> None:
    """Stop every sidecar of this process still running at interpreter exit (no garbage collection then):
    SIGTERM to all at once, then wait for each."""
    mine = [r for r in list(_RUNNING) if r.owner == os.getpid()]
    for running in mine:
        try:
            if running.proc.poll() is None:
                running.proc.terminate()
        except OSError:
            pass
    for running in mine:
        running.stop()


def _describe_log(proc: subprocess.Popen[bytes], log_path: Path, pumps: Sequence[threading.Thread]) -> str:
    """The log path and its last lines, for fault messages."""
    if proc.poll() is not None:
        for pump in pumps:  # the process is gone: its last lines are still on their way to the log
            if pump is not threading.current_thread():
                pump.join(1.0)
    tail = _tail(log_path)
    text = f"sidecar log: {log_path}"
    return text + (f"; last lines:\n{tail}" if tail else "")


def _pump_stderr(err: IO[bytes] | None, log_path: Path) -> None:
    """Copy stderr to the log without escape codes; runs until the process closes stderr."""
    if err is None:
        return
    with log_path.open("ab", buffering=0) as log:
        for raw in iter(err.readline, b""):
            log.write(strip_escapes(raw))


def _pump_stdout(out: IO[bytes] | None, log_path: Path, ready: threading.Event, info: dict[str, Any]) -> None:
    """Copy stdout to the log and catch the READY line (and a FAULT line); runs until the process closes stdout."""
    if out is None:
        return
    with log_path.open("ab", buffering=0) as log:
        for raw in iter(out.readline, b""):
            raw = strip_escapes(raw)
            log.write(raw)
            line = raw.decode("utf-8", "replace").strip()
            if line.startswith(FAULT_PREFIX):
                try:
                    info["fault"] = json.loads(line[len(FAULT_PREFIX):])
                except json.JSONDecodeError:
                    pass
            if not ready.is_set() and line.startswith(READY_PREFIX):
                try:
                    parsed = json.loads(line[len(READY_PREFIX):] or "{}")
                except json.JSONDecodeError:
                    parsed = {"unparsed": line}
                info.update(parsed if isinstance(parsed, dict) else {"value": parsed})
                ready.set()


class Sidecar:
    """One running sidecar process with its client. Create with ``Sidecar.start``."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        endpoint: str,
        log_path: Path,
        options: SidecarOptions,
        sock_path: str,
        workdir: str = "",
    ) -> None:
        self.process = proc
        self.endpoint = endpoint
        self.log_path = log_path
        self.options = options
        self.ready_info: dict[str, Any] = {}
        self.hello: dict[str, Any] = {}
        self.client: SidecarClient | None = None
        #: The CURVE keys of this launch (tcp); None on ipc.
        self.curve: CurveKeys | None = None
        #: This launch's token: what ``shutdown`` and a full ``hello`` carry (``owner_args``). Never log it.
        self.token = secrets.token_hex(16)
        self._ready = threading.Event()
        self._pumps: list[threading.Thread] = []
        self._running = _Running(proc, sock_path, workdir, self._pumps)
        #: ``describe_log`` without a reference to this Sidecar, for its clients' fault messages.
        self.log_view = functools.partial(_describe_log, proc, log_path, self._pumps)
        self._finalizer = weakref.finalize(self, self._running.stop_soon)
        self._finalizer.atexit = False  # at exit, _stop_all stops it and waits

    @classmethod
    def start(cls, runtime: Runtime, options: SidecarOptions | None = None) -> Sidecar:
        """Launch the sidecar, wait for ``READY``, connect and check ``hello``."""
        options = options or SidecarOptions()
        remove_orphaned_workdirs()
        workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-"))
        os.chmod(workdir, 0o700)  # mkdtemp makes it so; the ipc socket's privacy rests on it
        log_dir = Path(options.log_dir) if options.log_dir else default_log_dir()
        log_dir.mkdir(parents=True, exist_ok=True)
        prune_logs(log_dir)
        log_path = log_dir / f"sidecar-{os.getpid()}-{workdir.name[-8:]}.log"
        if options.transport == "ipc":
            sock_path = str(workdir / "sidecar.sock")
            endpoint = f"ipc://{sock_path}"
        else:
            sock_path = ""
            endpoint = "tcp://127.0.0.1:0"  # the sidecar binds a free port and reports it in READY
        curve = CurveKeys.generate() if options.transport == "tcp" else None
        argv = sidecar_argv(runtime, endpoint, options, parent_pid=os.getpid(),
                            client_key=curve.public_hex if curve else "")
        log = log_path.open("ab", buffering=0)
        shown_env = "".join(f"{k}={v} " for k, v in runtime.env().items())
        log.write(f"$ {shown_env}{' '.join(argv)}\n".encode())
        token = secrets.token_hex(16)
        env = {**os.environ, **runtime.env(), **options.env, TOKEN_ENV: token}
        try:
            proc = subprocess.Popen(
                argv, cwd=runtime.sidecar_dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=env,
            )
        except OSError as e:  # the node binary or the sources' folder cannot be run
            shutil.rmtree(workdir, ignore_errors=True)
            raise RuntimeMissing(f"cannot start the sidecar ({argv[0]} in {runtime.sidecar_dir}): {e}; {SETUP_HINT}") from None
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        finally:
            log.close()
        sidecar = cls(proc, endpoint, log_path, options, sock_path, str(workdir))
        sidecar.token = token
        # The pumps get no reference to the Sidecar, so an abandoned Sidecar can still be collected.
        sidecar._pumps += [
            threading.Thread(target=_pump_stdout, args=(proc.stdout, log_path, sidecar._ready, sidecar.ready_info),
                             name="sidecar-stdout", daemon=True),
            threading.Thread(target=_pump_stderr, args=(proc.stderr, log_path), name="sidecar-stderr", daemon=True),
        ]
        for pump in sidecar._pumps:
            pump.start()
        try:
            sidecar._await_ready()
            if curve is not None:
                sidecar.curve = curve.with_server(sidecar._server_key())
            sidecar.client = sidecar.new_client()
            sidecar.hello = check_hello(sidecar.client.call("hello", sidecar.owner_args()))
        except BaseException:
            sidecar.kill()
            raise
        return sidecar

    # ---- lifecycle ------------------------------------------------------------------------------

    def _await_ready(self) -> None:
        ready_s = (self.options.ready_timeout_s if self.options.ready_timeout_s is not None
                   else READY_TIMEOUT_S * timeout_scale())
        deadline = time.monotonic() + ready_s
        while not self._ready.wait(0.05):
            code = self.process.poll()
            if code is not None:
                self._raise_fault()
                raise SidecarDied(
                    f"the sidecar exited with code {code} before it was ready; " + self.describe_log(),
                    returncode=code,
                )
            if time.monotonic() > deadline:
                raise SidecarTimeout(
                    f"the sidecar did not print READY within {ready_s:.0f} s (on a loaded machine, set "
                    f"{TIMEOUT_SCALE_ENV} to stretch the startup deadlines); "
                    + self.describe_log()
                )
        endpoint = self.ready_info.get("endpoint")
        if isinstance(endpoint, str) and endpoint and endpoint != self.endpoint:
            # The sidecar may report the address it actually bound (e.g. a wildcard port).
            if not endpoint.startswith(("tcp://127.0.0.1:", "ipc://")):
                raise ProtocolMismatch(f"the sidecar bound {endpoint!r}, which is not loopback or ipc")
            self.endpoint = endpoint

    def _raise_fault(self) -> None:
        """The server fault an exited sidecar printed (``FAULT``), raised as its typed exception; else nothing."""
        for pump in self._pumps:  # the process is gone: its last lines are on their way
            pump.join(1.0)
        fault = self.ready_info.get("fault")
        if isinstance(fault, dict) and fault.get("type") in SERVER_FAULTS:
            raise SERVER_FAULTS[fault["type"]](f"the sidecar could not start its first arenas: {fault.get('message')}")

    def _server_key(self) -> str:
        key = self.ready_info.get("curve_server_key")
        if not isinstance(key, str) or len(key) != 40:
            raise ProtocolMismatch(
                f"the sidecar started on tcp without reporting its CURVE key (READY curve_server_key: {key!r:.60}); "
                "mineflayer_server/ is older than this package: reinstall both from one checkout and run "
                "`gencoord setup`; " + self.describe_log()
            )
        return key

    def owner_args(self) -> dict[str, str]:
        """The args that mark a request as this process's, the one that started the sidecar."""
        return {"token": self.token}

    def new_client(self, identity: Identity | None = None) -> SidecarClient:
        """A client with its own socket (under ``identity``, else a fresh one); it refers to this Sidecar's process
        and log, not to the Sidecar."""
        return SidecarClient(self.endpoint, exit_code=self.process.poll, describe_log=self.log_view,
                             timeouts=self.options.timeouts, curve=self.curve, identity=identity)

    def exit_code(self) -> int | None:
        """The process's exit code, or None while it runs."""
        return self.process.poll()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def unreachable(self) -> str | None:
        """Why no new client can connect although the process may run (its ipc socket file is gone), or None."""
        why = unreachable(self.endpoint)
        return f"the sidecar at {self.endpoint} is unreachable: {why}" if why else None

    def describe_log(self) -> str:
        """The log path and its last lines, for fault messages."""
        return self.log_view()

    def close(self) -> None:
        """Ask the sidecar to shut down, wait ``kill_after_s`` for it to exit, then terminate or kill it."""
        if self.client is not None and not self.client.closed:
            if self.alive:
                try:
                    self.client.call("shutdown", self.owner_args(), timeout=min(self.options.kill_after_s, 3.0))
                    self.process.wait(self.options.kill_after_s)
                except Exception:
                    pass  # stopped below regardless
            self.client.close()
        self._finalizer.detach()
        self._running.stop()

    def kill(self) -> None:
        """Stop the process now, without asking."""
        if self.alive:
            self.process.kill()
        if self.client is not None and not self.client.closed:
            self.client.close()
        self._finalizer.detach()
        self._running.stop()

    def __enter__(self) -> Sidecar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
