from __future__ import annotations

import itertools

import pytest

from gencoord_env.tasks import POOL_SIZES, pool, prior


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


def test_crossproduct_factors_each_seen_in_train_but_never_the_combination() -> None:
    train = pool("train")
    seen_pairs = {(c.template, c.binding, c.q) for c in train}
    seen_bindings = {(c.template, c.binding) for c in train}
    seen_q = {(c.template, c.q) for c in train}
    for c in pool("crossproduct"):
        assert (c.template, c.binding) in seen_bindings
        assert (c.template, c.q) in seen_q
        assert (c.template, c.binding, c.q) not in seen_pairs


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
    with pytest.raises(ValueError, match="did you mean 'heldout'"):
        pool("heldot")
