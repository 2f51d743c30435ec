"""Sidecar logs: one per-user folder, old logs removed, no terminal escape codes, no temporary folders left."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gencoord_env.world.minecraft.runtime import Runtime
from gencoord_env.world.minecraft.supervisor import (
    LOG_GRACE_S,
    Sidecar,
    SidecarOptions,
    default_log_dir,
    prune_logs,
    strip_escapes,
)

#: What flying-squid's console writes around each line (cursor to column 1, its prompt), plus a colour.
NOISE = "\x1b[1G\x1b[1G> \x1b[1G\x1b[32mgreen\x1b[0m and \x1b]0;title\x07plain"


@pytest.fixture
def noisy_runtime(fake_runtime: Runtime) -> Runtime:
    """The stand-in sidecar, writing console noise to stderr and stdout before it starts."""
    entry = fake_runtime.entry
    fake = entry.with_name("fake.py")
    entry.rename(fake)
    entry.write_text(
        "import runpy, sys\n"
        f"sys.stderr.write({NOISE!r} + ' on stderr\\n'); sys.stderr.flush()\n"
        f"sys.stdout.write({NOISE!r} + ' on stdout\\n'); sys.stdout.flush()\n"
        f"runpy.run_path({str(fake)!r}, run_name='__main__')\n"
    )
    return fake_runtime


def test_strip_escapes() -> None:
    assert strip_escapes(NOISE.encode()) == b"> green and plain"


def test_logs_go_to_the_user_cache_without_escape_codes(noisy_runtime: Runtime, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    sc = Sidecar.start(noisy_runtime, SidecarOptions(transport="ipc"))
    sock = Path(sc.endpoint.removeprefix("ipc://"))
    assert sock.exists()
    sc.close()
    assert sc.log_path.parent == default_log_dir() == tmp_path / "cache" / "gencoord_env" / "logs"
    log = sc.log_path.read_bytes()
    assert b"> green and plain on stderr" in log and b"> green and plain on stdout" in log
    assert b"\x1b" not in log and b"\x07" not in log
    assert not sock.parent.exists()  # the private socket folder is removed with the process


def _touch(path: Path, age_s: float, now: float) -> Path:
    path.write_text("x")
    os.utime(path, (now - age_s, now - age_s))
    return path


def test_prune_keeps_the_newest_and_drops_the_old(tmp_path: Path) -> None:
    now = time.time()
    fresh = [_touch(tmp_path / f"sidecar-{i}.log", 10 + i, now) for i in range(3)]  # running sidecars, maybe
    recent = [_touch(tmp_path / f"sidecar-r{i}.log", LOG_GRACE_S + 100 + i, now) for i in range(4)]
    ancient = _touch(tmp_path / "sidecar-old.log", 8 * 24 * 3600, now)
    other = _touch(tmp_path / "notes.txt", 8 * 24 * 3600, now)
    removed = prune_logs(tmp_path, keep=5, now=now)
    assert sorted(removed) == sorted([ancient, *recent[2:]])
    assert all(p.exists() for p in [*fresh, *recent[:2], other])


def test_prune_never_removes_a_log_in_its_grace_period(tmp_path: Path) -> None:
    now = time.time()
    logs = [_touch(tmp_path / f"sidecar-{i}.log", i, now) for i in range(10)]
    assert prune_logs(tmp_path, keep=2, now=now) == [] and all(p.exists() for p in logs)


def test_start_prunes_the_log_folder(fake_runtime: Runtime, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    old = _touch(logs / "sidecar-1-old.log", 30 * 24 * 3600, time.time())
    sc = Sidecar.start(fake_runtime, SidecarOptions(log_dir=logs))
    sc.close()
    assert not old.exists() and sc.log_path.exists()
