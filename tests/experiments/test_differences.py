"""Every difference says which way it is taken: ``versus`` minus the condition, in the JSON keys, the CSV
headers and the printed table's headers, so a condition below its reference reads as a positive gap."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from gencoord_env.commands.experiments import EXPERIMENTS
from gencoord_env.commands.experiments.cli import main
from gencoord_env.commands.experiments.report import fitted, matrix_table, narrow_matrix_table, narrow_table, table


def _headers(name: str, records: list[dict]) -> list[str]:
    return [str(c.header) for c in table(EXPERIMENTS[name], records, "sim").columns]


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_no_difference_column_hides_its_direction(name: str, tmp_path: Path) -> None:
    assert main([name, "--episodes", "2", "--out", str(tmp_path), "--quiet"]) == 0
    records = json.loads((tmp_path / "results.json").read_text())
    with (tmp_path / "results.csv").open() as f:
        fields = next(csv.reader(f))
    assert not [k for k in fields if "diff" in k], fields
    for r in records:
        if r["versus"] and r["paired"]:
            assert r["paired"]["taken_as"] == f"{r['versus']} - {r['condition']}"
            assert set(r["paired"]["success"]) == {"versus_minus_condition", "ci95", "clusters"}
            assert "paired.success.versus_minus_condition" in fields
    differences = [h for h in _headers(name, records) if "\u2212" in h]
    refs = {r["versus"] for r in records if r["versus"]}
    if refs:
        assert differences and all(h.endswith("\u2212 this (pp)") or h.endswith("\u2212 this (decisions)")
                                   for h in differences)
    if len(refs) == 1:
        ref = next(iter(refs))
        assert all(h.startswith(f"{ref} \u2212 ") for h in differences)
    _fits_a_terminal(name, records)


def _fits_a_terminal(name: str, records: list[dict]) -> None:
    """The printed tables, in an 80-column terminal: no line wider, no cell cut to an ellipsis, every condition
    and every header whole; a wide terminal keeps one row per condition."""
    from rich.console import Console

    exp = EXPERIMENTS[name]
    narrow = Console(width=80, record=True, file=io.StringIO())
    narrow.print(fitted(narrow, table(exp, records, "sim"), narrow_table(exp, records, "sim")))
    if exp.matrix_rows:
        narrow.print(fitted(narrow, matrix_table(exp, records, "sim"), narrow_matrix_table(exp, records, "sim")))
    text = narrow.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "\u2026" not in text, text
    assert all(r["condition"] in text for r in records) and "[sim]" in text
    assert all(h in text for h in _headers(name, records))
    wide = Console(width=400, record=True, file=io.StringIO())
    wide.print(fitted(wide, table(exp, records, "sim"), narrow_table(exp, records, "sim")))
    assert "condition / measure" not in wide.export_text()


def test_request_removal_reads_as_true_minus_removed(tmp_path: Path) -> None:
    assert main(["request", "--episodes", "16", "--out", str(tmp_path), "--quiet"]) == 0
    by = {r["condition"]: r for r in json.loads((tmp_path / "results.json").read_text())}
    removed = by["removed"]
    gap = removed["paired"]["success"]["versus_minus_condition"]
    assert gap == pytest.approx(by["true request"]["success_rate"] - removed["success_rate"])
    assert gap > 0  # removal costs success: a positive gap under "true request - this"
    assert removed["paper"]["paired"]["success"]["versus_minus_condition"] == 0.5
    assert "true request \u2212 this (pp)" in _headers("request", list(by.values()))


def test_horizon_decisions_read_as_multi_minus_single(tmp_path: Path) -> None:
    assert main(["horizon", "--episodes", "8", "--out", str(tmp_path), "--quiet"]) == 0
    single = json.loads((tmp_path / "results.json").read_text())[1]
    assert single["paired"]["taken_as"] == "multi-step - single-step"
    assert single["paired"]["decisions"]["versus_minus_condition"] == -1.0
    assert single["paper"]["paired"]["decisions"]["versus_minus_condition"] == -0.931
    with (tmp_path / "results.csv").open() as f:
        row = list(csv.DictReader(f))[1]
    assert float(row["paired.decisions.versus_minus_condition"]) == -1.0
    assert float(row["paper.paired.decisions.versus_minus_condition"]) == -0.931
    assert "success_perm0_minus_perm1" in row
