"""Episode rows -> one result record per condition (rates, costs, intervals, paired effects).

A record holds plain JSON values only, so ``results.json`` and the CSV are written from it directly.
Success intervals are cluster-bootstrap intervals over per-cluster means; ``strict_clusters`` counts the
clusters whose every episode succeeded, and ``exact_ci95`` is the Clopper-Pearson interval of that count.
Paired effects (``paired``) are ``versus`` minus this condition over the clusters both ran, stored under
``versus_minus_condition``; ``success_perm0_minus_perm1`` is the role-swap difference.

Byte and token figures are means (and p95) over the episodes whose metrics carry them: ``request_bytes``
(the peer-directed REQ payload), ``response_bytes`` (the bounded response alone, feedback route),
``wire_bytes`` (their sum, or the centralized upload), ``model_input_tokens`` / ``model_output_tokens``
(policies that record their calls); a figure no episode carries is ``None``, so records of older runs or
rule agents say "not measured" rather than 0.

``matrix`` lays the records of an experiment with ``matrix_rows`` out as the paper's method x column
success matrix.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gencoord_env.commands.experiments import stats
from gencoord_env.commands.experiments.runner import EpisodeRow
from gencoord_env.commands.experiments.specs import Condition, Experiment


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _values(rows: Sequence[EpisodeRow], key: str) -> list[float]:
    """``metrics[key]`` of the rows that carry it (old records and rule agents may not)."""
    return [float(r.metrics[key]) for r in rows if r.metrics.get(key) is not None]


def _mean_p95(rows: Sequence[EpisodeRow], key: str, name: str) -> dict[str, float | None]:
    values = _values(rows, key)
    return {f"{name}_mean": _mean(values), f"{name}_p95": stats.percentile(values, 95)}


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
    ttc = _values(rows, "time_to_commitment")
    secs = _values(rows, "episode_seconds")
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
        "method": condition.method or None,
        "column": condition.column or None,
        **{str(k): v for k, v in condition.where.items()},
        "episodes": n,
        "clusters": len(per_cluster),
        "successes": sum(1 for r in rows if r.success),
        "success_rate": _mean([1.0 if r.success else 0.0 for r in rows]),
        "success_ci95": list(ci) if ci else None,
        "strict_clusters": strict,
        "exact_ci95": list(exact) if exact else None,
        "success_perm0_minus_perm1": (by_role[0] - by_role[1]) if by_role[0] is not None and by_role[1] is not None else None,
        "raw_validity_rate": _rate(rows, "raw_validity"),
        "commitment_validity_rate": _rate(rows, "commitment_validity"),
        "handoff_verified_rate": _rate(rows, "handoff_verified"),
        "decisions_per_episode": _mean([float(r.metrics["decisions"]) for r in rows]),
        "calls_per_episode": _mean([float(r.metrics["decisions"]) for r in rows]),
        "model_calls_per_episode": _mean([float(r.model_calls) for r in rows]),
        "input_tokens_per_episode": _mean(_values(rows, "model_input_tokens")),
        "output_tokens_per_episode": _mean(_values(rows, "model_output_tokens")),
        **_mean_p95(rows, "request_bytes", "request_bytes"),
        **_mean_p95(rows, "response_bytes", "response_bytes"),
        **_mean_p95(rows, "wire_bytes", "wire_bytes"),
        "time_to_commitment_p50": stats.percentile(ttc, 50),
        "time_to_commitment_p95": stats.percentile(ttc, 95),
        "episode_seconds_p50": stats.percentile(secs, 50),
        "episode_seconds_p95": stats.percentile(secs, 95),
        "outcomes": dict(sorted(outcomes.items())),
    }
    record.update(_team_traffic(rows))
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


def _team_traffic(rows: Sequence[EpisodeRow]) -> dict[str, Any]:
    """A team condition's per-edge figures (rows whose metrics carry ``edges``; none for two agents): the
    paper's B_local and B_central per episode (``gencoord_env.traffic``), their rounds and edges, the team
    size, the edges failures were attributed to and the commonest failure outcome."""
    from gencoord_env import traffic

    team = [r for r in rows if "edges" in r.metrics]
    if not team:
        return {}
    local = [traffic.local(r.metrics["edges"]) for r in team]
    central = [traffic.central(r.metrics["edges"]) for r in team]
    failed: dict[str, int] = {}
    for r in team:
        if r.metrics.get("failed_edge"):
            failed[r.metrics["failed_edge"]] = failed.get(r.metrics["failed_edge"], 0) + 1
    failures: dict[str, int] = {}
    for r in rows:
        if not r.success:
            failures[r.outcome] = failures.get(r.outcome, 0) + 1
    return {
        "agents": max(int(r.metrics.get("agents", 0)) for r in team) or None,
        "b_local_mean": _mean([float(t.bytes) for t in local if t.messages]),
        "local_rounds": _mean([float(t.rounds) for t in local if t.messages]),
        "active_edges": _mean([float(t.edges) for t in local if t.messages]),
        "b_central_mean": _mean([float(t.bytes) for t in central if t.messages]),
        "central_participants": _mean([float(t.participants) for t in central if t.messages]),
        "failed_edges": ", ".join(f"{e} {k}" for e, k in sorted(failed.items())) or None,
        "failure_mode": max(failures, key=lambda o: failures[o]) if failures else None,
    }


def _versus_minus_condition(effect: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if effect is None:
        return None
    return {"versus_minus_condition": effect["diff"], "ci95": effect["ci95"], "clusters": effect["clusters"]}


def add_paired(records: list[dict[str, Any]], rows: Mapping[str, Sequence[EpisodeRow]]) -> None:
    """Add ``paired`` to records with a ``versus``: success and decisions, ``versus`` minus condition, with
    intervals, and ``taken_as`` naming the subtraction ("true request - removed")."""
    j = 0
    for record in records:
        ref = record.get("versus")
        if not ref or ref not in rows:
            record["paired"] = None
            continue
        mine, theirs = rows[record["condition"]], rows[ref]
        record["paired"] = {
            "versus": ref,
            "taken_as": f"{ref} - {record['condition']}",
            "success": _versus_minus_condition(stats.paired_bootstrap_ci(
                success_by_cluster(theirs), success_by_cluster(mine), stats.PAIRED_SEED + j)),
            "decisions": _versus_minus_condition(stats.paired_bootstrap_ci(
                decisions_by_cluster(theirs), decisions_by_cluster(mine), stats.PAIRED_SEED + j)),
        }
        j += 1


def analyze(experiment: Experiment, rows: Mapping[str, Sequence[EpisodeRow]], policy_names: Mapping[str, str]) -> list[dict[str, Any]]:
    """One record per condition that ran, in the experiment's order."""
    ran = [c for c in experiment.conditions if c.name in rows]
    records = [summarize_condition(c, rows[c.name], i, experiment, policy_names[c.name]) for i, c in enumerate(ran)]
    add_paired(records, rows)
    return records


def matrix(experiment: Experiment, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The paper's method x column success matrix: ``rows`` (every method of ``matrix_rows``, run or not),
    ``columns`` (in condition order), and ``success`` / ``paper`` / ``condition`` grids of the same shape,
    ``None`` where no condition ran (the learned row without ``--policy``) or the paper gives no figure.
    """
    rows = list(experiment.matrix_rows)
    columns = list(dict.fromkeys(c.column for c in experiment.conditions if c.method in rows))
    grid: dict[str, list[list[Any]]] = {k: [[None] * len(columns) for _ in rows] for k in ("success", "paper", "condition")}
    for c in experiment.conditions:
        if c.method in rows:
            grid["paper"][rows.index(c.method)][columns.index(c.column)] = c.paper.get("success_rate")
    for r in records:
        if r.get("method") in rows:
            i, j = rows.index(r["method"]), columns.index(r["column"])
            grid["success"][i][j] = r["success_rate"]
            grid["condition"][i][j] = r["condition"]
    return {"rows": rows, "columns": columns, **grid}


__all__ = ["add_paired", "analyze", "decisions_by_cluster", "matrix", "success_by_cluster", "summarize_condition"]
