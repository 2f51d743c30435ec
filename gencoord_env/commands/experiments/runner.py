"""Run an experiment's conditions and return one plain row per episode.

Every condition builds its own env (pool, route, view, surface, private fact, intervention) on one shared
world, so a Minecraft experiment starts one sidecar. ``select_clusters`` picks the clusters a capped run
uses (``--episodes N``): deterministically, spread over templates and alternating bindings, so a small
run still sees both sides of every paired ambiguity; each picked cluster runs under both role
permutations. Conditions of one experiment on the same pool and filter get the same clusters, which
is what the paired comparisons need.

A row's ``metrics`` are the env's episode metrics plus the policy's model cost for that episode
(``model_metrics``): calls, and input and output tokens where the policy records them per call.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gencoord_env.commands.experiments.specs import Condition, Experiment
from gencoord_env.tasks import Cluster, Episode, pool as load_pool
from gencoord_env.tasks.pools import role_permutations
from gencoord_env.world.types import World

PolicyFactory = Callable[[Condition], Any]
Progress = Callable[[Condition, int, int], None]


@dataclass(frozen=True)
class EpisodeRow:
    """What the analysis needs of one finished episode (no trace: those are for ``TraceRecorder``)."""

    condition: str
    episode_id: str
    cluster: str
    perm: int
    family: str
    motif: str | None
    outcome: str
    metrics: Mapping[str, Any]
    model_calls: int

    @property
    def success(self) -> bool:
        return self.outcome == "SUCCESS"

    def to_json(self) -> dict[str, Any]:
        return {"condition": self.condition, "episode_id": self.episode_id, "cluster": self.cluster,
                "perm": self.perm, "family": self.family, "motif": self.motif, "outcome": self.outcome,
                "model_calls": self.model_calls, "metrics": dict(self.metrics)}


def _attribute(cluster: Cluster, name: str) -> str | None:
    from gencoord_env.tasks.prior import prior

    template = prior().template(cluster.template)
    value = getattr(template, name) if hasattr(template, name) else getattr(cluster, name)
    return None if value is None else str(value)


def pool_indices(condition: Condition, pool_seed: int = 0) -> list[int]:
    """Indices into the pool of the clusters that pass the condition's ``where`` filter."""
    clusters = load_pool(condition.pool, pool_seed)
    return [i for i, c in enumerate(clusters)
            if all(str(_attribute(c, k)) == v for k, v in condition.where.items())]


def select_clusters(clusters: Sequence[Cluster], indices: Sequence[int], limit: int | None) -> list[int]:
    """``limit`` of ``indices`` (all when ``None``), in pool order.

    Round r takes, from the t-th template, the next cluster of binding ``(r + t) % bindings``, so the
    first picks cover the templates and alternate bindings (Goal x Capability: matched mode pairs).
    """
    if limit is None or limit >= len(indices):
        return list(indices)
    queues: dict[str, dict[str, list[int]]] = {}
    for i in indices:
        c = clusters[i]
        queues.setdefault(c.template, {}).setdefault(c.binding, []).append(i)
    picked: list[int] = []
    r = 0
    while len(picked) < limit:
        for t, by_binding in enumerate(queues.values()):
            lanes = list(by_binding.values())
            for shift in range(len(lanes)):  # the scheduled binding, else the next one with clusters left
                lane = lanes[(r + t + shift) % len(lanes)]
                if lane:
                    picked.append(lane.pop(0))
                    break
            if len(picked) == limit:
                break
        r += 1
    return sorted(picked)


def episode_indices(condition: Condition, episodes: int | None, pool_seed: int = 0) -> list[int]:
    """Env episode indices (``2 * cluster + perm``; a team of n: ``n * cluster + rotation``) for at most
    ``ceil(episodes / 2)`` clusters, each under both role permutations. A capped run plays a team's cluster
    under two of its n rotations, the next two for the next cluster, so a small run still meets every one;
    an uncapped run plays every rotation."""
    clusters = load_pool(condition.pool, pool_seed)
    limit = None if episodes is None else max(1, math.ceil(episodes / 2))
    offsets, start = [], 0
    for c in clusters:
        offsets.append(start)
        start += role_permutations(c)
    out: list[int] = []
    for j, i in enumerate(select_clusters(clusters, pool_indices(condition, pool_seed), limit)):
        n = role_permutations(clusters[i])
        perms = range(n) if limit is None or n == 2 else sorted({j % n, (j + 1) % n})
        out += [offsets[i] + perm for perm in perms]
    return out


def make_env(condition: Condition, backend: str, world: World | None, pool_seed: int = 0) -> Any:
    """The env of one condition, wrapped in its intervention."""
    import gencoord_env
    from gencoord_env.wrappers import apply

    env = gencoord_env.parallel_env(timings=True, pool=condition.pool, backend=backend, route=condition.route, view=condition.view,
                                    surface=condition.surface, private_fact=condition.private_fact,
                                    pool_seed=pool_seed, world=world)
    if condition.intervention:
        spec: dict[str, Any] = {"name": condition.intervention}
        if condition.intervention_args:
            spec["args"] = dict(condition.intervention_args)
        env = apply(env, [spec])
    return env


def run_condition(condition: Condition, policy: Any, backend: str = "sim", world: World | None = None,
                  episodes: int | None = None, pool_seed: int = 0, progress: Progress | None = None) -> list[EpisodeRow]:
    """Play the condition's selected episodes with ``policy`` and return one row per episode."""
    env = make_env(condition, backend, world, pool_seed)
    order = episode_indices(condition, episodes, pool_seed)
    rows: list[EpisodeRow] = []
    for n, k in enumerate(order):
        rows.append(play_row(condition, env, policy, k))
        if progress is not None:
            progress(condition, n + 1, len(order))
    return rows


def play_row(condition: Condition, env: Any, policy: Any, k: int) -> EpisodeRow:
    """Play episode ``k`` of the condition's env with ``policy``: its row."""
    from gencoord_env.agents.rollout import run_episode

    before = int(getattr(policy, "model_calls", 0))
    calls_before = len(getattr(policy, "records", ()))
    info = run_episode(env, policy, index=k)
    ep: Episode = env.unwrapped.episodes[k]
    model_calls = int(getattr(policy, "model_calls", 0)) - before
    metrics = {**info["metrics"], **(info.get("timings") or {}), **model_metrics(policy, calls_before, model_calls)}
    return EpisodeRow(
        condition=condition.name, episode_id=str(info["episode_id"]), cluster=ep.cluster.id, perm=ep.perm,
        family=ep.template.family, motif=ep.template.motif, outcome=str(info["outcome"]),
        metrics=metrics, model_calls=model_calls,
    )


def condition_slot(condition: Condition, backend: str, pool_seed: int, make_policy: PolicyFactory,
                   world: World | None) -> Any:
    """The condition's env on ``world`` and its policy: one slot of an ``ArenaRunner`` (or a Ray worker's)."""
    from gencoord_env.commands.arenas import Slot, slot_policy

    return Slot(make_env(condition, backend, world, pool_seed), slot_policy(make_policy(condition)))


def _play_slot(condition: Condition, slot: Any, k: int) -> EpisodeRow:
    return play_row(condition, slot.env, slot.policy, k)


def run_condition_at_once(condition: Condition, make_policy: PolicyFactory, runner: Any, backend: str = "sim",
                          episodes: int | None = None, pool_seed: int = 0, progress: Progress | None = None,
                          retries: list[Any] | None = None) -> list[EpisodeRow]:
    """``run_condition`` on an ``ArenaRunner`` or ``RayRunner``: several episodes at once, rows in the same
    order as the serial run's. Retried episodes are added to ``retries``."""
    import threading
    from functools import partial

    order = episode_indices(condition, episodes, pool_seed)
    done = [0]
    lock = threading.Lock()

    def tick(k: int, row: EpisodeRow) -> None:
        with lock:
            done[0] += 1
            if progress is not None:
                progress(condition, done[0], len(order))

    played = runner.run(order, partial(condition_slot, condition, backend, pool_seed, make_policy),
                        partial(_play_slot, condition), key=condition.name, on_result=tick)
    if retries is not None:
        retries.extend(played.retries)
    return list(played.results)


def model_metrics(policy: Any, calls_before: int, model_calls: int) -> dict[str, int]:
    """One episode's model cost: ``model_calls``, and the summed ``model_input_tokens`` and
    ``model_output_tokens`` of the per-call records (``gencoord_env.agents.lm.policy.CallRecord``) it added after
    ``calls_before``. A policy that keeps no call records (a rule agent) has no token counts.
    """
    records = getattr(policy, "records", None)
    if records is None:
        return {"model_calls": model_calls}
    mine = records[calls_before:]
    return {"model_calls": len(mine), "model_input_tokens": sum(int(r.input_tokens) for r in mine),
            "model_output_tokens": sum(int(r.output_tokens) for r in mine)}


def conditions_to_run(experiment: Experiment, policy: str | None) -> list[Condition]:
    """The experiment's conditions, learned-policy-only rows dropped unless a policy is given."""
    return [c for c in experiment.conditions if policy is not None or not c.only_with_policy]


def run_experiment(experiment: Experiment, make_policy: PolicyFactory, backend: str = "sim",
                   episodes: int | None = None, policy: str | None = None, pool_seed: int = 0,
                   world: World | None = None, progress: Progress | None = None, runner: Any = None,
                   retries: list[Any] | None = None) -> dict[str, list[EpisodeRow]]:
    """Run every condition on one shared world; returns the rows per condition name, in spec order.

    ``world``: a world to use (and leave open); by default one is made for ``backend`` and closed here.
    ``runner``: an ``ArenaRunner`` or ``RayRunner`` (left open) to play several episodes at once instead;
    the rows are the same. Its retried episodes are added to ``retries``.
    """
    from gencoord_env.envs.gencoord.gencoord import make_world

    if runner is not None:
        return {c.name: run_condition_at_once(c, make_policy, runner, backend, episodes, pool_seed, progress, retries)
                for c in conditions_to_run(experiment, policy)}
    own = world is None
    shared = make_world(backend) if world is None else world
    try:
        return {c.name: run_condition(c, make_policy(c), backend, shared, episodes, pool_seed, progress)
                for c in conditions_to_run(experiment, policy)}
    finally:
        if own:
            shared.close()


__all__ = ["EpisodeRow", "condition_slot", "conditions_to_run", "episode_indices", "make_env", "model_metrics",
           "play_row", "pool_indices", "run_condition", "run_condition_at_once", "run_experiment", "select_clusters"]
