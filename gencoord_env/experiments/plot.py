"""PNG figures in the manner of the paper's: aligned horizontal bar panels, one per metric on its own axis
(ours dark with the cluster-bootstrap interval, the paper's figure pale beside it), per-family paired bars
for the horizon experiment, and an annotated view x motif matrix for visibility.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never open a window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from gencoord_env.experiments.specs import Experiment  # noqa: E402

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


def _success(record: Mapping[str, Any], paper: bool) -> float:
    value = record.get("paper", {}).get("success_rate") if paper else record.get("success_rate")
    return float("nan") if value is None else 100 * float(value)


def _heatmap(fig: Any, records: Sequence[Mapping[str, Any]]) -> None:
    """Rows: views; columns: motifs (``record["motif"]``, from the condition's filter)."""
    views = list(dict.fromkeys(r["view"] for r in records))
    labels = list(dict.fromkeys(r["condition"].split(" / ")[0] for r in records))
    motifs = list(dict.fromkeys(str(r.get("motif")) for r in records))
    for k, (title, paper) in enumerate((("ours", False), ("paper (Direct Short DSL)", True))):
        ax = fig.add_subplot(1, 2, k + 1)
        grid = np.full((len(views), len(motifs)), np.nan)
        for r in records:
            grid[views.index(r["view"]), motifs.index(str(r.get("motif")))] = _success(r, paper)
        ax.imshow(grid, cmap="Blues", vmin=0, vmax=100)
        for i in range(len(views)):
            for j in range(len(motifs)):
                text = "\u2014" if np.isnan(grid[i, j]) else f"{grid[i, j]:.1f}"
                ax.text(j, i, text, ha="center", va="center", fontsize=8,
                        color="white" if grid[i, j] > 60 else "black")
        ax.set_xticks(range(len(motifs)), motifs, fontsize=7, rotation=20)
        ax.set_yticks(range(len(views)), labels if len(labels) == len(views) else views, fontsize=8)
        ax.set_title(f"success (%): {title}", fontsize=9)


def plot(experiment: Experiment, records: Sequence[Mapping[str, Any]], backend: str, path: Path) -> None:
    """Draw the experiment's figure into ``path`` (PNG)."""
    if experiment.plot == "heatmap":
        fig = plt.figure(figsize=(9, 3.2))
        _heatmap(fig, records)
    else:
        panels = len(experiment.columns) + (1 if experiment.group_by else 0)
        fig, axes = plt.subplots(1, panels, figsize=(3.3 * panels + 1.5, 0.45 * len(records) + 2.4), squeeze=False)
        for ax, (key, header) in zip(axes[0], experiment.columns):
            _bars(ax, records, key, header)
        for ax in axes[0][1:len(experiment.columns)]:
            ax.set_yticks([])
        if experiment.group_by:
            _groups(axes[0][-1], records)
        axes[0][0].legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    fig.suptitle(f"{experiment.title} [{backend}]", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


__all__ = ["plot"]
