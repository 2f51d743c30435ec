"""The public composer: a binding id plus the shared task DAG gives both role-local paths.

This is the deterministic expansion used by the rule agents (Rule-Minimal-Request, Explicit-Factor
Composer), by Factor-Code + Rule, and by the canonical reference commitments. How nodes are ordered
depends on which projection of the prior the composer reads (supplement, "Task-Structure Visibility"):

- ``full``: predecessor edges are visible, so paths follow a topological order of the DAG;
- ``skeleton``: no edges, only coarse stages: paths are ordered by stage, ties in listing order;
- ``node_only``: no stages or edges: paths follow a fixed skill priority, ties in listing order.

Each is one row of ``VIEW_FORMS`` (what its ``PRIOR`` block shows, and its one ordering function); a new
projection is a new row.

A team template adds who tells whom (``Team``): each role's path is composed the same way, and a request
along a channel carries the receiving role's nodes that the sender can decide - the nodes of the fact
factors the sender knows (it holds them, or they reached it along a channel), and the receiver's shared
nodes on its first incoming channel. So in ``chain`` the sender asks the crafter and the courier for their
whole paths, in ``relay`` the middle agent passes the receiver's path on, and in ``fan_in`` each sender asks
the builder for the part its own factor decides.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gencoord_env.catalog import CATALOG
from gencoord_env.errors import DataError, UnknownName, UsageError
from gencoord_env.types import Task
from gencoord_env.tasks.episode import Episode, GroundedNode, branch_values
from gencoord_env.tasks.prior import STAGE_ORDER, TemplateSpec

#: The fixed task-path priority a node-only reader falls back on: each skill's ``node_only_rank`` in the catalog.
SKILL_PRIORITY: tuple[str, ...] = CATALOG.node_only_order


@dataclass(frozen=True)
class View:
    """One projection of the shared prior (``view=``): which node fields its ``PRIOR`` block shows, and one
    function that orders the public nodes a reader of it sees.

    ``order(nodes, compose)``: with ``compose=False`` the answer-independent order the view lists the nodes
    in (the ``NODE`` lines); with ``compose=True`` the order its reader composes a path in (ties in listing
    order).
    """

    name: str
    shows_stage: bool
    shows_preds: bool
    order: Callable[[Sequence[GroundedNode], bool], list[GroundedNode]]


def _stage(n: GroundedNode) -> int:
    return STAGE_ORDER.index(n.stage)


def _full(nodes: Sequence[GroundedNode], compose: bool) -> list[GroundedNode]:
    """Listed as the template lists them; composed in a topological order of the visible edges."""
    return _topological(nodes) if compose else list(nodes)


def _skeleton(nodes: Sequence[GroundedNode], compose: bool) -> list[GroundedNode]:
    """Listed by stage, then skill and id; composed by stage."""
    listed = sorted(nodes, key=lambda n: (_stage(n), n.task.skill, n.id))
    return sorted(listed, key=_stage) if compose else listed


def _node_only(nodes: Sequence[GroundedNode], compose: bool) -> list[GroundedNode]:
    """Listed by skill and id; composed by the fixed skill priority (``SKILL_PRIORITY``)."""
    listed = sorted(nodes, key=lambda n: (n.task.skill, n.id))
    return sorted(listed, key=lambda n: SKILL_PRIORITY.index(n.task.skill)) if compose else listed


#: Every projection of the prior, by name: the ``view`` argument's values, in the paper's order.
VIEW_FORMS: dict[str, View] = {v.name: v for v in (
    View("full", shows_stage=True, shows_preds=True, order=_full),
    View("skeleton", shows_stage=True, shows_preds=False, order=_skeleton),
    View("node_only", shows_stage=False, shows_preds=False, order=_node_only),
)}
VIEWS: tuple[str, ...] = tuple(VIEW_FORMS)


def view_form(view: str) -> View:
    """The ``View`` named ``view``; ``ValueError`` naming the known views.

    >>> view_form("skeletn")
    Traceback (most recent call last):
    ...
    gencoord_env.errors.UnknownName: unknown view 'skeletn'; expected one of full, skeleton, node_only (did you mean 'skeleton'?)
    """
    found = VIEW_FORMS.get(view)
    if found is None:
        raise UnknownName("view", view, VIEWS)
    return found


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
            raise DataError(f"public DAG has a cycle among {[n.id for n in pending]}")
    return out


def order_nodes(nodes: Sequence[GroundedNode], view: str) -> list[GroundedNode]:
    """The order in which a reader of ``view`` composes a path of ``nodes``."""
    return view_form(view).order(nodes, True)


def role_paths(episode: Episode, binding: str, view: str = "full") -> tuple[tuple[Task, ...], tuple[Task, ...]]:
    """(first-role path, second-role path) of ``binding``'s branch, as read through ``view``.

    >>> from gencoord_env.tasks import pool
    >>> ep = Episode(pool("train")[0], perm=0)
    >>> first, second = role_paths(ep, ep.binding)
    """
    if binding not in episode.template.bindings:
        raise UsageError(f"binding {binding!r} is not admissible for {episode.template.id!r}: {episode.template.bindings}")
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


# ------------------------------------------------------------------------------------------- teams


class Node(Protocol):
    """What the composer reads of a node: a ``GroundedNode`` or a context's ``PriorNode``."""

    @property
    def id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def branch(self) -> str | None: ...
    @property
    def task(self) -> Task: ...


@dataclass(frozen=True)
class Team:
    """The public shape of a template the team composer reads: roles, channels and fact holders."""

    roles: tuple[str, ...]
    channels: tuple[tuple[str, str], ...]
    factors: tuple[tuple[str, tuple[str, ...]], ...]  # (holder role, branch ids), one per factor

    @classmethod
    def of(cls, template: TemplateSpec) -> Team:
        return cls(tuple(template.roles), template.message_edges,
                   tuple((f.holder, f.bindings) for f in template.fact_factors))

    def senders(self, role: str) -> tuple[str, ...]:
        """The roles with a channel to ``role``, in channel order."""
        return tuple(a for a, b in self.channels if b == role)

    def receivers(self, role: str) -> tuple[str, ...]:
        """The roles ``role`` has a channel to, in channel order."""
        return tuple(b for a, b in self.channels if a == role)

    def factor_of(self, branch: str | None) -> int | None:
        return next((i for i, (_, values) in enumerate(self.factors) if branch in values), None)

    def known(self, role: str) -> frozenset[int]:
        """The factors ``role`` can know: those it holds and those that reach it along channels."""
        seen: set[str] = set()
        out: set[int] = set()
        pending = [role]
        while pending:
            r = pending.pop()
            if r in seen:
                continue
            seen.add(r)
            out |= {i for i, (holder, _) in enumerate(self.factors) if holder == r}
            pending += list(self.senders(r))
        return frozenset(out)

    def asks(self, sender: str, node: Node) -> bool:
        """Whether the request along ``sender -> node.role`` carries ``node``."""
        senders = self.senders(node.role)
        if node.branch is None:
            return bool(senders) and senders[0] == sender
        factor = self.factor_of(node.branch)
        deciders = [s for s in senders if factor in self.known(s)]
        return bool(deciders) and deciders[0] == sender


def team_paths(nodes: Sequence[Any], view: str, roles: Sequence[str], selected: Collection[str]) -> dict[str, tuple[Task, ...]]:
    """Each role's path over the shared nodes and the nodes of the ``selected`` branch ids, as ``view`` orders them."""
    ordered = order_nodes([n for n in nodes if n.branch is None or n.branch in selected], view)
    return {r: tuple(n.task for n in ordered if n.role == r) for r in roles}


def team_requests(nodes: Sequence[Any], view: str, team: Team, sender: str,
                  selected: Collection[str]) -> tuple[tuple[str, tuple[Task, ...]], ...]:
    """(receiving role, requested path) along each of ``sender``'s channels that has something to ask."""
    ordered = order_nodes([n for n in nodes if n.branch is None or n.branch in selected], view)
    out = []
    for target in team.receivers(sender):
        path = tuple(n.task for n in ordered if n.role == target and team.asks(sender, n))
        if path:
            out.append((target, path))
    return tuple(out)


def team_record_paths(episode: Episode, binding: str, role: str,
                      view: str = "full") -> tuple[tuple[Task, ...], tuple[tuple[str, tuple[Task, ...]], ...]]:
    """(``role``'s SELF path, (receiving agent, requested path) per channel) of ``binding``'s branch."""
    if binding not in episode.template.bindings:
        raise UsageError(f"binding {binding!r} is not admissible for {episode.template.id!r}: {episode.template.bindings}")
    selected = branch_values(binding)
    own = team_paths(episode.nodes, view, (role,), selected)[role]
    asked = team_requests(episode.nodes, view, Team.of(episode.template), role, selected)
    return own, tuple((episode.agent_of[target], path) for target, path in asked)


def all_paths(episode: Episode, binding: str, view: str = "full") -> Mapping[str, tuple[Task, ...]]:
    """Every agent's path on ``binding``'s branch (agent -> path), in role order."""
    paths = team_paths(episode.nodes, view, episode.roles, branch_values(binding))
    return {episode.agent_of[r]: paths[r] for r in episode.roles}
