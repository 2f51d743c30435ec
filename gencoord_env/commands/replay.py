"""Re-run recorded episodes and check that they reproduce their trace, or show one episode's accounting.

A ``TraceRecorder`` record names the episode (cluster and role permutation), the env's arguments, the
intervention stack and the deciding agents' actions. ``replay`` rebuilds that env on that single episode,
feeds the recorded actions in order and compares what comes out with what was recorded: the deciding
agent at every step, the outcome, the reason, the metrics and every stage record of the trace (including
each observation the agents saw). Wall-clock measurements (``VOLATILE``) are not compared, nor the hash of an
overlong action, which the record keeps as prefix, length and hash: it replays as its prefix padded to its
length, refused for that length as the original was.

``gencoord replay --show TRACE.jsonl [--episode ID]`` re-runs nothing: it prints one recorded episode's
runtime accounting (:mod:`gencoord_env.accounting`).

>>> from gencoord_env.commands.replay import replay_file
>>> results = replay_file("trace.jsonl")            # doctest: +SKIP
>>> all(r.ok for r in results)                      # doctest: +SKIP
True
"""
from __future__ import annotations

import difflib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gencoord_env.tasks.episode import Cluster, Episode
from gencoord_env.wrappers import apply
from gencoord_env.trace import jsonable
from gencoord_env.wrappers.trace_recorder import RECORD_VERSION, episode_record

#: Keys whose values are wall-clock measurements and differ between runs.
VOLATILE: frozenset[str] = frozenset({"episode_seconds", "time_to_commitment", "timings"})


class ReplayError(ValueError):
    """A record that cannot be replayed (wrong version, missing fields); the message says which."""


@dataclass(frozen=True)
class ReplayResult:
    episode_id: str
    ok: bool
    mismatches: tuple[str, ...] = ()
    record: Mapping[str, Any] = field(default_factory=dict, repr=False)  # the re-run's own record


def read_records(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The records of a JSONL trace file, one per non-empty line."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise ReplayError(f"{os.fspath(path)}:{n}: not a JSON record ({e.msg})") from None


def episode_of(record: Mapping[str, Any]) -> Episode:
    """The episode a record names."""
    try:
        return Episode(Cluster(**record["episode"]["cluster"]), int(record["episode"]["perm"]))
    except (KeyError, TypeError) as e:
        raise ReplayError(f"record {record.get('episode_id')!r} does not name an episode: {e}") from None


def replay(record: Mapping[str, Any], backend: str | None = None, world: Any = None) -> ReplayResult:
    """Re-run one record with its recorded actions; ``backend`` overrides the recorded backend."""
    import gencoord_env

    if record.get("version") != RECORD_VERSION:
        raise ReplayError(f"trace record version {record.get('version')!r} is not supported; expected {RECORD_VERSION}")
    episode = episode_of(record)
    cfg = record["env"]
    env = gencoord_env.parallel_env(
        pool=[episode], backend=backend or cfg["backend"], route=cfg["route"], view=cfg["view"],
        surface=cfg["surface"], private_fact=cfg["private_fact"], world=world, actions=cfg.get("actions", "text"),
        reward=cfg.get("reward", "binary"),
    )
    env = apply(env, list(record.get("interventions", [])))
    mismatches: list[str] = []
    actions: list[dict[str, Any]] = []
    obs, infos = env.reset(options={"episode": episode})
    for k, step in enumerate(record["actions"]):
        if not env.agents:
            mismatches.append(f"the episode ended after {k} actions; the record has {len(record['actions'])}")
            break
        turn = next((a for a, i in infos.items() if i.get("deciding")), None)
        if turn != step["agent"]:
            mismatches.append(f"action {k}: {turn} decides, the record has {step['agent']}")
        actions.append({"agent": turn, "action": step["action"]})
        action = _unfolded(step["action"])
        obs, _, _, _, infos = env.step({a: (action if a == turn else "") for a in env.agents})
    if env.agents:
        mismatches.append(f"the episode did not end after the {len(record['actions'])} recorded actions")
        env.close()
        return ReplayResult(str(record.get("episode_id")), False, tuple(mismatches))
    again = jsonable(episode_record(env, actions, infos[env.possible_agents[0]]))
    env.close()
    # The replay runs a one-episode pool, so the pool name is not compared; nor is the backend when overridden.
    labels = ("pool", "backend") if backend else ("pool",)
    recorded, replayed = _strip(jsonable(record)), _strip(again)
    for r in (recorded, replayed):
        r["env"] = {k: v for k, v in r["env"].items() if k not in labels}
    mismatches += compare(recorded, replayed)
    return ReplayResult(episode.id, not mismatches, tuple(mismatches), again)


def replay_file(path: str | os.PathLike[str], backend: str | None = None) -> list[ReplayResult]:
    """Replay every record of a JSONL trace file (one fresh env per record)."""
    return [replay(r, backend) for r in read_records(path)]


def pick_record(records: list[dict[str, Any]], episode_id: str | None) -> dict[str, Any]:
    """The record of ``episode_id`` (the first one when ``None``); ``ReplayError`` naming close ids if absent."""
    if not records:
        raise ReplayError("the trace holds no records")
    if episode_id is None:
        return records[0]
    for r in records:
        if r.get("episode_id") == episode_id:
            return r
    ids = [str(r.get("episode_id")) for r in records]
    close = difflib.get_close_matches(episode_id, ids, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else f"; it holds {ids[:3]}{' ...' if len(ids) > 3 else ''}"
    raise ReplayError(f"the trace has no episode {episode_id!r}{hint}")


def _overlong(value: Any) -> bool:
    """Whether ``value`` is how a trace keeps an overlong action (``session.traced``)."""
    return isinstance(value, dict) and set(value) == {"prefix", "characters", "sha256"}


def _unfolded(action: Any) -> Any:
    """A recorded action as the env is to get it again: an overlong one as its prefix padded to its length."""
    if _overlong(action):
        return str(action["prefix"]).ljust(int(action["characters"]))
    return action


def _strip(value: Any) -> Any:
    if _overlong(value):
        return {k: v for k, v in value.items() if k != "sha256"}  # a replay rebuilds only prefix and length
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def compare(recorded: Any, replayed: Any, where: str = "") -> list[str]:
    """Paths where two JSON values differ, e.g. ``trace[3].parse.self_plan[0]: 'a' != 'b'``."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        out = []
        for k in sorted(set(recorded) | set(replayed)):
            path = f"{where}.{k}" if where else k
            if k not in replayed:
                out.append(f"{path}: missing in the replay")
            elif k not in recorded:
                out.append(f"{path}: not in the record")
            else:
                out += compare(recorded[k], replayed[k], path)
        return out
    if isinstance(recorded, list) and isinstance(replayed, list):
        if len(recorded) != len(replayed):
            return [f"{where}: {len(recorded)} entries recorded, {len(replayed)} replayed"]
        return [m for i, (a, b) in enumerate(zip(recorded, replayed)) for m in compare(a, b, f"{where}[{i}]")]
    return [] if recorded == replayed else [f"{where}: {recorded!r:.80} != {replayed!r:.80}"]


__all__ = ["ReplayError", "ReplayResult", "VOLATILE", "compare", "episode_of", "pick_record", "read_records", "replay",
           "replay_file"]


def main(argv: list[str] | None = None) -> int:
    """``gencoord replay TRACE.jsonl [--backend sim|minecraft]``: exit 0 when every record replays identically.

    ``gencoord replay --show TRACE.jsonl [--episode ID]``: print one episode's accounting table, re-running nothing.
    """
    from rich.console import Console

    from gencoord_env.accounting import account, table
    from gencoord_env.commands.cli import Parser, add_env_arguments

    ap = Parser(prog="gencoord replay", description="re-run recorded episodes and check they match")
    ap.add_argument("trace", help="a JSONL file written by TraceRecorder (gencoord rollout --trace)")
    add_env_arguments(ap, {"backend": None}, notes={"backend": "default: the recorded backend"})
    ap.add_argument("--show", action="store_true",
                    help="print one recorded episode's accounting table instead of re-running (no env is built)")
    ap.add_argument("--episode", default=None, help="with --show: the episode id to show (default: the first record)")
    args = ap.parse_args(argv)
    console = Console()
    if args.episode is not None and not args.show:
        ap.error("--episode selects the episode for --show")
    if args.show:
        records = list(read_records(args.trace))
        try:
            record = pick_record(records, args.episode)
        except ReplayError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        console.print(table(account(record)))
        if args.episode is None and len(records) > 1:
            console.print(f"record 1 of {len(records)}; choose another with --episode ID")
        return 0
    results = replay_file(args.trace, backend=args.backend)
    bad = [r for r in results if not r.ok]
    for r in bad:
        console.print(f"[red]mismatch[/red] {r}")
    console.print(f"replayed {len(results)} episodes: {len(results) - len(bad)} match, {len(bad)} differ")
    return 1 if bad or not results else 0
