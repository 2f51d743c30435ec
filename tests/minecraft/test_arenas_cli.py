"""``gencoord rollout --arenas 4`` and ``--workers 2`` on Minecraft give the serial run's results for the same seeds.

Compared: the summary (less wall-clock values and the run's own settings), and every trace record in order
less what measures time or motion (``gencoord_env.trace.what_happened``, the rule replay and
``gencoord_env.commands.arenas.comparable`` apply too).
"""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from gencoord_env.commands.cli import main as gencoord
from gencoord_env.trace import what_happened
from sidecar_installed import needs_sidecar


pytestmark = needs_sidecar

COMMON = ["rollout", "--backend", "minecraft", "--pool", "heldout", "--episodes", "8", "--seed", "2"]
SUMMARY_ONLY = ("timings", "episode_seconds_p50", "time_to_commitment_p50", "startup_seconds", "arenas", "workers",
                "retries")


def untimed(record: dict[str, Any]) -> dict[str, Any]:
    return what_happened({k: v for k, v in record.items() if k not in SUMMARY_ONLY})


def rollout(tmp: Path, name: str, *extra: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    summary, trace = tmp / f"{name}.json", tmp / f"{name}.jsonl"
    assert gencoord([*COMMON, *extra, "--json", str(summary), "--trace", str(trace)]) == 0
    raw = json.loads(summary.read_text())
    if not extra:  # the sidecar's start is reported apart from the episodes
        assert raw["startup_seconds"] > 0, raw.keys()
    return (untimed(raw),
            [untimed(json.loads(line)) for line in trace.read_text().splitlines()])


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return rollout(tmp_path_factory.mktemp("serial"), "serial")


def _outcomes(records: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """Each episode's outcome and reason: what a failed comparison shows first."""
    return [(r.get("outcome"), r.get("reason")) for r in records]


def test_arenas_4_equals_serial(serial: tuple[dict[str, Any], list[dict[str, Any]]], tmp_path: Path) -> None:
    summary, records = rollout(tmp_path, "arenas", "--arenas", "4")
    assert _outcomes(records) == _outcomes(serial[1])
    assert summary == serial[0] and summary["episodes"] == 8
    assert len(records) == 8 and records == serial[1]


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the ray extra is not installed")
def test_workers_2_equals_serial(serial: tuple[dict[str, Any], list[dict[str, Any]]], tmp_path: Path) -> None:
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a local cluster over loopback only
    # one arena per worker: each worker still has a sidecar of its own (two at once beside the suite's own)
    summary, records = rollout(tmp_path, "workers", "--workers", "2", "--arenas", "1")
    assert _outcomes(records) == _outcomes(serial[1])
    assert summary == serial[0]
    assert records == serial[1]
