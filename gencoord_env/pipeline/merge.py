"""Handoff compatibility and the predecessor merge shared by both resolvers.

The two role-local paths must realize exactly the public DAG nodes of one branch (complete), and the
union of each path's order, the public predecessors of that branch and the cross-agent edge from the
handoff producer to the first consuming node of the other role must be acyclic.
"""
from __future__ import annotations

from collections.abc import Sequence

from gencoord_env.catalog import CATALOG
from gencoord_env.types import Task
from gencoord_env.dsl.serializer import format_task
from gencoord_env.pipeline.types import Commitment
from gencoord_env.tasks.compose import binding_of_tasks
from gencoord_env.tasks.episode import Episode
from gencoord_env.world.recipes import load_recipes


class MergeConflict(Exception):
    """Raised inside this module only; resolvers turn it into ``RESOLUTION_CONFLICT``."""


def _match(path: Sequence[Task], role: str, episode: Episode, binding: str, who: str) -> tuple[str, ...]:
    candidates = [n for n in episode.branch_nodes(binding) if n.role == role]
    used: list[str] = []
    for i, task in enumerate(path):
        hit = next((n for n in candidates if n.id not in used and n.task == task), None)
        if hit is None:
            raise MergeConflict(
                f"{who} task {i} {format_task(task)} is not a {role} task of branch {binding} "
                f"(expected one of: {', '.join(format_task(n.task) for n in candidates if n.id not in used) or 'none left'})"
            )
        used.append(hit.id)
    missing = [n.id for n in candidates if n.id not in used]
    if missing:
        raise MergeConflict(f"{who} path leaves {role} nodes of branch {binding} undone: {missing}")
    return tuple(used)


def _consumes(task: Task, item: str) -> int | None:
    """How many of ``item`` the task needs (its skill's ``consumes`` rule), or None when it does not use it."""
    spec = CATALOG.skills.get(task.skill)
    use = spec.consumes if spec is not None else None
    if use is None or use.item.fill(task.args) != item:
        return None
    if use.crafting is not None and use.made is not None:
        plan = load_recipes().craft_plan(str(use.crafting.fill(task.args)), int(use.made.fill(task.args)))
        return plan.inputs.get(item, 0)
    return int(use.count.fill(task.args) or 0)  # type: ignore[union-attr]


def _hands_to(task: Task, peer: str) -> bool:
    """Whether the task hands items to ``peer`` (its skill's ``handoff`` rule)."""
    spec = CATALOG.skills.get(task.skill)
    return spec is not None and spec.handoff is not None and spec.handoff.to.fill(task.args) == peer  # type: ignore[union-attr]


def handoff(first_path: Sequence[Task], second_path: Sequence[Task], first: str, second: str) -> tuple[int, int, str, int]:
    """HandoffCompatible: (producer index, first consuming index, item, count) or MergeConflict."""
    producers = [i for i, t in enumerate(first_path) if _hands_to(t, second)]
    if len(producers) != 1:
        raise MergeConflict(f"{first}'s path must hand items to {second} exactly once; found {len(producers)} handoffs")
    prod = first_path[producers[0]]
    given = CATALOG.skills[prod.skill].handoff
    item, count = str(given.item.fill(prod.args)), given.count.fill(prod.args)  # type: ignore[union-attr]
    if not isinstance(count, int) or isinstance(count, bool):
        raise MergeConflict(f"handoff quantity {count!r} is not an integer")
    for j, task in enumerate(second_path):
        need = _consumes(task, item)
        if need is not None:
            if need > count:
                raise MergeConflict(f"{second} needs {need} {item} for {format_task(task)} but the handoff carries {count}")
            return producers[0], j, item, count
    raise MergeConflict(f"{second}'s path never uses the handed-off {item}")


def _acyclic(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> bool:
    indeg = {n: 0 for n in nodes}
    for _, b in edges:
        indeg[b] += 1
    ready = [n for n, d in indeg.items() if d == 0]
    seen = 0
    while ready:
        n = ready.pop()
        seen += 1
        for a, b in edges:
            if a == n:
                indeg[b] -= 1
                if indeg[b] == 0:
                    ready.append(b)
    return seen == len(nodes)


def merge(first_path: Sequence[Task], second_path: Sequence[Task], episode: Episode) -> Commitment:
    """Build C = (S_first, S_second, b, P_C) or raise MergeConflict naming what does not fit."""
    binding = binding_of_tasks(second_path) or binding_of_tasks(first_path)
    if binding is None:
        raise MergeConflict("no branch selected: no task carries a bind=<binding id> argument")
    if binding not in episode.template.bindings:
        raise MergeConflict(f"binding {binding} is not a branch of {episode.template.id}")
    first, second = episode.first, episode.second
    role1, role2 = episode.roles
    ids1 = _match(first_path, role1, episode, binding, first)
    ids2 = _match(second_path, role2, episode, binding, second)
    p, c, item, count = handoff(first_path, second_path, first, second)
    nodes = [*ids1, *ids2]
    edges = {(a, b) for ids in (ids1, ids2) for a, b in zip(ids, ids[1:])}
    edges |= {(pred, n.id) for n in episode.branch_nodes(binding) for pred in n.preds if pred in nodes}
    edges.add((ids1[p], ids2[c]))
    ordered = tuple(sorted(edges))
    if not _acyclic(nodes, ordered):
        raise MergeConflict("the paths' order contradicts the public predecessors: the merged relation has a cycle")
    return Commitment(first, second, tuple(first_path), tuple(second_path), binding, (ids1, ids2), ordered,
                      (first, second, item, count))
