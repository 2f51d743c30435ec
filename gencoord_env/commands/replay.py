"""Re-run recorded episodes and check that they reproduce their trace, or show one episode's accounting.

A ``TraceRecorder`` record names the episode (cluster and role permutation), the env's arguments, the
intervention stack and the deciding agents' actions. ``replay`` rebuilds that env on that single episode,
feeds the recorded actions in order and compares what comes out with what was recorded: the deciding
agent at every step, the outcome, the reason, the metrics and every stage record of the trace (including
each observation the agents saw), less what measures time or motion rather than the world, by the one rule
the arena runner's check uses too (``gencoord_env.trace.what_happened``: wall-clock values, each event's
duration and executor action counts, the order in which two bots' calls finished), so a Minecraft trace
replays as matching when the bots did the same to the world. Nor is the hash of an overlong action compared,
which the record keeps as prefix, length and hash: it replays as its prefix padded to its length, refused for
that length as the original was.

A trace is read in bounded pieces before anything is parsed: a line over ``MAX_RECORD_BYTES``, a file over
``MAX_TRACE_BYTES`` or an overlong action claiming over ``MAX_REPLAYED_CHARACTERS`` is a ``ReplayError``
naming where and the bound, not memory spent on a crafted record.

``gencoord replay --show TRACE.jsonl [--episode ID]`` re-runs nothing: it prints one recorded episode's
runtime accounting (:mod:`gencoord_env.accounting`).

>>> from gencoord_env.commands.replay import replay_file
>>> results = replay_file("trace.jsonl")            # doctest: +SKIP
>>> all(r.ok for r in results)                      # doctest: +SKIP
True
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gencoord_env.errors import DataError
from gencoord_env.suggest import close_matches
from gencoord_env.tasks.episode import Cluster, Episode
from gencoord_env.wrappers import apply
from gencoord_env.trace import jsonable, what_happened
from gencoord_env.wrappers.trace_recorder import RECORD_VERSION, episode_record

#: The largest trace line read (one episode's record: a Minecraft record of the heldout pool is about 11 KB,
#: a team pool's under 100 KB; JSON of small values costs up to ~25 times its bytes once parsed).
MAX_RECORD_BYTES = 4 * 2**20
#: The largest trace file read (records are read and replayed one at a time; this bounds the time spent).
MAX_TRACE_BYTES = 4 * 2**30
#: The longest overlong action a replay rebuilds (it is refused unread, but must be that long to be refused
#: for its length as the original was).
MAX_REPLAYED_CHARACTERS = 16 * 2**20


class ReplayError(DataError):
    """A record that cannot be replayed (wrong version, missing fields); the message says which."""


@dataclass(frozen=True)
class ReplayResult:
    episode_id: str
    ok: bool
    mismatches: tuple[str, ...] = ()
    record: Mapping[str, Any] = field(default_factory=dict, repr=False)  # the re-run's own record


def read_records(path: str | os.PathLike[str], *, max_record_bytes: int = MAX_RECORD_BYTES,
                 max_trace_bytes: int = MAX_TRACE_BYTES) -> Iterator[dict[str, Any]]:
    """The records of a JSONL trace file, one per non-empty line, read one at a time; a file or line over its
    bound, or a line that is not one JSON object, is a ``ReplayError`` naming the file and line."""
    where = os.fspath(path)
    size = os.path.getsize(path)  # a missing file is a FileNotFoundError, as for any file the commands read
    if size > max_trace_bytes:
        raise ReplayError(f"{where} is {size:,} bytes; a trace is read up to {max_trace_bytes:,} bytes: "
                          "split it (one JSON record per line) and replay the parts")
    with open(path, "rb") as f:
        n = 0
        while line := f.readline(max_record_bytes + 1):
            n += 1
            if len(line) > max_record_bytes:
                raise ReplayError(f"{where}:{n}: a line over {max_record_bytes:,} bytes; a trace record "
                                  "(one episode) is far smaller: this is not a trace written by TraceRecorder")
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError) as e:  # bad JSON or UTF-8, an over-long integer, deep nesting
                raise ReplayError(f"{where}:{n}: not a JSON record ({getattr(e, 'msg', None) or e})") from None
            if not isinstance(record, dict):
                raise ReplayError(f"{where}:{n}: a JSON {type(record).__name__}, not a record (an object)")
            yield record


def episode_of(record: Mapping[str, Any]) -> Episode:
    """The episode a record names."""
    try:
        return Episode(Cluster(**record["episode"]["cluster"]), int(record["episode"]["perm"]))
    except (KeyError, TypeError, ValueError) as e:
        raise ReplayError(f"record {record.get('episode_id')!r:.80} does not name an episode: {e!s:.200}") from None


def replay_env(record: Mapping[str, Any], backend: str | None = None, world: Any = None,
               **env_kwargs: Any) -> tuple[Any, Episode, list[dict[str, Any]]]:
    """(the env the record was played in, on its one episode and wrapped in its interventions; the episode;
    the recorded actions), checked before any env starts; ``env_kwargs`` add env arguments (``render_mode``)."""
    import gencoord_env

    if record.get("version") != RECORD_VERSION:
        raise ReplayError(f"trace record version {record.get('version')!r} is not supported; expected {RECORD_VERSION}")
    episode = episode_of(record)
    cfg, steps = record.get("env"), record.get("actions")
    if not isinstance(cfg, dict) or not isinstance(steps, list) or \
            not all(isinstance(s, dict) and {"agent", "action"} <= set(s) for s in steps):
        raise ReplayError(f"record {record.get('episode_id')!r:.80} needs env (a map of the env's arguments) and "
                          "actions (a list of {agent, action})")
    for k, step in enumerate(steps):  # before any env starts
        _check_overlong(step["action"], f"record {record.get('episode_id')!r:.80}, action {k}")
    try:
        env = gencoord_env.parallel_env(
            pool=[episode], backend=backend or cfg["backend"], route=cfg["route"], view=cfg["view"],
            surface=cfg["surface"], private_fact=cfg["private_fact"], world=world, actions=cfg.get("actions", "text"),
            reward=cfg.get("reward", "binary"), **env_kwargs,
        )
    except KeyError as e:
        raise ReplayError(f"record {record.get('episode_id')!r:.80}: its env lacks {e}") from None
    return apply(env, list(record.get("interventions", []))), episode, steps


def replay(record: Mapping[str, Any], backend: str | None = None, world: Any = None) -> ReplayResult:
    """Re-run one record with its recorded actions; ``backend`` overrides the recorded backend."""
    env, episode, steps = replay_env(record, backend, world)
    mismatches: list[str] = []
    actions: list[dict[str, Any]] = []
    obs, infos = env.reset(options={"episode": episode})
    for k, step in enumerate(steps):
        if not env.agents:
            mismatches.append(f"the episode ended after {k} actions; the record has {len(steps)}")
            break
        turn = next((a for a, i in infos.items() if i.get("deciding")), None)
        if turn != step["agent"]:
            mismatches.append(f"action {k}: {turn} decides, the record has {step['agent']}")
        actions.append({"agent": turn, "action": step["action"]})
        action = unfolded(step["action"])
        obs, _, _, _, infos = env.step({a: (action if a == turn else "") for a in env.agents})
    if env.agents:
        mismatches.append(f"the episode did not end after the {len(steps)} recorded actions")
        env.close()
        return ReplayResult(str(record.get("episode_id")), False, tuple(mismatches))
    again = jsonable(episode_record(env, actions, infos[env.possible_agents[0]]))
    env.close()
    # The replay runs a one-episode pool, so the pool name is not compared; nor is the backend when overridden.
    labels = ("pool", "backend") if backend else ("pool",)
    recorded, replayed = what_happened(_strip(jsonable(record))), what_happened(_strip(again))
    for r in (recorded, replayed):
        r["env"] = {k: v for k, v in r["env"].items() if k not in labels}
    mismatches += compare(recorded, replayed)
    return ReplayResult(episode.id, not mismatches, tuple(mismatches), again)


def replay_file(path: str | os.PathLike[str], backend: str | None = None) -> list[ReplayResult]:
    """Replay every record of a JSONL trace file, one fresh env per record; the records replayed on Minecraft
    share one sidecar (each its own world on a fresh arena), started at the first of them."""
    results = []
    pool = None
    try:
        for record in read_records(path):
            world = None
            if (backend or (record.get("env") or {}).get("backend")) == "minecraft":
                from gencoord_env.world.minecraft import MinecraftWorld, SidecarPool

                pool = pool or SidecarPool()
                world = MinecraftWorld(pool=pool)
            try:
                results.append(replay(record, backend, world))
            finally:
                if world is not None:
                    world.close()
    finally:
        if pool is not None:
            pool.close()
    return results


def play_pictured(record: Mapping[str, Any], backend: str | None = None) -> dict[str, Any]:
    """Play ``record`` again with its actions, picturing each decision: the episode, frames (caption, PNG bytes), the
    final infos and mismatches (``episode_page.page`` shows them)."""
    from gencoord_env.envs.gencoord.picture import png

    env, episode, steps = replay_env(record, backend, render_mode="rgb_array")
    try:
        obs, infos = env.reset(options={"episode": episode})
        frames = [("after the reset", png(env.render()))]
        mismatches = []
        for k, step in enumerate(steps):
            turn = next((a for a, i in infos.items() if i.get("deciding")), None)
            if turn is None:
                mismatches.append(f"the episode ended after {k} actions; the record has {len(steps)}")
                break
            if turn != step["agent"]:
                mismatches.append(f"action {k}: {turn} decides, the record has {step['agent']}")
            stage = infos[turn].get("stage")
            obs, _, _, _, infos = env.step({a: (unfolded(step["action"]) if a == turn else "") for a in env.agents})
            frames.append((f"after {turn}'s decision ({stage})", png(env.render())))
        final = infos[env.unwrapped.possible_agents[0]]
        if env.agents:
            mismatches.append(f"the episode did not end after the {len(steps)} recorded actions")
        elif str(final.get("outcome")) != str(record.get("outcome")):
            mismatches.append(f"outcome {final.get('outcome')} replayed, {record.get('outcome')} recorded")
    finally:
        env.close()
    return {"episode": episode, "frames": frames, "final": final, "mismatches": mismatches}


def pick_record(records: Iterable[dict[str, Any]], episode_id: str | None) -> dict[str, Any]:
    """The record of ``episode_id`` (the first one when ``None``); ``ReplayError`` naming close ids if absent.
    Records are read until the one asked for: a trace need not fit in memory."""
    ids: list[str] = []
    for r in records:
        if episode_id is None or r.get("episode_id") == episode_id:
            return r
        if len(ids) < 10_000:  # enough for a suggestion
            ids.append(str(r.get("episode_id"))[:200])
    if episode_id is None or not ids:
        raise ReplayError("the trace holds no records")
    close = close_matches(episode_id, ids, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else f"; it holds {ids[:3]}{' ...' if len(ids) > 3 else ''}"
    raise ReplayError(f"the trace has no episode {episode_id!r}{hint}")


def _overlong(value: Any) -> bool:
    """Whether ``value`` is how a trace keeps an overlong action (``session.traced``)."""
    return isinstance(value, dict) and set(value) == {"prefix", "characters", "sha256"}


def _check_overlong(action: Any, where: str) -> None:
    """An overlong action's length must be one a replay can rebuild."""
    if _overlong(action):
        characters = action["characters"]
        if type(characters) is not int or not len(str(action["prefix"])) <= characters <= MAX_REPLAYED_CHARACTERS:
            raise ReplayError(f"{where}: an overlong action of {characters!r:.40} characters; a replay rebuilds one "
                              f"of at most {MAX_REPLAYED_CHARACTERS:,} characters, no shorter than its prefix")


def unfolded(action: Any) -> Any:
    """A recorded action as the env is to get it again: an overlong one as its prefix padded to its length."""
    if _overlong(action):
        return str(action["prefix"]).ljust(action["characters"])
    return action


def _strip(value: Any) -> Any:
    """``value`` less the hashes of overlong actions (a replay rebuilds only prefix and length)."""
    if _overlong(value):
        return {k: v for k, v in value.items() if k != "sha256"}
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items()}
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


__all__ = ["MAX_RECORD_BYTES", "MAX_REPLAYED_CHARACTERS", "MAX_TRACE_BYTES", "ReplayError", "ReplayResult", "compare", "episode_of", "pick_record", "play_pictured", "read_records", "replay",
           "replay_env", "replay_file", "unfolded"]


def main(argv: list[str] | None = None) -> int:
    """``gencoord replay TRACE.jsonl [--backend sim|minecraft]``: exit 0 when every record replays identically.

    ``gencoord replay --show TRACE.jsonl [--episode ID]``: print one episode's accounting table, re-running nothing.
    ``gencoord replay --html TRACE.jsonl [--episode ID] [--out PAGE.html]``: the episode as an HTML page
    (``gencoord_env.commands.episode_page``).
    """
    from rich.console import Console

    from gencoord_env.accounting import account, table
    from gencoord_env.commands.cli import Parser, add_env_arguments

    ap = Parser(prog="gencoord replay", description="re-run recorded episodes and check they match")
    ap.add_argument("trace", help="a JSONL file written by TraceRecorder (gencoord rollout --trace)")
    add_env_arguments(ap, {"backend": None}, notes={"backend": "default: the recorded backend"})
    ap.add_argument("--show", action="store_true",
                    help="print one recorded episode's accounting table instead of re-running (no env is built)")
    ap.add_argument("--html", action="store_true",
                    help="write one recorded episode as a self-contained HTML page: frames, transcripts, the trace")
    ap.add_argument("--out", default=None, help="with --html: the page's file (default: TRACE with .html)")
    ap.add_argument("--episode", default=None, help="with --show or --html: the episode id (default: the first record)")
    args = ap.parse_args(argv)
    console = Console()
    if args.episode is not None and not (args.show or args.html):
        ap.error("--episode selects the episode for --show or --html")
    if args.out is not None and not args.html:
        ap.error("--out names the page of --html")
    if args.html:
        from pathlib import Path

        from gencoord_env.commands.episode_page import page

        try:
            record = pick_record(read_records(args.trace), args.episode)
            out = Path(args.out) if args.out else Path(args.trace).with_suffix(".html")
            out.write_text(page(record, play_pictured(record, args.backend)), encoding="utf-8")
        except ReplayError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        console.print(f"wrote {out} ({record.get('episode_id')})")
        return 0
    if args.show:
        records = read_records(args.trace)
        try:
            record = pick_record(records, args.episode)
            more = sum(1 for _ in records) if args.episode is None else 0
        except ReplayError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        console.print(table(account(record)))
        if more:
            console.print(f"record 1 of {more + 1}; choose another with --episode ID")
        return 0
    results = replay_file(args.trace, backend=args.backend)
    bad = [r for r in results if not r.ok]
    for r in bad:
        console.print(f"[red]mismatch[/red] {r}")
    console.print(f"replayed {len(results)} episodes: {len(results) - len(bad)} match, {len(bad)} differ")
    return 1 if bad or not results else 0
