"""The public composer: a binding id plus the shared task DAG gives both role-local paths.

This is the deterministic expansion used by the rule agents (Rule-Minimal-Request, Explicit-Factor
Composer), by Factor-Code + Rule, and by the canonical reference commitments. How nodes are ordered
depends on which projection of the prior the composer reads (supplement, "Task-Structure Visibility"):

- ``full``: predecessor edges are visible, so paths follow a topological order of the DAG;
- ``skeleton``: no edges, only coarse stages: paths are ordered by stage, ties in listing order;
- ``node_only``: no stages or edges: paths follow a fixed skill priority, ties in listing order.
"""
from __future__ import annotations

from collections.abc import Sequence

from gencoord_env.types import Task
from gencoord_env.tasks.episode import Episode, GroundedNode
from gencoord_env.tasks.prior import STAGE_ORDER

VIEWS: tuple[str, ...] = ("full", "skeleton", "node_only")

#: The fixed task-path priority a node-only reader falls back on.
SKILL_PRIORITY: tuple[str, ...] = (
    "resource.obtain",
    "craft.item",
    "transform.supply_input",
    "transform.supply_fuel",
    "transform.collect_output",
    "build.component",
    "resource.deliver",
    "control.wait",
)


def view_order(nodes: Sequence[GroundedNode], view: str) -> tuple[GroundedNode, ...]:
    """The answer-independent order in which ``view`` lists the public nodes."""
    if view == "full":
        return tuple(nodes)
    if view == "skeleton":
        return tuple(sorted(nodes, key=lambda n: (STAGE_ORDER.index(n.stage), n.task.skill, n.id)))
    if view == "node_only":
        return tuple(sorted(nodes, key=lambda n: (n.task.skill, n.id)))
    raise ValueError(f"unknown view {view!r}; expected one of {VIEWS}")


def _topological(nodes: Sequence[GroundedNode]) -> list[GroundedNode]:
    ids = {n.id for n in nodes}
    done: set[str] = set()
    out: list[GroundedNode] = []
    pending = list(nodes)
    while pending:
        for i, n in enumerate(pending):
            if all(p in done or p not in ids for p in n.preds):
                out.append(pending.pop(i))
                done.add(n.id)
                break
        else:
            raise ValueError(f"public DAG has a cycle among {[n.id for n in pending]}")
    return out


def order_nodes(nodes: Sequence[GroundedNode], view: str) -> list[GroundedNode]:
    listed = view_order(nodes, view)
    if view == "full":
        return _topological(listed)
    if view == "skeleton":
        return sorted(listed, key=lambda n: STAGE_ORDER.index(n.stage))
    return sorted(listed, key=lambda n: SKILL_PRIORITY.index(n.task.skill))


def role_paths(episode: Episode, binding: str, view: str = "full") -> tuple[tuple[Task, ...], tuple[Task, ...]]:
    """(first-role path, second-role path) of ``binding``'s branch, as read through ``view``.

    >>> from gencoord_env.tasks import pool
    >>> ep = Episode(pool("train")[0], perm=0)
    >>> first, second = role_paths(ep, ep.binding)
    """
    if binding not in episode.template.bindings:
        raise ValueError(f"binding {binding!r} is not admissible for {episode.template.id!r}: {episode.template.bindings}")
    branch = [n for n in episode.branch_nodes(binding)]
    ordered = order_nodes(branch, view)
    first_role, second_role = episode.roles
    return (
        tuple(n.task for n in ordered if n.role == first_role),
        tuple(n.task for n in ordered if n.role == second_role),
    )


def binding_of_tasks(tasks: Sequence[Task]) -> str | None:
    """The branch a path selects: the ``bind`` of its first task that has one."""
    for t in tasks:
        b = t.args.get("bind")
        if isinstance(b, str):
            return b
    return None
