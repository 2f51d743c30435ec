"""Rollouts on Ray workers (a local Ray cluster, sim worlds): serial results, and a killed worker's episode retried.

The Minecraft form of the same (each worker with its own sidecar) is in ``tests/minecraft/test_arenas_cli.py``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

from gencoord_env.commands.arenas import ArenaRunner, RolloutSpec, Slot, comparable, play_rollout, rollout_slot  # noqa: E402
from gencoord_env.commands.cli import main as gencoord  # noqa: E402
from gencoord_env.commands.distributed import RayRunner  # noqa: E402

SPEC = RolloutSpec({"pool": "heldout", "backend": "sim"}, policy="rule")
BUILD = partial(rollout_slot, SPEC)


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """One local Ray cluster for the module, over loopback only."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    # the test's play functions travel to the workers by value (tests/ is no importable package there)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.shutdown()


def test_workers_give_the_serial_results_in_order(cluster: None) -> None:
    order = list(range(10))
    with ArenaRunner("sim", 1) as serial_runner:
        serial = serial_runner.run(order, BUILD, play_rollout)
    with RayRunner(2, "sim", arenas=2) as runner:
        assert len(set(runner.where)) == 2  # two actors, two processes
        played = runner.run(order, BUILD, play_rollout)
    assert [r["index"] for r in played.results] == order and played.retries == ()
    assert [comparable(r["info"]) for r in played.results] == [comparable(r["info"]) for r in serial.results]


def _dies_once(marker: str, victim: int, slot: Slot, index: int) -> dict:
    """Kill this worker's process the first time episode ``victim`` is played."""
    if index == victim and not Path(marker).exists():
        Path(marker).touch()
        os._exit(1)
    return play_rollout(slot, index)


def test_a_killed_workers_episode_is_retried_once_and_reported(cluster: None, tmp_path: Path) -> None:
    order = list(range(12))
    with ArenaRunner("sim", 1) as serial_runner:
        serial = serial_runner.run(order, BUILD, play_rollout)
    with RayRunner(2, "sim", arenas=1) as runner:
        played = runner.run(order, BUILD, partial(_dies_once, str(tmp_path / "died"), 5))
    assert (tmp_path / "died").exists()
    assert [r["index"] for r in played.results] == order
    assert [comparable(r["info"]) for r in played.results] == [comparable(r["info"]) for r in serial.results]
    # one episode in flight on the killed worker, and nothing sent to it while Ray restarts it: only that
    # episode is played again
    assert len(played.retries) == 1, played.retries
    [retry] = played.retries
    assert retry.index == 5 and retry.where.startswith("worker ") and "the worker was lost" in retry.error


def untimed(record: dict) -> dict:
    """A summary or trace record without its wall-clock values."""
    return {k: v for k, v in record.items() if k not in ("timings", "episode_seconds_p50", "time_to_commitment_p50")}


def test_gencoord_rollout_workers_equals_serial(cluster: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["rollout", "--backend", "sim", "--pool", "heldout", "--episodes", "8", "--seed", "5"]
    assert gencoord([*common, "--json", str(tmp_path / "serial.json"), "--trace", str(tmp_path / "serial.jsonl")]) == 0
    assert gencoord([*common, "--workers", "2", "--json", str(tmp_path / "ray.json"),
                     "--trace", str(tmp_path / "ray.jsonl")]) == 0
    serial, spread = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("serial", "ray"))
    assert {spread.pop(k) for k in ("arenas", "workers")} == {1, 2} and spread.pop("retries") == []
    assert untimed(spread) == untimed(serial)
    records = [[untimed(json.loads(line)) for line in (tmp_path / f"{n}.jsonl").read_text().splitlines()]
               for n in ("serial", "ray")]
    assert len(records[0]) == 8 and records[0] == records[1]
    with pytest.raises(SystemExit):
        gencoord(["rollout", "--workers", "0"])
    assert gencoord(["rollout", "--backend", "sim", "--ray-address", "127.0.0.1:6379"]) == 2
    assert "--ray-address names the cluster that --workers run on" in capsys.readouterr().err


def test_ray_keeps_its_session_in_the_test_runs_own_temp_folder(cluster: None) -> None:
    """tests/conftest.py points RAY_TMPDIR at a folder it removes at exit: a run leaves no session in Ray's default temp folder."""
    sessions = Path(os.environ["RAY_TMPDIR"], "ray")
    assert Path(os.environ["RAY_TMPDIR"]).name.startswith("gencoord-ray-")
    assert any(p.name.startswith("session_") for p in sessions.iterdir()), f"no Ray session under {sessions}"



def test_workers_run_at_the_callers_priority(tmp_path: Path) -> None:
    """Ray runs its workers at nice 15 unless told otherwise; a worker's sidecar inherits it and, beside four busy
    loops, its bots did not spawn in two minutes. A cluster ``RayRunner`` starts runs its workers at the caller's
    priority (a fresh process: this module's cluster is started by its fixture)."""
    code = """
import os, re
from gencoord_env.commands.distributed import RayRunner
with RayRunner(1, "sim", arenas=1) as runner:
    pid = int(re.search(r"pid (\\d+)", runner.where[0])[1])
    print(os.getpriority(os.PRIO_PROCESS, 0), os.getpriority(os.PRIO_PROCESS, pid))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") or k == "RAY_TMPDIR"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    caller, worker = proc.stdout.split()
    assert caller == worker, proc.stdout
