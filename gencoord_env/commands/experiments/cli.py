"""``gencoord experiment NAME``: run one of the paper's evaluations and write its results.

    gencoord experiment request                      # sim backend, rule agents, the whole pool
    gencoord experiment request --backend minecraft --episodes 8 --out results/request-mc
    gencoord experiment composition --policy model:checkpoints/direct
    gencoord experiment all --out results            # every experiment, one folder each
    gencoord experiment request --backend minecraft --arenas 4 [--workers 2]   # the same rows, K at a time
    gencoord experiment --list

``--policy`` replaces the policy of the conditions the paper ran with its learned model (see
``gencoord_env.commands.experiments.specs``): a rule agent name (``gencoord_env.agents.POLICIES``) or ``model:PATH``
(a checkpoint loaded with ``gencoord_env.agents.lm.policy.load_policy``). ``--episodes N`` caps every condition at
``ceil(N / 2)`` clusters, both role permutations, picked deterministically. ``--arenas K`` plays K
episodes at once (K arenas of one Minecraft server, or K sim worlds) and ``--workers N`` spreads them over
N Ray workers (each with its own sidecar and K arenas); the rows are those of the serial run.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gencoord_env.commands.cli import Parser, add_scale_arguments, check_scale_arguments, env_choices, one_of, policy_help
from gencoord_env.commands.experiments.specs import EXPERIMENTS, Condition, Experiment, experiment
from gencoord_env.errors import UsageError


def policy_factory(policy: str | None) -> tuple[Any, Any]:
    """``(make, name_of)``: build the policy of a condition, and say which one it is."""
    from gencoord_env.agents import make_policy
    from gencoord_env.agents.registry import learned_checkpoint

    learned: list[Any] = []

    def chosen(c: Condition) -> str:
        return policy if (policy is not None and c.subject) else c.policy

    def make(c: Condition) -> Any:
        name = chosen(c)
        if learned_checkpoint(name) is not None:
            if not learned:  # load a checkpoint once for every condition that uses it
                learned.append(make_policy(name))
            return learned[0]
        return make_policy(name)

    return make, chosen


def _locked(fn: Any) -> Any:
    """``fn`` made safe to call from several threads (episodes that finish at once on arenas)."""
    import threading

    lock = threading.Lock()

    def call(*a: Any) -> Any:
        with lock:
            return fn(*a)

    return call


def make_runner(args: argparse.Namespace) -> Any:
    """An ArenaRunner (``--arenas``) or RayRunner (``--workers``) for the run, or None for the serial run."""
    check_scale_arguments(args)
    if args.workers:
        from gencoord_env.commands.distributed import RayRunner

        return RayRunner(args.workers, args.backend, arenas=args.arenas, address=args.ray_address)
    if args.arenas > 1:
        from gencoord_env.commands.arenas import ArenaRunner

        return ArenaRunner(args.backend, args.arenas)
    return None


def run(exp: Experiment, args: argparse.Namespace, out: Path, runner: Any = None) -> list[dict[str, Any]]:
    """Run ``exp``, print its table, write its artifacts into ``out``; returns the records.

    ``runner``: an ArenaRunner or RayRunner (see ``make_runner``) to play several episodes at once.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from gencoord_env.commands.experiments.analysis import analyze
    from gencoord_env.commands.experiments.report import (fitted, matrix_table, narrow_matrix_table, narrow_table,
                                                           table, write)
    from gencoord_env.commands.experiments.runner import conditions_to_run, run_experiment

    make, chosen = policy_factory(args.policy)
    if args.policy is not None:
        chosen_names = {chosen(c) for c in exp.conditions if c.subject}
        if not chosen_names:
            raise UsageError(f"experiment {exp.name!r} has no condition that --policy applies to")
    err = Console(stderr=True)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=args.quiet) as progress:
        tasks: dict[str, Any] = {}

        def tick(c: Condition, done: int, total: int) -> None:
            if c.name not in tasks:
                tasks[c.name] = progress.add_task(f"{exp.name}: {c.name}", total=total)
            progress.update(tasks[c.name], completed=done)

        retries: list[Any] = []
        rows = run_experiment(exp, make, backend=args.backend, episodes=args.episodes, policy=args.policy,
                              pool_seed=args.pool_seed, progress=_locked(tick), runner=runner, retries=retries)
    for retry in retries:
        err.print(f"warning: {retry.describe()}")
    names = {c.name: chosen(c) for c in conditions_to_run(exp, args.policy)}
    records = analyze(exp, rows, names)
    for r in records:
        r["backend"] = args.backend
    paths = write(out, exp, records, rows, args.backend)
    out_console = Console()
    if not out_console.is_terminal:  # a pipe or file: do not squeeze the table into 80 columns
        out_console = Console(width=240)
    # a terminal too narrow for a row per condition gets a section per condition, a line per measure
    out_console.print(fitted(out_console, table(exp, records, args.backend), narrow_table(exp, records, args.backend)))
    if exp.matrix_rows:
        out_console.print(fitted(out_console, matrix_table(exp, records, args.backend),
                                 narrow_matrix_table(exp, records, args.backend)))
    if not args.quiet:
        err.print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return records


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="gencoord experiment", description="reproduce one of the paper's evaluations")
    ap.add_argument("name", nargs="?", help=f"{' | '.join(EXPERIMENTS)} | all")
    backends = env_choices()["backend"]
    ap.add_argument("--backend", default="sim", type=one_of("backend", backends), metavar="BACKEND",
                    help=f"{' | '.join(backends)} (default: sim; a whole pool on minecraft takes about an hour per experiment)")
    ap.add_argument("--policy", default=None,
                    help=f"policy for the learned-model conditions: {policy_help()} (default: the rule agents the paper used)")
    ap.add_argument("--out", default=None, help="output folder (default: results/NAME; with 'all': results/)")
    ap.add_argument("--episodes", type=int, default=None,
                    help="at most this many episodes per condition (ceil(N/2) clusters, both roles; default: whole pool)")
    ap.add_argument("--pool-seed", type=int, default=0)
    add_scale_arguments(ap)
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    ap.add_argument("--list", action="store_true", help="list the experiments and their conditions")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.list:
        for e in EXPERIMENTS.values():
            print(f"{e.name}: {e.title}")
            for c in e.conditions:
                print(f"  - {c.name} (pool {c.pool}, route {c.route}, policy {c.policy}{'*' if c.subject else ''}"
                      + (f", {c.intervention}" if c.intervention else "")
                      + (", runs only with --policy" if c.only_with_policy else "") + ")")
        print("* --policy P runs P here (the paper's learned-model rows); without it the rule agent named stands in "
              "for a learned model")
        return 0
    if not args.name:
        print("error: name an experiment (or 'all'); see --list", file=sys.stderr)
        return 2
    if args.episodes is not None and args.episodes < 1:
        print(f"error: --episodes must be at least 1, got {args.episodes}", file=sys.stderr)
        return 2
    try:
        exps = list(EXPERIMENTS.values()) if args.name == "all" else [experiment(args.name)]
        runner = make_runner(args)
        try:
            for exp in exps:
                if args.name == "all":
                    out = Path(args.out or "results") / exp.name
                else:
                    out = Path(args.out or Path("results") / exp.name)
                run(exp, args, out, runner)
        finally:
            if runner is not None:
                runner.close()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    from gencoord_env.commands.cli import main as gencoord

    raise SystemExit(gencoord(["experiment", *sys.argv[1:]]))
