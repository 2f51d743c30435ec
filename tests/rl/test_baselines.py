"""The RL baselines: every one runs on its small budget here (``examples/baselines.py``), and the committed
full-budget results in reports/rl are whole and are the README's table."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "reports" / "rl"


def test_every_baseline_runs_on_the_small_budget(example, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    baselines = example("baselines")
    results = baselines.main(["--budget", "small", "--seeds", "0", "--out", str(tmp_path)])
    assert set(results) == set(baselines.BASELINES)
    for name, runs in results.items():
        (run,) = runs
        assert all(0.0 <= run[m] <= 1.0 for m in baselines.METRICS) and run["curve"], name
        # without the request both bindings of a pair look the same to the receiver: a greedy one wins one
        assert run["request_removed"] <= 0.5, name
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
        assert (tmp_path / f"{name}_seed0.csv").read_text().startswith("step,train_success\n")
    assert json.loads((tmp_path / "baselines.json").read_text())["budget"] == "small"


def test_the_committed_baselines_are_whole_and_in_the_readme(example) -> None:  # type: ignore[no-untyped-def]
    baselines = example("baselines")
    report = json.loads((REPORTS / "baselines.json").read_text())
    assert report["budget"] == "full" and set(report["runs"]) == set(baselines.BASELINES)
    for name, runs in report["runs"].items():
        assert [r["seed"] for r in runs] == [0, 1, 2], name
        assert (REPORTS / f"{name}.png").exists()
    table = (REPORTS / "baselines.md").read_text().strip()
    assert table == baselines.table({name: report["runs"][name] for name in baselines.BASELINES})
    assert table in (ROOT / "README.md").read_text()
