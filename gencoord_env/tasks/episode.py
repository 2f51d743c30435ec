"""Clusters, role permutations and the grounded episode they define.

A *cluster* is one sampled semantic instance (template, binding, order quantity, world variant, decoy
objects; for Goal x Capability also the goal and the peer's workcell mode). An *episode* is a cluster under
one role permutation: which agent holds the first role (sender / requester). The episode instantiates the
public task DAG with agent ids and quantities, and builds the world the backends reset to.

A template of n roles is played by the n agents ``agent_a``, ``agent_b``, ... Its role permutations are
the n rotations: permutation ``p`` gives role ``i`` to agent ``(i + p) mod n``. For two roles these are the
paper's two permutations. For a team the rotations are a Latin square: every agent holds every role once
(so agent identity, spawn point, bot and source chest are balanced against the role, and every agent holds
the fact once), at n episodes per cluster rather than n! (120 for five agents); which agent follows which
along the chain is the part the rotations do not vary, and the world's mirrored variants vary the geometry.

An ``Episode`` is a frozen value that keeps no memo (``gencoord_env.caches``): what the env reads at every
step (its template, agents and role maps, id) is derived once by the constructor into declared fields;
what costs more (the grounded nodes, the world, the contract scopes, the terminal checks) is computed when
first asked for and memoized in the module's registered caches, keyed by the episode, so ``caches.clear()``
reaches it and the memory it holds is bounded.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, cast

from gencoord_env.caches import Memo, cache
from gencoord_env.catalog import CATALOG
from gencoord_env.errors import UsageError
from gencoord_env.types import Args, Task, Value
from gencoord_env.tasks.prior import (
    FACTOR_JOIN,
    GOAL_CAPABILITY,
    NodeSpec,
    Prior,
    StationSpec,
    TemplateSpec,
    TerminalSpec,
    eval_quantity,
    prior,
)
from gencoord_env.world.types import Pos, Station, WorldSpec

if TYPE_CHECKING:
    from gencoord_env.contract import PublicScope

AGENTS: tuple[str, str] = ("agent_a", "agent_b")
#: agent ids of a team, in order: a team of n agents is the first n
TEAM_AGENTS: tuple[str, ...] = ("agent_a", "agent_b", "agent_c", "agent_d", "agent_e")
#: episodes whose derived values (nodes, world, scopes, ...) each memo keeps: a few pools' worth
EPISODE_MEMO = 8192
#: each distinct station layout once (``Episode.world``)
_LAYOUTS = Memo("tasks.episode.layouts")


@dataclass(frozen=True)
class EpisodeRef:
    """What an episode id says, read back (:func:`parse_episode_id`): ids are made by ``Cluster.id`` and
    ``Episode.id`` above and read nowhere else.

    ``cluster`` is the cluster's id (the unit the bootstrap resamples), ``pair`` the public instance (the
    cluster id without its opaque tag: equal for the two clusters of a matched pair), ``perm`` the role
    permutation.
    """

    episode: str
    cluster: str
    pair: str
    pool: str
    template: str
    perm: int


def parse_episode_id(episode_id: str) -> EpisodeRef:
    """``<pool>-<template>-q<q>-<variant>-<decoy>-<tag>-R<perm>`` as its parts.

    >>> ref = parse_episode_id("heldout-chest_ab-q3-W1-D0-1a2b3c-R1")
    >>> ref.cluster, ref.pair, ref.pool, ref.template, ref.perm
    ('heldout-chest_ab-q3-W1-D0-1a2b3c', 'heldout-chest_ab-q3-W1-D0', 'heldout', 'chest_ab', 1)
    """
    cluster, sep, perm = episode_id.rpartition("-R")
    parts = cluster.split("-")
    if not sep or not perm.isdigit() or len(parts) < 2:
        raise UsageError(f"{episode_id!r} is not an episode id; expected <pool>-<template>-q<q>-<variant>-<decoy>-<tag>-R<perm>")
    return EpisodeRef(episode_id, cluster, "-".join(parts[:-1]), parts[0], parts[1], int(perm))


def agents_for(n: int) -> tuple[str, ...]:
    """The agent ids of a team of ``n`` (two: ``AGENTS``)."""
    if not 2 <= n <= len(TEAM_AGENTS):
        raise UsageError(f"a team has 2 to {len(TEAM_AGENTS)} agents; got {n}")
    return TEAM_AGENTS[:n]


@dataclass(frozen=True)
class Cluster:
    """One semantic instance: one binding of one public instance; ``key`` identifies it across pools.

    ``pair_key`` is the public instance without the hidden fact: the two clusters of a matched pair share
    it. ``id`` names the public instance plus an opaque tag that tells the two clusters of a pair apart
    without naming the binding (or, in Goal x Capability, the goal and the workcell mode): ids reach
    every agent through ``infos``, and a learner must not read the hidden fact from them.
    """

    pool: str
    template: str
    binding: str  # the active binding (Goal x Capability: the branch the true world can execute; several factors: joined by "+")
    q: int
    variant: str
    decoy: str
    goal: str | None = None  # Goal x Capability only
    mode: str | None = None  # Goal x Capability only: RAW_PROCESSOR | FINISHED_RECEIVER

    @property
    def key(self) -> tuple[object, ...]:
        return (self.template, self.binding, self.q, self.variant, self.decoy, self.goal, self.mode)

    @property
    def pair_key(self) -> tuple[object, ...]:
        return (self.template, self.q, self.variant, self.decoy, self.goal)

    @property
    def pair_id(self) -> str:
        """The matched pair's id (names the Goal x Capability goal, which the pair shares)."""
        return "-".join(p for p in (self.pool, self.template, self.goal or "", f"q{self.q}", self.variant, self.decoy) if p)

    @property
    def id(self) -> str:
        public = "-".join(p for p in (self.pool, self.template, f"q{self.q}", self.variant, self.decoy) if p)
        hidden = f"{public}|{self.goal}|{self.mode}|{self.binding}"
        return f"{public}-{hashlib.sha256(hidden.encode()).hexdigest()[:6]}"


def branch_values(binding: str | None) -> tuple[str, ...]:
    """The branch ids a binding selects: itself, or each factor's value of a several-factor binding."""
    return tuple(binding.split(FACTOR_JOIN)) if binding else ()


def handoff_edges(nodes: Sequence[GroundedNode], agents: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """(giver, receiver) of each node that hands items to another agent (its skill's ``handoff`` rule)."""
    out: list[tuple[str, str]] = []
    for n in nodes:
        spec = CATALOG.skills.get(n.task.skill)
        flow = spec.handoff if spec is not None else None
        to = flow.to.fill(n.task.args) if flow is not None and flow.to is not None else None
        if to in agents and (n.actor, to) not in out:
            out.append((n.actor, str(to)))
    return tuple(out)


@dataclass(frozen=True)
class GroundedNode:
    """A public DAG node instantiated for one episode: tau = (actor, skill, args, location, preds)."""

    id: str
    role: str
    actor: str
    task: Task
    loc: str
    stage: str
    preds: tuple[str, ...]
    branch: str | None


@dataclass(frozen=True)
class TerminalCheck:
    kind: str  # "container" | "site" | "inventory"
    where: str  # station name or agent id
    item: str
    count: int


@dataclass(frozen=True)
class Episode:
    """A cluster under one role permutation (``perm`` p: agent ``p`` holds the first role, see the module docstring)."""

    cluster: Cluster
    perm: int
    prior: Prior = field(default_factory=prior, repr=False, compare=False)

    # Derived once, at construction, from the fields above: fields the constructor sets and nothing changes
    # (not memos), because the env reads them at every step. Costlier derived values (nodes, world, scopes)
    # are computed when first asked for and memoized by the module's caches (see the end of the module).
    template: TemplateSpec = field(init=False, repr=False, compare=False)
    agents: tuple[str, ...] = field(init=False, repr=False, compare=False)  # in id order (``AGENTS`` for two)
    agent_of: Mapping[str, str] = field(init=False, repr=False, compare=False)  # role -> agent
    role_of: Mapping[str, str] = field(init=False, repr=False, compare=False)  # agent -> role
    role_agents: tuple[str, ...] = field(init=False, repr=False, compare=False)  # in role order
    id: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        template = self.prior.template(self.cluster.template)
        n = len(template.roles)
        agents = agents_for(n)
        agent_of = {role: agents[(i + self.perm) % n] for i, role in enumerate(template.roles)}
        derived = {"template": template, "agents": agents, "agent_of": agent_of,
                   "role_of": {a: r for r, a in agent_of.items()}, "role_agents": tuple(agent_of[r] for r in template.roles),
                   "id": f"{self.cluster.id}-R{self.perm}"}
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    # --- roles -----------------------------------------------------------------------------------
    @property
    def roles(self) -> tuple[str, ...]:
        return self.template.roles

    @property
    def first(self) -> str:
        """The agent holding the deciding first role (sender or requester)."""
        return self.agent_of[self.roles[0]]

    @property
    def second(self) -> str:
        return self.agent_of[self.roles[1]]

    @property
    def peers_of(self) -> Mapping[str, tuple[str, ...]]:
        """Each agent's peers: every other agent, in role order."""
        return MappingProxyType({a: tuple(b for b in self.role_agents if b != a) for a in self.role_agents})

    @property
    def message_edges(self) -> tuple[tuple[str, str], ...]:
        """The template's channels as (sender agent, receiver agent), in the order messages flow."""
        return tuple((self.agent_of[a], self.agent_of[b]) for a, b in self.template.message_edges)

    @property
    def handoff_edges(self) -> tuple[tuple[str, str], ...]:
        """(giver, receiver) of every handoff on the true binding's branch, in template order."""
        return _handoff_edges_memo(self)

    def _build_handoff_edges(self) -> tuple[tuple[str, str], ...]:
        return handoff_edges(self.branch_nodes(self.binding), self.agents)

    @property
    def is_team(self) -> bool:
        """More than two agents."""
        return len(self.roles) > 2

    @property
    def is_goal_capability(self) -> bool:
        return self.cluster.template == GOAL_CAPABILITY

    # --- quantities and placeholders ---------------------------------------------------------------
    @property
    def quantities(self) -> Mapping[str, int]:
        env = {"q": self.cluster.q}
        if self.is_goal_capability:
            goal = self._goal
            env = {"q": goal.q, "h": goal.q * goal.input_per_item}
        return env

    @property
    def _goal(self):  # type: ignore[no-untyped-def]
        return next(g for g in self.prior.goal_capability.goals if g.id == self.cluster.goal)

    @property
    def placeholders(self) -> Mapping[str, str]:
        values = {"$source": self.template.source, **{f"${r}": a for r, a in self.agent_of.items()}}
        if self.is_goal_capability:
            values["$goal"] = self._goal.item
        return values

    def source_chest(self, agent: str) -> str:
        return next(s.name for s in self.prior.stations if s.owner == agent)

    def _value(self, key: str, raw: Value, node: NodeSpec) -> Value:
        if key in ("q", "ticks"):
            return eval_quantity(raw, self.quantities)  # type: ignore[arg-type]  # a quantity expression
        if isinstance(raw, str) and raw.startswith("$"):
            if raw == "$source_chest":
                return self.source_chest(self.agent_of[node.actor])
            return self.placeholders[raw]
        return raw

    # --- the public DAG ----------------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[GroundedNode, ...]:
        return _nodes_memo(self)

    def _build_nodes(self) -> tuple[GroundedNode, ...]:
        out = []
        for n in self.template.nodes:
            actor = self.agent_of[n.actor]
            args = {k: self._value(k, v, n) for k, v in n.args.items()}
            task = Task(n.skill, Args(args))
            out.append(GroundedNode(n.id, n.actor, actor, task, self.location(task, actor), n.stage, n.preds, n.branch))
        return tuple(out)

    def node(self, node_id: str) -> GroundedNode:
        return self._node_by_id[node_id]

    @property
    def _node_by_id(self) -> dict[str, GroundedNode]:
        return _node_by_id_memo(self)

    def _build_node_by_id(self) -> dict[str, GroundedNode]:
        return {n.id: n for n in self.nodes}

    def location(self, task: Task, actor: str) -> str:
        """The grounding location of a task: the first given of its skill's ``location`` keys in
        ``data/catalog.json`` (``@source_chest``: ``actor``'s own source chest), else ``""``."""
        spec = CATALOG.skills.get(task.skill)
        for key in spec.location if spec is not None else CATALOG.location:
            value = self.source_chest(actor) if key == "@source_chest" else task.args.get(key)
            if value:
                return str(value)
        return ""

    def branch_nodes(self, binding: str) -> tuple[GroundedNode, ...]:
        """The public nodes on ``binding``'s branch (shared nodes included), in template order."""
        nodes = self._branches.get(binding)
        return nodes if nodes is not None else self._branches[None]

    @property
    def _branches(self) -> Mapping[str | None, tuple[GroundedNode, ...]]:
        return _branches_memo(self)

    def _build_branches(self) -> Mapping[str | None, tuple[GroundedNode, ...]]:
        # None: an inadmissible binding selects only the shared nodes; a several-factor binding selects the
        # nodes of each of its values
        return MappingProxyType({b: tuple(n for n in self.nodes if n.branch is None or n.branch in branch_values(b))
                                 for b in (*self.template.bindings, None)})

    # --- private facts and terminal predicate --------------------------------------------------------
    @property
    def binding(self) -> str:
        return self.cluster.binding

    def private_fields(self, agent: str) -> Mapping[str, str]:
        """What only ``agent`` knows: the active binding (sender; in a team, the factor its role holds) or the
        goal (requester)."""
        if self.is_goal_capability:
            if agent == self.first:
                return {"goal": f"{self._goal.item} x{self._goal.q}"}
            return {"workcell_mode": str(self.cluster.mode)}
        held = self._held.get(agent)
        return {"active_binding_id": held} if held is not None else {}

    @property
    def _held(self) -> Mapping[str, str]:
        """agent -> the value of the fact factor its role holds (an agent holds at most one)."""
        out: dict[str, str] = {}
        for f, v in zip(self.template.fact_factors, branch_values(self.binding)):
            out.setdefault(self.agent_of[f.holder], v)
        return MappingProxyType(out)

    def terminal(self, binding: str | None = None) -> tuple[TerminalCheck, ...]:
        """The terminal predicate of ``binding`` (default: the true binding) as concrete checks."""
        if binding is None or binding == self.binding:
            return self._true_terminal
        return self._terminal(binding)

    @property
    def _true_terminal(self) -> tuple[TerminalCheck, ...]:
        return _true_terminal_memo(self)

    def _build_true_terminal(self) -> tuple[TerminalCheck, ...]:
        return self._terminal(self.binding)

    def _terminal(self, binding: str) -> tuple[TerminalCheck, ...]:
        specs: tuple[TerminalSpec, ...] = tuple(s for b in branch_values(binding) for s in self.template.terminal[b])
        return tuple(
            TerminalCheck(
                kind=s.kind,
                where=self.agent_of[s.where] if s.kind == "inventory" else s.where,
                item=self.placeholders.get(s.item, s.item),
                count=eval_quantity(s.count, self.quantities),
            )
            for s in specs
        )

    # --- public scope and world ----------------------------------------------------------------------
    @property
    def public_stations(self) -> tuple[StationSpec, ...]:
        return _public_stations_memo(self)

    def _build_public_stations(self) -> tuple[StationSpec, ...]:
        suites: tuple[str | None, ...] = (None, GOAL_CAPABILITY) if self.is_goal_capability else (None, self.template.suite)
        if self.template.suite is not None:  # a team template's own stations
            suites += (self.template.id,)
        return tuple(s for s in self.prior.stations if s.suite in suites)

    @property
    def references(self) -> frozenset[str]:
        """Every grounding reference of the episode: public station names and agent ids."""
        return _references_memo(self)

    def _build_references(self) -> frozenset[str]:
        return frozenset(s.name for s in self.public_stations) | frozenset(self.agent_of.values())

    def scope(self, agent: str) -> PublicScope:
        """The public instantiation xi_pub as the contract checker sees it for ``agent``."""
        return self._scopes[agent]

    @property
    def _scopes(self) -> Mapping[str, PublicScope]:
        return _scopes_memo(self)

    def _build_scopes(self) -> Mapping[str, PublicScope]:
        from gencoord_env.contract import PublicScope

        references = frozenset(s.name for s in self.public_stations)
        bindings = frozenset(self.template.branch_ids)
        return {a: PublicScope(agents=self.agents, agent=a, references=references, bindings=bindings) for a in self.agents}

    @property
    def _variant(self):  # type: ignore[no-untyped-def]
        return self.prior.variant(self.cluster.variant)

    def place(self, pos: Pos) -> Pos:
        """A layout position in this episode's world variant (shifted, mirrored)."""
        v = self._variant
        x, y, z = pos
        if v.mirror:
            x = -x
        return (x + v.shift[0], y, z + v.shift[1])

    @property
    def source_stock(self) -> Mapping[str, int]:
        """What the first role's source chest holds: enough for either branch, so stock reveals nothing."""
        return _source_stock_memo(self)

    def _build_source_stock(self) -> Mapping[str, int]:
        return self.stock_of(self.roles[0])

    def stock_of(self, role: str) -> Mapping[str, int]:
        """What ``role``'s source chest holds: what its ``resource.obtain`` nodes take on any branch."""
        need: dict[str, int] = {}
        for b in self.template.bindings:
            per: dict[str, int] = {}
            for n in self.branch_nodes(b):
                if n.role == role and n.task.skill == "resource.obtain":
                    item, q = str(n.task.args["item"]), cast(int, n.task.args["q"])
                    per[item] = per.get(item, 0) + q
            for item, q in per.items():
                need[item] = max(need.get(item, 0), q)
        return need

    @property
    def world(self) -> WorldSpec:
        return _world_memo(self)

    def _build_world(self) -> WorldSpec:
        decoy = self.prior.decoy(self.cluster.decoy)
        selected = branch_values(self.binding)
        built = [
            s for s in self.public_stations if (s.mode is None or s.mode == self.cluster.mode)
            and (s.branch is None or s.branch in selected)
        ]
        stations = tuple(
            Station(s.name, s.kind, self.place(s.pos), tuple(self.place(c) for c in s.cells)) for s in built
        )
        # one tuple per distinct layout (a pool has a handful): a world that validated it finds it again by
        # identity, without comparing every station
        known = _LAYOUTS.get(stations)
        stations = known if known is not None else _LAYOUTS.put(stations, stations)
        containers: dict[str, dict[str, int]] = {s.name: {} for s in built if s.kind == "chest"}
        source = containers[self.source_chest(self.first)]
        for item, n in [*self.source_stock.items(), *decoy.source_chest.items()]:
            source[item] = source.get(item, 0) + n
        for role in self.roles[1:]:  # in a team other roles may obtain from their own source chests too
            for item, n in self.stock_of(role).items():
                chest = containers[self.source_chest(self.agent_of[role])]
                chest[item] = chest.get(item, 0) + n
        receiver_inv = dict(decoy.receiver_inventory)
        for item, expr in (self.template.receiver_inventory or {}).items():
            receiver_inv[item] = receiver_inv.get(item, 0) + eval_quantity(expr, self.quantities)
        others: dict[str, dict[str, int]] = {self.agent_of[r]: {} for r in self.roles[2:]}
        return WorldSpec(
            agents=self.agents,
            stations=stations,
            positions={a: self.place(p) for a, p in self.prior.spawn.items() if a in self.agent_of.values()},
            inventories={self.first: {}, self.second: receiver_inv, **others},
            containers=containers,
            cook_ticks=self.prior.variant(self.cluster.variant).cook_ticks,
        )


# Memos of the derived values of an episode, keyed by the episode (``caches``: bounded, clearable, never a
# field of the frozen value). An episode's values are a pure function of its cluster and role permutation:
# its prior is the package's, or for a generated template one that only adds that template, whose id is
# unique to it.
@cache(maxsize=EPISODE_MEMO)
def _handoff_edges_memo(episode: Episode) -> tuple[tuple[str, str], ...]:
    return episode._build_handoff_edges()


@cache(maxsize=EPISODE_MEMO)
def _nodes_memo(episode: Episode) -> tuple[GroundedNode, ...]:
    return episode._build_nodes()


@cache(maxsize=EPISODE_MEMO)
def _node_by_id_memo(episode: Episode) -> dict[str, GroundedNode]:
    return episode._build_node_by_id()


@cache(maxsize=EPISODE_MEMO)
def _branches_memo(episode: Episode) -> Mapping[str | None, tuple[GroundedNode, ...]]:
    return episode._build_branches()


@cache(maxsize=EPISODE_MEMO)
def _true_terminal_memo(episode: Episode) -> tuple[TerminalCheck, ...]:
    return episode._build_true_terminal()


@cache(maxsize=EPISODE_MEMO)
def _public_stations_memo(episode: Episode) -> tuple[StationSpec, ...]:
    return episode._build_public_stations()


@cache(maxsize=EPISODE_MEMO)
def _references_memo(episode: Episode) -> frozenset[str]:
    return episode._build_references()


@cache(maxsize=EPISODE_MEMO)
def _scopes_memo(episode: Episode) -> Mapping[str, PublicScope]:
    return episode._build_scopes()


@cache(maxsize=EPISODE_MEMO)
def _source_stock_memo(episode: Episode) -> Mapping[str, int]:
    return episode._build_source_stock()


@cache(maxsize=EPISODE_MEMO)
def _world_memo(episode: Episode) -> WorldSpec:
    return episode._build_world()
