"""Deterministic cluster selection for capped runs."""
from __future__ import annotations

from collections import Counter

import pytest

from gencoord_env.commands.experiments.runner import episode_indices, pool_indices, select_clusters
from gencoord_env.commands.experiments.specs import EXPERIMENTS, experiment
from gencoord_env.tasks import pool


def test_uncapped_selection_is_the_whole_pool_under_both_roles() -> None:
    c = experiment("request").conditions[0]
    assert episode_indices(c, None) == list(range(2 * len(pool("request"))))


@pytest.mark.parametrize("episodes, clusters", [(1, 1), (2, 1), (7, 4), (40, 20)])
def test_capped_selection_takes_ceil_half_clusters_each_under_both_roles(episodes: int, clusters: int) -> None:
    c = experiment("request").conditions[0]
    idx = episode_indices(c, episodes)
    assert len(idx) == 2 * clusters
    assert Counter(k // 2 for k in idx) == {k // 2: 2 for k in idx}
    assert idx == episode_indices(c, episodes)  # deterministic


def test_capped_selection_spreads_over_templates_and_balances_bindings() -> None:
    clusters = pool("request")
    picked = select_clusters(clusters, range(len(clusters)), 16)
    assert len({clusters[i].template for i in picked}) == 8
    from gencoord_env.tasks.prior import prior

    sides = Counter(prior().templates[clusters[i].template].bindings.index(clusters[i].binding) for i in picked)
    assert sides == {0: 8, 1: 8}


def test_two_goal_capability_clusters_are_a_matched_mode_pair() -> None:
    clusters = pool("goal_capability")
    a, b = (clusters[i] for i in select_clusters(clusters, range(len(clusters)), 2))
    assert (a.goal, a.variant) == (b.goal, b.variant)
    assert a.mode != b.mode


def test_where_filter_selects_one_motif_of_the_visibility_pool() -> None:
    for c in EXPERIMENTS["visibility"].conditions:
        idx = pool_indices(c)
        assert len(idx) == 32
        from gencoord_env.tasks.prior import prior

        assert {prior().templates[pool("visibility")[i].template].motif for i in idx} == {c.where["motif"]}
