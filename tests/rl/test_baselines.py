"""The RL baselines: every one runs on its small budget here (``examples/baselines.py``) with its intervals
and the cross-play of the parallel learners, and the committed full-budget results in reports/rl are whole
and are the README's table."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "reports" / "rl"


def test_every_baseline_runs_on_the_small_budget(example, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    baselines = example("baselines")
    results = baselines.main(["--budget", "small", "--seeds", "0", "--out", str(tmp_path), "--work", str(tmp_path / "work"),
                              "--crossplay-episodes", "4"])
    assert set(results) == set(baselines.BASELINES)
    for name, runs in results.items():
        (run,) = runs
        assert all(0.0 <= run[m] <= 1.0 for m in baselines.METRICS) and run["curve"], name
        # without the request both bindings of a pair look the same to the receiver: a greedy one wins one
        assert run["request_removed"] <= 0.5, name
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
        assert (tmp_path / f"{name}_seed0.csv").read_text().startswith("step,train_success\n")
    assert json.loads((tmp_path / "baselines.json").read_text())["budget"] == "small"
    for line in (tmp_path / "baselines.md").read_text().splitlines()[2:]:  # every cell: mean [interval] (per seed)
        assert len(re.findall(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\] \(\d\.\d{3}\)", line)) == 3, line
    crossplay = json.loads((tmp_path / "crossplay.json").read_text())
    learners = [f"{n}/0" for n in baselines.CROSSPLAY]
    assert list(crossplay["members"]) == [*learners, *baselines.RULES]
    assert (tmp_path / "crossplay.png").stat().st_size > 5000


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
    assert report["parts"] and all(p["command"].startswith("python examples/baselines.py") and p["machine"]
                                   for p in report["parts"])  # what ran, where, under what load
    crossplay = json.loads((REPORTS / "crossplay.json").read_text())
    assert crossplay["provenance"]["machine"] and crossplay["provenance"]["load"]
    assert [m["seed"] for m in crossplay["members"].values()] == [0, 1, 2] * len(baselines.CROSSPLAY) + [None] * len(baselines.RULES)
    assert (REPORTS / "crossplay.md").read_text().strip() in (ROOT / "README.md").read_text()
    assert (REPORTS / "crossplay.png").exists()
