"""PNG figures in the manner of the paper's: aligned horizontal bar panels, one per metric on its own axis
(ours dark with the cluster-bootstrap interval, the paper's figure pale beside it), per-family paired bars
for the horizon experiment, the five cost panels of the representation experiment (calls, input tokens,
output tokens, wire bytes, time-to-commitment with the dark bar at p50 and a pale extension to p95), and
one annotated method x column success heatmap (visibility: method x motif/view) with the exact
percentage in every cell.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never open a window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from gencoord_env.commands.experiments.analysis import matrix  # noqa: E402
from gencoord_env.commands.experiments.specs import Experiment  # noqa: E402

OURS = "#1f4e79"
PAPER = "#a9c4de"


def _scale(key: str) -> float:
    return 100.0 if key == "success_rate" else 1.0


def _bars(ax: Any, records: Sequence[Mapping[str, Any]], key: str, header: str) -> None:
    y = np.arange(len(records))
    s = _scale(key)
    ours = [float(r.get(key) or 0.0) * s for r in records]
    paper = [float(r.get("paper", {}).get(key, np.nan)) * s for r in records]
    ax.barh(y - 0.2, ours, height=0.38, color=OURS, label="ours")
    ax.barh(y + 0.2, paper, height=0.38, color=PAPER, label="paper")
    if key == "success_rate":
        lo = [o - float(r["success_ci95"][0]) * s if r.get("success_ci95") else 0.0 for o, r in zip(ours, records)]
        hi = [float(r["success_ci95"][1]) * s - o if r.get("success_ci95") else 0.0 for o, r in zip(ours, records)]
        ax.errorbar(ours, y - 0.2, xerr=[lo, hi], fmt="none", ecolor="black", capsize=2, lw=0.8)
        ax.set_xlim(0, 105)
    if key == "time_to_commitment_p50":
        p95 = [float(r.get("time_to_commitment_p95") or 0.0) for r in records]
        ax.barh(y - 0.2, [max(0.0, b - a) for a, b in zip(ours, p95)], left=ours, height=0.38, color=OURS, alpha=0.35)
    for yi, v in zip(y, ours):
        ax.text(v, yi - 0.2, f" {v:.3g}", va="center", fontsize=7)
    ax.set_title(header + (" (%)" if key == "success_rate" else ""), fontsize=9)
    ax.set_yticks(y, [r["condition"] for r in records], fontsize=8)
    ax.invert_yaxis()
    ax.tick_params(axis="x", labelsize=7)
    ax.spines[["top", "right"]].set_visible(False)


def _groups(ax: Any, records: Sequence[Mapping[str, Any]]) -> None:
    names = sorted({g for r in records for g in (r.get("groups") or {})})
    y = np.arange(len(names))
    h = 0.8 / max(1, 2 * len(records))
    for i, r in enumerate(records):
        ours = [100 * float((r.get("groups") or {}).get(g) or 0.0) for g in names]
        paper = [100 * float(r.get("paper", {}).get("groups", {}).get(g, np.nan)) for g in names]
        alpha = 1.0 - 0.45 * i
        ax.barh(y - 0.4 + (2 * i + 0.5) * h, ours, height=h, color=OURS, alpha=alpha, label=f"{r['condition']} (ours)")
        ax.barh(y - 0.4 + (2 * i + 1.5) * h, paper, height=h, color=PAPER, alpha=alpha, label=f"{r['condition']} (paper)")
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 105)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_title("success by family (%)", fontsize=9)
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)


def _heatmap(fig: Any, experiment: Experiment, records: Sequence[Mapping[str, Any]]) -> None:
    """One annotated heatmap: rows are the experiment's methods (a row that did not run stays, marked), columns
    its matrix columns grouped by their first part (visibility: motif, then view)."""
    m = matrix(experiment, records)
    grid = np.array([[np.nan if v is None else 100 * float(v) for v in row] for row in m["success"]], dtype=float)
    ax = fig.add_subplot(1, 1, 1)
    cmap = matplotlib.colormaps["Blues"].with_extremes(bad="#e6e6e6")  # cells that did not run
    ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=100, aspect="auto")
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            v = grid[i, j]
            ax.text(j, i, "not run" if np.isnan(v) else f"{v:.1f}%", ha="center", va="center", fontsize=8,
                    color="white" if v > 60 else "black")
    # cell outlines, so cells stay apart in grayscale
    ax.set_xticks(np.arange(-0.5, grid.shape[1]), minor=True)
    ax.set_yticks(np.arange(-0.5, grid.shape[0]), minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="minor", length=0)
    parts = [c.split(" / ", 1) for c in m["columns"]]
    grouped = all(len(p) == 2 for p in parts)
    ax.set_xticks(range(len(parts)), [p[1] if grouped else p[0] for p in parts], fontsize=7)
    if grouped:
        groups = list(dict.fromkeys(p[0] for p in parts))
        for g in groups:
            cols = [j for j, p in enumerate(parts) if p[0] == g]
            ax.text((cols[0] + cols[-1]) / 2, -0.75, g, ha="center", va="bottom", fontsize=8, fontweight="bold")
            if cols[0] > 0:
                ax.axvline(cols[0] - 0.5, color="black", linewidth=1.2)
    policies = {r["method"]: r["policy"] for r in records if r.get("method")}
    labels = []
    for method in m["rows"]:
        ran = [c for c in experiment.conditions if c.method == method]
        if method not in policies:
            labels.append(f"{method}\n(run with --policy)")
        elif ran and ran[0].subject:
            labels.append(f"{method}\n({policies[method]})")
        else:
            labels.append(method)
    ax.set_yticks(range(len(m["rows"])), labels, fontsize=8)


#: the representation experiment's cost panels (paper: fig:cost-fingerprint), each on its own axis
COST_PANELS = (
    ("calls_per_episode", "calls / episode"),
    ("input_tokens_per_episode", "input tokens / episode"),
    ("output_tokens_per_episode", "output tokens / episode"),
    ("wire_bytes_mean", "wire bytes / episode"),
    ("time_to_commitment_p50", "time to commitment (s)"),
)


def _cost_panel(ax: Any, records: Sequence[Mapping[str, Any]], key: str, header: str) -> None:
    y = np.arange(len(records))
    ours = [r.get(key) for r in records]
    paper = [r.get("paper", {}).get(key) for r in records]
    ax.barh(y + 0.2, [np.nan if v is None else float(v) for v in paper], height=0.38, color=PAPER, label="paper")
    ax.barh(y - 0.2, [np.nan if v is None else float(v) for v in ours], height=0.38, color=OURS, label="ours")
    if key == "time_to_commitment_p50":
        for values, p95s, dy, color in ((ours, [r.get("time_to_commitment_p95") for r in records], -0.2, OURS),
                                        (paper, [r.get("paper", {}).get("time_to_commitment_p95") for r in records],
                                         0.2, PAPER)):
            ext = [np.nan if a is None or b is None else max(0.0, float(b) - float(a)) for a, b in zip(values, p95s)]
            ax.barh(y + dy, ext, left=[0.0 if a is None else float(a) for a in values], height=0.38, color=color,
                    alpha=0.35, label=f"{'ours' if color == OURS else 'paper'} p50 \u2192 p95")
    for yi, v in zip(y, ours):
        ax.text(0 if v is None else float(v), yi - 0.2, " n/a" if v is None else f" {float(v):.3g}", va="center",
                fontsize=7)
    if all(v is None for v in ours):
        ax.text(0.98, 0.02, "no model calls: rule agents\ngenerate no tokens (--policy model:PATH)",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=6.5, style="italic",
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85})
    ax.set_title(header, fontsize=9)
    ax.set_yticks(y, [r["condition"] for r in records], fontsize=8)
    ax.invert_yaxis()
    ax.tick_params(axis="x", labelsize=7)
    ax.spines[["top", "right"]].set_visible(False)


def _cost(fig: Any, records: Sequence[Mapping[str, Any]]) -> None:
    axes = fig.subplots(1, len(COST_PANELS), squeeze=False)[0]
    for ax, (key, header) in zip(axes, COST_PANELS):
        _cost_panel(ax, records, key, header)
    for ax in axes[1:]:
        ax.set_yticks([])
    axes[-1].legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)


def figure(experiment: Experiment, records: Sequence[Mapping[str, Any]], backend: str) -> Any:
    """The experiment's matplotlib figure (the caller saves and closes it)."""
    if experiment.plot == "heatmap":
        m = matrix(experiment, records)
        fig = plt.figure(figsize=(1.05 * len(m["columns"]) + 2.5, 0.75 * len(m["rows"]) + 2.0))
        _heatmap(fig, experiment, records)
    elif experiment.plot == "cost":
        fig = plt.figure(figsize=(3.0 * len(COST_PANELS) + 1.5, 0.45 * len(records) + 2.6))
        _cost(fig, records)
    else:
        # a column of text (the teams experiment's failing edges) has no bar
        columns = [(k, h) for k, h in experiment.columns
                   if all(r.get(k) is None or isinstance(r.get(k), (int, float)) for r in records)]
        panels = len(columns) + (1 if experiment.group_by else 0)
        fig, axes = plt.subplots(1, panels, figsize=(3.3 * panels + 1.5, 0.45 * len(records) + 2.4), squeeze=False)
        for ax, (key, header) in zip(axes[0], columns):
            _bars(ax, records, key, header)
        for ax in axes[0][1:len(columns)]:
            ax.set_yticks([])
        if experiment.group_by:
            _groups(axes[0][-1], records)
        axes[0][0].legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    what = " \u2014 success (%)" if experiment.plot == "heatmap" else ""
    fig.suptitle(f"{experiment.title}{what} [{backend}]", fontsize=10)
    fig.tight_layout()
    return fig


def plot(experiment: Experiment, records: Sequence[Mapping[str, Any]], backend: str, path: Path) -> None:
    """Draw the experiment's figure into ``path`` (PNG)."""
    fig = figure(experiment, records, backend)
    fig.savefig(path, dpi=150)
    plt.close(fig)


__all__ = ["COST_PANELS", "figure", "plot"]
