"""Statistics against values known in closed form or from the paper."""
from __future__ import annotations

import math

import pytest

from gencoord_env.commands.experiments import stats


def test_cluster_means_average_role_and_seed_repeats_within_a_cluster() -> None:
    obs = [("c1", 1.0), ("c1", 0.0), ("c1", 1.0), ("c1", 0.0), ("c2", 1.0), ("c2", 1.0)]
    assert stats.cluster_means(obs) == {"c1": 0.5, "c2": 1.0}


@pytest.mark.parametrize("n", [10, 60, 128])
def test_clopper_pearson_all_success_lower_bound_is_alpha_half_root(n: int) -> None:
    # k == n: the exact lower bound solves p**n == 0.025
    lo, hi = stats.exact_ci(n, n)
    assert lo == pytest.approx(0.025 ** (1 / n), rel=1e-9)
    assert hi == 1.0


def test_clopper_pearson_matches_the_paper_and_closed_forms() -> None:
    assert round(stats.exact_ci(128, 128)[0], 3) == 0.972  # paper: "exact-binomial 95% lower bound 0.972"
    lo, hi = stats.exact_ci(0, 60)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 60), rel=1e-9)
    lo, hi = stats.exact_ci(5, 10)
    assert lo == pytest.approx(1 - hi, rel=1e-9)  # symmetric at k = n/2
    assert lo == pytest.approx(0.187086, abs=1e-6)
    assert stats.exact_ci(0, 0) is None


def test_bootstrap_of_twenty_successes_and_twenty_failures_is_the_papers_35_65() -> None:
    # paper, E1: A-only 20 of 40 clusters, 95% CI [35, 65]
    lo, hi = stats.bootstrap_ci([1.0] * 20 + [0.0] * 20)
    assert (lo, hi) == pytest.approx((0.35, 0.65), abs=0.0251)
    assert stats.bootstrap_ci([1.0] * 20 + [0.0] * 20) == (lo, hi)  # fixed seed: repeatable


def test_bootstrap_seed_changes_the_resamples_and_constant_data_has_a_point_interval() -> None:
    values = [((i * 37) % 101) / 101 for i in range(30)]
    assert stats.bootstrap_ci(values, seed=1) != stats.bootstrap_ci(values, seed=2)
    assert stats.bootstrap_ci([1.0] * 40) == (1.0, 1.0)
    assert stats.bootstrap_ci([]) is None


def test_bootstrap_interval_is_a_percentile_interval_of_resampled_means() -> None:
    values = [float(i % 7) / 6 for i in range(50)]
    lo, hi = stats.bootstrap_ci(values, resamples=10_000)
    mean = sum(values) / len(values)
    se = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values) / len(values))
    # the percentile interval of the mean is close to the normal one, +-1.96 standard errors
    assert lo == pytest.approx(mean - 1.96 * se, abs=0.02)
    assert hi == pytest.approx(mean + 1.96 * se, abs=0.02)


def test_paired_bootstrap_aligns_clusters_and_takes_reference_minus_condition() -> None:
    reference = {f"c{i}": 1.0 for i in range(40)}
    condition = {f"c{i}": (1.0 if i % 2 else 0.0) for i in range(40)}
    condition["extra"] = 0.0  # not in the reference: not paired
    out = stats.paired_bootstrap_ci(reference, condition)
    assert out is not None
    assert out["diff"] == 0.5 and out["clusters"] == 40
    assert out["ci95"] == pytest.approx([0.35, 0.65], abs=0.0251)
    assert stats.paired_bootstrap_ci(reference, {"other": 1.0}) is None
    same = stats.paired_bootstrap_ci(reference, reference)
    assert same == {"diff": 0.0, "ci95": [0.0, 0.0], "clusters": 40}
