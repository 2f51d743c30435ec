"""Team pools in the ParallelEnv: n agents, every template x binding x rotation solved by the rule agents on
the sim, PettingZoo's API tests, per-edge accounting and the options a team refuses."""
from __future__ import annotations

import re
from collections import Counter

import pytest
from pettingzoo.test import api_test, parallel_api_test

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.agents.rollout import run_episode
from gencoord_env.dsl import parse
from gencoord_env.envs.gencoord.menu import menu_size
from gencoord_env.outcomes import FailureCode
from gencoord_env.tasks import prior


@pytest.mark.parametrize("pool,route", [("teams", "forward"), ("teams", "centralized"), ("team_feedback", "feedback"),
                                        ("team_feedback", "centralized"), ("chain4", "forward"), ("chain5", "forward"),
                                        ("chain5", "centralized")])
def test_rule_agents_solve_every_template_binding_and_rotation(pool: str, route: str) -> None:
    env = gencoord_env.parallel_env(pool=pool, backend="sim", route=route)
    policy = make_policy("rule")
    seen: Counter[tuple[str, str, int]] = Counter()
    for k, ep in enumerate(env.episodes):
        info = run_episode(env, policy, index=k)
        assert info["outcome"] is FailureCode.SUCCESS, (ep.id, info["reason"])
        assert info["metrics"]["handoff_verified"] and info["metrics"]["agents"] == len(ep.agents)
        seen[(ep.template.id, ep.binding, ep.perm)] += 1
    templates = {e.template.id for e in env.episodes}
    assert len(seen) == sum(len(prior().template(t).bindings) * len(prior().template(t).roles) for t in templates)


@pytest.mark.parametrize("route", ["feedback", "centralized"])
def test_the_random_agent_plans_one_branch_per_fact(route: str) -> None:
    """A random team agent draws one value of each fact; merged with a branch it was asked for or countered,
    it once planned both (six tasks: the serializer refused the record and the episode raised)."""
    env = gencoord_env.parallel_env(pool="team_feedback", backend="sim", route=route)
    outcomes = Counter(str(run_episode(env, make_policy("random", seed=k), index=k)["outcome"])
                       for k in range(len(env.episodes)))
    assert sum(outcomes.values()) == len(env.episodes) and outcomes["SUCCESS"] > 0, outcomes


def test_a_team_env_has_n_agents_and_a_record_addresses_several_peers() -> None:
    env = gencoord_env.parallel_env(pool="teams", backend="sim")
    assert env.possible_agents == ["agent_a", "agent_b", "agent_c"]
    obs, infos = env.reset(options={"index": 0})  # chain, rotation 0: agent_a is the sender
    assert env.agents == ["agent_a", "agent_b", "agent_c"] and set(obs) == set(env.agents)
    assert "TEAM sender=agent_a crafter=agent_b courier=agent_c" in obs["agent_a"]
    record = make_policy("rule").act(obs["agent_a"], infos["agent_a"])
    assert [r.target for r in parse(record, max_requests=2).peer_requests] == ["agent_b", "agent_c"]
    obs, _, _, _, infos = env.step({"agent_a": record})
    assert infos["agent_b"]["deciding"] and "MESSAGE REQ from agent_a:" in obs["agent_b"]
    assert [m.sender for m in env.unwrapped.session.progress.inbox["agent_c"]] == ["agent_a"]  # the courier's, too


def test_per_edge_bytes_add_up_to_the_wire_bytes() -> None:
    env = gencoord_env.parallel_env(pool="teams", backend="sim")
    info = run_episode(env, make_policy("rule"), index=3)  # relay
    edges = info["metrics"]["edges"]
    assert sum(e["bytes"] for e in edges) == info["metrics"]["wire_bytes"] == info["metrics"]["request_bytes"]
    assert {(e["kind"], e["round"]) for e in edges} >= {("request", 1)}
    relay = next(k for k, e in enumerate(env.episodes) if e.template.id == "relay")
    info = run_episode(env, make_policy("rule"), index=relay)
    assert sorted(e["round"] for e in info["metrics"]["edges"]) == [1, 2]  # the relay passes it on in round 2


def test_two_agent_metrics_keep_their_keys() -> None:
    info = run_episode(gencoord_env.parallel_env(pool="heldout", backend="sim"), make_policy("rule"), index=0)
    assert "edges" not in info["metrics"] and "failed_edge" not in info["metrics"]


@pytest.mark.parametrize("pool,route,kw", [
    ("teams", "forward", {}), ("teams", "forward", {"actions": "menu", "observations": "tokens"}),
    ("team_feedback", "feedback", {"actions": "menu", "observations": "bag"}), ("chain5", "centralized", {}),
])
def test_parallel_api_on_team_pools(pool: str, route: str, kw: dict) -> None:
    parallel_api_test(gencoord_env.parallel_env(pool=pool, backend="sim", route=route, **kw), num_cycles=40)


def test_aec_api_on_a_team_pool() -> None:
    api_test(gencoord_env.env(pool="teams", backend="sim", actions="menu", observations="tokens"), num_cycles=30)


@pytest.mark.parametrize("pool,route", [("teams", "forward"), ("team_feedback", "feedback"), ("chain5", "centralized")])
def test_the_rule_record_is_always_on_the_team_menu(pool: str, route: str) -> None:
    env = gencoord_env.parallel_env(pool=pool, backend="sim", route=route, actions="menu")
    assert env.action_space("agent_a").n == menu_size()  # one N for every pool
    policy = make_policy("rule")
    for k in range(0, len(env.episodes), 5):
        obs, infos = env.reset(options={"index": k})
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            wanted = policy.act(env.observation_text(turn), infos[turn])
            slot = infos[turn]["candidates"].index(wanted)
            assert obs[turn]["action_mask"][slot] == 1
            obs, _, _, _, infos = env.step({turn: slot})
        assert infos["agent_a"]["outcome"] is FailureCode.SUCCESS


def test_a_record_to_a_peer_without_a_channel_is_a_contract_reject() -> None:
    env = gencoord_env.parallel_env(pool="teams", backend="sim")
    relay = next(k for k, e in enumerate(env.episodes) if e.template.id == "relay" and e.perm == 0)
    env.reset(options={"index": relay})
    _, _, _, _, infos = env.step({"agent_a": "SELF -\nREQ agent_c resource.deliver(q=1,item=oak_planks,dst=chest_a)"})
    assert infos["agent_a"]["outcome"] is FailureCode.CONTRACT_REJECT
    assert "expected one non-empty REQ to each of agent_b (its channels)" in infos["agent_a"]["reason"]


def test_a_two_agent_env_still_refuses_a_second_request_line() -> None:
    env = gencoord_env.parallel_env(pool="heldout", backend="sim")
    obs, infos = env.reset(options={"index": 0})
    sender = next(a for a, i in infos.items() if i["deciding"])
    _, _, _, _, infos = env.step({sender: "SELF -\nREQ agent_b control.wait()\nREQ agent_c control.wait()"})
    assert infos[sender]["outcome"] is FailureCode.PARSE_FAILURE


@pytest.mark.parametrize("kwargs,message", [
    ({"route": "single_step"}, "route 'single_step' has no team form"),
    ({"surface": "freeform"}, "a team pool runs 'dsl' or 'json'"),
])
def test_team_pools_refuse_what_has_no_team_form(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        gencoord_env.parallel_env(pool="teams", backend="sim", **kwargs)


def test_the_json_surface_carries_a_team_record() -> None:
    env = gencoord_env.parallel_env(pool="teams", backend="sim", surface="json")
    info = run_episode(env, make_policy("rule_json"), index=0)
    assert info["outcome"] is FailureCode.SUCCESS
