"""The Node sidecar's own test suite (Node's test runner, real Mineflayer clients), run from pytest so that
one command runs every test of the project."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gencoord_env.world.minecraft.errors import RuntimeMissing
from gencoord_env.world.minecraft.runtime import locate


def test_node_suite_passes() -> None:
    try:
        rt = locate()
    except RuntimeMissing as e:
        pytest.skip(str(e))
    sidecar = rt.sidecar_dir
    files = sorted(str(p.relative_to(sidecar)) for p in Path(sidecar, "test").glob("*.test.js"))
    assert files, "no Node test files found"
    # The packages sit in the per-user cache; NODE_PATH reaches the test files and the sidecars they spawn.
    proc = subprocess.run(
        [str(rt.node), "--test", "--test-concurrency=1", "--test-force-exit", *files],
        cwd=sidecar, capture_output=True, text=True, timeout=600, env={**os.environ, **rt.env()},
    )
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
    assert proc.returncode == 0, tail
    assert "# fail 0" in proc.stdout, tail
