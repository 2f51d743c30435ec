"""The report of ``gencoord train selfplay`` runs: tables and reward curves from their output folders.

Each argument is ``NAME=FOLDER``, a folder ``gencoord train selfplay --out`` wrote (``summary.json``,
``seed<S>/provenance.json``, ``seed<S>/reward_curve.json``, ``cross_play.json`` when it played several
seeds). Writes under ``--out``: ``RESULTS.md`` (per run and seed: the warm start and its train-pool success,
held-out success before and after with 95% cluster-bootstrap intervals, the paired change, GRPO steps and
seconds; per run the pooled change over its seeds; between runs of the same seeds, the difference of their
after-GRPO success paired by cluster; cross-play), ``curves.png`` (reward and success per step, one line per
seed, one panel per run; needs matplotlib) and ``curves.json`` (the numbers plotted).

    python -m gencoord_env.train.selfplay_report one=runs/selfplay two=runs/two --out reports/grpo
"""
from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gencoord_env.commands.experiments import stats
from gencoord_env.train.pipeline import cluster_success

__all__ = ["load_run", "main", "render"]


def load_run(folder: Path) -> dict[int, dict[str, Any]]:
    """seed -> {"provenance", "curve"} of every seed folder under ``folder``."""
    runs: dict[int, dict[str, Any]] = {}
    for seed_dir in sorted(folder.glob("seed*")):
        prov_path = seed_dir / "provenance.json"
        if not prov_path.is_file():
            continue
        prov = json.loads(prov_path.read_text(encoding="utf-8"))
        curve_path = seed_dir / "reward_curve.json"
        curve = json.loads(curve_path.read_text(encoding="utf-8")) if curve_path.is_file() else []
        runs[int(prov["config"]["seed"])] = {"provenance": prov, "curve": curve}
    return runs


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _ci(ci: Sequence[float] | None) -> str:
    return "" if not ci else f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _change(change: Mapping[str, Any] | None) -> str:
    if not change or change.get("diff") is None:
        return "-"
    ci = change.get("ci95")
    return f"{100 * change['diff']:+.1f} pp" + (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci else "")


def _paired(after: Mapping[str, float], before: Mapping[str, float]) -> dict[str, Any] | None:
    """After minus before over the clusters (of every seed) both played, as ``paired_change`` pairs one seed's."""
    return stats.paired_bootstrap_ci(after, before)


def render(runs: Mapping[str, Mapping[int, Mapping[str, Any]]], cross: Mapping[str, Mapping[str, Any]]) -> str:
    """The markdown of ``RESULTS.md``."""
    lines: list[str] = []
    for name, seeds in runs.items():
        if not seeds:
            continue
        first = next(iter(seeds.values()))["provenance"]
        c = first["config"]
        lines += [f"### {name}", "",
                  f"policies `{c['policies']}`" + (f" (training {', '.join(c['train_roles'])})" if c["policies"] == "two" else "")
                  + f", trainer `{c['trainer']}`, pool `{c['pool']}` -> `{c['eval_pool']}`, private fact `{c['private_fact']}`, "
                  f"{c['prompts_per_step']} x {c['num_generations']} episodes a step, lr {c['lr']:g}, reward `{c['reward']}`; "
                  f"{first['libraries'].get('device_name', '?')}", "",
                  "| seed | warm start (epochs: train-pool success) | before | after | change [95% CI] | steps | GRPO s | steps/s |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        before_all: dict[str, float] = {}
        after_all: dict[str, float] = {}
        for seed, run in sorted(seeds.items()):
            p = run["provenance"]
            tried = ", ".join(f"{t['epochs']:g}: {_pct(t['train_success'])}" for t in p["warm_start"]["tried"])
            chosen = p["warm_start"]["chosen"]
            b, a = p["eval_before"], p["eval_after"]
            sps = p.get("steps_per_second")
            lines.append(f"| {seed} | {tried} (chosen {chosen['epochs']:g}) | {_pct(b['success_rate'])}{_ci(b.get('ci95'))} | "
                         f"{_pct(a['success_rate'])}{_ci(a.get('ci95'))} | {_change(p.get('eval_change'))} | "
                         f"{p['optimizer_steps']} | {p['seconds'].get('grpo', 0):.0f} | {'-' if sps is None else f'{sps:.2f}'} |")
            before_all.update(cluster_success(b["success_by_episode"], f"s{seed}:"))
            after_all.update(cluster_success(a["success_by_episode"], f"s{seed}:"))
        pooled = _paired(after_all, before_all) if len(seeds) > 1 else None
        mean_after = statistics.fmean(r["provenance"]["eval_after"]["success_rate"] for r in seeds.values())
        lines += ["", f"Mean after GRPO over {len(seeds)} seed(s): {_pct(mean_after)}"
                  + (f"; change pooled over seeds (clusters x seeds paired): {_change(pooled)}" if pooled else "") + ".", ""]
        if name in cross:
            x = cross[name]
            lines += [f"Cross-play ({x['episodes']} episodes of `{x['pool']}` a pair; sender seed rows, receiver seed columns):", ""]
            seeds_x = sorted({p["sender_seed"] for p in x["pairs"]})
            lines += ["| sender \\ receiver | " + " | ".join(str(s) for s in seeds_x) + " |", "| --- |" + " --- |" * len(seeds_x)]
            cell = {(p["sender_seed"], p["receiver_seed"]): p["success_rate"] for p in x["pairs"]}
            for s in seeds_x:
                lines.append(f"| {s} | " + " | ".join(_pct(cell.get((s, r))) for r in seeds_x) + " |")
            lines += ["", f"Within a seed {_pct(x.get('within_seed'))}, across seeds {_pct(x.get('across_seeds'))}; "
                      f"across minus within {_change(x.get('across_minus_within'))}.", ""]
    names = [n for n, s in runs.items() if s]
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if set(runs[a]) == set(runs[b])]
    if pairs:
        lines += ["### Between runs (after GRPO, the same seeds and evaluation episodes, paired by cluster and seed)", "",
                  "| run | minus run | difference [95% CI] |", "| --- | --- | --- |"]
        for a, b in pairs:
            ma = {k: v for s, r in runs[a].items() for k, v in cluster_success(r["provenance"]["eval_after"]["success_by_episode"], f"s{s}:").items()}
            mb = {k: v for s, r in runs[b].items() for k, v in cluster_success(r["provenance"]["eval_after"]["success_by_episode"], f"s{s}:").items()}
            lines.append(f"| {a} | {b} | {_change(_paired(ma, mb))} |")
        lines.append("")
    return "\n".join(lines)


def _plot(runs: Mapping[str, Mapping[int, Mapping[str, Any]]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [n for n, s in runs.items() if s]
    fig, axes = plt.subplots(2, len(names), figsize=(4.5 * len(names), 6), squeeze=False, sharey="row")
    for col, name in enumerate(names):
        for seed, run in sorted(runs[name].items()):
            steps = [r["step"] for r in run["curve"]]
            axes[0][col].plot(steps, [r.get("reward") for r in run["curve"]], label=f"seed {seed}")
            axes[1][col].plot(steps, [r.get("success") for r in run["curve"]], label=f"seed {seed}")
        axes[0][col].set_title(name)
        axes[1][col].set_xlabel("GRPO step")
        axes[0][col].legend(fontsize=7)
    axes[0][0].set_ylabel("mean staged reward (train pool)")
    axes[1][0].set_ylabel("success (sampled, train pool)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gencoord_env.train.selfplay_report", description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", metavar="NAME=FOLDER")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    cross: dict[str, dict[str, Any]] = {}
    for spec in a.runs:
        name, sep, folder = spec.partition("=")
        if not sep:
            p.error(f"expected NAME=FOLDER, got {spec!r}")
        runs[name] = load_run(Path(folder))
        if (Path(folder) / "cross_play.json").is_file():
            cross[name] = json.loads((Path(folder) / "cross_play.json").read_text(encoding="utf-8"))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "RESULTS.md").write_text(render(runs, cross) + "\n", encoding="utf-8")
    curves = {name: {str(s): r["curve"] for s, r in seeds.items()} for name, seeds in runs.items()}
    (out / "curves.json").write_text(json.dumps(curves, indent=1) + "\n", encoding="utf-8")
    _plot(runs, out / "curves.png")
    print((out / "RESULTS.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
