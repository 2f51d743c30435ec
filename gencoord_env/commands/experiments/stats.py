"""Statistics as the paper's reproducibility notes define them.

The semantic cluster is the independent unit: every observation of a cluster (its two role permutations,
repeated seeds) is averaged within the cluster first, and intervals resample clusters. Intervals are

- ``bootstrap_ci``: percentile cluster bootstrap, 95%, 10,000 resamples, fixed seed (``scipy.stats.bootstrap``);
- ``paired_bootstrap_ci``: the same on cluster-aligned differences (reference minus condition);
- ``exact_ci``: two-sided 95% Clopper-Pearson interval for k of n (``scipy.stats.binomtest``), used for
  pools where every cluster succeeds (a bootstrap interval of constant data says nothing);
- ``two_way_bootstrap_ci``: a learner's success over several training seeds, where a seed (or a partner of a
  cross-play score) is a second independent unit beside the cluster: each resample draws the seeds and the
  clusters with replacement, independently (the percentile interval of the grand mean), so the interval
  holds the spread between runs as well as between tasks.

Seeds follow the paper: condition intervals use ``CONDITION_SEED + i`` (8901, 8902, ...) for the i-th
condition, paired differences ``PAIRED_SEED + j`` (8911, ...) for the j-th comparison.

>>> exact_ci(128, 128)[0] > 0.97
True
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any, TypeVar

import numpy as np
from scipy import stats

RESAMPLES = 10_000
CONFIDENCE = 0.95
CONDITION_SEED = 8901
PAIRED_SEED = 8911

Interval = tuple[float, float]
K = TypeVar("K", bound=Hashable)


def cluster_means(observations: Iterable[tuple[K, float]]) -> dict[K, float]:
    """Average every observation of a cluster (role and seed repeats) into one value per cluster.

    >>> cluster_means([("c1", 1.0), ("c1", 0.0), ("c2", 1.0)])
    {'c1': 0.5, 'c2': 1.0}
    """
    sums: dict[K, list[float]] = {}
    for key, value in observations:
        sums.setdefault(key, []).append(float(value))
    return {k: sum(v) / len(v) for k, v in sums.items()}


def bootstrap_ci(values: Iterable[float], seed: int = CONDITION_SEED, resamples: int = RESAMPLES) -> Interval | None:
    """Percentile bootstrap interval of the mean of per-cluster values; ``None`` for no clusters."""
    data = np.asarray(list(values), dtype=float)
    if data.size == 0:
        return None
    if np.all(data == data[0]):  # every resample has the same mean; scipy would warn about degeneracy
        return (float(data[0]), float(data[0]))
    res = stats.bootstrap((data,), np.mean, n_resamples=resamples, confidence_level=CONFIDENCE,
                          method="percentile", rng=np.random.default_rng(seed))
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def paired_differences(reference: Mapping[K, float], condition: Mapping[K, float]) -> list[float]:
    """Cluster-aligned differences ``reference - condition`` over the clusters both have, in a stable order."""
    common = [k for k in reference if k in condition]
    return [reference[k] - condition[k] for k in sorted(common, key=repr)]


def paired_bootstrap_ci(reference: Mapping[K, float], condition: Mapping[K, float],
                        seed: int = PAIRED_SEED, resamples: int = RESAMPLES) -> dict[str, Any] | None:
    """Mean paired difference (reference minus condition) with its cluster-bootstrap interval."""
    diffs = paired_differences(reference, condition)
    if not diffs:
        return None
    ci = bootstrap_ci(diffs, seed, resamples)
    assert ci is not None
    return {"diff": float(np.mean(diffs)), "ci95": list(ci), "clusters": len(diffs)}


def exact_ci(successes: int, n: int) -> Interval | None:
    """Two-sided 95% Clopper-Pearson interval for ``successes`` of ``n``; ``None`` when ``n == 0``.

    >>> round(exact_ci(128, 128)[0], 4)
    0.9716
    """
    if n == 0:
        return None
    ci = stats.binomtest(successes, n).proportion_ci(confidence_level=CONFIDENCE, method="exact")
    return (float(ci.low), float(ci.high))


def two_way_bootstrap_ci(values: np.ndarray | Iterable[Iterable[float]], seed: int = CONDITION_SEED,
                         resamples: int = RESAMPLES) -> Interval | None:
    """Percentile interval of the mean of a (units x clusters) table (units: training seeds, or partners),
    resampling rows and columns independently; one row is the cluster bootstrap. ``None`` for an empty table.

    >>> two_way_bootstrap_ci([[1.0, 1.0], [1.0, 1.0]])
    (1.0, 1.0)
    """
    table = np.asarray(values if isinstance(values, np.ndarray) else [list(r) for r in values], dtype=float)
    if table.size == 0:
        return None
    if np.all(table == table.flat[0]):
        return (float(table.flat[0]), float(table.flat[0]))
    rows, cols = table.shape
    rng = np.random.default_rng(seed)
    # a resample's mean is w_rows . table . w_cols / (rows * cols), with w the draw counts of each row and column
    w_rows = rng.multinomial(rows, np.full(rows, 1 / rows), size=resamples).astype(float)
    w_cols = rng.multinomial(cols, np.full(cols, 1 / cols), size=resamples).astype(float)
    means = np.einsum("rs,sc,rc->r", w_rows, table, w_cols) / (rows * cols)
    low, high = np.percentile(means, [50 * (1 - CONFIDENCE), 50 * (1 + CONFIDENCE)])
    return (float(low), float(high))


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-th percentile (linear interpolation), ``None`` for no values."""
    data = list(values)
    return float(np.percentile(data, q)) if data else None


__all__ = [
    "CONDITION_SEED", "CONFIDENCE", "PAIRED_SEED", "RESAMPLES", "bootstrap_ci", "cluster_means", "exact_ci",
    "paired_bootstrap_ci", "paired_differences", "percentile", "two_way_bootstrap_ci",
]
