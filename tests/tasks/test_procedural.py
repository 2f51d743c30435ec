"""Procedural tasks: seeded, matched pairs, executable by the rule agents, never the held-out material.

Every check runs on what ``procedural_episodes`` actually serves (through the env where the property is
about the env), except the large disjointness sample, which runs on the template draws themselves: a
served template is always one of these draws, so disjointness of the draws covers it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

import gencoord_env
from gencoord_env import caches
from gencoord_env.agents import make_policy
from gencoord_env.catalog import CATALOG
from gencoord_env.outcomes import FailureCode
from gencoord_env.pipeline import compile_plan, materialize, resolve_forward, verify
from gencoord_env.tasks import Episode, prior
from gencoord_env.tasks import references as R
from gencoord_env.tasks.pools import CROSSPRODUCT_Q
from gencoord_env.tasks.procedural import (
    LENGTH,
    POOL,
    ProceduralEpisodes,
    draw,
    held_out,
    procedural_episodes,
    signature,
    template_id,
    template_problems,
)
from gencoord_env.tasks.prior import STAGE_ORDER, NodeSpec, TemplateSpec, TerminalSpec
from gencoord_env.world.sim import SimWorld
from gencoord_env.wrappers import RequestRemoval

SEED = 11
PAIRS = 120  # 480 episodes


@pytest.fixture(scope="module")
def episodes() -> list[Episode]:
    eps = procedural_episodes(SEED)
    return [eps[k] for k in range(4 * PAIRS)]


@pytest.fixture(scope="module")
def templates(episodes: list[Episode]) -> list[TemplateSpec]:
    return [episodes[4 * p].template for p in range(PAIRS)]


# --------------------------------------------------------------------------------------- seeding


def test_item_k_is_pair_k_div_4_cluster_k_div_2_role_k_mod_2() -> None:
    eps = procedural_episodes(3)
    assert len(eps) == LENGTH == 2**31 - 1
    four = [eps[k] for k in range(8, 12)]
    assert len({e.template.id for e in four}) == 1
    assert [e.perm for e in four] == [0, 1, 0, 1]
    assert four[0].cluster == four[1].cluster != four[2].cluster == four[3].cluster
    assert four[0].cluster.pair_key == four[2].cluster.pair_key
    assert eps[-1].id == eps[LENGTH - 1].id
    assert eps.index(four[1]) == 9 and four[1] in eps and four[1] not in procedural_episodes(4)
    assert [e.id for e in eps[8:12]] == [e.id for e in four]
    with pytest.raises(IndexError, match="out of range"):
        eps[LENGTH]
    with pytest.raises(TypeError, match="must be int or slice"):
        eps["3"]  # type: ignore[call-overload]


def test_seeded_and_deterministic() -> None:
    first = [procedural_episodes(5)[k] for k in range(0, 40, 3)]
    caches.clear()
    again = [procedural_episodes(5)[k] for k in range(0, 40, 3)]
    assert [(e.id, e.template) for e in first] == [(e.id, e.template) for e in again]
    other = [procedural_episodes(6)[k] for k in range(0, 40, 3)]
    assert [e.template.id for e in first] != [e.template.id for e in other]


def test_same_items_in_another_process_with_another_hash_seed() -> None:
    """No set or dict order leaks into generation: a fresh interpreter with another string-hash seed agrees."""
    code = ("from gencoord_env.tasks.procedural import procedural_episodes as p; e = p(5)\n"
            "print(' '.join(e[k].id for k in range(0, 40, 3)))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == [procedural_episodes(5)[k].id for k in range(0, 40, 3)]


def test_episodes_carry_the_prior_extended_with_their_template(episodes: list[Episode]) -> None:
    ep = episodes[0]
    assert ep.template.split == POOL and ep.cluster.pool == POOL
    pair = procedural_episodes(SEED).pair(0)
    assert ep.template.id == template_id(SEED, 0, len(pair.rejected)) and ep.template.id not in prior().templates
    assert set(ep.prior.templates) == set(prior().templates) | {ep.template.id}
    assert set(ep.template.bindings) <= set(ep.prior.codebook)
    assert isinstance(procedural_episodes(0), ProceduralEpisodes)


# --------------------------------------------------------------------------------------- pairs


def test_pairs_are_matched_and_balanced(episodes: list[Episode], templates: list[TemplateSpec]) -> None:
    firsts = Counter()
    for p, t in enumerate(templates):
        a, b = episodes[4 * p].cluster, episodes[4 * p + 2].cluster
        assert a.pair_key == b.pair_key and a.template == b.template == t.id
        assert sorted((a.binding, b.binding)) == sorted(t.bindings)  # each binding once per pair
        assert a.q in t.quantities
        for c in (a, b):
            assert not any(binding in c.id for binding in t.bindings)  # ids reach every agent
        firsts[t.bindings.index(a.binding)] += 1
    # neither the slot a binding is listed in nor the order of a pair's clusters is fixed
    assert min(firsts.values()) > PAIRS // 4
    longer_first = sum(len([n for n in t.nodes if n.branch in (None, t.bindings[0])])
                       > len([n for n in t.nodes if n.branch in (None, t.bindings[1])]) for t in templates)
    shorter_first = sum(len([n for n in t.nodes if n.branch in (None, t.bindings[0])])
                        < len([n for n in t.nodes if n.branch in (None, t.bindings[1])]) for t in templates)
    assert min(longer_first, shorter_first) > (longer_first + shorter_first) // 4


def _receiver_views(episodes: list[Episode]) -> list[tuple[str, str, str]]:
    """(binding, observation, infos) of the receiver at its decision with the request removed."""
    env = RequestRemoval(gencoord_env.parallel_env(pool=episodes, backend="sim"))
    policy = make_policy("rule")
    out = []
    for ep in episodes:
        obs, infos = env.reset(options={"episode": ep})
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            if turn == ep.second:
                info = {k: v for k, v in infos[turn].items() if k != "episode_id"}
                out.append((ep.binding, obs[turn], json.dumps(info, sort_keys=True, default=str)))
                break
            obs, _, _, _, infos = env.step({turn: policy.act(obs[turn], infos[turn])})
    return out


def test_receiver_views_are_byte_identical_within_each_pair(episodes: list[Episode]) -> None:
    sample = episodes[: 4 * 60]
    views = _receiver_views(sample)
    for p in range(0, len(sample), 4):
        for perm in (0, 1):
            a, b = views[p + perm], views[p + 2 + perm]
            assert a[0] != b[0]
            assert a[1:] == b[1:], sample[p + perm].id


def test_the_sender_does_see_its_binding(episodes: list[Episode]) -> None:
    env = gencoord_env.parallel_env(pool=episodes, backend="sim")
    for p in range(0, 40, 4):
        seen = [env.reset(options={"episode": episodes[k]})[0][episodes[k].first] for k in (p, p + 2)]
        assert seen[0] != seen[1]


# --------------------------------------------------------------------------------------- executable


def test_rule_agents_succeed_in_the_sim(episodes: list[Episode]) -> None:
    env = gencoord_env.parallel_env(pool=episodes, backend="sim")
    policy = make_policy("rule")
    outcomes = Counter()
    for ep in episodes[:320]:
        obs, infos = env.reset(options={"episode": ep})
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            obs, _, _, _, infos = env.step({turn: policy.act(obs[turn], infos[turn])})
        info = infos["agent_a"]
        outcomes[info["outcome"]] += 1
        assert info["outcome"] is FailureCode.SUCCESS, (ep.id, info["reason"])
        assert info["metrics"]["handoff_verified"]
    assert outcomes == {FailureCode.SUCCESS: 320}


def _run(ep: Episode, binding: str, world: SimWorld) -> Any:
    q = R.joint(ep, binding)
    res = resolve_forward(q, R.receiver_after_request(q.peer_requests[0]), ep)
    assert res.commitment is not None, res.reason
    plan = materialize(res.commitment, ep)
    world.reset(ep.world)
    return verify(plan, world.run(compile_plan(plan)), world.observe())


def test_every_quantity_executes_and_the_other_binding_fails_the_terminal(templates: list[TemplateSpec]) -> None:
    """At every order quantity a template serves: each binding succeeds, and the consistent plan of the
    other binding executes, hands off and fails the terminal predicate (paired worlds are disjoint)."""
    from gencoord_env.tasks.procedural import extend_prior
    from gencoord_env.tasks import Cluster

    world = SimWorld()
    for t in templates[:40]:
        p = extend_prior(t)
        for q in t.quantities:
            for b in t.bindings:
                ep = Episode(Cluster(POOL, t.id, b, q, "W3", "D2"), q % 2, p)
                assert _run(ep, b, world).code is FailureCode.SUCCESS, (t.id, b, q)
                other = next(x for x in t.bindings if x != b)
                verdict = _run(ep, other, world)
                assert verdict.code is FailureCode.TERMINAL_FAILURE and verdict.handoff_verified, (t.id, b, q)


def test_templates_are_valid_by_construction(templates: list[TemplateSpec]) -> None:
    for t in templates:
        assert template_problems(t) == ()
        assert t.terminal[t.bindings[0]] != t.terminal[t.bindings[1]]
        by_id = {n.id: n for n in t.nodes}
        for n in t.nodes:
            assert all(STAGE_ORDER.index(by_id[p].stage) <= STAGE_ORDER.index(n.stage) for p in n.preds)
        for b in t.bindings:
            branch = [n for n in t.nodes if n.branch in (None, b)]
            assert 2 <= sum(n.actor == "sender" for n in branch) <= 5
            assert 1 <= sum(n.actor == "receiver" for n in branch) <= 5
            assert [n.args.get("to") for n in branch if n.skill == "resource.deliver" and "to" in n.args] == ["$receiver"]


def test_a_pair_generation_rarely_redraws() -> None:
    eps = procedural_episodes(SEED)
    rejected = sum(len(eps.pair(p).rejected) for p in range(PAIRS))
    assert rejected / (PAIRS + rejected) < 0.05


# --------------------------------------------------------------------------------------- variety


def test_covers_the_families_skills_and_mechanisms(templates: list[TemplateSpec]) -> None:
    nodes = [n for t in templates for n in t.nodes]
    assert {t.family for t in templates} == {"destination", "recipe", "allocation", "active_branch"}
    assert {n.skill for n in nodes} == set(CATALOG.skills)
    crafts = [n for n in nodes if n.skill == "craft.item"]
    assert any("station" not in n.args for n in crafts) and any("station" in n.args for n in crafts)
    assert {n.actor for n in crafts} == {"sender", "receiver"}
    by_id = {(t.id, n.id): n for t in templates for n in t.nodes}
    fuel_first = [t for t in templates for n in t.nodes if n.skill == "transform.supply_input"
                  and any(by_id[(t.id, p)].skill == "transform.supply_fuel" for p in n.preds)]
    input_first = [t for t in templates for n in t.nodes if n.skill == "transform.supply_fuel"
                   and any(by_id[(t.id, p)].skill == "transform.supply_input" for p in n.preds)]
    assert fuel_first and input_first
    assert len({n.args["item"] for n in nodes if n.skill == "resource.obtain"}) >= 8
    assert {c.kind for t in templates for clauses in t.terminal.values() for c in clauses} == {"container", "site", "inventory"}
    assert len({max(t.quantities) for t in templates}) >= 4
    assert len({signature(t) for t in templates}) > PAIRS // 2


# --------------------------------------------------------------------------------------- held out


def _disguised(t: TemplateSpec) -> TemplateSpec:
    """``t`` with new ids, binding ids, stations of the same kind and other quantities."""
    stations = {"chest_a": "depot", "chest_b": "order_chest", "site_a": "marker", "order_chest": "chest_b"}
    bindings = {b: f"B{i}" for i, b in enumerate(t.bindings)}
    ids = {n.id: f"x{i}" for i, n in enumerate(t.nodes)}

    def arg(k: str, v: Any) -> Any:
        if k == "q":
            return "3*q"
        if k == "bind":
            return bindings[v]
        return stations.get(v, v) if k in ("dst", "site", "station") else v

    nodes = tuple(NodeSpec(ids[n.id], n.actor, n.skill, {k: arg(k, v) for k, v in n.args.items()}, n.stage,
                           tuple(ids[p] for p in n.preds), bindings.get(n.branch) if n.branch else None)
                  for n in reversed(t.nodes))
    terminal = {bindings[b]: tuple(TerminalSpec(c.kind, stations.get(c.where, c.where), c.item, c.count) for c in cs)
                for b, cs in t.terminal.items()}
    return dataclasses.replace(t, id="proc_disguised", bindings=tuple(bindings[b] for b in t.bindings), nodes=nodes,
                               terminal=terminal, quantities=(1, 2, 3, 4))


@pytest.mark.parametrize("template", ["chest_ab_planks", "deposit_or_build_planks", "remaining_terminal_cobblestone",
                                      "sticks_or_table", "vis_post_handoff", "vis_smelt_input_first", "vis_smelt_fuel_first"])
def test_the_signature_sees_through_ids_stations_and_quantities(template: str) -> None:
    t = prior().template(template)
    disguised = _disguised(t)
    assert signature(disguised) == signature(t)
    assert any("held-out template" in p for p in template_problems(disguised))


def test_the_signature_tells_the_held_out_templates_from_their_train_siblings() -> None:
    p = prior()
    assert signature(p.template("chest_ab_planks")) != signature(p.template("chest_ab"))
    assert signature(p.template("sticks_or_table")) != signature(p.template("planks_or_sticks"))
    assert len(held_out().templates) == len([t for t in p.templates.values() if t.split in ("horizon", "visibility")])


def test_a_core_structure_never_comes_with_its_crossproduct_quantity() -> None:
    """Chest A/B holds out q = 3: neither that order quantity nor one whose grounded counts equal it (the
    disguise stores 3*q, so q = 1 moves the crossproduct instance's 3 cobblestone)."""
    t = _disguised(prior().template("chest_ab"))
    assert CROSSPRODUCT_Q["chest_ab"] == 3

    def flagged(quantities: tuple[int, ...]) -> bool:
        return any("crossproduct" in p for p in template_problems(dataclasses.replace(t, quantities=quantities)))

    assert flagged((2, 3)) and flagged((1, 2))
    assert not flagged((2, 4, 5))


def test_five_thousand_draws_never_hold_out_material() -> None:
    h = held_out()
    core_like = 0
    for index in range(5000):
        t, _ = draw(SEED + 1, index)
        if t is None:
            continue
        sig = signature(t)
        assert sig not in h.templates, (t.id, h.templates.get(sig))
        if sig in h.core:
            core_like += 1
            template, q = h.core[sig]
            assert q == CROSSPRODUCT_Q[template] and q not in t.quantities, t.id
    assert core_like  # the core structures themselves are in the distribution, at their other quantities
