"""GENCOORD_TIMEOUT_SCALE stretches the startup deadlines, on both sides of the sidecar, and nothing else."""
from __future__ import annotations

import os
import subprocess

import pytest

from gencoord_env.errors import UsageError
from gencoord_env.world.minecraft.client import DEFAULT_TIMEOUTS, STARTUP_OPS, SidecarClient, startup_timeouts
from gencoord_env.world.minecraft.runtime import locate


def test_the_startup_ops_stretch_and_the_others_keep_their_deadlines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GENCOORD_TIMEOUT_SCALE", raising=False)
    assert startup_timeouts() == dict(DEFAULT_TIMEOUTS)
    monkeypatch.setenv("GENCOORD_TIMEOUT_SCALE", "2.5")
    stretched = startup_timeouts()
    assert set(STARTUP_OPS) == {"open_arena", "reset"}
    for op, seconds in DEFAULT_TIMEOUTS.items():
        assert stretched[op] == (seconds * 2.5 if op in STARTUP_OPS else seconds), op
    # a deadline the caller names is kept as named
    client = SidecarClient("ipc:///nonexistent", timeouts={"reset": 7.0})
    assert client.timeouts["reset"] == 7.0 and client.timeouts["open_arena"] == DEFAULT_TIMEOUTS["open_arena"] * 2.5
    client.close()


@pytest.mark.parametrize("value", ["0.5", "fast", "inf", "nan", "-2"])
def test_a_scale_below_one_or_not_a_number_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("GENCOORD_TIMEOUT_SCALE", value)
    with pytest.raises(UsageError, match=f"GENCOORD_TIMEOUT_SCALE must be a number >= 1.*{value!r}"):
        startup_timeouts()


def test_the_sidecar_reads_the_same_scale_for_a_bots_spawn() -> None:
    runtime = locate()
    if runtime.node_modules is None:
        pytest.skip("the sidecar's Node packages are not installed (gencoord setup)")
    script = "console.log(require('./src/bots.js').SPAWN_TIMEOUT_MS)"
    seen = {}
    for scale in ("", "3", "0.5"):
        env = {**os.environ, **runtime.env(), "GENCOORD_TIMEOUT_SCALE": scale}
        out = subprocess.run([str(runtime.node), "-e", script], cwd=runtime.sidecar_dir, env=env, capture_output=True,
                             text=True, timeout=60, check=True)
        seen[scale] = int(out.stdout.strip())
    assert seen == {"": 40000, "3": 120000, "0.5": 40000}  # below 1: the default (the Python side refuses it)
