"""Closed-loop evaluation: a policy plays whole episodes of a pool in the env; the paper's table metrics.

Episodes run in lockstep across ``batch_size`` env copies, so one batched model call answers every
env whose agent is deciding; with ``batch_size=1`` each call is a hot batch-1 call, as the paper times
them. For every episode the result keeps the env's final info (outcome, metrics; the trace is dropped) plus
the actions taken and the learned calls attributed to it: calls, input tokens, output tokens and model
seconds.

Table metrics (:func:`table_metrics`): success, calls, input tokens, output tokens, peer-directed wire
bytes (means per episode) and time to commitment p50 / p95 (the env's clock from reset to the
executable commitment, so it includes the model calls).

Example::

    policy = load_policy("runs/sft/final")
    report = evaluate(policy, pool="heldout", route="forward")
    report["metrics"]["success_rate"], report["metrics"]["ttc_p50"]
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from gencoord_env.agents.base import Policy
from gencoord_env.envs.gencoord.gencoord import parallel_env
from gencoord_env.errors import UsageError
from gencoord_env.tasks import Episode
from gencoord_env.tasks.episode import parse_episode_id

__all__ = ["evaluate", "run_lockstep", "table_metrics"]


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def run_lockstep(
    envs: Sequence[Any],
    policy: Policy,
    indices: Sequence[int],
    on_episode: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Play episode ``indices`` across ``envs`` in lockstep; results come back in ``indices`` order."""
    pending = list(indices)[::-1]
    live: dict[int, dict[str, Any]] = {}  # env slot -> {index, obs, infos, calls...}
    results: dict[int, dict[str, Any]] = {}

    def start(slot: int) -> None:
        k = pending.pop()
        obs, infos = envs[slot].reset(options={"index": k})
        live[slot] = {"index": k, "obs": obs, "infos": infos, "calls": 0, "input_tokens": 0, "output_tokens": 0,
                      "model_seconds": 0.0, "actions": []}

    for slot in range(min(len(envs), len(pending))):
        start(slot)
    while live:
        slots = sorted(live)
        turns = [next(a for a, i in live[s]["infos"].items() if i.get("deciding")) for s in slots]
        actions = policy.act_batch([live[s]["obs"][t] for s, t in zip(slots, turns)], [live[s]["infos"][t] for s, t in zip(slots, turns)])
        records = getattr(policy, "last_records", None) or []
        for n, (slot, turn, action) in enumerate(zip(slots, turns, actions)):
            state = live[slot]
            rec = records[n] if n < len(records) else None
            if rec is not None:  # None: a policy without call records (a rule partner) answered this one
                state["calls"] += 1
                state["input_tokens"] += rec.input_tokens
                state["output_tokens"] += rec.output_tokens
                state["model_seconds"] += rec.latency_s
            state["actions"].append({"stage": live[slot]["infos"][turn].get("stage"), "agent": turn, "action": action})
            env = envs[slot]
            step_actions = {a: "" for a in env.agents}
            step_actions[turn] = action
            obs, _, _, _, infos = env.step(step_actions)
            state["obs"], state["infos"] = obs, infos
            if not env.agents:
                final = dict(infos[env.possible_agents[0]])
                final.pop("trace", None)
                final.update(index=state["index"], calls=state["calls"], input_tokens=state["input_tokens"],
                             output_tokens=state["output_tokens"], model_seconds=state["model_seconds"],
                             actions=state["actions"])
                results[state["index"]] = final
                del live[slot]
                if on_episode:
                    on_episode(final)
                if pending:
                    start(slot)
    return [results[k] for k in indices]


def table_metrics(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Success and online costs over episodes, as in the paper's tables."""
    n = len(results)
    if n == 0:
        return {"episodes": 0}
    outcomes = Counter(str(r["outcome"]) for r in results)
    ttc = [t["time_to_commitment"] for t in (r.get("timings") or {} for r in results) if t.get("time_to_commitment") is not None]

    def mean(key: str) -> float:
        return sum(float(r[key]) for r in results) / n

    return {
        "episodes": n,
        "successes": outcomes.get("SUCCESS", 0),
        "success_rate": outcomes.get("SUCCESS", 0) / n,
        "outcomes": dict(sorted(outcomes.items())),
        "calls": mean("calls"),
        "input_tokens": mean("input_tokens"),
        "output_tokens": mean("output_tokens"),
        "wire_bytes": sum(r["metrics"]["wire_bytes"] for r in results) / n,
        "raw_validity": sum(bool(r["metrics"]["raw_validity"]) for r in results) / n,
        "commitment_validity": sum(bool(r["metrics"]["commitment_validity"]) for r in results) / n,
        "handoff_verified": sum(bool(r["metrics"]["handoff_verified"]) for r in results) / n,
        "ttc_p50": _percentile(ttc, 0.5),
        "ttc_p95": _percentile(ttc, 0.95),
        "model_seconds_per_episode": mean("model_seconds"),
        "success_by_role_permutation": {
            perm: sum(str(r["outcome"]) == "SUCCESS" for r in results if parse_episode_id(r["episode_id"]).perm == perm)
            / max(1, sum(parse_episode_id(r["episode_id"]).perm == perm for r in results))
            for perm in (0, 1)
        },
    }


def evaluate(
    policy: Policy,
    pool: str | Sequence[Episode] = "heldout",
    *,
    route: str = "forward",
    view: str = "full",
    surface: str = "dsl",
    backend: str = "sim",
    pool_seed: int = 0,
    episodes: int | None = None,
    batch_size: int = 64,
    on_episode: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Closed-loop run of ``policy`` over a pool (every cluster x both role permutations by default).

    ``backend="minecraft"`` runs one world at a time (``batch_size`` is forced to 1 there: each env
    would otherwise need its own server).
    """
    if batch_size < 1:
        raise UsageError(f"batch_size must be >= 1, got {batch_size}")
    if backend != "sim":
        batch_size = 1
    envs = [parallel_env(pool=pool, route=route, view=view, surface=surface, backend=backend, pool_seed=pool_seed, timings=True)
            for _ in range(batch_size)]
    try:
        total = len(envs[0].episodes) if episodes is None else min(episodes, len(envs[0].episodes))
        results = run_lockstep(envs, policy, range(total), on_episode)
    finally:
        for env in envs:
            env.close()
    return {
        "pool": pool if isinstance(pool, str) else "custom",
        "route": route, "view": view, "surface": surface, "backend": backend, "batch_size": batch_size,
        "policy": getattr(policy, "name", type(policy).__name__),
        "metrics": table_metrics(results),
        "episodes": results,
    }
