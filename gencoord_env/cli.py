"""The ``gencoord`` command.

    gencoord setup                          install the Minecraft sidecar's Node packages
    gencoord rollout --backend minecraft --pool heldout --policy rule --episodes 16 --seed 0
    gencoord replay TRACE.jsonl             re-run recorded episodes and check they match
    gencoord replay --show TRACE.jsonl [--episode ID]   print one episode's runtime accounting
    gencoord experiment NAME [--backend sim|minecraft] [--out DIR]
    gencoord train ...                      SFT data, training and closed-loop evaluation
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Subcommands implemented elsewhere: name -> "module:function" taking argv and returning an exit code.
DELEGATED = {
    "replay": "gencoord_env.replay:main",
    "experiment": "gencoord_env.experiments.cli:main",
    "train": "gencoord_env.train.cli:main",
}


def _setup(args: argparse.Namespace) -> int:
    from gencoord_env.world.minecraft import RuntimeMissing, setup

    try:
        rt = setup(force=args.force)
    except RuntimeMissing as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"ready: Node {'.'.join(map(str, rt.node_version))}; sidecar at {rt.entry}")
    return 0


def _rollout(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    import gencoord_env
    from gencoord_env.agents.rollout import run_episode, summarize
    from gencoord_env.agents import make_policy

    env = gencoord_env.parallel_env(pool=args.pool, backend=args.backend, route=args.route, view=args.view,
                                    surface=args.surface, seed=args.seed, pool_seed=args.pool_seed)
    policy = _policy(args, make_policy)
    if args.trace:
        from gencoord_env.wrappers import TraceRecorder

        env = TraceRecorder(env, args.trace)
    import random

    order = list(range(len(env.unwrapped.episodes)))
    random.Random(args.seed).shuffle(order)
    n = len(order) if args.episodes is None else min(args.episodes, len(order))
    console = Console(stderr=True)
    results: list[dict[str, Any]] = []
    try:
        with Progress(TextColumn("[bold]rollout"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.fields[rate]}"), console=console, transient=False) as progress:
            task = progress.add_task("episodes", total=n, rate="")
            for k in sorted(order[:n]):
                results.append(run_episode(env, policy, index=k))
                ok = sum(str(r["outcome"]) == "SUCCESS" for r in results)
                progress.update(task, advance=1, rate=f"success {ok}/{len(results)}")
    finally:
        env.close()
    summary = {"pool": args.pool, "backend": args.backend, "route": args.route, "view": args.view,
               "policy": args.policy, "seed": args.seed, **summarize(results)}
    table = Table(title=f"gencoord rollout: {args.policy} on {args.pool} ({args.backend}, {args.route}, {args.view})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in ("episodes", "successes", "success_rate", "decisions_per_episode", "wire_bytes_mean",
                "handoff_verified_rate", "episode_seconds_p50", "time_to_commitment_p50"):
        v = summary[key]
        table.add_row(key, f"{v:.4g}" if isinstance(v, float) else str(v))
    for code, count in summary["outcomes"].items():
        table.add_row(f"outcome {code}", str(count))
    Console().print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0


def _policy(args: argparse.Namespace, make_policy: Any) -> Any:
    if args.policy.startswith("model:"):
        from gencoord_env.agents.lm.policy import load_policy  # type: ignore[import-not-found]

        return load_policy(args.policy.split(":", 1)[1])
    return make_policy(args.policy)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="gencoord", description="gencoord_env command line")
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("setup", help="install the Minecraft sidecar's Node packages (npm ci with the pinned Node)")
    s.add_argument("--force", action="store_true", help="reinstall even when up to date")
    s.set_defaults(func=_setup)
    r = sub.add_parser("rollout", help="run a policy on a pool and print the results table")
    r.add_argument("--backend", default="minecraft", choices=["sim", "minecraft"])
    r.add_argument("--pool", default="heldout")
    r.add_argument("--policy", default="rule", help="rule, factor, table, requester_local, random, or model:PATH")
    r.add_argument("--route", default="forward")
    r.add_argument("--view", default="full")
    r.add_argument("--surface", default="dsl")
    r.add_argument("--episodes", type=int, default=None, help="number of episodes (default: the whole pool, both role permutations)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--pool-seed", type=int, default=0)
    r.add_argument("--trace", default=None, help="write one JSONL trace record per episode here")
    r.add_argument("--json", default=None, help="write the summary JSON here")
    r.set_defaults(func=_rollout)
    for name in DELEGATED:
        d = sub.add_parser(name, add_help=False, help=f"see 'gencoord {name} --help'")
        d.add_argument("rest", nargs=argparse.REMAINDER)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        module, func = DELEGATED[argv[0]].split(":")
        try:
            entry = getattr(importlib.import_module(module), func)
        except ModuleNotFoundError as e:
            print(f"error: 'gencoord {argv[0]}' needs {e.name}, which is not installed", file=sys.stderr)
            return 2
        return int(entry(argv[1:]))
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
