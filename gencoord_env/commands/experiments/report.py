"""Write an experiment's results: a rich table (the paper's figure beside ours), ``results.json`` (a list, one
record per condition in the experiment's order), ``results.csv`` (the same records, flattened),
``episodes.jsonl`` (one row per episode), ``matrix.csv`` (experiments laid out as the paper's method x
column matrix: success per cell, percent) and ``NAME.png`` (see ``gencoord_env.commands.experiments.plot``).

Difference columns name their subtraction in the header: "true request - this (pp)" when every row is
paired with one reference, otherwise "versus - this (pp)" beside a ``versus`` column.
"""
from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from gencoord_env.commands.experiments.analysis import matrix
from gencoord_env.commands.experiments.runner import EpisodeRow
from gencoord_env.commands.experiments.specs import Experiment

PERCENT_KEYS = frozenset({"success_rate"})
DECISIONS_KEY = "decisions_per_episode"


def fmt(key: str, value: Any, record: Mapping[str, Any] | None = None) -> str:
    """One table cell: rates as percentages, cluster counts as k/n, missing values as an em dash."""
    if value is None:
        return "\u2014"
    if key == "strict_clusters" and record is not None and "clusters" in record:
        return f"{value}/{record['clusters']}"
    if key == "strict_clusters":
        return str(value)
    if key in PERCENT_KEYS or key.endswith("_rate"):
        return f"{100 * float(value):.1f}%"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.1f}"
    return str(value)


def fmt_ci(ci: Sequence[float] | None, percent: bool = True) -> str:
    if not ci:
        return "\u2014"
    lo, hi = ci
    return f"[{100 * lo:.1f}, {100 * hi:.1f}]" if percent else f"[{lo:.3g}, {hi:.3g}]"


def _paired_cell(record: Mapping[str, Any], key: str = "success") -> str:
    effect = (record.get("paired") or {}).get(key)
    if not effect:
        return "\u2014"
    d = effect["versus_minus_condition"]
    if key == "success":
        return f"{100 * d:+.1f} pp {fmt_ci(effect['ci95'])}"
    return f"{d:+.3g} {fmt_ci(effect['ci95'], percent=False)}"


def _paper_paired_cell(record: Mapping[str, Any], key: str = "success") -> str:
    effect = (record.get("paper", {}).get("paired") or {}).get(key)
    if not effect:
        return "\u2014"
    d, ci = effect["versus_minus_condition"], effect.get("ci95")
    if key == "success":
        return f"{100 * d:+.1f} pp" + (f" {fmt_ci(ci)}" if ci else "")
    return f"{d:+.3g}" + (f" {fmt_ci(ci, percent=False)}" if ci else "")


def difference_headers(experiment: Experiment, records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Headers of the difference columns, each naming its subtraction (``versus`` minus this condition)."""
    refs = list(dict.fromkeys(r["versus"] for r in records if r.get("versus")))
    ref = refs[0] if len(refs) == 1 else "versus"
    out = {"success": f"{ref} \u2212 this (pp)"}
    if DECISIONS_KEY in {k for k, _ in experiment.columns}:
        out["decisions"] = f"{ref} \u2212 this (decisions)"
    return out


def _pair(ours: str, paper: str) -> str:
    return ours if paper == "\u2014" else f"{ours} [dim]({paper})[/dim]"


def _columns(experiment: Experiment, records: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The table's headers after ``condition`` and ``episodes``, and each record's cells (ours, then the paper's
    figure in parentheses), ``condition`` and ``episodes`` first."""
    headers = [header for _, header in experiment.columns] + ["95% CI (cluster)", "exact 95% CI"]
    groups = sorted({g for r in records for g in (r.get("groups") or {})})
    headers += groups
    differences = difference_headers(experiment, records)
    several = len({r["versus"] for r in records if r.get("versus")}) > 1
    if several:
        headers.append("versus")
    headers += list(differences.values())
    rows = []
    for r in records:
        paper = r.get("paper", {})
        cells = [r["condition"], str(r["episodes"])]
        for key, _ in experiment.columns:
            cells.append(_pair(fmt(key, r.get(key), r), fmt(key, paper.get(key))))
        cells += [fmt_ci(r.get("success_ci95")), fmt_ci(r.get("exact_ci95"))]
        for g in groups:
            cells.append(_pair(fmt("success_rate", (r.get("groups") or {}).get(g)),
                               fmt("success_rate", paper.get("groups", {}).get(g))))
        if several:
            cells.append(r.get("versus") or "\u2014")
        for key in differences:
            cells.append(_pair(_paired_cell(r, key), _paper_paired_cell(r, key)))
        rows.append(cells)
    return headers, rows


def _backend(backend: str) -> str:
    """`` [backend]`` for a title, as text: rich would read ``[sim]`` as a style and drop it."""
    return " " + escape(f"[{backend}]")


def _caption(experiment: Experiment, records: Sequence[Mapping[str, Any]]) -> str:
    notes = "".join(f"\n{r['condition']}: {r['note']}" for r in records if r.get("note"))
    return f"(paper figure in parentheses) paper: {experiment.paper_source}{notes}"


def table(experiment: Experiment, records: Sequence[Mapping[str, Any]], backend: str) -> Table:
    """The experiment's rich table, one row per condition: each cell is ours, then the paper's figure in
    parentheses."""
    headers, rows = _columns(experiment, records)
    t = Table(title=f"{experiment.title}{_backend(backend)}", caption=_caption(experiment, records))
    t.add_column("condition", no_wrap=True)  # the name is how a reader finds a row: never broken
    t.add_column("episodes", justify="right")
    for header in headers:
        t.add_column(header, justify="right" if header != "versus" else "left")
    for cells in rows:
        t.add_row(*cells)
    return t


def narrow_table(experiment: Experiment, records: Sequence[Mapping[str, Any]], backend: str) -> Table:
    """The same figures for a narrow terminal: one section per condition, one line per measure (``measure``,
    then ours with the paper's figure in parentheses), so that no cell is broken into a column of fragments."""
    headers, rows = _columns(experiment, records)
    t = Table(title=f"{experiment.title}{_backend(backend)}", caption=_caption(experiment, records))
    t.add_column("condition / measure", no_wrap=True)
    t.add_column("ours (paper)")
    for cells in rows:
        t.add_row(f"[bold]{cells[0]}[/bold]", f"{cells[1]} episodes")
        for header, cell in zip(headers, cells[2:]):
            t.add_row(f"  {header}", cell)
        t.add_section()
    return t


def fitted(console: Console, wide: Table, narrow: Table) -> Table:
    """``wide`` when it fits ``console``'s width without breaking a cell, else ``narrow``."""
    needed = Measurement.get(console, console.options.update_width(10_000), wide).maximum  # unclipped
    return wide if needed <= console.width else narrow


def _matrix_cells(experiment: Experiment, records: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The matrix's column names, and per method its name then its cells (ours, the paper's in parentheses)."""
    m = matrix(experiment, records)
    rows = [[row, *(_pair(fmt("success_rate", m["success"][i][j]), fmt("success_rate", m["paper"][i][j]))
                    for j in range(len(m["columns"])))] for i, row in enumerate(m["rows"])]
    return list(m["columns"]), rows


_MATRIX_CAPTION = "(paper figure in parentheses; \u2014: not run, e.g. the learned row without --policy)"


def matrix_table(experiment: Experiment, records: Sequence[Mapping[str, Any]], backend: str) -> Table:
    """The paper's method x column success matrix: ours, the paper's figure in parentheses."""
    columns, rows = _matrix_cells(experiment, records)
    t = Table(title=f"{experiment.title}: success by method{_backend(backend)}", caption=_MATRIX_CAPTION)
    t.add_column("method")
    for c in columns:
        t.add_column(c, justify="right")
    for cells in rows:
        t.add_row(*cells)
    return t


def narrow_matrix_table(experiment: Experiment, records: Sequence[Mapping[str, Any]], backend: str) -> Table:
    """The matrix for a narrow terminal: one section per method, one line per column."""
    columns, rows = _matrix_cells(experiment, records)
    t = Table(title=f"{experiment.title}: success by method{_backend(backend)}", caption=_MATRIX_CAPTION)
    t.add_column("method / column", no_wrap=True)
    t.add_column("success (paper)")
    for cells in rows:
        t.add_row(f"[bold]{cells[0]}[/bold]", "")
        for column, cell in zip(columns, cells[1:]):
            t.add_row(f"  {column}", cell)
        t.add_section()
    return t


def flatten(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts become dotted keys; lists (intervals) become ``lo;hi`` strings."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            out[name] = ";".join(str(v) for v in value)
        else:
            out[name] = value
    return out


def write_csv(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    rows = [flatten(r) for r in records]
    fields: list[str] = []
    for row in rows:
        fields += [k for k in row if k not in fields]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def write_matrix(path: Path, experiment: Experiment, records: Sequence[Mapping[str, Any]]) -> None:
    """``method`` then one column per matrix column: our success in percent, empty where not run."""
    m = matrix(experiment, records)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["method", *(f"{c} success (%)" for c in m["columns"])])
        for i, row in enumerate(m["rows"]):
            writer.writerow([row, *("" if v is None else f"{100 * v:.1f}" for v in m["success"][i])])


def write(out: Path, experiment: Experiment, records: Sequence[Mapping[str, Any]],
          rows: Mapping[str, Sequence[EpisodeRow]], backend: str) -> dict[str, Path]:
    """Write every artifact into ``out`` (created if missing); returns their paths by kind."""
    from gencoord_env.commands.experiments.plot import plot

    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "results.json", "csv": out / "results.csv", "episodes": out / "episodes.jsonl",
             "png": out / f"{experiment.name}.png"}
    if experiment.matrix_rows:
        paths["matrix"] = out / "matrix.csv"
        write_matrix(paths["matrix"], experiment, records)
    paths["json"].write_text(json.dumps(list(records), indent=2) + "\n", encoding="utf-8")
    write_csv(paths["csv"], records)
    with paths["episodes"].open("w", encoding="utf-8") as f:
        for condition_rows in rows.values():
            for row in condition_rows:
                f.write(json.dumps(row.to_json()) + "\n")
    plot(experiment, records, backend, paths["png"])
    return paths


__all__ = ["difference_headers", "flatten", "fmt", "fmt_ci", "matrix_table", "table", "write", "write_csv",
           "write_matrix"]
