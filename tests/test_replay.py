from __future__ import annotations

import copy
import io
import json
import re
import tracemalloc
from pathlib import Path

import pytest
from gencoord_env.agents.rollout import rollout
from gencoord_env.agents import make_policy

import gencoord_env
from gencoord_env.commands.replay import (MAX_RECORD_BYTES, MAX_REPLAYED_CHARACTERS, ReplayError, read_records, replay,
                                 replay_file)
from gencoord_env.trace import what_happened
from gencoord_env.wrappers import CounterfactualFeedback, TraceRecorder, UnreliableChannel


def test_round_trip_through_a_file(tmp_path):
    path = tmp_path / "t.jsonl"
    env = TraceRecorder(UnreliableChannel(gencoord_env.parallel_env(backend="sim", pool="request"), drop=0.3, duplicate=0.3, seed=2), path)
    rollout(env, make_policy("rule"), episodes=8)
    results = replay_file(path)
    assert len(results) == 8 and all(r.ok for r in results), [r.mismatches for r in results]


def test_round_trip_feedback_route_with_counterfactual_response():
    buf = io.StringIO()
    env = TraceRecorder(CounterfactualFeedback(gencoord_env.parallel_env(backend="sim", pool="goal_capability", route="feedback")), buf)
    rollout(env, make_policy("rule"), episodes=2)
    for line in buf.getvalue().splitlines():
        result = replay(json.loads(line))
        assert result.ok, result.mismatches


def _record() -> dict:
    buf = io.StringIO()
    rollout(TraceRecorder(gencoord_env.parallel_env(backend="sim", pool="heldout"), buf), make_policy("rule"), episodes=1)
    return json.loads(buf.getvalue())


def test_a_changed_action_is_reported():
    rec = _record()
    rec["actions"][1]["action"] = "SELF -\nREQ -"  # the receiver now answers nothing
    result = replay(rec)
    assert not result.ok
    assert any(m.startswith("outcome:") for m in result.mismatches)
    assert any(m.startswith("trace") for m in result.mismatches)


def test_a_missing_intervention_is_reported():
    buf = io.StringIO()
    from gencoord_env.wrappers import RequestRemoval

    rollout(TraceRecorder(RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="request")), buf), make_policy("rule"), episodes=1)
    rec = json.loads(buf.getvalue())
    rec["interventions"] = []
    assert not replay(rec).ok


def test_unsupported_version_raises():
    rec = _record()
    rec["version"] = 99
    with pytest.raises(ReplayError, match="version 99 is not supported"):
        replay(rec)


# ---- one rule for what two runs share, on a real Minecraft record --------------------------------------

MINECRAFT = Path(__file__).parent / "golden" / "traces_minecraft_v1.jsonl"


def _mc_record() -> dict:
    return next(read_records(MINECRAFT))


def _events(record: dict) -> list[dict]:
    return next(s for s in record["trace"] if s["stage"] == "execute")["events"]


def test_timings_walk_counts_and_event_order_are_not_what_happened() -> None:
    rec, other = _mc_record(), copy.deepcopy(_mc_record())
    events = _events(other)
    assert any("ms" in e["data"] for e in events) and any(e.get("actions") for e in events)
    for e in events:
        e["data"]["ms"] = e["data"].get("ms", 0) + 777
        e["actions"] = {k: v + 3 for k, v in e.get("actions", {}).items()}
    events.reverse()
    other["timings"] = {"episode_seconds": 99.0, "time_to_commitment": 9.0}
    assert what_happened(other) == what_happened(rec)


@pytest.mark.parametrize("change", ["ok", "reason", "op", "station", "ground_truth", "metrics", "observation"])
def test_what_the_world_did_is_compared(change: str) -> None:
    rec, other = _mc_record(), copy.deepcopy(_mc_record())
    event = _events(other)[0]
    if change == "ok":
        event["ok"] = False
    elif change == "reason":
        event["reason"] = "path blocked"
    elif change == "op":
        event["op"] = "deposit"
    elif change == "station":
        event["data"]["station"] = "source_a"
    elif change == "ground_truth":
        next(s for s in other["trace"] if s["stage"] == "verify")["ground_truth"]["inventories"]["agent_a"]["dirt"] = 3
    elif change == "metrics":
        other["metrics"]["decisions"] += 1
    else:
        other["trace"][0]["observation"] += " "
    assert what_happened(other) != what_happened(rec)


def test_the_arena_runners_comparison_is_the_same_rule() -> None:
    from gencoord_env.commands.arenas import comparable

    rec = _mc_record()
    assert comparable(rec) == what_happened({k: rec[k] for k in ("outcome", "reason", "episode_id", "metrics", "trace")})


# ---- bounds before parsing ----------------------------------------------------------------------------

def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    return path


@pytest.mark.parametrize("line, message", [
    ("[" * 100_000, "t.jsonl:1: not a JSON record (maximum recursion depth"),
    ('{"a": ' + "9" * 5000 + "}", "t.jsonl:1: not a JSON record (Exceeds the limit (4300 digits)"),
    ("[1, 2]", "t.jsonl:1: a JSON list, not a record (an object)"),
    ("{not json", "t.jsonl:1: not a JSON record (Expecting property name"),
])
def test_a_line_that_is_not_a_record_is_named(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(ReplayError, match=re.escape(message)):
        list(read_records(_write(tmp_path, line + "\n")))


def test_an_overlong_line_is_refused_before_it_is_read_whole(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"a": "' + "x" * 5000 + '"}\n')
    records = read_records(path, max_record_bytes=4096)
    with pytest.raises(ReplayError, match=re.escape("t.jsonl:1: a line over 4,096 bytes; a trace record")):
        next(records)
    # the default bound on a line five times over it: the refusal reads no more than the bound
    path.write_text('"' + "x" * (5 * MAX_RECORD_BYTES) + '"\n')
    tracemalloc.start()
    with pytest.raises(ReplayError, match="a line over 4,194,304 bytes"):
        list(read_records(path))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 3 * MAX_RECORD_BYTES, peak


def test_an_overlong_file_is_refused_before_a_line_is_read(tmp_path: Path) -> None:
    path = _write(tmp_path, "{}\n" * 100)
    with pytest.raises(ReplayError, match=re.escape("t.jsonl is 300 bytes; a trace is read up to 200 bytes: split it")):
        next(read_records(path, max_trace_bytes=200))


@pytest.mark.parametrize("characters", [10**9, -1, "1000", 0])
def test_an_overlong_action_claiming_an_unbuildable_length_costs_nothing(characters: object) -> None:
    """A crafted 10 KB record whose overlong action claims 10**9 characters cost 1 GB of memory to replay."""
    rec = _record()
    rec["actions"][0]["action"] = {"prefix": "SELF", "characters": characters, "sha256": "0" * 64}
    tracemalloc.start()
    with pytest.raises(ReplayError, match=re.escape(f"action 0: an overlong action of {characters!r} characters; "
                                                    f"a replay rebuilds one of at most {MAX_REPLAYED_CHARACTERS:,}")):
        replay(rec)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20 * 2**20, peak


def test_a_record_without_actions_or_env_is_named() -> None:
    rec = _record()
    del rec["actions"]
    with pytest.raises(ReplayError, match=re.escape("needs env (a map of the env's arguments) and actions")):
        replay(rec)
    rec = _record()
    del rec["env"]["route"]
    with pytest.raises(ReplayError, match=re.escape("its env lacks 'route'")):
        replay(rec)
