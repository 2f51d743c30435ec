"""The RL baselines, every seed, judged by the evaluation protocol: independent PPO and MAPPO on the parallel
menu env (default and branches menus, bag MLPs and the label-reading slot scorer, ``examples/marl_ppo.py``)
and masked PPO on the single-agent view as sender and as receiver (``examples/sb3_ppo_single_agent.py``).
Each baseline's held-out, horizon and request-removed success with a 95% interval over seeds and clusters
(``gencoord_env.commands.experiments.protocol``: every episode played greedily, success per cluster, seeds
and clusters resampled), its training curves (CSV per run, one PNG per baseline), the table (Markdown, as in
the README) and a cross-play matrix of the parallel learners' seeds beside the rule agents
(``crossplay.png``, ``crossplay.md``, ``crossplay.json``) go to ``--out``.

    python examples/baselines.py [--budget small] [--seeds 0 1 2] [--out reports/rl] [--work runs/baselines]
                                 [--engine batched|pipeline]

``--budget full`` is what ``reports/rl`` holds: 60 PPO updates of 256 episodes (15,360 training episodes)
per parallel-env run of a bag MLP, 30 (7,680) for the slot scorer, which has converged by then; 10,240
learner steps per single-agent run. The ``slots_orders*`` runs train the slot scorer on sequences of K
orders paid once at their end (``marl_ppo.py --orders K``: 2K decisions share one return), 3 updates of 256
sequences on either budget: enough for the share-of-orders reward, while the all-or-nothing one, which pays
about one sequence in 280 (K = 2) or in 75,000 (K = 4) at the start, gives PPO almost nothing to learn from. ``small``
(what the test runs) is 3 updates, 1,024 steps and one update of sequences (they play one episode at a time:
three updates of them were 50 of its 82 s). The parallel
runs' checkpoints go to ``--work`` (``rl:PATH`` for ``gencoord evaluate``), where the cross-play reads them.
``--merge --only ...`` runs some baselines (or seeds) and keeps the others' runs in ``--out``'s
``baselines.json``, so parts run side by side; ``--no-crossplay`` leaves the matrix to a later call (or to
``gencoord evaluate --zoo``). Each call's command, seconds, machine and load go under ``parts``.
``--engine`` is how the parallel-env baselines play (``marl_ppo.py --engine``): ``batched`` (default) on
``gencoord_env.batched``, every decision point computed once by the env for all of their runs, or
``pipeline``, one episode at a time through ``parallel_env``; the runs over sequences of orders, the
single-agent baselines and the cross-play play the pipeline.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from gencoord_env.commands.experiments.protocol import CrossPlay, Score, Setting, cross_play, provenance

HERE = Path(__file__).resolve().parent
SLOTS = ["--algo", "ippo", "--menu", "branches", "--policy", "slots"]
#: name -> (script, its arguments); a baseline's runs differ only in the seed
BASELINES: dict[str, tuple[str, list[str]]] = {
    "ippo_default": ("marl_ppo", ["--algo", "ippo", "--menu", "default"]),
    "ippo_branches": ("marl_ppo", ["--algo", "ippo", "--menu", "branches"]),
    "mappo_default": ("marl_ppo", ["--algo", "mappo", "--menu", "default"]),
    "mappo_branches": ("marl_ppo", ["--algo", "mappo", "--menu", "branches"]),
    "ippo_slots_branches": ("marl_ppo", SLOTS),
    "receiver_slots_branches": ("marl_ppo", [*SLOTS, "--learn", "second"]),
    # credit over many decisions: K orders per training episode, paid once at its end (OrderSequence)
    "slots_orders2_all": ("marl_ppo", [*SLOTS, "--orders", "2", "--orders-reward", "all"]),
    "slots_orders4_all": ("marl_ppo", [*SLOTS, "--orders", "4", "--orders-reward", "all"]),
    "slots_orders4_mean": ("marl_ppo", [*SLOTS, "--orders", "4", "--orders-reward", "mean"]),
    "sender_masked_ppo": ("sb3_ppo_single_agent", ["--role", "first"]),
    "receiver_masked_ppo": ("sb3_ppo_single_agent", ["--role", "second"]),
    "receiver_masked_ppo_branches": ("sb3_ppo_single_agent", ["--role", "second", "--menu", "branches"]),
}
#: this script's budget -> each script's (the slot scorer's own, and its runs over sequences of orders)
BUDGETS = {"small": {"marl_ppo": "tiny", "sb3_ppo_single_agent": "tiny", "slots": "tiny", "orders": "one"},
           "full": {"marl_ppo": "full", "sb3_ppo_single_agent": "small", "slots": "small", "orders": "tiny"}}
METRICS = ("heldout", "horizon", "request_removed")
#: the cross-play zoo: these baselines' seeds (both roles trained; one of each menu and learner) and rule agents
CROSSPLAY = ("ippo_default", "ippo_branches", "ippo_slots_branches")
RULES = ("rule", "random", "tfidf", "frozen_parser")
CROSSPLAY_EPISODES = 64


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"gencoord_examples_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _budget(name: str, budget: str) -> str:
    script, args = BASELINES[name]
    return BUDGETS[budget]["orders" if "--orders" in args else "slots" if "slots" in args else script]


def checkpoint(name: str, work: Path) -> str:
    """The policy name of a parallel-env baseline's runs, ``{seed}`` in place of the seed."""
    return f"rl:{work / name}_seed{{seed}}.pt"


def run(names: list[str], seeds: list[int], budget: str, out: Path, work: Path,
        engine: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every run of ``names`` x ``seeds``, judged on every metric's pool; CSV curves under ``out``, the parallel
    runs' checkpoints under ``work``."""
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        script, args = BASELINES[name]
        for seed in seeds:
            log = out / f"{name}_seed{seed}.csv"
            extra = ["--save", str(work / f"{name}_seed{seed}.pt")] if script == "marl_ppo" else []
            if script == "marl_ppo" and engine and "--orders" not in args:  # sequences of orders play the pipeline
                extra += ["--engine", engine]
            result = _script(script).main([*args, *extra, "--budget", _budget(name, budget), "--seed", str(seed),
                                           "--log", str(log)])
            timing = {k: round(result[k], 1) for k in ("wall_seconds", "cpu_seconds") if k in result}
            results.setdefault(name, []).append({"seed": seed, **{m: result[m] for m in METRICS},
                                                 "seconds": round(result["seconds"], 1), **timing, "curve": result["curve"],
                                                 "clusters": result["clusters"]})
    return results


def scores(runs: list[dict[str, Any]], metric: str) -> Score:
    """A baseline's score on ``metric``: its runs (seeds) x clusters, with the protocol's interval."""
    return Score.of({str(r["seed"]): r["clusters"][metric] for r in runs})


def _cell(runs: list[dict[str, Any]], metric: str) -> str:
    """Mean [95% interval] (per seed); runs recorded without their clusters' results have no interval."""
    seeds = ", ".join(f"{r[metric]:.3f}" for r in runs)
    if all("clusters" in r for r in runs):
        return f"{scores(runs, metric).cell()} ({seeds})"
    return f"{np.mean([r[metric] for r in runs]):.3f} [no clusters kept] ({seeds})"


def table(results: dict[str, list[dict[str, Any]]]) -> str:
    """The Markdown table: per baseline, each metric's mean, its 95% interval over seeds and clusters, and its
    per-seed values."""
    lines = ["| baseline | held-out | horizon | request removed | training s / seed |", "| --- | --- | --- | --- | --- |"]
    for name, runs in results.items():
        cells = [_cell(runs, m) for m in METRICS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {np.mean([r['seconds'] for r in runs]):.0f} |")
    return "\n".join(lines)


def crossplay(names: list[str], seeds: list[int], work: Path, episodes: int | None) -> CrossPlay:
    """The ``CROSSPLAY`` baselines' seeds beside the rule agents, on held-out episodes."""
    zoo = [f"{n}={checkpoint(n, work)}" for n in names if n in CROSSPLAY]
    return cross_play([*zoo, *(f"{r}={r}" for r in RULES)], Setting("heldout", episodes=episodes), seeds)


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


def _part(argv: list[str], seconds: float, load: tuple[float, ...]) -> dict[str, Any]:
    """What one invocation was and where it ran: the command, the machine and its load before and after."""
    return {**provenance("python examples/baselines.py", argv, seconds), "load_before": [round(x, 1) for x in load]}


def main(argv: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", choices=BUDGETS, default="full")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--only", nargs="+", choices=sorted(BASELINES), default=list(BASELINES))
    parser.add_argument("--out", default="reports/rl")
    parser.add_argument("--work", default="runs/baselines", help="folder for the parallel runs' checkpoints")
    parser.add_argument("--engine", choices=("batched", "pipeline"), default=None,
                        help="how the parallel-env baselines play (marl_ppo.py --engine)")
    parser.add_argument("--crossplay-episodes", type=int, default=CROSSPLAY_EPISODES,
                        help="held-out episodes per cross-play cell (ceil(N/2) clusters, both roles)")
    parser.add_argument("--no-crossplay", action="store_true", help="run the baselines only")
    parser.add_argument("--merge", action="store_true",
                        help="keep the other baselines' runs of --out's baselines.json (of the same budget): run them in parts")
    given = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(given)
    out, work = Path(args.out), Path(args.work)
    start, load = time.perf_counter(), os.getloadavg()
    report: dict[str, Any] = {"budget": args.budget, "runs": {}, "parts": []}
    if args.merge and (out / "baselines.json").exists():
        report = json.loads((out / "baselines.json").read_text())
        if report["budget"] != args.budget:
            parser.error(f"--merge: {out / 'baselines.json'} holds budget {report['budget']!r}, not {args.budget!r}")
    results = run(args.only, args.seeds, args.budget, out, work, args.engine)
    xp = None if args.no_crossplay else crossplay(args.only, args.seeds, work, args.crossplay_episodes)
    seconds = time.perf_counter() - start
    if args.merge and (out / "baselines.json").exists():  # again: another part may have ended meanwhile
        report = json.loads((out / "baselines.json").read_text())
    for name, runs in results.items():  # by seed: a part may run some seeds of a baseline
        report["runs"][name] = sorted({r["seed"]: r for r in [*report["runs"].get(name, []), *runs]}.values(),
                                      key=lambda r: r["seed"])
    report["runs"] = {name: report["runs"][name] for name in BASELINES if name in report["runs"]}
    report["parts"] = [*report.get("parts", []), _part(given, seconds, load)]
    report = json.loads(json.dumps(report, sort_keys=True))  # the table as read back: the bootstrap sees clusters in that order
    (out / "baselines.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    (out / "baselines.md").write_text(table(report["runs"]) + "\n", encoding="utf-8")
    curves(results, out)
    print(table(report["runs"]))
    if xp is not None:
        (out / "crossplay.json").write_text(json.dumps({**xp.to_json(), "provenance": _part(given, seconds, load)},
                                                       indent=1) + "\n", encoding="utf-8")
        (out / "crossplay.md").write_text(xp.table() + "\n", encoding="utf-8")
        xp.plot(out / "crossplay.png", f"cross-play success, {args.crossplay_episodes} held-out episodes per cell")
        print(xp.table())
    print(f"{sum(len(r) for r in results.values())} runs" + (f" and {len(xp.cells)} cross-play cells" if xp else "")
          + f" in {seconds:.0f} s")
    return results


if __name__ == "__main__":
    main()
