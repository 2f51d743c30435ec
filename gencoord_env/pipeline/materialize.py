"""Materialize: a validated commitment plus the shared DAG -> a dispatch plan.

Task instances get ids, actors, grounded locations, dependencies (the merged relation P_C) and checker
attachments: the handoff checker on the producing task of each handoff, the terminal checker on each
path's last task.
"""
from __future__ import annotations

import dataclasses

from gencoord_env.catalog import CATALOG
from gencoord_env.pipeline.types import Commitment, DispatchPlan, DispatchTask
from gencoord_env.tasks.episode import Episode
from gencoord_env.types import Task


class MaterializationError(Exception):
    """The commitment cannot instantiate a dispatch plan; the env reports MATERIALIZATION_FAILURE."""


_NO_PREDS: frozenset[str] = frozenset()
_new = object.__new__
if tuple(f.name for f in dataclasses.fields(DispatchTask)) != ("id", "node", "actor", "task", "loc", "deps", "checks") \
        or hasattr(DispatchTask, "__slots__") or hasattr(DispatchTask, "__post_init__"):
    raise ImportError("DispatchTask changed shape; update materialize._task to match")


def _task(id: str, node: str, actor: str, task: Task, loc: str, deps: tuple[str, ...], checks: tuple[str, ...]) -> DispatchTask:
    """``DispatchTask(...)`` without a frozen dataclass's per-field ``object.__setattr__``."""
    out = _new(DispatchTask)
    out.__dict__.update(id=id, node=node, actor=actor, task=task, loc=loc, deps=deps, checks=checks)
    return out


def materialize(commitment: Commitment, episode: Episode) -> DispatchPlan:
    references = episode.references
    paths = tuple(zip(commitment.agents, commitment.paths, commitment.node_ids))
    preds_of: dict[str, set[str]] = {}
    for a, b in commitment.edges:
        preds_of.setdefault(b, set()).add(a)
    pending = [(actor, task, node_id) for actor, path, ids in paths for task, node_id in zip(path, ids)]
    # one global order that respects the merged relation: Kahn over node ids, stable in path order
    order: list[tuple[str, Task, str, set[str] | frozenset[str]]] = []
    done: set[str] = set()
    while pending:
        ready = next((i for i, (_, _, node_id) in enumerate(pending) if preds_of.get(node_id, _NO_PREDS) <= done), None)
        if ready is None:
            raise MaterializationError("the merged relation has no executable order")
        actor, task, node_id = pending.pop(ready)
        order.append((actor, task, node_id, preds_of.get(node_id, _NO_PREDS)))
        done.add(node_id)
    gives = {(producer, receiver) for producer, receiver, _, _ in commitment.handoffs}
    last = {actor: k for k, (actor, _, _, _) in enumerate(order)}
    id_of = {node_id: f"t{k + 1}" for k, (_, _, node_id, _) in enumerate(order)}
    tasks = []
    for k, (actor, task, node_id, preds) in enumerate(order):
        # the merge matched this task to a public node, whose grounded location is the same
        loc = episode.node(node_id).loc
        if loc and loc not in references:
            raise MaterializationError(f"{node_id}: location {loc!r} is not a reference of this episode")
        checks: tuple[str, ...] = ()
        handoff = CATALOG.skills[task.skill].handoff
        if handoff is not None and handoff.to is not None and (actor, handoff.to.fill(task.args)) in gives:
            checks = ("handoff",)
        if last[actor] == k:
            checks += ("terminal",)
        tasks.append(_task(id_of[node_id], node_id, actor, task, loc, tuple([id_of[p] for p in sorted(preds)]), checks))
    return DispatchPlan(tuple(tasks), commitment.handoffs, episode.terminal())


def materialize_step(task: Task, actor: str, episode: Episode, step: int) -> DispatchPlan:
    """Single-step route: one SELF task run before any commitment, as a one-task plan.

    It has no handoff and no terminal predicate (those belong to the commitment formed later); the final
    commitment repeats the task and the session skips it there, since it is already discharged.
    """
    loc = episode.location(task, actor)
    if loc and loc not in episode.references:
        raise MaterializationError(f"step {step}: location {loc!r} is not a reference of this episode")
    return DispatchPlan((DispatchTask(f"s{step}", "", actor, task, loc, ()),), (), ())
