"""Episode rows -> one result record per condition (rates, costs, cluster-level intervals, paired effects).

A record holds plain JSON values only, so ``results.json`` and the CSV are written from it directly.
Success intervals are cluster-bootstrap intervals over per-cluster means; ``strict_clusters`` counts the
clusters whose every episode succeeded, and ``exact_ci95`` is the Clopper-Pearson interval of that count.
Paired effects are ``versus`` minus this condition over the clusters both ran.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gencoord_env.experiments import stats
from gencoord_env.experiments.runner import EpisodeRow
from gencoord_env.experiments.specs import Condition, Experiment


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _rate(rows: Sequence[EpisodeRow], key: str) -> float | None:
    return _mean([1.0 if r.metrics.get(key) else 0.0 for r in rows])


def success_by_cluster(rows: Sequence[EpisodeRow]) -> dict[str, float]:
    return {str(k): v for k, v in stats.cluster_means((r.cluster, 1.0 if r.success else 0.0) for r in rows).items()}


def decisions_by_cluster(rows: Sequence[EpisodeRow]) -> dict[str, float]:
    return {str(k): v for k, v in stats.cluster_means((r.cluster, float(r.metrics["decisions"])) for r in rows).items()}


def summarize_condition(condition: Condition, rows: Sequence[EpisodeRow], index: int, experiment: Experiment,
                        policy_name: str) -> dict[str, Any]:
    """The record of one condition (``index``: its position, which fixes its bootstrap seed)."""
    n = len(rows)
    per_cluster = success_by_cluster(rows)
    strict = sum(1 for v in per_cluster.values() if v == 1.0)
    ci = stats.bootstrap_ci(per_cluster.values(), stats.CONDITION_SEED + index)
    exact = stats.exact_ci(strict, len(per_cluster))
    ttc = [float(r.metrics["time_to_commitment"]) for r in rows if r.metrics.get("time_to_commitment") is not None]
    secs = [float(r.metrics["episode_seconds"]) for r in rows if r.metrics.get("episode_seconds") is not None]
    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
    by_role = {perm: _mean([1.0 if r.success else 0.0 for r in rows if r.perm == perm]) for perm in (0, 1)}
    record: dict[str, Any] = {
        "experiment": experiment.name,
        "condition": condition.name,
        "pool": condition.pool,
        "route": condition.route,
        "view": condition.view,
        "surface": condition.surface,
        "private_fact": condition.private_fact,
        "intervention": condition.intervention,
        "policy": policy_name,
        **{str(k): v for k, v in condition.where.items()},
        "episodes": n,
        "clusters": len(per_cluster),
        "successes": sum(1 for r in rows if r.success),
        "success_rate": _mean([1.0 if r.success else 0.0 for r in rows]),
        "success_ci95": list(ci) if ci else None,
        "strict_clusters": strict,
        "exact_ci95": list(exact) if exact else None,
        "role_swap_diff": (by_role[0] - by_role[1]) if by_role[0] is not None and by_role[1] is not None else None,
        "raw_validity_rate": _rate(rows, "raw_validity"),
        "commitment_validity_rate": _rate(rows, "commitment_validity"),
        "handoff_verified_rate": _rate(rows, "handoff_verified"),
        "decisions_per_episode": _mean([float(r.metrics["decisions"]) for r in rows]),
        "calls_per_episode": _mean([float(r.metrics["decisions"]) for r in rows]),
        "model_calls_per_episode": _mean([float(r.model_calls) for r in rows]),
        "wire_bytes_mean": _mean([float(r.metrics["wire_bytes"]) for r in rows]),
        "wire_bytes_p95": stats.percentile([float(r.metrics["wire_bytes"]) for r in rows], 95),
        "time_to_commitment_p50": stats.percentile(ttc, 50),
        "time_to_commitment_p95": stats.percentile(ttc, 95),
        "episode_seconds_p50": stats.percentile(secs, 50),
        "episode_seconds_p95": stats.percentile(secs, 95),
        "outcomes": dict(sorted(outcomes.items())),
    }
    if experiment.group_by:
        groups: dict[str, list[float]] = {}
        for r in rows:
            groups.setdefault(str(getattr(r, experiment.group_by)), []).append(1.0 if r.success else 0.0)
        record["groups"] = {k: _mean(v) for k, v in groups.items()}
    record["versus"] = condition.versus
    record["paper"] = dict(condition.paper)
    if condition.note:
        record["note"] = condition.note
    return record


def add_paired(records: list[dict[str, Any]], rows: Mapping[str, Sequence[EpisodeRow]]) -> None:
    """Add ``paired`` (success and decisions: versus minus condition, with intervals) to records with a ``versus``."""
    j = 0
    for record in records:
        ref = record.get("versus")
        if not ref or ref not in rows:
            record["paired"] = None
            continue
        mine, theirs = rows[record["condition"]], rows[ref]
        record["paired"] = {
            "versus": ref,
            "success": stats.paired_bootstrap_ci(success_by_cluster(theirs), success_by_cluster(mine), stats.PAIRED_SEED + j),
            "decisions": stats.paired_bootstrap_ci(decisions_by_cluster(theirs), decisions_by_cluster(mine),
                                                   stats.PAIRED_SEED + j),
        }
        j += 1


def analyze(experiment: Experiment, rows: Mapping[str, Sequence[EpisodeRow]], policy_names: Mapping[str, str]) -> list[dict[str, Any]]:
    """One record per condition that ran, in the experiment's order."""
    ran = [c for c in experiment.conditions if c.name in rows]
    records = [summarize_condition(c, rows[c.name], i, experiment, policy_names[c.name]) for i, c in enumerate(ran)]
    add_paired(records, rows)
    return records


__all__ = ["add_paired", "analyze", "decisions_by_cluster", "success_by_cluster", "summarize_condition"]
