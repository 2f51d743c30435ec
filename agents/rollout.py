"""Run policies in the env: one episode, or a pool of episodes with a summary."""
from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from gencoord_env.agents.base import Policy


def run_episode(env: Any, policy: Policy, index: int | None = None, seed: int | None = None) -> dict[str, Any]:
    """Play one episode with ``policy`` for both agents; returns the final info of the first agent."""
    obs, infos = env.reset(seed=seed, options=None if index is None else {"index": index})
    while env.agents:
        turn = next(a for a, i in infos.items() if i.get("deciding"))
        actions = {a: "" for a in env.agents}
        actions[turn] = policy.act(obs[turn], infos[turn])
        obs, _, _, _, infos = env.step(actions)
    final: dict[str, Any] = infos[env.possible_agents[0]]
    return final


def summarize(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    rows = list(results)
    n = len(rows)
    outcomes = Counter(str(r["outcome"]) for r in rows)
    timings = [r.get("timings") or {} for r in rows]  # present when the env was made with timings=True
    secs = [t["episode_seconds"] for t in timings if t.get("episode_seconds") is not None]
    ttc = [t["time_to_commitment"] for t in timings if t.get("time_to_commitment") is not None]
    successes = outcomes.get("SUCCESS", 0)
    return {
        "episodes": n,
        "successes": successes,
        "success_rate": successes / n if n else 0.0,
        "outcomes": dict(sorted(outcomes.items())),
        "decisions_per_episode": sum(r["metrics"]["decisions"] for r in rows) / n if n else 0.0,
        "wire_bytes_mean": sum(r["metrics"]["wire_bytes"] for r in rows) / n if n else 0.0,
        "handoff_verified_rate": sum(bool(r["metrics"]["handoff_verified"]) for r in rows) / n if n else 0.0,
        "episode_seconds_p50": statistics.median(secs) if secs else None,
        "time_to_commitment_p50": statistics.median(ttc) if ttc else None,
    }


def rollout(env: Any, policy: Policy, episodes: int | None = None, on_episode: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run ``episodes`` episodes (default: every cluster under both role permutations) in index order."""
    total = len(env.episodes) if episodes is None else episodes
    out = []
    for k in range(total):
        info = run_episode(env, policy, index=k)
        info["index"] = k
        out.append(info)
        if on_episode:
            on_episode(info)
    return out


__all__ = ["rollout", "run_episode", "summarize", "time"]
