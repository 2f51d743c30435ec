"""The shared executable prior K, loaded from ``data/tasks.json`` into frozen values.

The JSON is the single source of truth for layout, world variants, the binding codebook and the task
templates; this module only reads and validates it. Templates may ``extend`` another template and override
its scalar fields (source item, title, split, order text).

A template names its roles (two for the paper's suites; n for a team template, section ``teams``), the
message channels between them (default: first role to second role) and the factors of its hidden fact:
one by default, held by the first role, whose values are the template's bindings; a team template may
split the fact over several holders (``factors``), and then a binding is one value of each factor joined
by ``+`` (``STORAGE_BRANCH+SITE_A``).
"""
from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gencoord_env.caches import cache
from gencoord_env.data_files import data_path
from typing import Any

from gencoord_env.errors import DataError, UnknownName
from gencoord_env.world.types import Pos

STAGE_ORDER: tuple[str, ...] = ("acquire", "build", "handoff", "transform", "terminal")

_EXPR = re.compile(r"^(?:(\d+)\*)?([a-z])(?:\+(\d+))?$")


def eval_quantity(expr: str | int, env: Mapping[str, int]) -> int:
    """Evaluate a template quantity: ``"3"``, ``"q"``, ``"8*q"``, ``"q+2"`` or ``"2*h+1"``.

    >>> eval_quantity("8*q", {"q": 2})
    16
    """
    if isinstance(expr, int):
        return expr
    text = expr.strip()
    if text.isdigit():
        return int(text)
    m = _EXPR.match(text)
    if not m:
        raise DataError(f"bad quantity expression {expr!r}; expected N, v, A*v, v+B or A*v+B")
    factor, var, offset = m.groups()
    if var not in env:
        raise DataError(f"quantity expression {expr!r} uses {var!r}; known: {sorted(env)}")
    return int(factor or 1) * env[var] + int(offset or 0)


@dataclass(frozen=True)
class StationSpec:
    name: str
    kind: str
    pos: Pos
    cells: tuple[Pos, ...] = ()
    owner: str | None = None
    suite: str | None = None  # only present in episodes of this suite (a team template's id: of that template)
    mode: str | None = None  # only built in worlds of this peer workcell mode
    branch: str | None = None  # only built in worlds whose binding selects this branch id (a team's capability)


@dataclass(frozen=True)
class WorldVariant:
    id: str
    shift: tuple[int, int]
    mirror: bool
    cook_ticks: int


@dataclass(frozen=True)
class Decoy:
    id: str
    source_chest: Mapping[str, int]
    receiver_inventory: Mapping[str, int]


@dataclass(frozen=True)
class NodeSpec:
    """A public task-DAG node: actor slot (role), skill, argument templates, stage and predecessors."""

    id: str
    actor: str
    skill: str
    args: Mapping[str, Any]
    stage: str
    preds: tuple[str, ...] = ()
    branch: str | None = None  # None: shared by every binding


@dataclass(frozen=True)
class TerminalSpec:
    """One clause of a terminal predicate: ``where`` holds exactly ``count`` of ``item``."""

    kind: str  # "container" | "site" | "inventory"
    where: str  # station name, or a role name for "inventory"
    item: str
    count: str


@dataclass(frozen=True)
class FactorSpec:
    """One part of the hidden fact: the role that holds it and the branch ids it chooses between."""

    holder: str
    bindings: tuple[str, ...]


#: joins the values of a several-factor binding (``STORAGE_BRANCH+SITE_A``); an atom character, never in a branch id
FACTOR_JOIN = "+"


@dataclass(frozen=True)
class TemplateSpec:
    id: str
    family: str
    title: str
    source: str
    split: str  # "core" (train/heldout/request/crossproduct), "horizon", "visibility", "teams"
    changed_field: str
    bindings: tuple[str, ...]  # every value of the hidden fact (several factors: one branch id of each, joined)
    quantities: tuple[int, ...]
    order: str
    nodes: tuple[NodeSpec, ...]
    terminal: Mapping[str, tuple[TerminalSpec, ...]]  # by branch id
    roles: tuple[str, ...] = ("sender", "receiver")
    motif: str | None = None
    receiver_inventory: Mapping[str, str] | None = None
    channels: tuple[tuple[str, str], ...] = ()  # () : the first role sends to the second
    factors: tuple[FactorSpec, ...] = ()  # () : one factor, held by the first role, valued by ``bindings``
    suite: str | None = None  # stations of this suite are built in its episodes
    crossproduct_q: int | None = None  # a core template: the quantity only the crossproduct pool pairs it with

    def node(self, node_id: str) -> NodeSpec:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    @property
    def message_edges(self) -> tuple[tuple[str, str], ...]:
        """The channels (sender role, receiver role) in the order messages flow along them."""
        return self.channels or ((self.roles[0], self.roles[1]),)

    @property
    def fact_factors(self) -> tuple[FactorSpec, ...]:
        return self.factors or (FactorSpec(self.roles[0], self.bindings),)

    @property
    def branch_ids(self) -> tuple[str, ...]:
        """Every branch id a ``bind`` argument may name: the bindings, or each factor's values."""
        return tuple(b for f in self.fact_factors for b in f.bindings)

    def factor_of(self, branch: str) -> int | None:
        """Which factor ``branch`` is a value of (``None``: not a branch id of this template)."""
        return next((i for i, f in enumerate(self.fact_factors) if branch in f.bindings), None)


@dataclass(frozen=True)
class GoalSpec:
    id: str
    item: str
    q: int
    input_per_item: int


@dataclass(frozen=True)
class GoalCapabilitySpec:
    """The Goal x Capability suite: one DAG whose branch is chosen by the peer's workcell mode."""

    template: TemplateSpec
    goals: tuple[GoalSpec, ...]
    modes: Mapping[str, str]  # workcell mode -> the branch (binding id) that world can execute
    initial_branch: str
    counter_offer_id: str


@dataclass(frozen=True)
class Prior:
    stations: tuple[StationSpec, ...]
    spawn: Mapping[str, Pos]
    variants: tuple[WorldVariant, ...]
    decoys: tuple[Decoy, ...]
    codebook: Mapping[str, str]
    templates: Mapping[str, TemplateSpec]
    goal_capability: GoalCapabilitySpec
    teams: Mapping[str, TemplateSpec] = field(default_factory=dict)  # team templates (n roles), apart from the paper's

    def template(self, template_id: str) -> TemplateSpec:
        if template_id == GOAL_CAPABILITY:
            return self.goal_capability.template
        found = self.templates.get(template_id) or self.teams.get(template_id)
        if found is None:
            raise UnknownName("template", template_id, sorted([*self.templates, *self.teams]))
        return found

    def variant(self, variant_id: str) -> WorldVariant:
        found = next((v for v in self.variants if v.id == variant_id), None)  # ten of them: no index needed
        if found is None:
            raise UnknownName("world variant", variant_id, [v.id for v in self.variants])
        return found

    def decoy(self, decoy_id: str) -> Decoy:
        found = next((d for d in self.decoys if d.id == decoy_id), None)
        if found is None:
            raise UnknownName("decoy", decoy_id, [d.id for d in self.decoys])
        return found


GOAL_CAPABILITY = "goal_capability"
#: the split and station suite of the team templates
TEAMS = "teams"


def _pos(value: Any) -> Pos:
    x, y, z = value
    return (int(x), int(y), int(z))


def _node(raw: Mapping[str, Any]) -> NodeSpec:
    if raw["stage"] not in STAGE_ORDER:
        raise DataError(f"node {raw['id']!r}: stage {raw['stage']!r} is not one of {STAGE_ORDER}")
    return NodeSpec(
        id=raw["id"], actor=raw["actor"], skill=raw["skill"], args=dict(raw["args"]), stage=raw["stage"],
        preds=tuple(raw.get("preds", ())), branch=raw.get("branch"),
    )


def _terminal(raw: Mapping[str, list[Mapping[str, Any]]]) -> dict[str, tuple[TerminalSpec, ...]]:
    out: dict[str, tuple[TerminalSpec, ...]] = {}
    for binding, clauses in raw.items():
        specs = []
        for c in clauses:
            kind = next(k for k in ("container", "site", "inventory") if k in c)
            specs.append(TerminalSpec(kind=kind, where=c[kind], item=c["item"], count=str(c["count"])))
        out[binding] = tuple(specs)
    return out


def _template(tid: str, raw: Mapping[str, Any], raw_all: Mapping[str, Any], roles: tuple[str, ...],
              suite: str | None = None) -> TemplateSpec:
    if "extends" in raw:
        base = dict(raw_all[raw["extends"]])
        base.update({k: v for k, v in raw.items() if k != "extends"})
        raw = base
    roles = tuple(raw.get("roles", roles))
    nodes = tuple(_node(n) for n in raw["nodes"])
    ids = {n.id for n in nodes}
    for n in nodes:
        missing = [p for p in n.preds if p not in ids]
        if missing:
            raise DataError(f"template {tid!r} node {n.id!r} names unknown predecessors {missing}")
        if n.actor not in roles:
            raise DataError(f"template {tid!r} node {n.id!r}: actor {n.actor!r} is not one of its roles {roles}")
    channels = tuple((str(a), str(b)) for a, b in raw.get("channels", ()))
    for a, b in channels:
        if a not in roles or b not in roles or a == b:
            raise DataError(f"template {tid!r}: channel {a!r} -> {b!r} must join two of its roles {roles}")
    factors = tuple(FactorSpec(f["holder"], tuple(f["bindings"])) for f in raw.get("factors", ()))
    for f in factors:
        if f.holder not in roles:
            raise DataError(f"template {tid!r}: factor holder {f.holder!r} is not one of its roles {roles}")
    terminal = _terminal(raw["terminal"])
    if factors:
        bindings = tuple(FACTOR_JOIN.join(combo) for combo in itertools.product(*(f.bindings for f in factors)))
        branch_ids = [b for f in factors for b in f.bindings]
    else:
        bindings = tuple(raw.get("bindings") or terminal)
        branch_ids = list(bindings)
    if set(terminal) != set(branch_ids) or len(set(branch_ids)) != len(branch_ids):
        raise DataError(f"template {tid!r}: terminal predicates {sorted(terminal)} != bindings {sorted(branch_ids)}")
    for n in nodes:
        if n.branch is not None and n.branch not in branch_ids:
            raise DataError(f"template {tid!r} node {n.id!r}: branch {n.branch!r} is not one of {branch_ids}")
    return TemplateSpec(
        id=tid, family=raw.get("family", GOAL_CAPABILITY), title=raw["title"], source=raw["source"],
        split=raw.get("split", suite or GOAL_CAPABILITY), changed_field=raw.get("changed_field", "actor, handoff item, suffix"),
        bindings=bindings, quantities=tuple(raw.get("quantities", (1,))), order=raw["order"], nodes=nodes,
        terminal=terminal, roles=roles, motif=raw.get("motif"), receiver_inventory=raw.get("receiver_inventory"),
        channels=channels, factors=factors, suite=suite, crossproduct_q=raw.get("crossproduct_q"),
    )


def _teams(raw: Mapping[str, Any]) -> dict[str, TemplateSpec]:
    """The team templates: the hand-written ones, and the generated chain family (``team_chains``)."""
    from gencoord_env.tasks.team_chain import chain_raw

    hand = raw.get("teams", {})
    teams = {tid: _template(tid, t, hand, (), TEAMS) for tid, t in hand.items()}
    for n in raw.get("team_chains", ()):
        teams[f"chain_{n}"] = _template(f"chain_{n}", chain_raw(hand["chain"], int(n)), hand, (), TEAMS)
    return teams


def load_prior(raw: Mapping[str, Any]) -> Prior:
    layout = raw["layout"]
    stations = tuple(
        StationSpec(name=name, kind=s["kind"], pos=_pos(s["pos"]), cells=tuple(_pos(c) for c in s.get("cells", ())),
                    owner=s.get("owner"), suite=s.get("suite"), mode=s.get("mode"), branch=s.get("branch"))
        for name, s in layout["stations"].items()
    )
    templates = {tid: _template(tid, t, raw["templates"], ("sender", "receiver")) for tid, t in raw["templates"].items()}
    gc = raw["goal_capability"]
    gc_template = _template(GOAL_CAPABILITY, {**gc, "bindings": list(gc["terminal"])}, {}, tuple(gc["roles"]))
    codebook = dict(raw["codebook"])
    teams = _teams(raw)
    for t in [*templates.values(), gc_template, *teams.values()]:
        unknown = [b for b in t.branch_ids if b not in codebook]
        if unknown:
            raise DataError(f"template {t.id!r} uses bindings {unknown} missing from the codebook")
    return Prior(
        stations=stations,
        spawn={a: _pos(p) for a, p in layout["spawn"].items()},
        variants=tuple(WorldVariant(v["id"], (int(v["shift"][0]), int(v["shift"][1])), bool(v["mirror"]), int(v["cook_ticks"]))
                       for v in raw["world_variants"]),
        decoys=tuple(Decoy(d["id"], dict(d["source_chest"]), dict(d["receiver_inventory"])) for d in raw["decoys"]),
        codebook=codebook,
        templates=templates,
        goal_capability=GoalCapabilitySpec(
            template=gc_template,
            goals=tuple(GoalSpec(g["id"], g["item"], int(g["q"]), int(g["input_per_item"])) for g in gc["goals"]),
            modes=dict(gc["modes"]), initial_branch=gc["initial_branch"], counter_offer_id=gc["counter_offer_id"],
        ),
        teams=teams,
    )


@cache(maxsize=1)
def raw_tasks() -> Mapping[str, Any]:
    """``data/tasks.json`` as read (read once; do not modify)."""
    text = data_path("tasks.json").read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


@cache(maxsize=1)
def prior() -> Prior:
    """The package's prior K (parsed once)."""
    return load_prior(raw_tasks())
