"""The real sidecar runs from sources with no node_modules of their own, as in an installed wheel: its
packages come from the per-user cache through NODE_PATH, and its log lands in the cache, clean."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gencoord_env.world.minecraft import runtime
from gencoord_env.world.minecraft.supervisor import Sidecar, default_log_dir
from sidecar_installed import RUNTIME, needs_sidecar

pytestmark = needs_sidecar


def _copy_sources(dest: Path) -> Path:
    """What the wheel ships of the sidecar: src/, package.json and the lockfile, nothing else."""
    src = RUNTIME.sidecar_dir
    shutil.copytree(src / "src", dest / "src")
    for name in runtime.MANIFESTS:
        shutil.copyfile(src / name, dest / name)
    return dest


def test_sidecar_without_local_node_modules_starts_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not any((p / "node_modules").exists() for p in [tmp_path, *tmp_path.parents])
    monkeypatch.setenv(runtime.SIDECAR_DIR_ENV, str(_copy_sources(tmp_path / "sidecar")))
    rt = runtime.locate()
    assert rt.node_modules == RUNTIME.node_modules  # same lockfile, same cache entry
    sc = Sidecar.start(rt)
    try:
        assert sc.client is not None and sc.client.call("ping") == "pong"
        assert sc.hello["minecraft"] == "1.21.4"
    finally:
        sc.close()
    assert sc.log_path.parent == default_log_dir()
    log = sc.log_path.read_bytes()
    assert f"NODE_PATH={rt.node_modules}".encode() in log and b"[sidecar]" in log
    assert b"\x1b" not in log  # flying-squid's console prompt redraws are stripped
    assert not (tmp_path / "sidecar" / "node_modules").exists() and not (tmp_path / "sidecar" / "logs").exists()
