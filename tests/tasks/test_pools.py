from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from gencoord_env.data_files import data_path
from gencoord_env.errors import DataError, UnknownName
from gencoord_env.tasks import POOL_SIZES, TEAM_POOLS, pool, prior
from gencoord_env.tasks.pools import CROSSPRODUCT_Q, POOL_SPECS, load_pools


@pytest.mark.parametrize("name,size", sorted(POOL_SIZES.items()))
def test_pool_sizes(name: str, size: int) -> None:
    assert len(pool(name)) == size


def test_pools_are_pairwise_disjoint() -> None:
    keys = {name: {c.key for c in pool(name)} for name in POOL_SIZES}
    for a, b in itertools.combinations(POOL_SIZES, 2):
        assert not keys[a] & keys[b], f"{a} and {b} share clusters"
    for name in POOL_SIZES:
        assert len(keys[name]) == POOL_SIZES[name], f"{name} repeats a cluster"


def test_core_pools_per_template_counts_and_balance() -> None:
    core = [t.id for t in prior().templates.values() if t.split == "core"]
    assert len(core) == 8
    for name, per in (("train", 60), ("heldout", 16), ("request", 20)):
        clusters = pool(name)
        for tid in core:
            mine = [c for c in clusters if c.template == tid]
            assert len(mine) == per
            bindings = prior().template(tid).bindings
            assert [sum(c.binding == b for c in mine) for b in bindings] == [per // 2, per // 2]


@pytest.mark.parametrize("name", sorted(POOL_SIZES))
def test_every_pool_is_matched_pairs(name: str) -> None:
    """Paper counting: a cluster is one binding's instance, a pair two clusters that differ only in it."""
    clusters = pool(name)
    pairs: dict[tuple, list] = {}
    for c in clusters:
        pairs.setdefault(c.pair_key, []).append(c)
    assert len(pairs) == len(clusters) // 2
    for members in pairs.values():
        t = prior().template(members[0].template)
        assert sorted(c.binding for c in members) == sorted(t.bindings)
        if members[0].mode is not None:  # Goal x Capability: one cluster of each workcell mode
            assert len({c.mode for c in members}) == len(members)


def test_paper_counts_train_pairs_episodes_and_forward_rows() -> None:
    train = pool("train")
    assert len(train) == 480 and len({c.pair_key for c in train}) == 240
    assert 2 * len(train) == 960  # role permutations -> episodes; x 2 learned stages = 1,920 forward rows


@pytest.mark.parametrize("name", sorted(POOL_SIZES))
def test_cluster_ids_do_not_name_the_hidden_fact(name: str) -> None:
    """Ids reach every agent in infos: no binding, goal or workcell mode in them, and no fixed order."""
    clusters = pool(name)
    hidden = {c.binding for c in clusters} | {c.mode for c in clusters if c.mode} | {c.goal for c in clusters if c.goal}
    for c in clusters:
        assert not any(h in c.id for h in hidden), c.id
    firsts = [pool_pair[0].binding for pool_pair in zip(clusters[::2], clusters[1::2])]
    if len(firsts) >= 20:  # which binding comes first in a pair is not fixed
        assert 0 < sum(b == firsts[0] for b in firsts) < len(firsts)


def test_crossproduct_factors_each_seen_in_train_but_never_the_combination() -> None:
    train = pool("train")
    seen_cases = {(c.template, c.binding, c.q) for c in train}
    seen_bindings = {(c.template, c.binding) for c in train}
    seen_q = {c.q for c in train}
    for c in pool("crossproduct"):
        assert (c.template, c.binding) in seen_bindings
        assert c.q in seen_q
        assert {(t, c.q) for t, _, q in seen_cases if q == c.q} - {(c.template, c.q)}  # q is seen with other templates
        assert (c.template, c.binding, c.q) not in seen_cases
        assert (c.template, c.q) not in {(t, q) for t, _, q in seen_cases}


def test_every_pool_covers_the_quantities_evenly() -> None:
    for name in ("train", "heldout", "request"):
        for t in (t for t in prior().templates.values() if t.split == "core"):
            qs = {c.q for c in pool(name) if c.template == t.id}
            assert qs == set(t.quantities) - {CROSSPRODUCT_Q[t.id]}, (name, t.id)


def test_heldout_holds_the_papers_representative_episode() -> None:
    """Active Order, WORK_BRANCH, 8 oak planks handed off (q = 1), as the paper's accounting example."""
    assert any(c.template == "active_order" and c.binding == "WORK_BRANCH" and c.q == 1 for c in pool("heldout"))


def test_horizon_and_visibility_templates_never_in_train() -> None:
    train_templates = {c.template for c in pool("train")}
    assert not {c.template for c in pool("horizon")} & train_templates
    assert len({c.template for c in pool("horizon")}) == 4
    assert {prior().template(c.template).family for c in pool("horizon")} == {"destination", "recipe", "allocation", "active_branch"}
    motifs = {prior().template(c.template).motif for c in pool("visibility")}
    assert motifs == {"post_handoff", "input_then_fuel", "fuel_then_input"}


def test_goal_capability_pool_shape() -> None:
    clusters = pool("goal_capability")
    assert {(c.goal, c.mode) for c in clusters} == {(g, m) for g in ("G_TABLE", "G_CHEST") for m in ("RAW_PROCESSOR", "FINISHED_RECEIVER")}
    assert len({c.variant for c in clusters}) == 10


def test_generation_is_seeded_and_deterministic() -> None:
    assert pool("train", seed=0) == pool("train", seed=0)
    assert pool("train", seed=0) != pool("train", seed=1)


def test_unknown_pool_suggests() -> None:
    with pytest.raises(UnknownName, match="did you mean 'heldout'"):
        pool("heldot")


def test_a_pool_value_says_what_the_env_needs() -> None:
    """``make_pool``: the env's agents, team and endless checks come from one value, for every pool name."""
    import gencoord_env
    from gencoord_env.tasks.pool_value import POOL_NAMES, make_pool
    from gencoord_env.tasks.pools import TEAM_POOLS

    for name in POOL_NAMES:
        p = make_pool(name)
        assert p.name == name and p.team == (name in TEAM_POOLS) and p.endless == (name == "procedural")
        assert p.described == (name != "procedural")
        route = "feedback" if name == "team_feedback" else "forward"  # the forward route cannot solve team_feedback
        assert gencoord_env.parallel_env(backend="sim", pool=name, route=route).possible_agents == list(p.agents)
    assert make_pool("chain5").agents == ("agent_a", "agent_b", "agent_c", "agent_d", "agent_e")
    custom = make_pool(make_pool("chain4").episodes[:3])
    assert custom.name == "custom" and custom.team and len(custom.agents) == 4


def _pools_of_copy(tmp_path: Any, change: Callable[[dict[str, Any]], None]) -> Any:
    """``load_pools`` of a temporary copy of the package's ``data/tasks.json`` with ``change`` applied."""
    raw = json.loads(data_path("tasks.json").read_text(encoding="utf-8"))
    change(raw)
    copy = tmp_path / "tasks.json"
    copy.write_text(json.dumps(raw), encoding="utf-8")
    return load_pools(json.loads(copy.read_text(encoding="utf-8")), prior())


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    *keys, last = path.split(".")

    def change(raw: dict[str, Any]) -> None:
        node = raw
        for key in keys:
            node = node[key]
        if value is _MISSING:
            del node[last]
        else:
            node[last] = value

    return change


_MISSING = object()
#: (the change to the table, the error it gives)
BAD_TABLES: list[tuple[str, Any, str]] = [
    ("pools", _MISSING, "data/tasks.json: expected a 'pools' table naming each pool's draw and size"),
    ("pools.heldout.clusters", _MISSING, "data/tasks.json pools.heldout.clusters: expected a positive integer, got None"),
    ("pools.heldout.clusters", 130, "data/tasks.json pools.heldout.clusters: 130 is not what the draw makes "
                                    "(8 pairs of each of the 8 core templates: 128)"),
    ("pools.visibility.pairs_per_template", "16", "data/tasks.json pools.visibility.pairs_per_template: expected a "
                                                  "positive integer, got '16'"),
    ("pools.horizon.split", "horizn", "data/tasks.json pools.horizon.split: unknown split 'horizn'; expected one of "
                                      "horizon, visibility (did you mean 'horizon'?)"),
    ("pools.train.draw", "cor", "data/tasks.json pools.train.draw: unknown draw 'cor'; expected one of core, split, "
                                "crossproduct, goal_capability, team (did you mean 'core'?)"),
    ("pools.train.pair_per_template", 30, "data/tasks.json pools.train: unknown key(s) ['pair_per_template']; a 'core' "
                                          "pool has ['clusters', 'pairs_per_template']"),
    ("pools.crossproduct.clusters", 61, "data/tasks.json pools.crossproduct.clusters: 61 is not what the draw makes (an "
                                        "even number of clusters, one to 30 pairs for each of the 8 core templates)"),
    ("pools.goal_capability.clusters", 20, "data/tasks.json pools.goal_capability.clusters: 20 is not what the draw "
                                           "makes (2 goals x 10 world variants x 2 workcell modes: 40)"),
    ("pools.chain4.templates", ["chain_6"], "data/tasks.json pools.chain4.templates: expected a list of team templates"),
    ("pools.teams.instances_per_template", 0, "data/tasks.json pools.teams.instances_per_template: expected a positive "
                                              "integer, got 0"),
    ("pools.teams.instances_per_template", 500, "data/tasks.json pools teams: take 500 public instances of template "
                                                "'chain', which has"),
]


@pytest.mark.parametrize("path, value, message", BAD_TABLES, ids=[f"{p}=" + ("missing" if v is _MISSING else repr(v)) for p, v, _ in BAD_TABLES])
def test_a_wrong_or_missing_pool_value_in_the_table_is_a_clear_error(tmp_path: Any, path: str, value: Any, message: str):
    with pytest.raises(DataError, match=re.escape(message)):
        _pools_of_copy(tmp_path, _set(path, value))


def test_too_many_pairs_for_a_template_s_public_instances_is_a_clear_error(tmp_path: Any):
    def change(raw: dict[str, Any]) -> None:
        raw["pools"]["train"].update(pairs_per_template=200, clusters=3200)

    with pytest.raises(ValueError, match=re.escape("data/tasks.json pools train, heldout, request: take 218 public "
                                                   "instances of template 'build_site_ab', which has 210")):
        _pools_of_copy(tmp_path, change)


def test_the_pools_are_the_table_s_rows():
    """The env's pools, their sizes and the team pools' templates are read from the table, not written in code."""
    table = json.loads(data_path("tasks.json").read_text(encoding="utf-8"))["pools"]
    assert list(POOL_SPECS) == list(table)
    assert POOL_SIZES == {n: r["clusters"] for n, r in table.items() if r["draw"] != "team"}
    assert TEAM_POOLS == {n: tuple(r["templates"]) for n, r in table.items() if r["draw"] == "team"}
    for name, row in table.items():
        if row["draw"] == "team":
            assert len(pool(name)) == sum(row["instances_per_template"] * len(prior().teams[t].bindings)
                                          for t in row["templates"])
