"""Complete game trees kept on disk: a tree the env computed once is read back by every later process.

A complete tree (``GameTree.expand_all``: every node its episodes reach through unmasked slots) is a pure
function of the env's arguments and of the package's code and data. ``key`` names that function: the
arguments and a digest of every file of the installed package (``source_digest``), so any change to the
env (its menus, observations, an intervention, a pool) names a different file and the old one is never
read for it. ``load`` fills a fresh tree from the file (the env is still the tree's, for choices the file
does not hold: masked slots); ``save`` writes one atomically, and ``computing`` (a file lock) makes a process that
asks for a tree another is computing wait for its file instead of computing it too.

The files hold numbers only (``np.load`` without pickle): trees whose observations have text parts are not
kept. Tables are written sparse (the nonzero entries of each row), which keeps a train pool's tree, with
bag-of-words observations and states, at about a megabyte. They live in ``$GENCOORD_TREE_STORE`` when it is set, else
in ``cache_dir()/trees`` (``$XDG_CACHE_HOME/gencoord_env/trees``, else ``~/.cache/gencoord_env/trees``);
deleting them is always safe.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
import zipfile

try:
    import fcntl
except ImportError:  # not POSIX: processes may compute the same tree side by side
    fcntl = None  # type: ignore[assignment]
from pathlib import Path
from typing import Any

import numpy as np

from gencoord_env.batched.tree import GameTree, Rows
from gencoord_env.caches import cache
from gencoord_env.world.minecraft.runtime import cache_dir

FORMAT = "gencoord-game-tree-v1"
_PACKAGE = Path(__file__).resolve().parent.parent
_TABLES = ("observations", "masks", "states")


@cache(maxsize=1)
def source_digest() -> str:
    """sha256 over the path and bytes of every file of the installed package (compiled files left out)."""
    h = hashlib.sha256()
    files = []
    for root, dirs, names in os.walk(_PACKAGE, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        files += [Path(root) / n for n in names if not n.endswith((".pyc", ".pyo"))]
    for path in sorted(files, key=lambda p: p.relative_to(_PACKAGE).as_posix()):
        h.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def key(**arguments: Any) -> str:
    """The file name of the complete tree of an env built from ``arguments`` by this package's code."""
    text = json.dumps({"format": FORMAT, "source": source_digest(), "arguments": arguments}, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def folder() -> Path:
    """Where complete trees are kept: ``$GENCOORD_TREE_STORE`` when set, else ``cache_dir()/trees``."""
    named = os.environ.get("GENCOORD_TREE_STORE")
    return Path(named) if named else cache_dir() / "trees"


def storable(tree: GameTree) -> bool:
    """Whether every table of ``tree`` is numeric (text observations are not kept)."""
    return all(getattr(tree, name).table(part).dtype != object
               for name in _TABLES for part in getattr(tree, name).parts)


@contextmanager
def computing(path: Path) -> Iterator[None]:
    """Hold the lock of ``path`` (``path.lock``, an exclusive ``flock``) for the block: a process that computes a
    tree and writes it holds it, so another asking for the same tree waits and then reads the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def save(tree: GameTree, path: Path) -> Path:
    """Write ``tree`` (complete, numeric) to ``path`` atomically."""
    n = len(tree)
    data: dict[str, np.ndarray] = {f"node.{name}": a[:n] for name, a in tree.arrays.items()}
    data["root"] = tree.root_nodes
    tables: dict[str, dict[str, Any]] = {}
    meta = {"format": FORMAT, "agents": list(tree.agents), "slots": tree.slots, "episodes": tree.episodes,
            "state": tree.keeps_state, "replays": tree.replays, "tables": tables}
    for name in _TABLES:
        rows: Rows = getattr(tree, name)
        tables[name] = {"rows": len(rows), "parts": list(rows.parts)}
        for k, part in enumerate(rows.parts):
            table = rows.table(part)
            flat = table.reshape(len(table), -1)
            at = np.nonzero(flat)
            data[f"{name}.{k}.shape"] = np.asarray(table.shape, dtype=np.int64)
            data[f"{name}.{k}.row"], data[f"{name}.{k}.col"] = at[0].astype(np.int32), at[1].astype(np.int32)
            data[f"{name}.{k}.value"] = flat[at]
    data["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, allow_pickle=False, **data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def load(tree: GameTree, path: Path) -> bool:
    """Fill the fresh ``tree`` (no node yet) from ``path``; False, leaving it untouched, when the file is missing,
    unreadable or of another tree's shape."""
    try:
        with np.load(path, allow_pickle=False) as z:
            files = {k: z[k] for k in z.files}
        meta = json.loads(files.pop("meta").tobytes())
        if (meta.get("format") != FORMAT or meta["agents"] != list(tree.agents) or meta["slots"] != tree.slots
                or meta["episodes"] != tree.episodes or meta["state"] != tree.keeps_state or len(tree)):
            return False
        tables = {name: _rows(files, name, meta["tables"][name]) for name in _TABLES}
        nodes = {name[len("node."):]: a for name, a in files.items() if name.startswith("node.")}
        root = files["root"]
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
        return False
    if set(nodes) != set(tree.arrays) or root.shape != tree.root_nodes.shape:
        return False
    tree.restore(nodes, root, tables, replays=int(meta["replays"]))
    return True


def _rows(files: dict[str, np.ndarray], name: str, about: dict[str, Any]) -> list[dict[str, np.ndarray]]:
    """The rows of one table, in order, from its sparse parts."""
    parts = {}
    for k, part in enumerate(about["parts"]):
        shape = tuple(files[f"{name}.{k}.shape"].tolist())
        values = files[f"{name}.{k}.value"]
        flat = np.zeros((shape[0], int(np.prod(shape[1:], dtype=np.int64))), dtype=values.dtype)
        flat[files[f"{name}.{k}.row"], files[f"{name}.{k}.col"]] = values
        parts[part] = flat.reshape(shape)
    return [{p: parts[p][r] for p in parts} for r in range(about["rows"])]


__all__ = ["FORMAT", "computing", "folder", "key", "load", "save", "source_digest", "storable"]
