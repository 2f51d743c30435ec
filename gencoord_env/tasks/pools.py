"""Evaluation and training pools, built deterministically from the prior as matched pairs.

Counting follows the paper. A *semantic cluster* is one binding's instance of a public instance
(template, order quantity, world variant, decoy objects); a *matched pair* is the two clusters of one
public instance that differ only in the hidden fact. Every pool is drawn as pairs, so the agent without
the fact sees byte-identical views of the two clusters until a message arrives (Proposition "Paired
local ambiguity"), and every cluster runs under both role permutations:
episodes = 2 x clusters = 4 x pairs. For one seed the pools are pairwise disjoint (no cluster in two pools).

The sizes below are data: each named pool is a row of the ``pools`` table of ``data/tasks.json`` (its draw,
its size in clusters, its pairs or instances per template, a team pool's templates), read and checked
against the prior once, at import (``load_pools``, ``POOL_SPECS``).

| pool | clusters | pairs | construction |
| --- | --- | --- | --- |
| ``train`` | 480 | 240 | 30 pairs per core template (8); quantities other than the template's crossproduct quantity |
| ``heldout`` | 128 | 64 | 8 pairs per core template: public instances not in train |
| ``request`` | 160 | 80 | 10 pairs per core template: further unseen public instances |
| ``crossproduct`` | 60 | 30 | each core template at its crossproduct quantity (``CROSSPRODUCT_Q``): the template and the quantity are each seen in train, their combination never |
| ``horizon`` | 80 | 40 | 10 pairs per held-out template (one per family, never in train) |
| ``goal_capability`` | 40 | 20 | 2 goals x 10 world variants, each under both workcell modes |
| ``visibility`` | 96 | 48 | 16 pairs per motif: familiar post-handoff craft, smelt input-then-fuel, smelt fuel-then-input |
| ``procedural`` | endless | endless | one generated template per pair, never a held-out structure or a crossproduct combination: ``gencoord_env.tasks.procedural.procedural_episodes(seed)``, a lazy sequence of episodes (not drawn by ``pool``) |

Inside a pool the public instances cycle through the template's quantities, so every pool covers them
evenly; the order of the two clusters of a pair is opaque (it follows the clusters' ids, which do not
name the binding).

Team pools (``TEAM_POOLS``, apart from the paper's sizes above) draw ``TEAM_INSTANCES`` public instances
per team template, each as its matched set: every binding of the instance (two for one factor, four for
two factors of two values), so an agent without a fact sees the same views across the set. Every cluster
of a team of n runs under the n rotations of its roles (``gencoord_env.tasks.episode``):

| pool | templates | clusters | episodes |
| --- | --- | --- | --- |
| ``teams`` | chain, relay, fan_in | 16 + 16 + 32 | 3 x 64 |
| ``team_feedback`` | workcells (feedback route: each peer's capability decides its edge) | 32 | 3 x 32 |
| ``chain3`` / ``chain4`` / ``chain5`` | the chain family at 3, 4, 5 agents | 16 each | 3, 4, 5 x 16 |
"""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gencoord_env.caches import cache
from gencoord_env.errors import DataError, UnknownName
from gencoord_env.suggest import unknown
from gencoord_env.tasks.episode import Cluster, Episode
from gencoord_env.tasks.prior import GOAL_CAPABILITY, Prior, TemplateSpec, prior, raw_tasks

#: How each kind of pool is drawn (``data/tasks.json`` ``pools``: each pool names its ``draw``), and the keys
#: that kind reads besides ``draw``.
DRAWS: dict[str, tuple[str, ...]] = {
    "core": ("clusters", "pairs_per_template"),
    "split": ("clusters", "split", "pairs_per_template"),
    "crossproduct": ("clusters",),
    "goal_capability": ("clusters",),
    "team": ("templates", "instances_per_template"),
}


@dataclass(frozen=True)
class PoolSpec:
    """One named pool as ``data/tasks.json`` sizes it (``load_pools`` checks it against the prior)."""

    name: str
    draw: str
    clusters: int = 0  # a paper pool's size; 0 for a team pool (its size follows from its templates)
    per_template: int = 0  # matched pairs (core, split) or public instances (team) of each template
    split: str | None = None  # a split pool's template split
    templates: tuple[str, ...] = ()  # a team pool's templates


def _count(where: str, raw: Mapping[str, Any], key: str) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataError(f"{where}.{key}: expected a positive integer, got {value!r}")
    return value


def load_pools(raw: Mapping[str, Any], p: Prior) -> dict[str, PoolSpec]:
    """The ``pools`` table of a ``tasks.json`` (``raw``), each row checked against the prior ``p``: its keys,
    its templates, and its ``clusters`` against what its draw makes. ``ValueError`` names the row and key.
    """
    table = raw.get("pools")
    if not isinstance(table, Mapping) or not table:
        raise DataError("data/tasks.json: expected a 'pools' table naming each pool's draw and size")
    out: dict[str, PoolSpec] = {}
    core = [t for t in p.templates.values() if t.split == "core"]
    for name, row in table.items():
        where = f"data/tasks.json pools.{name}"
        draw = row.get("draw") if isinstance(row, Mapping) else None
        if draw not in DRAWS:
            raise DataError(f"{where}.draw: {unknown('draw', draw, DRAWS)}")
        extra = sorted(set(row) - {"draw", *DRAWS[draw]})
        if extra:
            raise DataError(f"{where}: unknown key(s) {extra}; a {draw!r} pool has {list(DRAWS[draw])}")
        if draw == "team":
            templates = row.get("templates")
            if not isinstance(templates, list) or not templates or not all(t in p.teams for t in templates):
                raise DataError(f"{where}.templates: expected a list of team templates (of {sorted(p.teams)}), "
                                f"got {templates!r}")
            out[name] = PoolSpec(name, draw, per_template=_count(where, row, "instances_per_template"),
                                 templates=tuple(templates))
            continue
        clusters = _count(where, row, "clusters")
        if draw in ("core", "split"):
            split = "core" if draw == "core" else row.get("split")
            members = [t for t in p.templates.values() if t.split == split]
            if not members:
                splits = sorted({t.split for t in p.templates.values()} - {"core"})
                raise DataError(f"{where}.split: {unknown('split', split, splits)}")
            pairs = _count(where, row, "pairs_per_template")
            made = 2 * pairs * len(members)
            why = f"{pairs} pairs of each of the {len(members)} {split} templates"
            out[name] = PoolSpec(name, draw, clusters, pairs, None if draw == "core" else split)
        elif draw == "crossproduct":
            per_template = -(-(clusters // 2) // len(core)) if core else 0
            fits = clusters % 2 == 0 and len(core) <= clusters // 2 and per_template <= len(p.variants) * len(p.decoys)
            made = clusters if fits else -1
            why = (f"an even number of clusters, one to {len(p.variants) * len(p.decoys)} pairs for each of the "
                   f"{len(core)} core templates")
            out[name] = PoolSpec(name, draw, clusters)
        else:
            gc = p.goal_capability
            made = len(gc.goals) * len(p.variants) * len(gc.modes)
            why = f"{len(gc.goals)} goals x {len(p.variants)} world variants x {len(gc.modes)} workcell modes"
            out[name] = PoolSpec(name, draw, clusters)
        if clusters != made:
            raise DataError(f"{where}.clusters: {clusters} is not what the draw makes ({why}"
                            + (f": {made}" if made > 0 else "") + ")")
    for draw in ("crossproduct", "goal_capability"):
        if sum(1 for spec in out.values() if spec.draw == draw) != 1:
            raise DataError(f"data/tasks.json pools: expected exactly one pool with draw {draw!r}")
    _check_instances(out, p)
    return out


def _check_instances(specs: Mapping[str, PoolSpec], p: Prior) -> None:
    """Each template has the public instances its pools take from it (quantities x world variants x decoys),
    so that no pool comes out smaller than the table says."""
    per_q = len(p.variants) * len(p.decoys)
    wanted: dict[str, tuple[int, int, list[str]]] = {}  # template -> (instances taken, instances it has, pools)

    def take(t: TemplateSpec, n: int, has: int, name: str) -> None:
        taken, _, names = wanted.get(t.id, (0, has, []))
        wanted[t.id] = (taken + n, has, [*names, name])

    for spec in specs.values():
        if spec.draw == "core":
            for t in (t for t in p.templates.values() if t.split == "core"):
                take(t, spec.per_template, (len(t.quantities) - 1) * per_q, spec.name)
        elif spec.draw == "split":
            for t in (t for t in p.templates.values() if t.split == spec.split):
                take(t, spec.per_template, len(t.quantities) * per_q, spec.name)
        elif spec.draw == "team":
            for tid in spec.templates:
                t = p.teams[tid]
                wanted[f"{spec.name}:{tid}"] = (spec.per_template, len(t.quantities) * per_q, [spec.name])
    for key, (taken, has, names) in wanted.items():
        if taken > has:
            raise DataError(f"data/tasks.json pools {', '.join(names)}: take {taken} public instances of template "
                            f"{key.split(':')[-1]!r}, which has {has}")


#: Every named pool but ``procedural``, as ``data/tasks.json`` sizes it (read once, at import).
POOL_SPECS: dict[str, PoolSpec] = load_pools(raw_tasks(), prior())

#: The paper's pools and their sizes in clusters.
POOL_SIZES: dict[str, int] = {n: s.clusters for n, s in POOL_SPECS.items() if s.draw != "team"}

#: Pairs per core template in the pools drawn from the same side of the quantity split, in draw order.
_CORE_PAIRS: dict[str, int] = {n: s.per_template for n, s in POOL_SPECS.items() if s.draw == "core"}


def _crossproduct_q() -> dict[str, int]:
    """Each core template's ``crossproduct_q`` (``data/tasks.json``), checked: one of its quantities, and a
    Latin assignment (every quantity held out by exactly one core template, so each is still seen in train
    with the others)."""
    core = [t for t in prior().templates.values() if t.split == "core"]
    out = {t.id: t.crossproduct_q for t in core}
    for t in core:
        if t.crossproduct_q not in t.quantities:
            raise DataError(f"core template {t.id!r}: crossproduct_q {t.crossproduct_q!r} must be one of its "
                            f"quantities {list(t.quantities)} (data/tasks.json)")
    if len(set(out.values())) != len(out):
        raise DataError(f"the core templates' crossproduct_q {out} repeat a quantity; each is held out by one template")
    return out  # type: ignore[return-value]


#: The order quantity each core template keeps out of train, heldout and request (its ``crossproduct_q``).
CROSSPRODUCT_Q: dict[str, int] = _crossproduct_q()

PublicInstance = tuple[int, str, str]  # (order quantity, world variant, decoy)


def _rng(seed: int, *parts: object) -> random.Random:
    return random.Random(f"{seed}:" + ":".join(map(str, parts)))


def _instances(p: Prior, quantities: Sequence[int], rng: random.Random) -> list[PublicInstance]:
    """Every (quantity, variant, decoy) public instance, shuffled, with the quantities interleaved.

    Round-robin over the quantities (each one's instances shuffled) so that any run of consecutive
    instances covers the quantities evenly: a pool sliced from this list sees every quantity.
    """
    by_q = []
    for q in quantities:
        group = [(q, v.id, d.id) for v in p.variants for d in p.decoys]
        rng.shuffle(group)
        by_q.append(group)
    rng.shuffle(by_q)
    return [group[i] for i in range(max(map(len, by_q))) for group in by_q if i < len(group)]


def _pair(pool_name: str, t: TemplateSpec, instance: PublicInstance) -> list[Cluster]:
    q, v, d = instance
    clusters = [Cluster(pool_name, t.id, b, q, v, d) for b in t.bindings]
    return sorted(clusters, key=lambda c: c.id)


def _spread(total: int, slots: int) -> list[int]:
    base, extra = divmod(total, slots)
    return [base + (1 if i < extra else 0) for i in range(slots)]


@cache(maxsize=32)
def _core_pools(seed: int) -> dict[str, tuple[Cluster, ...]]:
    p = prior()
    cross = next(s for s in POOL_SPECS.values() if s.draw == "crossproduct")
    out: dict[str, list[Cluster]] = {name: [] for name in (*_CORE_PAIRS, cross.name)}
    core = [t for t in p.templates.values() if t.split == "core"]
    cross_pairs = _spread(cross.clusters // 2, len(core))
    for t, n_cross in zip(core, cross_pairs):
        held = CROSSPRODUCT_Q[t.id]
        side = _instances(p, [q for q in t.quantities if q != held], _rng(seed, t.id, "side"))
        start = 0
        for name, n in _CORE_PAIRS.items():
            for instance in side[start:start + n]:
                out[name] += _pair(name, t, instance)
            start += n
        for instance in _instances(p, [held], _rng(seed, t.id, "cross"))[:n_cross]:
            out[cross.name] += _pair(cross.name, t, instance)
    return {k: tuple(v) for k, v in out.items()}


def _split_pool(name: str, split: str, per_template: int, seed: int) -> tuple[Cluster, ...]:
    p = prior()
    out: list[Cluster] = []
    for t in (t for t in p.templates.values() if t.split == split):
        for instance in _instances(p, t.quantities, _rng(seed, t.id, split))[:per_template]:
            out += _pair(name, t, instance)
    return tuple(out)


def _goal_capability_pool(name: str) -> tuple[Cluster, ...]:
    """2 goals x 10 world variants x 2 workcell modes: each (goal, variant) is a matched pair across modes."""
    p = prior()
    gc = p.goal_capability
    out: list[Cluster] = []
    for goal in gc.goals:
        for v in p.variants:
            pair = [Cluster(name, GOAL_CAPABILITY, gc.modes[mode], goal.q, v.id, p.decoys[0].id,
                            goal=goal.id, mode=mode) for mode in gc.modes]
            out += sorted(pair, key=lambda c: c.id)
    return tuple(out)


#: team pools -> their templates (``prior().teams``)
TEAM_POOLS: dict[str, tuple[str, ...]] = {n: s.templates for n, s in POOL_SPECS.items() if s.draw == "team"}


@cache(maxsize=32)
def _team_pool(name: str, seed: int) -> tuple[Cluster, ...]:
    p = prior()
    out: list[Cluster] = []
    for tid in TEAM_POOLS[name]:
        t = p.template(tid)
        for instance in _instances(p, t.quantities, _rng(seed, tid, "teams"))[:POOL_SPECS[name].per_template]:
            out += _pair(name, t, instance)
    return tuple(out)


def role_permutations(cluster: Cluster) -> int:
    """How many role permutations a cluster runs under: its template's role count (the rotations)."""
    return len(prior().template(cluster.template).roles)


@cache(maxsize=32)
def pool_episodes(name: str, seed: int = 0) -> tuple[Episode, ...]:
    """The episodes of pool ``name`` in env index order: each cluster under each of its role permutations.

    The same tuple for the same arguments, so what an episode derives once (its world, DAG, scopes) is
    built once per process, not once per env.

    >>> [e.perm for e in pool_episodes("heldout")[:4]]
    [0, 1, 0, 1]
    """
    return tuple(Episode(c, perm) for c in pool(name, seed) for perm in range(role_permutations(c)))


def pool(name: str, seed: int = 0) -> tuple[Cluster, ...]:
    """The clusters of pool ``name`` (see the module docstring), drawn with ``seed``.

    >>> len(pool("heldout"))
    128
    """
    spec = POOL_SPECS.get(name)
    if spec is None:
        raise UnknownName("pool", name, sorted(POOL_SPECS))
    if spec.draw == "team":
        return _team_pool(name, seed)
    if spec.draw in ("core", "crossproduct"):
        return _core_pools(seed)[name]
    if spec.draw == "split":
        return _split_pool(name, str(spec.split), spec.per_template, seed)
    return _goal_capability_pool(name)
