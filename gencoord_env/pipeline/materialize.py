"""Materialize: a validated commitment plus the shared DAG -> a dispatch plan.

Task instances get ids, actors, grounded locations, dependencies (the merged relation P_C) and checker
attachments: the handoff checker on the producing task, the terminal checker on each path's last task.
"""
from __future__ import annotations

from gencoord_env.pipeline.types import Commitment, DispatchPlan, DispatchTask
from gencoord_env.tasks.episode import Episode


class MaterializationError(Exception):
    """The commitment cannot instantiate a dispatch plan; the env reports MATERIALIZATION_FAILURE."""


def materialize(commitment: Commitment, episode: Episode) -> DispatchPlan:
    references = {s.name for s in episode.public_stations} | set(episode.agent_of.values())
    tasks: list[DispatchTask] = []
    id_of: dict[str, str] = {}
    paths = ((commitment.first, commitment.first_path, commitment.node_ids[0]),
             (commitment.second, commitment.second_path, commitment.node_ids[1]))
    preds_of: dict[str, set[str]] = {}
    for a, b in commitment.edges:
        preds_of.setdefault(b, set()).add(a)
    pending = [(actor, task, node_id) for actor, path, ids in paths for task, node_id in zip(path, ids)]
    # one global order that respects the merged relation: Kahn over node ids, stable in path order
    done: set[str] = set()
    producer, receiver, item, _ = commitment.handoff
    while pending:
        for i, (actor, task, node_id) in enumerate(pending):
            preds = preds_of.get(node_id, set())
            if preds <= done:
                pending.pop(i)
                break
        else:
            raise MaterializationError("the merged relation has no executable order")
        loc = episode.location(task, actor)
        if loc and loc not in references:
            raise MaterializationError(f"{node_id}: location {loc!r} is not a reference of this episode")
        tid = f"t{len(tasks) + 1}"
        id_of[node_id] = tid
        checks = ("handoff",) if task.skill == "resource.deliver" and task.args.get("to") == receiver and actor == producer else ()
        tasks.append(DispatchTask(tid, node_id, actor, task, loc, tuple(id_of[p] for p in sorted(preds)), checks))
        done.add(node_id)
    last = {t.actor: t.id for t in tasks}
    tasks = [
        DispatchTask(t.id, t.node, t.actor, t.task, t.loc, t.deps, t.checks + (("terminal",) if last[t.actor] == t.id else ()))
        for t in tasks
    ]
    return DispatchPlan(tuple(tasks), commitment.handoff, episode.terminal())
