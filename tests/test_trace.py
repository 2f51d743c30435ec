"""The episode trace is typed records (``gencoord_env.trace``) that read as their JSON layout."""
from __future__ import annotations

import pickle

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.lifecycle import DecisionStage
from gencoord_env.trace import (
    DecisionRecord,
    DeliverRecord,
    ResolveRecord,
    TraceRecord,
    VerifyRecord,
    dumps,
    jsonable,
)
from gencoord_env.types import Proposal


def _final_info(**kwargs) -> dict:
    env = gencoord_env.parallel_env(backend="sim", **kwargs)
    policy = make_policy("rule")
    obs, infos = env.reset(options={"index": 0})
    while env.agents:
        turn = next(a for a, i in infos.items() if i["deciding"])
        obs, _, _, _, infos = env.step({turn: policy.act(obs[turn], infos[turn])})
    return infos[env.possible_agents[0]]


def test_a_forward_episode_writes_typed_records_in_order():
    trace = _final_info(pool="heldout")["trace"]
    assert all(isinstance(r, TraceRecord) for r in trace)
    assert [type(r) for r in trace][:3] == [DecisionRecord, DeliverRecord, DecisionRecord]
    first = trace[0]
    assert first.stage is DecisionStage.SENDER_INITIAL and isinstance(first.parse, Proposal)
    assert first.violations == [] or first.violations == ()
    assert isinstance(trace[-1], VerifyRecord) and any(isinstance(r, ResolveRecord) for r in trace)


def test_a_record_reads_as_its_layout_and_keeps_absent_keys_out():
    deliver = DeliverRecord("REQ agent_b -", None)
    assert deliver == {"stage": "deliver", "sent": "REQ agent_b -", "delivered": None}
    assert "copies" not in deliver and deliver.get("edge") is None and deliver["delivered"] is None
    assert dumps(deliver) == '{"delivered":null,"sent":"REQ agent_b -","stage":"deliver"}'


def test_records_survive_pickling_as_ray_workers_send_them():
    trace = _final_info(pool="heldout", route="single_step")["trace"]
    again = pickle.loads(pickle.dumps(trace))
    assert [jsonable(r) for r in again] == [jsonable(r) for r in trace]
