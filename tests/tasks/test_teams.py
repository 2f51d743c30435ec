"""Team templates: the data, the generated chain family, and paired views over the team pools the env serves.

Every agent without a fact must see byte-identical observations - text and infos - across the clusters of
a matched set that differ only in facts it does not hold, until a message arrives.
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.tasks import TEAM_POOLS, pool, pool_episodes, prior
from gencoord_env.tasks.episode import branch_values
from gencoord_env.tasks.prior import raw_tasks
from gencoord_env.tasks.team_chain import chain_raw
from gencoord_env.wrappers import RequestRemoval

TEMPLATES = ("chain", "relay", "fan_in", "workcells")


def test_team_templates_name_their_roles_channels_and_facts() -> None:
    p = prior()
    chain, relay, fan_in, workcells = (p.template(t) for t in TEMPLATES)
    assert chain.roles == ("sender", "crafter", "courier")
    assert chain.message_edges == (("sender", "crafter"), ("sender", "courier"))
    assert relay.message_edges == (("sender", "relay"), ("relay", "receiver"))
    assert fan_in.message_edges == (("wood_sender", "builder"), ("stone_sender", "builder"))
    assert [f.holder for f in fan_in.fact_factors] == ["wood_sender", "stone_sender"]
    assert fan_in.bindings == ("STORAGE_BRANCH+SITE_A", "STORAGE_BRANCH+SITE_B", "WORK_BRANCH+SITE_A", "WORK_BRANCH+SITE_B")
    assert [f.holder for f in workcells.fact_factors] == ["first_peer", "second_peer"]
    assert not set(p.teams) & set(p.templates)  # the paper's suites are untouched


def test_the_chain_family_grows_the_hand_written_chain() -> None:
    chain = raw_tasks()["teams"]["chain"]
    assert chain_raw(chain, 3) == chain
    five = prior().template("chain_5")
    assert five.roles == ("sender", "crafter", "carrier_1", "carrier_2", "courier")
    assert len(five.message_edges) == 4 and all(a == "sender" for a, _ in five.message_edges)
    ep = pool_episodes("chain5")[0]
    assert len(ep.handoff_edges) == 4 and [b for _, b in ep.handoff_edges] == [ep.agent_of[r] for r in five.roles[1:]]
    with pytest.raises(ValueError, match="at least three agents"):
        chain_raw(chain, 2)


def test_rotations_give_every_agent_every_role_once() -> None:
    for name in TEAM_POOLS:
        episodes = pool_episodes(name)
        first = episodes[: len(episodes[0].roles)]
        assert [e.perm for e in first] == list(range(len(first)))
        for role in first[0].roles:
            assert sorted(e.agent_of[role] for e in first) == list(first[0].agents)


def test_matched_sets_hold_every_binding_of_a_public_instance() -> None:
    for name in TEAM_POOLS:
        sets: dict[tuple, set[str]] = defaultdict(set)
        for c in pool(name):
            sets[c.pair_key].add(c.binding)
        for key, bindings in sets.items():
            assert bindings == set(prior().template(key[0]).bindings), key


def test_a_fact_holder_sees_its_own_fact_only() -> None:
    for ep in pool_episodes("teams")[::7]:
        values = branch_values(ep.binding)
        for f, value in zip(ep.template.fact_factors, values):
            assert ep.private_fields(ep.agent_of[f.holder]) == {"active_binding_id": value}
        holders = {ep.agent_of[f.holder] for f in ep.template.fact_factors}
        assert all(ep.private_fields(a) == {} for a in ep.agents if a not in holders)


def test_two_agent_worlds_hold_no_team_station_or_bot() -> None:
    ep = pool_episodes("heldout")[0]
    assert set(ep.world.positions) == {"agent_a", "agent_b"}
    assert not {s.name for s in ep.world.stations} & {"source_c", "bench", "workcell1_table"}


ROUTE = {"teams": "forward", "team_feedback": "feedback", "chain3": "forward", "chain4": "forward", "chain5": "forward"}


def _views(name: str) -> list[tuple[Any, str, str, tuple[str, ...], str]]:
    """(matched set, agent's rotation slot, agent's role, the facts it holds, its first view as text + infos)
    for every agent at its first decision, every request removed (what it sees before any message)."""
    env: Any = gencoord_env.parallel_env(pool=name, backend="sim", route=ROUTE[name])
    if ROUTE[name] == "forward":
        env = RequestRemoval(env)
    policy = make_policy("rule")
    out = []
    for k in range(len(env.unwrapped.episodes)):
        obs, infos = env.reset(options={"index": k})
        ep = env.unwrapped.session.episode
        seen: set[str] = set()
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            if turn not in seen:
                seen.add(turn)
                info = {key: v for key, v in infos[turn].items() if key != "episode_id"}
                held = tuple(sorted(ep.private_fields(turn).values()))
                out.append((ep.cluster.pair_key, ep.perm, ep.role_of[turn], held,
                            obs[turn] + "\n" + json.dumps(info, sort_keys=True, default=str)))
            obs, _, _, _, infos = env.step({turn: policy.act(obs[turn], infos[turn])})
    return out


@pytest.mark.parametrize("name", ["teams", "team_feedback"])
def test_agents_see_the_same_views_across_facts_they_do_not_hold(name: str) -> None:
    groups: dict[tuple, set[str]] = defaultdict(set)
    bindings: dict[tuple, int] = defaultdict(int)
    for pair, perm, role, held, view in _views(name):
        groups[(pair, perm, role, held)].add(view)
        bindings[(pair, perm, role, held)] += 1
    assert groups
    for key, views in groups.items():
        assert len(views) == 1, key
    # the uninformed agents of each matched set share one view across all its bindings
    uninformed = [k for k in groups if not k[3]]
    assert uninformed and all(bindings[k] == len(prior().template(k[0][0]).bindings) for k in uninformed)
