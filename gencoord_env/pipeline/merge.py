"""Handoff compatibility and the predecessor merge shared by every resolver.

The role-local paths of all agents must realize exactly the public DAG nodes of one branch (complete),
each handoff edge of that branch must be compatible (the giver hands the item once, the receiver uses it
and needs no more than it gets), and the union of each path's order, the public predecessors of that
branch and one cross-agent edge per handoff - from its producer to the first consuming node of its
receiver - must be acyclic: one merge over all agents. Two agents are the case of one handoff.

A conflict names the edge it is attributed to (``MergeConflict.edge``, agents): the handoff that does not
fit, or the channel into the agent whose path does not fit the selected branch.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gencoord_env.caches import Memo
from gencoord_env.catalog import CATALOG
from gencoord_env.types import Task
from gencoord_env.dsl.serializer import format_task
from gencoord_env.pipeline.types import Commitment
from gencoord_env.tasks.compose import binding_of_tasks
from gencoord_env.tasks.episode import Episode, handoff_edges
from gencoord_env.tasks.prior import FACTOR_JOIN
from gencoord_env.world.recipes import load_recipes


class MergeConflict(Exception):
    """Raised inside this module only; resolvers turn it into ``RESOLUTION_CONFLICT``."""

    def __init__(self, message: str, edge: tuple[str, str] | None = None) -> None:
        super().__init__(message)
        self.edge = edge


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
    return merge_paths({episode.first: first_path, episode.second: second_path}, episode)


def selected_binding(paths: Mapping[str, Sequence[Task]], episode: Episode) -> str:
    """The binding the paths select: per fact factor, the first ``bind`` value naming it, read from the last
    role's path back to the first one (a receiver's realization decides what the sender's path must fit)."""
    template = episode.template
    agents = [a for a in reversed(episode.role_agents) if a in paths]
    if not template.factors:  # one fact, its values the bindings (every two-agent template)
        binding = next((b for b in (binding_of_tasks(paths[a]) for a in agents) if b), None)
        if binding is None:
            raise MergeConflict("no branch selected: no task carries a bind=<binding id> argument")
        if binding not in template.bindings:
            raise MergeConflict(f"binding {binding} is not a branch of {template.id}")
        return binding
    factors = template.fact_factors
    chosen: list[str | None] = [None] * len(factors)
    for a in agents:
        for task in paths[a]:
            b = task.args.get("bind")
            if not isinstance(b, str):
                continue
            k = template.factor_of(b)
            if k is None:
                raise MergeConflict(f"binding {b} is not a branch of {template.id}", _channel_into(a, episode))
            chosen[k] = chosen[k] or b
    missing = [i for i, b in enumerate(chosen) if b is None]
    if missing:
        holders = ", ".join(factors[i].holder for i in missing)
        raise MergeConflict(f"no branch selected for the fact of {holders}: no task carries one of its bind values")
    return FACTOR_JOIN.join(b for b in chosen if b is not None)


def _channel_into(agent: str, episode: Episode) -> tuple[str, str] | None:
    """The first channel that reaches ``agent``, else the first it sends on (the edge a path conflict is told on)."""
    edges = episode.message_edges
    return next((e for e in edges if e[1] == agent), next((e for e in edges if e[0] == agent), None))


def _consistent(paths: Mapping[str, Sequence[Task]], episode: Episode) -> None:
    """A team's paths select one value of each fact factor; else a MergeConflict on the edge where two
    selections meet: a handoff or channel between two agents whose paths select different values."""
    template = episode.template
    chosen: dict[int, dict[str, str]] = {}
    for agent, path in paths.items():
        for task in path:
            b = task.args.get("bind")
            k = template.factor_of(b) if isinstance(b, str) else None
            if k is None:
                continue
            earlier = chosen.setdefault(k, {}).setdefault(agent, b)
            if earlier != b:
                raise MergeConflict(f"{agent}'s path selects both {earlier} and {b}", _channel_into(agent, episode))
    agents = [a for a in episode.role_agents if a in paths]
    edges = [*handoff_edges(episode.nodes, agents), *episode.message_edges]
    for by_agent in chosen.values():
        if len(set(by_agent.values())) < 2:
            continue
        edge = next(((a, b) for a, b in edges if a in by_agent and b in by_agent and by_agent[a] != by_agent[b]), None)
        if edge is None:
            first = next(a for a in agents if a in by_agent)
            other = next(a for a in agents if a in by_agent and by_agent[a] != by_agent[first])
            edge = _channel_into(other, episode) or (first, other)
            a, b = first, other
        else:
            a, b = edge
        raise MergeConflict(f"{a}'s path selects {by_agent[a]} but {b}'s selects {by_agent[b]}", edge)


#: what a merge derives from its paths, by (episode, paths): ("ok", binding, node ids, merged relation, handoffs)
#: or ("conflict", message, edge). Agents repeat records, so the same paths meet the same episode again.
_MERGES = Memo("pipeline.merge.merges", maxsize=1 << 14)


def merge_paths(paths: Mapping[str, Sequence[Task]], episode: Episode) -> Commitment:
    """Build C over every agent's path (agent -> path) or raise MergeConflict naming what does not fit.

    The commitment holds the caller's own task values; what the merge derives from them is memoized.
    """
    try:
        key: Any = (episode, tuple((a, tuple(p)) for a, p in paths.items()))
        found: Any = _MERGES.get(key)
    except TypeError:  # a task value that does not hash: merged every time
        key = found = None
    if found is None:
        try:
            c = _merge_paths(paths, episode)
            found = ("ok", c.binding, c.node_ids, c.edges, c.handoffs)
        except MergeConflict as e:
            found = ("conflict", str(e), e.edge)
        if key is not None:  # about 600 bytes a task, as caches.entry_bytes measures such an entry (cheaper)
            _MERGES.put(key, found, size=200 + 600 * sum(len(p) for _, p in key[1]))
    if found[0] == "conflict":
        raise MergeConflict(found[1], found[2])
    agents = episode.role_agents
    return Commitment(agents, tuple(tuple(paths[a]) for a in agents), *found[1:])


def _merge_paths(paths: Mapping[str, Sequence[Task]], episode: Episode) -> Commitment:
    if episode.is_team:
        _consistent(paths, episode)
    binding = selected_binding(paths, episode)
    agents = episode.role_agents
    ids: dict[str, tuple[str, ...]] = {}
    for agent in agents:
        try:
            ids[agent] = _match(paths[agent], episode.role_of[agent], episode, binding, agent)
        except MergeConflict as e:
            raise MergeConflict(str(e), _channel_into(agent, episode) if episode.is_team else None) from None
    handoffs = []
    cross = []
    # two agents: the paper's one handoff, first role to second; a team: every handoff of the branch
    pairs = handoff_edges(episode.branch_nodes(binding), agents) if episode.is_team else ((episode.first, episode.second),)
    for giver, receiver in pairs:
        try:
            p, c, item, count = handoff(paths[giver], paths[receiver], giver, receiver)
        except MergeConflict as e:
            raise MergeConflict(str(e), (giver, receiver) if episode.is_team else None) from None
        handoffs.append((giver, receiver, item, count))
        cross.append((ids[giver][p], ids[receiver][c]))
    nodes = [n for a in agents for n in ids[a]]
    edges = {(a, b) for a_ids in ids.values() for a, b in zip(a_ids, a_ids[1:])}
    edges |= {(pred, n.id) for n in episode.branch_nodes(binding) for pred in n.preds if pred in nodes}
    edges |= set(cross)
    ordered = tuple(sorted(edges))
    if not _acyclic(nodes, ordered):
        raise MergeConflict("the paths' order contradicts the public predecessors: the merged relation has a cycle")
    return Commitment(agents, tuple(tuple(paths[a]) for a in agents), binding, tuple(ids[a] for a in agents), ordered,
                      tuple(handoffs))
