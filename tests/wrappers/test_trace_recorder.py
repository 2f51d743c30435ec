from __future__ import annotations

import io
import json

from gencoord_env.agents.rollout import rollout
from gencoord_env.agents import make_policy

import gencoord_env
from gencoord_env.wrappers import RequestReplacement, TraceRecorder


def test_one_sorted_record_per_episode_with_every_stage(tmp_path):
    path = tmp_path / "trace.jsonl"
    env = TraceRecorder(RequestReplacement(gencoord_env.parallel_env(backend="sim", pool="request")), path)
    infos = rollout(env, make_policy("rule"), episodes=3)
    lines = path.read_text().splitlines()
    assert len(lines) == 3 == env.records_written
    rec = json.loads(lines[0])
    assert list(rec) == sorted(rec)
    assert rec["episode_id"] == infos[0]["episode_id"]
    assert rec["interventions"] == [{"name": "RequestReplacement", "args": {}}]
    assert [a["agent"] for a in rec["actions"]] == [s["agent"] for s in rec["trace"] if "action" in s]
    stages = [s["stage"] for s in rec["trace"]]
    assert stages == ["sender_initial", "intervention", "deliver", "receiver_after_request", "resolve",
                      "materialize", "compile", "execute", "verify"]
    assert rec["outcome"] == str(infos[0]["outcome"])
    # frozen dataclasses are objects of their fields, tasks their DSL text, GroundTruth included
    intervention = rec["trace"][1]
    assert intervention["replacement"]["target"] in ("agent_a", "agent_b")
    assert all(isinstance(t, str) and "(" in t for t in intervention["replacement"]["requested_plan"])
    assert rec["env"] == {"pool": "request", "backend": "sim", "route": "forward", "view": "full",
                          "surface": "dsl", "private_fact": "id", "actions": "text", "reward": "binary"}


def test_records_are_deterministic_apart_from_timings():
    def record(timings: bool = False) -> dict:
        buf = io.StringIO()
        env = gencoord_env.parallel_env(backend="sim", pool="heldout", timings=timings)
        rollout(TraceRecorder(env, buf), make_policy("rule"), episodes=1)
        return json.loads(buf.getvalue())

    assert record() == record()  # no wall-clock value anywhere unless asked for
    timed = record(timings=True)
    assert set(timed.pop("timings")) == {"episode_seconds", "time_to_commitment"}
    assert timed == record()
    verify = record()["trace"][-1]
    assert verify["stage"] == "verify" and set(verify["ground_truth"]) >= {"inventories", "containers", "sites"}
