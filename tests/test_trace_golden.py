"""Traces recorded before the trace records were typed still replay, and re-record byte for byte.

``tests/golden/traces_v1.jsonl`` was written by ``TraceRecorder`` (record version 1) with the rule agents on
the sim backend: every route, the json, node_only and freeform surfaces and views, every intervention,
the team pools, a parse failure and a contract reject. It is never regenerated: it is the format.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gencoord_env.accounting import account, table
from gencoord_env.commands.replay import read_records, replay
from gencoord_env.trace import WALL_CLOCK, dumps

GOLDEN = Path(__file__).parent / "golden" / "traces_v1.jsonl"
RECORDS = list(read_records(GOLDEN))


def _without_volatile(value):
    if isinstance(value, dict):
        return {k: _without_volatile(v) for k, v in value.items() if k not in WALL_CLOCK}
    if isinstance(value, list):
        return [_without_volatile(v) for v in value]
    return value


@pytest.mark.parametrize("record", RECORDS, ids=[f"{k}-{r['env']['route']}-{r['outcome']}" for k, r in enumerate(RECORDS)])
def test_a_recorded_trace_replays_and_re_records_the_same_line(record):
    result = replay(record)
    assert result.ok, result.mismatches
    again = dict(result.record, env={**result.record["env"], "pool": record["env"]["pool"]})
    assert dumps(_without_volatile(again)) == dumps(_without_volatile(record))


@pytest.mark.parametrize("record", RECORDS, ids=[f"{k}-{r['env']['route']}-{r['outcome']}" for k, r in enumerate(RECORDS)])
def test_a_recorded_trace_shows_its_accounting(record):
    acc = account(record)
    assert acc.episode_id == record["episode_id"]
    assert table(acc).row_count >= 6


def test_the_golden_file_covers_every_route_and_intervention():
    from gencoord_env.envs.gencoord.routes import ROUTES
    from gencoord_env.wrappers import INTERVENTIONS

    assert {r["env"]["route"] for r in RECORDS} == set(ROUTES)
    assert {i["name"] for r in RECORDS for i in r["interventions"]} == set(INTERVENTIONS)
    assert json.loads(GOLDEN.read_text().splitlines()[0])["version"] == 1
