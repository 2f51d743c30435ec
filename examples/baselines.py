"""The RL baselines, every seed: independent PPO and MAPPO on the parallel menu env (default and branches
menus, ``examples/marl_ppo.py``) and masked PPO on the single-agent view as sender and as receiver
(``examples/sb3_ppo_single_agent.py``). Each run's held-out, horizon and request-removed success, its
training curve as CSV (``RunLog``), one PNG of curves per baseline and the table (Markdown, as in the
README) go to ``--out``.

    python examples/baselines.py [--budget small] [--seeds 0 1 2] [--out reports/rl] [--engine batched|pipeline]

``--engine`` is how the parallel-env baselines play (``marl_ppo.py --engine``): ``batched`` (default) on
``gencoord_env.batched``, every decision point computed once by the env for all of their runs, or
``pipeline``, one episode at a time through ``parallel_env``. The single-agent baselines play the pipeline.

``--budget full`` is what ``reports/rl`` holds: 60 PPO updates of 256 episodes (15,360 training episodes)
per parallel-env run, 10,240 learner steps per single-agent run; ``small`` (what the test runs) is 3
updates and 1,024 steps.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
#: name -> (script, its arguments); a baseline's runs differ only in the seed
BASELINES: dict[str, tuple[str, list[str]]] = {
    "ippo_default": ("marl_ppo", ["--algo", "ippo", "--menu", "default"]),
    "ippo_branches": ("marl_ppo", ["--algo", "ippo", "--menu", "branches"]),
    "mappo_default": ("marl_ppo", ["--algo", "mappo", "--menu", "default"]),
    "mappo_branches": ("marl_ppo", ["--algo", "mappo", "--menu", "branches"]),
    "sender_masked_ppo": ("sb3_ppo_single_agent", ["--role", "first"]),
    "receiver_masked_ppo": ("sb3_ppo_single_agent", ["--role", "second"]),
    "receiver_masked_ppo_branches": ("sb3_ppo_single_agent", ["--role", "second", "--menu", "branches"]),
}
#: this script's budget -> each script's
BUDGETS = {"small": {"marl_ppo": "tiny", "sb3_ppo_single_agent": "tiny"},
           "full": {"marl_ppo": "full", "sb3_ppo_single_agent": "small"}}
METRICS = ("heldout", "horizon", "request_removed")


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"gencoord_examples_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run(names: list[str], seeds: list[int], budget: str, out: Path, engine: str = "batched") -> dict[str, list[dict[str, Any]]]:
    """Every run of ``names`` x ``seeds``; results (and a CSV curve per run) under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        script, args = BASELINES[name]
        for seed in seeds:
            log = out / f"{name}_seed{seed}.csv"
            extra = ["--engine", engine] if script == "marl_ppo" else []
            result = _script(script).main([*args, *extra, "--budget", BUDGETS[budget][script], "--seed", str(seed),
                                           "--log", str(log)])
            timing = {k: round(result[k], 1) for k in ("wall_seconds", "cpu_seconds") if k in result}
            results.setdefault(name, []).append({"seed": seed, **{m: result[m] for m in METRICS},
                                                 "seconds": round(result["seconds"], 1), **timing, "curve": result["curve"]})
    return results


def table(results: dict[str, list[dict[str, Any]]]) -> str:
    """The Markdown table: per baseline, each metric's mean and its per-seed values."""
    lines = ["| baseline | held-out | horizon | request removed | training s / seed |", "| --- | --- | --- | --- | --- |"]
    for name, runs in results.items():
        cells = [f"{np.mean([r[m] for r in runs]):.3f} ({', '.join(f'{r[m]:.3f}' for r in runs)})" for m in METRICS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {np.mean([r['seconds'] for r in runs]):.0f} |")
    return "\n".join(lines)


def curves(results: dict[str, list[dict[str, Any]]], out: Path) -> list[Path]:
    """One PNG per baseline: the training success of each seed's run against training progress."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name, runs in results.items():
        fig, ax = plt.subplots(figsize=(5, 3.2))
        for r in runs:
            ax.plot(np.arange(1, len(r["curve"]) + 1), r["curve"], label=f"seed {r['seed']}")
        unit = "PPO update (256 episodes)" if BASELINES[name][0] == "marl_ppo" else "rollout (512 learner steps)"
        ax.set(title=name, xlabel=unit, ylabel="training success", ylim=(0, 1.02))
        ax.legend(loc="lower right")
        fig.tight_layout()
        paths.append(out / f"{name}.png")
        fig.savefig(paths[-1], dpi=90)
        plt.close(fig)
    return paths


def main(argv: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", choices=BUDGETS, default="full")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--only", nargs="+", choices=sorted(BASELINES), default=list(BASELINES))
    parser.add_argument("--out", default="reports/rl")
    parser.add_argument("--engine", choices=("batched", "pipeline"), default="batched",
                        help="how the parallel-env baselines play (marl_ppo.py --engine)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    start = time.perf_counter()
    results = run(args.only, args.seeds, args.budget, out, args.engine)
    seconds = time.perf_counter() - start
    (out / "baselines.json").write_text(json.dumps({"budget": args.budget, "engine": args.engine, "seconds": round(seconds),
                                                    "runs": results},
                                                   indent=1, sort_keys=True) + "\n", encoding="utf-8")
    (out / "baselines.md").write_text(table(results) + "\n", encoding="utf-8")
    curves(results, out)
    print(table(results))
    print(f"{sum(len(r) for r in results.values())} runs in {seconds:.0f} s")
    return results


if __name__ == "__main__":
    main()
