"""The parallel-env RL baselines on the batched engine beside the pipeline, in one run: wall time and held-out success.

Each baseline of ``examples/baselines.py`` that plays the parallel env (``marl_ppo.py``: ippo and mappo on
the default and branches menus) trains every seed with the same recipe and budget on each engine, the two
engines' runs interleaved (pipeline, batched, pipeline, ...) so that both see the same load. A run's wall
and CPU seconds cover its training and its evaluation (every held-out, horizon and request-removed
episode). The batched runs of a menu share its complete game trees (train, held-out, horizon and request
pools), computed by the env before the runs into an empty store (``gencoord_env.batched.store``, a
temporary folder) and timed apart: the batched engine's seconds are given with that build (``cold``: the
first run on a machine, or after the package changed) and with the trees read back from the store instead
(``warm``: every later process, e.g. the other seeds and baselines of a sweep).

Printed per baseline and engine: held-out success (mean over seeds, the 95% interval that resamples seeds
and clusters), the seconds summed over its seeds, and the ratio of the pipeline's seconds to the batched
engine's runs; then the tree build and read-back seconds, the totals with the cold and warm ratios, the
machine and the load average at the start and the end. The held-out
success of the two engines is the same when their intervals overlap, and the batched engine's is higher when its interval lies
above (the same learners and update, each engine drawing its own training episodes;
``tests/batched`` holds the engine equal to the pipeline).

    nice python benchmarks/rl_engines.py [--only ippo_default mappo_default] [--seeds 0 1 2] [--budget small]
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import platform
import runpy
import time
from pathlib import Path
from typing import Any

import numpy as np

from gencoord_env import caches
from gencoord_env.commands.experiments.stats import two_way_bootstrap_ci

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ENGINES = ("pipeline", "batched")


def machine() -> str:
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"numpy {np.__version__}")


def report(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, dict[str, float]]:
    """The table: per baseline and engine, held-out success with its interval, seconds and ratios."""
    print(f"\n{'baseline':16s} {'engine':9s} {'held-out (95% interval)':>26s} {'wall s':>8s} {'CPU s':>8s} "
          f"{'wall ratio':>10s} {'CPU ratio':>9s}  same success")
    totals = {e: {"wall": 0.0, "cpu": 0.0} for e in ENGINES}
    for name, by_engine in runs.items():
        sums = {e: {k: sum(r[k] for r in rs) for k in ("wall", "cpu")} for e, rs in by_engine.items()}
        clusters = sorted(by_engine["pipeline"][0]["clusters"])
        spans = {e: two_way_bootstrap_ci([[r["clusters"][c] for c in clusters] for r in rs]) for e, rs in by_engine.items()}
        for engine, rs in by_engine.items():
            (low, high), other = spans[engine], spans["pipeline"]
            line = (f"{name:16s} {engine:9s} {np.mean([r['heldout'] for r in rs]):8.3f} ({low:.3f}-{high:.3f})"
                    f"{'':3s} {sums[engine]['wall']:8.1f} {sums[engine]['cpu']:8.1f}")
            if engine == "batched":
                line += (f" {sums['pipeline']['wall'] / sums[engine]['wall']:9.1f}x "
                         f"{sums['pipeline']['cpu'] / sums[engine]['cpu']:8.1f}x  "
                         + ("yes (the intervals overlap)" if low <= other[1] and other[0] <= high
                            else "higher (above the pipeline's interval)" if low > other[1] else "no (lower)"))
            print(line)
            for k in ("wall", "cpu"):
                totals[engine][k] += sums[engine][k]
    return totals


def build_trees(marl: Any, menus: list[str]) -> dict[str, dict[str, float]]:
    """Wall and CPU seconds to compute every tree the batched runs read into the (empty) store (``cold``), and to
    read them back in a process that has none (``warm``)."""
    seconds = {}
    for phase in ("cold", "warm"):
        caches.clear()  # the process's trees: the warm phase reads the store
        start, cpu = time.perf_counter(), time.process_time()
        for menu in menus:
            marl.train_tree(menu)
            for pool in marl.EVAL_POOLS:
                marl.eval_tree(pool, menu)
        seconds[phase] = {"wall": time.perf_counter() - start, "cpu": time.process_time() - cpu}
    return seconds


def summary(totals: dict[str, dict[str, float]], trees: dict[str, dict[str, float]]) -> None:
    piped = totals["pipeline"]
    print(f"trees: computed into the empty store {trees['cold']['wall']:.1f} s wall ({trees['cold']['cpu']:.1f} s CPU), "
          f"read back {trees['warm']['wall']:.1f} s ({trees['warm']['cpu']:.1f} s CPU)")
    for phase in ("cold", "warm"):
        batched = {k: totals["batched"][k] + trees[phase][k] for k in ("wall", "cpu")}
        print(f"{'all, ' + phase:16s} {'':9s} wall {piped['wall']:.0f} s (pipeline) / {batched['wall']:.0f} s (batched, "
              f"trees {'computed' if phase == 'cold' else 'read'}) = {piped['wall'] / batched['wall']:.1f}x; "
              f"CPU {piped['cpu'] / batched['cpu']:.1f}x")


def main(argv: list[str] | None = None) -> dict[str, dict[str, list[dict[str, Any]]]]:
    baselines = runpy.run_path(str(EXAMPLES / "baselines.py"))  # its table of runs and its loader of the examples
    parallel = sorted(name for name, (script, _) in baselines["BASELINES"].items() if script == "marl_ppo")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", choices=parallel, default=["ippo_default", "mappo_default"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--budget", default="small", help="marl_ppo.py's --budget (tiny: 3 updates, small: 30, full: 60)")
    args = ap.parse_args(argv)
    marl = baselines["_script"]("marl_ppo")
    if args.budget not in marl.BUDGETS:
        ap.error(f"--budget must be one of {sorted(marl.BUDGETS)}, got {args.budget!r}")
    store = tempfile.mkdtemp(prefix="gencoord-trees-")
    os.environ["GENCOORD_TREE_STORE"] = store  # an empty store: this run computes every tree
    print(f"rl_engines: {', '.join(args.only)}; seeds {args.seeds}; {marl.BUDGETS[args.budget]} PPO updates of "
          f"{marl.EPISODES} episodes per run; the engines' runs interleaved")
    print(f"machine: {machine()}; load average at start {os.getloadavg()[0]:.2f}")
    try:
        return run(args, baselines, marl)
    finally:
        shutil.rmtree(store, ignore_errors=True)


def run(args: argparse.Namespace, baselines: dict[str, Any], marl: Any) -> dict[str, dict[str, list[dict[str, Any]]]]:
    menus = sorted({baselines["BASELINES"][name][1][baselines["BASELINES"][name][1].index("--menu") + 1] for name in args.only})
    trees = build_trees(marl, menus)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {name: {e: [] for e in ENGINES} for name in args.only}
    for name in args.only:
        extra = [a for a in baselines["BASELINES"][name][1] if a != "--engine"]
        for seed in args.seeds:
            for engine in ENGINES:
                start, cpu = time.perf_counter(), time.process_time()
                result = marl.main([*extra, "--engine", engine, "--budget", args.budget, "--seed", str(seed)])
                runs[name][engine].append({"seed": seed, "heldout": result["heldout"],
                                           "clusters": result["clusters"]["heldout"],
                                           "wall": time.perf_counter() - start, "cpu": time.process_time() - cpu})
    summary(report(runs), trees)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    print("target: the baselines >= 10x faster wall time to the same held-out success")
    return runs


if __name__ == "__main__":
    main()
