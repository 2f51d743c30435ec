"""Visibility as the paper's 3 x 9 matrix: methods (symbolic rule, factor composer, learned policy) by
motif x view, one annotated heatmap; the learned row runs only with --policy."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from gencoord_env.commands.experiments.analysis import matrix
from gencoord_env.commands.experiments.cli import main
from gencoord_env.commands.experiments.plot import figure
from gencoord_env.commands.experiments.specs import EXPERIMENTS

VIS = EXPERIMENTS["visibility"]
METHODS = ["symbolic rule", "factor composer", "learned policy"]
MOTIFS = ["post_handoff", "input_then_fuel", "fuel_then_input"]
VIEWS = ["Full", "Skeleton", "Node-only"]


def _run(out: Path, *extra: str) -> tuple[list[dict], list[dict]]:
    assert main(["visibility", "--episodes", "4", "--out", str(out), "--quiet", *extra]) == 0
    records = json.loads((out / "results.json").read_text())
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    return records, episodes


def test_spec_is_three_methods_by_nine_motif_view_columns() -> None:
    assert list(VIS.matrix_rows) == METHODS
    cells = {(c.method, c.column) for c in VIS.conditions}
    assert cells == {(m, f"{motif} / {view}") for m in METHODS for motif in MOTIFS for view in VIEWS}
    assert [c.policy for c in VIS.conditions if c.method == "factor composer"] == ["factor"] * 9
    assert all(c.only_with_policy and c.subject for c in VIS.conditions if c.method == "learned policy")
    assert not any(c.subject for c in VIS.conditions if c.method != "learned policy")


def test_without_policy_the_model_row_is_absent_and_every_other_cell_is_its_episodes(tmp_path: Path) -> None:
    records, episodes = _run(tmp_path)
    assert len(records) == 18 and {r["method"] for r in records} == {"symbolic rule", "factor composer"}
    m = matrix(VIS, records)
    assert m["rows"] == METHODS and m["columns"] == [f"{motif} / {view}" for motif in MOTIFS for view in VIEWS]
    assert len(m["success"]) == 3 and all(len(row) == 9 for row in m["success"])
    assert m["success"][2] == [None] * 9
    for i in range(2):
        for j in range(9):
            condition = m["condition"][i][j]
            mine = [e for e in episodes if e["condition"] == condition]
            assert len(mine) == 4
            assert m["success"][i][j] == sum(e["outcome"] == "SUCCESS" for e in mine) / 4
    with (tmp_path / "matrix.csv").open() as f:
        rows = list(csv.reader(f))
    assert len(rows) == 4 and all(len(r) == 10 for r in rows)
    assert rows[3] == ["learned policy"] + [""] * 9
    # the paper's figures for the learned row (Direct Short DSL) stay beside it, ours absent
    assert m["paper"][2][:3] == [1.0, 1.0, 0.182]


def test_with_policy_the_model_row_is_filled(tmp_path: Path) -> None:
    records, _ = _run(tmp_path, "--policy", "factor")
    assert len(records) == 27
    learned = [r for r in records if r["method"] == "learned policy"]
    assert len(learned) == 9 and {r["policy"] for r in learned} == {"factor"}
    assert {r["policy"] for r in records if r["method"] == "symbolic rule"} == {"rule"}
    m = matrix(VIS, records)
    assert all(v is not None for row in m["success"] for v in row)


def test_figure_is_one_heatmap_with_a_percentage_in_every_cell(tmp_path: Path) -> None:
    records, _ = _run(tmp_path)
    fig = figure(VIS, records, "sim")
    try:
        assert len(fig.axes) == 1
        texts = [t.get_text() for t in fig.axes[0].texts]
        cells = [t for t in texts if t.endswith("%") or t == "not run"]
        assert len(cells) == 27
        assert cells.count("not run") == 9
        m = matrix(VIS, records)
        assert [float(t[:-1]) for t in cells if t != "not run"] == pytest.approx(
            [100 * v for row in m["success"][:2] for v in row])
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
