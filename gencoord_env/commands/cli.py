"""The ``gencoord`` command.

    gencoord setup                          install the Minecraft sidecar's Node packages
    gencoord doctor [--backend minecraft|sim] [--json]   check, in order, what an episode needs; say each fix
    gencoord doctor --server external --host H --port P   the same, against a running Minecraft server
    gencoord rollout --backend minecraft --pool heldout --policy rule --episodes 16 --seed 0
    gencoord rollout ... --arenas 4 [--workers 2 [--ray-address HOST:6379]]   the same results, K at a time
    gencoord replay TRACE.jsonl             re-run recorded episodes and check they match
    gencoord replay --show TRACE.jsonl [--episode ID]   print one episode's runtime accounting
    gencoord replay --html TRACE.jsonl [--episode ID] [--out PAGE.html]   one episode as an HTML page
    gencoord experiment NAME [--backend sim|minecraft] [--out DIR]
    gencoord evaluate --first POLICY [--second POLICY] [--seeds ...] [--pool P]   a pair's success with intervals
    gencoord evaluate --zoo NAME=POLICY ... [--seeds ...] --out DIR          cross-play of a partner zoo
    gencoord serve --port 8000 [--host 127.0.0.1] [--max-sessions 4] [--queue Q] [--idle-timeout S]
                   [--plays sender --partner rule] [--backend sim --pool heldout ...]
                                            the env as an OpenEnv server (needs the openenv extra)
    gencoord train ...                      SFT data, training and closed-loop evaluation
    gencoord --version

An error the user can act on (the runtime is missing, the sidecar died or timed out, a model does not
load, an optional dependency is not installed, a name or file is wrong) is printed as one line
``error: ... <what to do>`` with a non-zero exit code; ``--debug`` anywhere on the command line (or
``GENCOORD_DEBUG=1``) shows its traceback instead. Anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from gencoord_env.errors import Fault, UsageError
from gencoord_env.suggest import unknown

#: Subcommands implemented elsewhere: name -> ("module:function" taking argv and returning an exit code, the
#: line ``gencoord --help`` shows). Their modules load only when named, so the summary lives here.
DELEGATED: dict[str, tuple[str, str]] = {
    "doctor": ("gencoord_env.commands.doctor:main", "check what an episode needs, in order; each failure names its fix"),
    "replay": ("gencoord_env.commands.replay:main", "re-run a recorded episode and compare (--show: its accounting)"),
    "experiment": ("gencoord_env.commands.experiments.cli:main", "the paper's evaluations as tables and figures (experiments extra)"),
    "evaluate": ("gencoord_env.commands.experiments.protocol:main",
                 "a policy pair's success with intervals over clusters and seeds; cross-play over a zoo"),
    "train": ("gencoord_env.train.cli:main", "SFT data, training, transfer, learned table rows (lm extra)"),
}
DEBUG_FLAG = "--debug"
DEBUG_ENV = "GENCOORD_DEBUG"
#: Import names whose distribution is named otherwise (for finding the extra that installs a module).
_DISTRIBUTIONS = {"sklearn": "scikit-learn"}


# ---- shared argument helpers (the other commands use them too) ------------------------------------


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are the one line the README promises, ``error: ...`` (no usage
    block before it), exit code 2; an unknown subcommand or choice names the closest one.

    >>> p = Parser(prog="gencoord"); _ = p.add_subparsers(dest="command").add_parser("rollout")
    >>> p.parse_args(["rolout"])   # doctest: +SKIP
    error: unknown command 'rolout'; expected one of rollout (did you mean 'rollout'?); see 'gencoord --help'
    """

    def error(self, message: str) -> NoReturn:
        choice = re.match(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice is not None:
            names = re.findall(r"'([^']*)'", choice[3]) or [n.strip() for n in choice[3].split(",")]
            what = "command" if choice[1] == "command" or choice[1].startswith("{") else f"value for {choice[1]}"
            message = unknown(what, choice[2], names)
        self.exit(2, f"error: {message}; see '{self.prog} --help'\n")


def env_choices() -> dict[str, tuple[str, ...]]:
    """The names the env accepts for each argument, read from the env's own tables."""
    from gencoord_env.envs.gencoord.gencoord import BACKENDS
    from gencoord_env.envs.gencoord.routes import ROUTES
    from gencoord_env.envs.gencoord.surfaces import SURFACES
    from gencoord_env.tasks.compose import VIEWS
    from gencoord_env.tasks.pool_value import POOL_NAMES

    return {"pool": POOL_NAMES, "route": tuple(ROUTES), "view": tuple(VIEWS), "surface": tuple(SURFACES),
            "backend": tuple(BACKENDS)}


def one_of(what: str, names: Sequence[str]) -> Callable[[str], str]:
    """An argparse ``type`` that accepts one of ``names`` and suggests the closest for a typo."""

    def check(value: str) -> str:
        if value in names:
            return value
        raise argparse.ArgumentTypeError(unknown(what, value, names))

    return check


def add_env_arguments(parser: argparse.ArgumentParser, defaults: Mapping[str, str | None],
                      notes: Mapping[str, str] = {}) -> None:
    """``--NAME`` for each env argument in ``defaults`` (pool, route, view, surface, backend), its help
    listing every accepted name."""
    tables = env_choices()
    for name, default in defaults.items():
        names = tables[name]
        shown = f"default: {default}" if default is not None else notes.get(name, "")
        parser.add_argument(f"--{name}", default=default, type=one_of(name, names), metavar=name.upper(),
                            help=f"{' | '.join(names)}" + (f" ({shown})" if shown else ""))


def policy_help() -> str:
    """What ``--policy`` accepts: the rule agents' names from the registry, or a learned checkpoint."""
    from gencoord_env.agents.registry import POLICIES

    return (f"a rule agent ({' | '.join(POLICIES)}), model:PATH, a learned checkpoint (needs the lm extra), or "
            "rl:PATH[#ACTOR], a menu learner's checkpoint (needs torch)")


def add_scale_arguments(parser: argparse.ArgumentParser) -> None:
    """``--arenas``, ``--workers`` and ``--ray-address``: how many episodes run at once, and where."""
    parser.add_argument("--arenas", type=positive_int, default=1, metavar="K",
                        help="play K episodes at once, each in its own arena of one Minecraft server (or its own "
                             "sim world); results equal the serial run's (default: 1)")
    parser.add_argument("--workers", type=positive_int, default=None, metavar="N",
                        help="spread the episodes over N Ray workers, each with its own sidecar and --arenas "
                             "arenas (needs the ray extra)")
    parser.add_argument("--ray-address", default=None, metavar="ADDR",
                        help="a running Ray cluster (HOST:6379) for --workers; default: a local one for this run")


def check_scale_arguments(args: argparse.Namespace) -> None:
    """``--ray-address`` without ``--workers`` is a mistake, not a default."""
    if args.ray_address and not args.workers:
        raise UsageError("--ray-address names the cluster that --workers run on; add --workers N")


def positive_int(value: str) -> int:
    """An argparse ``type``: an integer of at least 1 (``--episodes``)."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def nonnegative_int(value: str) -> int:
    """An argparse ``type``: an integer of at least 0 (``--queue``)."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer of 0 or more, got {value!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {n}")
    return n


def seconds(value: str) -> float:
    """An argparse ``type``: a duration in seconds, 0 or more (``--idle-timeout``)."""
    try:
        t = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds (a number of 0 or more), got {value!r}") from None
    if not t >= 0 or t == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of 0 or more, got {value!r}")
    return t


# ---- errors -----------------------------------------------------------------------------------------


def extra_providing(module: str) -> str | None:
    """The extra of gencoord_env that installs ``module`` (an import name), read from the installed metadata.

    >>> extra_providing("sklearn")   # doctest: +SKIP
    'experiments'
    """
    from importlib import metadata

    try:
        requirements = metadata.requires("gencoord_env") or []
    except metadata.PackageNotFoundError:
        return None

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    wanted = norm(_DISTRIBUTIONS.get(module, module))
    extras = []
    for req in requirements:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*).*;.*\bextra\s*==\s*['\"]([^'\"]+)['\"]", req)
        if m and norm(m[1]) == wanted:
            extras.append(m[2])
    users = [e for e in extras if e != "test"]  # the test extra repeats others' packages
    return (users or extras or [None])[0]


def describe_error(error: BaseException, command: str = "") -> tuple[str, int] | None:
    """``(one-line message, exit code)`` for an error the user can act on; None for a bug.

    A fault (``gencoord_env.errors.Fault``: the Minecraft backend's, a model that cannot load, a lost
    episode) exits 1; a usage or data error (any ``ValueError``) exits 2.
    """
    if isinstance(error, Fault):
        return _one_line(str(error)), 1
    if isinstance(error, ModuleNotFoundError) and error.name and error.name.split(".")[0] != "gencoord_env":
        module = error.name.split(".")[0]
        extra = extra_providing(module)
        fix = f"pip install 'gencoord_env[{extra}]'" if extra else f"pip install {module}"
        who = f"'gencoord {command}'" if command else "this command"
        return f"{who} needs {module}, which is not installed: {fix}", 1
    if isinstance(error, ImportError) and "pip install" in str(error):
        return _one_line(str(error)), 1
    if isinstance(error, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
        return f"{error.strerror or error}: {error.filename}" if error.filename else _one_line(str(error)), 1
    if isinstance(error, ValueError):
        return _one_line(str(error)), 2
    return None


def _one_line(message: str) -> str:
    """The first line of a fault message; later lines are a log's tail (shown with --debug, and in the log)."""
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    return re.sub(r";?\s*last lines:\s*$", "", first)


def run_reported(entry: Callable[[], int], command: str = "", debug: bool = False) -> int:
    """Run ``entry``; an error the user can act on becomes one ``error:`` line on stderr and its exit code."""
    try:
        return int(entry())
    except KeyboardInterrupt:
        if debug:
            raise
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - sorted into "act on it" and "bug" below
        described = None if debug else describe_error(e, command)
        if described is None:
            raise
        message, code = described
        print(f"error: {message}", file=sys.stderr)
        return code


def _setup(args: argparse.Namespace) -> int:
    from gencoord_env.world.minecraft import setup

    rt = setup(force=args.force)
    print(f"ready: Node {'.'.join(map(str, rt.node_version))}; sidecar at {rt.entry}")
    return 0


def _rollout(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    import gencoord_env
    from gencoord_env.agents.rollout import run_episode, summarize
    from gencoord_env.agents import make_policy

    check_scale_arguments(args)

    policy = _policy(args, make_policy)  # a bad name or checkpoint fails before a sidecar starts
    env_kwargs = dict(timings=True, pool=args.pool, backend=args.backend, route=args.route, view=args.view,
                      surface=args.surface, seed=args.seed, pool_seed=args.pool_seed)
    env = gencoord_env.parallel_env(**env_kwargs)
    if args.trace:
        from gencoord_env.wrappers import TraceRecorder

        env = TraceRecorder(env, args.trace)
    import random

    size = len(env.unwrapped.episodes)
    if env.unwrapped.pool.endless:  # its first --episodes episodes, in order (each pair is a fresh template)
        if args.episodes is None:
            env.close()
            raise UsageError(f"the {args.pool} pool is endless; give --episodes N")
        order = list(range(args.episodes))
    else:
        order = list(range(size))
        random.Random(args.seed).shuffle(order)
    n = len(order) if args.episodes is None else min(args.episodes, len(order))
    if args.episodes is not None and args.episodes > n:
        print(f"note: the {args.pool} pool holds {n} episodes (every cluster in both role orders): "
              f"playing those {n}, not {args.episodes}", file=sys.stderr)
    console = Console(stderr=True)
    results: list[dict[str, Any]] = []
    retries: list[Any] = []
    at_once = args.arenas > 1 or bool(args.workers)
    startup: float | None = None
    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.fields[rate]}"), console=console, transient=True,
                      disable=not console.is_terminal) as progress:  # a log gets the table, not a bar
            task = progress.add_task("rollout", total=n, rate="")
            if at_once:
                results, retries, startup = _rollout_at_once(args, env_kwargs, sorted(order[:n]), progress, task)
            else:
                startup = _started(env.unwrapped.world, args.backend, progress, task)
                for k in sorted(order[:n]):
                    results.append(run_episode(env, policy, index=k))
                    ok = sum(str(r["outcome"]) == "SUCCESS" for r in results)
                    progress.update(task, advance=1, rate=f"success {ok}/{len(results)}")
    finally:
        env.close()
    for retry in retries:
        print(f"warning: {retry.describe()}", file=sys.stderr)
    summary = {"pool": args.pool, "backend": args.backend, "route": args.route, "view": args.view,
               "policy": args.policy, "seed": args.seed, **summarize(results)}
    if args.episodes is not None and args.episodes > n:
        summary["episodes_asked"] = args.episodes
    if startup is not None:
        summary["startup_seconds"] = startup  # starting the sidecar, before the first episode and outside its time
    if at_once:
        summary.update(arenas=args.arenas, workers=args.workers, retries=[vars(r) for r in retries])
    table = Table(title=f"gencoord rollout: {args.policy} on {args.pool} ({args.backend}, {args.route}, {args.view})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in ("episodes", "episodes_asked", "successes", "success_rate", "decisions_per_episode", "wire_bytes_mean",
                "handoff_verified_rate", "startup_seconds", "episode_seconds_p50", "time_to_commitment_p50"):
        if key not in summary:
            continue
        v = summary[key]
        table.add_row(key, f"{v:.4g}" if isinstance(v, float) else str(v))
    for code, count in summary["outcomes"].items():
        table.add_row(f"outcome {code}", str(count))
    Console().print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0


def _started(world: Any, backend: str, progress: Any, task: Any) -> float | None:
    """Start ``world``'s backend (``World.start``) under its own label, before the episodes' bar and outside
    every episode's time; its seconds, or None where there is nothing to start (the sim)."""
    import time

    if backend == "sim" or world is None:
        return None
    progress.update(task, description=f"starting the {backend} sidecar")
    t0 = time.perf_counter()
    try:
        world.start()
    except Exception as e:  # noqa: BLE001 - a backend fault is left to the first reset, as without this start
        faults = sys.modules.get("gencoord_env.world.minecraft.errors")
        if faults is None or not isinstance(e, faults.MinecraftBackendError):
            raise
        progress.update(task, description="rollout")
        return None  # the episodes' resets start it again (several arenas: with their retry)
    seconds = time.perf_counter() - t0
    progress.update(task, description="rollout")
    progress.reset(task)  # the bar's clock starts with the episodes
    return seconds


def _rollout_at_once(args: argparse.Namespace, env_kwargs: dict[str, Any], indices: list[int], progress: Any,
                     task: Any) -> tuple[list[dict[str, Any]], list[Any], float | None]:
    """Play ``indices`` on ``--arenas`` arenas (of each of ``--workers`` Ray workers); the final infos in
    the order of ``indices``, the retries and the seconds the sidecar took to start (None for Ray workers,
    which start their own, and the sim). Trace records are appended in that order too."""
    import threading
    from functools import partial

    from gencoord_env.commands.arenas import ArenaRunner, RolloutSpec, play_rollout, rollout_slot

    spec = RolloutSpec(env=env_kwargs, policy=args.policy, trace=bool(args.trace))
    done: list[bool] = []
    lock = threading.Lock()

    def tick(k: int, result: dict[str, Any]) -> None:
        with lock:
            done.append(str(result["info"]["outcome"]) == "SUCCESS")
            progress.update(task, advance=1, rate=f"success {sum(done)}/{len(done)}")

    if args.workers:
        from gencoord_env.commands.distributed import RayRunner

        runner: Any = RayRunner(args.workers, args.backend, arenas=args.arenas, address=args.ray_address)
    else:
        runner = ArenaRunner(args.backend, args.arenas)
    with runner:
        pool = getattr(runner, "pool", None)
        startup = _started(pool, args.backend, progress, task) if not args.workers else None
        played = runner.run(indices, partial(rollout_slot, spec), play_rollout, on_result=tick)
    if args.trace:
        with open(args.trace, "a", encoding="utf-8") as f:
            f.writelines(r["trace"] for r in played.results)
    return [r["info"] for r in played.results], list(played.retries), startup


def _serve(args: argparse.Namespace) -> int:
    from gencoord_env.commands.serve import ENV_NAME, config_from_args, serve

    config = config_from_args(args)  # a bad argument fails here, before the port opens
    plays = "every role" if config.plays == "both" else f"{config.plays}, beside a {config.partner} partner"
    print(f"serving {ENV_NAME} ({args.backend}, {args.pool}, {args.route}; sessions play {plays}) on "
          f"http://{args.host}:{args.port} for up to {args.max_sessions} sessions", file=sys.stderr)
    serve(config, host=args.host, port=args.port)
    return 0


def _policy(args: argparse.Namespace, make_policy: Any) -> Any:
    return make_policy(args.policy)  # a rule agent, or model:PATH in the format the checkpoint records


def build_parser() -> argparse.ArgumentParser:
    from gencoord_env import __version__

    ap = Parser(
        prog="gencoord", description="gencoord_env command line",
        epilog=f"'gencoord COMMAND --help' shows a command's arguments; {DEBUG_FLAG} (anywhere on the command line, "
               f"or {DEBUG_ENV}=1) shows the traceback of an error",
    )
    ap.add_argument("--version", action="version", version=f"gencoord_env {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("setup", help="install the Minecraft sidecar's Node packages (npm ci with the pinned Node)")
    s.add_argument("--force", action="store_true", help="reinstall even when up to date")
    s.set_defaults(func=_setup)
    r = sub.add_parser("rollout", help="run a policy on a pool and print the results table")
    add_env_arguments(r, {"backend": "minecraft", "pool": "heldout"})
    r.add_argument("--policy", default="rule", help=policy_help() + " (default: rule)")
    add_env_arguments(r, {"route": "forward", "view": "full", "surface": "dsl"})
    r.add_argument("--episodes", type=positive_int, default=None,
                   help="number of episodes (default: the whole pool, both role permutations)")
    r.add_argument("--seed", type=int, default=0,
                   help="orders the pool's episodes (a shuffle) and seeds the env; equal seeds, equal results (default: 0)")
    r.add_argument("--pool-seed", type=int, default=0,
                   help="which instances the generated pools draw (train, the procedural pool); the held-out pools "
                        "stay disjoint from train for any seed (default: 0)")
    r.add_argument("--trace", default=None, help="write one JSONL trace record per episode here")
    r.add_argument("--json", default=None, help="write the summary JSON here")
    add_scale_arguments(r)
    r.set_defaults(func=_rollout)
    v = sub.add_parser("serve", help="serve the env over OpenEnv's HTTP/WebSocket protocol (needs the openenv extra)",
                       description="An OpenEnv server: one session plays one env (on minecraft, one arena of one shared "
                                   "sidecar), over a WebSocket (/ws) or HTTP (/reset, /step with a session_id). Action "
                                   "{'text': record} or {'slot': k}; reset(seed=S) or reset(index=K).")
    v.add_argument("--port", type=int, required=True)
    v.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1, this machine only; the server has no authentication)")
    v.add_argument("--max-sessions", type=positive_int, default=4, metavar="N",
                   help="concurrent sessions, WebSocket and HTTP together (on minecraft: arenas of one server, at most 64) "
                        "(default: 4)")
    v.add_argument("--queue", type=nonnegative_int, default=0, metavar="Q",
                   help="newcomers that may wait for a session when all are taken; beyond them a newcomer is refused at "
                        "once with CAPACITY_REACHED (default: 0, no waiting)")
    v.add_argument("--queue-timeout", type=seconds, default=30.0, metavar="S",
                   help="seconds a newcomer waits in the queue before it is refused (default: 30)")
    v.add_argument("--idle-timeout", type=seconds, default=300.0, metavar="S",
                   help="a session that sends nothing for S seconds is closed and its env (and arena) released; its "
                        "client is told why; 0: never (default: 300)")
    v.add_argument("--plays", default="both", metavar="ROLE",
                   help="the role each session plays (sender, receiver, ...; the pool's roles), the server's --partner "
                        "playing the others; both: every decision of every agent (default: both)")
    v.add_argument("--partner", default=None, metavar="POLICY",
                   help=f"who plays the roles a session does not (with --plays ROLE): {policy_help()} (default: rule)")
    add_env_arguments(v, {"backend": "minecraft", "pool": "heldout", "route": "forward", "view": "full", "surface": "dsl"})
    v.add_argument("--private-fact", default="id", help="id | train | C1 | C2 | C3 (default: id)")
    v.add_argument("--actions", default="text", choices=("text", "menu"), help="text records or menu slots (default: text)")
    v.add_argument("--reward", default="binary", choices=("binary", "staged"), help="default: binary")
    v.add_argument("--on-fault", default="raise", choices=("raise", "truncate"),
                   help="an infrastructure fault: an error reply (raise) or a truncated episode (default: raise)")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--pool-seed", type=int, default=0)
    v.set_defaults(func=_serve)
    for name, (_, summary) in DELEGATED.items():
        d = sub.add_parser(name, add_help=False, help=summary)
        d.add_argument("rest", nargs=argparse.REMAINDER)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in argv or os.environ.get(DEBUG_ENV, "").strip().lower() in {"1", "true", "yes", "on"}
    argv = [a for a in argv if a != DEBUG_FLAG]
    if argv and argv[0] in DELEGATED:
        module, func = DELEGATED[argv[0]][0].split(":")
        rest = argv[1:]
        return run_reported(lambda: getattr(importlib.import_module(module), func)(rest), argv[0], debug)
    args = build_parser().parse_args(argv)
    return run_reported(lambda: args.func(args), args.command, debug)


if __name__ == "__main__":
    raise SystemExit(main())
