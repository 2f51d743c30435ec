"""The Node sidecar's own test suite (Node's test runner, real Mineflayer clients), run from pytest so that
one command runs every test of the project."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gencoord_env.world.minecraft.runtime import find_node, find_sidecar_dir, missing_packages


def test_node_suite_passes() -> None:
    sidecar = find_sidecar_dir()
    missing = missing_packages(sidecar)
    if missing:
        pytest.skip(f"run 'gencoord setup' first: {missing}")
    node, _ = find_node()
    files = sorted(str(p.relative_to(sidecar)) for p in Path(sidecar, "test").glob("*.test.js"))
    assert files, "no Node test files found"
    proc = subprocess.run(
        [str(node), "--test", "--test-concurrency=1", "--test-force-exit", *files],
        cwd=sidecar, capture_output=True, text=True, timeout=600,
    )
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
    assert proc.returncode == 0, tail
    assert "# fail 0" in proc.stdout, tail
