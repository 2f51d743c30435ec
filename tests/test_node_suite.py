"""The Node sidecar's own test suite (Node's test runner, real Mineflayer clients), run from pytest so that
one command runs every test of the project: one pytest test per Node test file, each with its own time limit
(the whole suite took 4 min 44 s at load ~14 on the 2-core machine, near the 10 min one run of it had)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gencoord_env.world.minecraft.errors import RuntimeMissing
from gencoord_env.world.minecraft.runtime import locate


SOURCES = Path(__file__).resolve().parents[1] / "mineflayer_server"
FILES = sorted(p.name for p in (SOURCES / "test").glob("*.test.js"))


def test_the_node_suite_has_files() -> None:
    assert len(FILES) >= 10, FILES


@pytest.mark.parametrize("name", FILES)
def test_node_suite_passes(name: str) -> None:
    try:
        rt = locate()
    except RuntimeMissing as e:
        pytest.skip(str(e))
    sidecar = rt.sidecar_dir
    assert (sidecar / "test" / name).is_file(), f"{name} is not among the installed sidecar's tests in {sidecar}"
    # The packages sit in the per-user cache; NODE_PATH reaches the test files and the sidecars they spawn.
    proc = subprocess.run(
        [str(rt.node), "--test", "--test-concurrency=1", "--test-force-exit", f"test/{name}"],
        cwd=sidecar, capture_output=True, text=True, timeout=600, env={**os.environ, **rt.env()},
    )
    report = _failures(proc.stdout) + "\n".join((proc.stdout + proc.stderr).splitlines()[-12:])
    assert proc.returncode == 0, report
    assert "# fail 0" in proc.stdout, report


def _failures(tap: str) -> str:
    """Each failed test's TAP block (its `not ok` line and the indented YAML under it): the tail alone can
    end on passing tests when the failure came early."""
    lines, out = tap.splitlines(), []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("not ok"):
            indent = len(line) - len(line.lstrip())
            block = [line]
            for nxt in lines[i + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent and not nxt.lstrip().startswith("..."):
                    break
                block.append(nxt)
            out.append("\n".join(block[:60]))
    return "\n".join(out) + ("\n--- tail ---\n" if out else "")
