"""The real sidecar's lifetime: a dropped env is collected at once and its sidecar exits; a sidecar whose parent
process is killed exits by itself.

Each case runs the owning Python process as a subprocess with a timeout, so a hang fails the test instead of
hanging the suite. Skipped only when the sidecar's Node packages are not installed (``gencoord setup``).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sidecar_installed import needs_sidecar

pytestmark = needs_sidecar

ROOT = Path(__file__).resolve().parents[3]


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _spawn(script: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def _read_pid(proc: subprocess.Popen[str]) -> int:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        raise AssertionError(f"the script printed {line!r}, not a pid; stderr:\n{proc.communicate(timeout=10)[1]}")
    return int(line)


def _reap(pid: int) -> None:
    if _running(pid):
        os.kill(pid, signal.SIGKILL)


DROP = """
import gc, sys, time
from gencoord_env.envs.gencoord.gencoord import parallel_env
env = parallel_env(backend="minecraft")
env.reset(seed=0)
print(env.unwrapped.world.sidecar.process.pid, flush=True)
del env
t0 = time.monotonic()
gc.collect()
print(f"{time.monotonic() - t0:.3f}", flush=True)
"""


def test_a_dropped_env_is_collected_at_once_and_its_sidecar_exits() -> None:
    proc = _spawn(DROP)
    sidecar = _read_pid(proc)
    try:
        out, err = proc.communicate(timeout=30)  # the collection used to hang here forever inside zmq
        assert proc.returncode == 0, err
        assert float(out.split()[0]) < 10.0, f"gc.collect() took {out.split()[0]} s"  # it hung forever; 10 s: a loaded machine
        assert _gone_within(sidecar, 30.0), "the dropped env's sidecar still runs"
    finally:
        proc.kill()
        _reap(sidecar)


ORPHAN = """
import time
from gencoord_env.world.minecraft.runtime import locate
from gencoord_env.world.minecraft.supervisor import Sidecar, SidecarOptions
sidecar = Sidecar.start(locate(), SidecarOptions(arenas=0, transport="ipc"))
print(sidecar.process.pid, flush=True)
print(sidecar.endpoint, flush=True)
time.sleep(120)
"""


def test_a_sidecar_exits_when_its_parent_is_killed_and_removes_its_socket_folder() -> None:
    parent = _spawn(ORPHAN)
    sidecar = _read_pid(parent)
    assert parent.stdout is not None
    folder = Path(parent.stdout.readline().strip()[len("ipc://"):]).parent
    try:
        assert _running(sidecar) and folder.is_dir()
        parent.send_signal(signal.SIGKILL)  # no finalizer, no atexit: only the sidecar's own watch can stop it
        # the parent stays an unreaped zombie meanwhile, which kill(pid, 0) would still find
        assert _gone_within(sidecar, 30.0), "the sidecar outlived its killed parent"
        # nothing is left for the next start to sweep up (it used to wait for it: remove_orphaned_workdirs)
        assert not folder.exists(), f"the killed parent's socket folder is left: {sorted(folder.iterdir())}"
    finally:
        parent.kill()
        parent.communicate(timeout=10)
        _reap(sidecar)
