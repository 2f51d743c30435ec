"""A Minecraft trace replays as matching: ``tests/golden/traces_minecraft_v1.jsonl`` (three heldout episodes
of the rule agents, recorded by ``gencoord rollout --backend minecraft --trace``) re-runs on the live sidecar
and equals its record in everything the world did; the bots' timings and walk counts, which differ on every
run, are what ``gencoord_env.trace.what_happened`` leaves out (a plain comparison met them in every record)."""
from __future__ import annotations

from pathlib import Path

from gencoord_env.commands.replay import compare, read_records, replay
from gencoord_env.trace import jsonable

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "traces_minecraft_v1.jsonl"


def test_a_recorded_minecraft_trace_replays_as_matching(mc_world) -> None:
    from gencoord_env.world.minecraft import MinecraftWorld

    plain = []
    for record in read_records(GOLDEN):
        result = replay(record, world=MinecraftWorld(pool=mc_world.pool))
        assert result.ok, (record["episode_id"], result.mismatches)
        assert result.record["outcome"] == record["outcome"] == "SUCCESS"
        plain += compare(jsonable(record["trace"]), jsonable(result.record["trace"]))
    # compared plainly, the runs differ, and only in the events of the execution: the rule is not vacuous
    assert plain and all(".events[" in m for m in plain), plain
