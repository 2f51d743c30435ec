"""Evaluation and training pools, built deterministically from the prior as matched pairs.

Counting follows the paper. A *semantic cluster* is one binding's instance of a public instance
(template, order quantity, world variant, decoy objects); a *matched pair* is the two clusters of one
public instance that differ only in the hidden fact. Every pool is drawn as pairs, so the agent without
the fact sees byte-identical views of the two clusters until a message arrives (Proposition "Paired
local ambiguity"), and every cluster runs under both role permutations:
episodes = 2 x clusters = 4 x pairs. For one seed the pools are pairwise disjoint (no cluster in two pools).

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
from collections.abc import Sequence
from gencoord_env.caches import cache
from gencoord_env.suggest import unknown

from gencoord_env.tasks.episode import Cluster, Episode
from gencoord_env.tasks.prior import GOAL_CAPABILITY, Prior, TemplateSpec, prior

POOL_SIZES: dict[str, int] = {
    "train": 480,
    "heldout": 128,
    "request": 160,
    "horizon": 80,
    "crossproduct": 60,
    "goal_capability": 40,
    "visibility": 96,
}

#: Pairs per core template in the pools drawn from the same side of the quantity split, in draw order.
_CORE_PAIRS: dict[str, int] = {"train": 30, "heldout": 8, "request": 10}



def _crossproduct_q() -> dict[str, int]:
    """Each core template's ``crossproduct_q`` (``data/tasks.json``), checked: one of its quantities, and a
    Latin assignment (every quantity held out by exactly one core template, so each is still seen in train
    with the others)."""
    core = [t for t in prior().templates.values() if t.split == "core"]
    out = {t.id: t.crossproduct_q for t in core}
    for t in core:
        if t.crossproduct_q not in t.quantities:
            raise ValueError(f"core template {t.id!r}: crossproduct_q {t.crossproduct_q!r} must be one of its "
                             f"quantities {list(t.quantities)} (data/tasks.json)")
    if len(set(out.values())) != len(out):
        raise ValueError(f"the core templates' crossproduct_q {out} repeat a quantity; each is held out by one template")
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
    out: dict[str, list[Cluster]] = {name: [] for name in (*_CORE_PAIRS, "crossproduct")}
    core = [t for t in p.templates.values() if t.split == "core"]
    cross_pairs = _spread(POOL_SIZES["crossproduct"] // 2, len(core))
    for t, n_cross in zip(core, cross_pairs):
        held = CROSSPRODUCT_Q[t.id]
        side = _instances(p, [q for q in t.quantities if q != held], _rng(seed, t.id, "side"))
        start = 0
        for name, n in _CORE_PAIRS.items():
            for instance in side[start:start + n]:
                out[name] += _pair(name, t, instance)
            start += n
        for instance in _instances(p, [held], _rng(seed, t.id, "cross"))[:n_cross]:
            out["crossproduct"] += _pair("crossproduct", t, instance)
    return {k: tuple(v) for k, v in out.items()}


def _split_pool(name: str, split: str, per_template: int, seed: int) -> tuple[Cluster, ...]:
    p = prior()
    out: list[Cluster] = []
    for t in (t for t in p.templates.values() if t.split == split):
        for instance in _instances(p, t.quantities, _rng(seed, t.id, split))[:per_template]:
            out += _pair(name, t, instance)
    return tuple(out)


def _goal_capability_pool() -> tuple[Cluster, ...]:
    """2 goals x 10 world variants x 2 workcell modes: each (goal, variant) is a matched pair across modes."""
    p = prior()
    gc = p.goal_capability
    out: list[Cluster] = []
    for goal in gc.goals:
        for v in p.variants:
            pair = [Cluster("goal_capability", GOAL_CAPABILITY, gc.modes[mode], goal.q, v.id, p.decoys[0].id,
                            goal=goal.id, mode=mode) for mode in gc.modes]
            out += sorted(pair, key=lambda c: c.id)
    return tuple(out)


#: team pools -> their templates (``prior().teams``)
TEAM_POOLS: dict[str, tuple[str, ...]] = {
    "teams": ("chain", "relay", "fan_in"),
    "team_feedback": ("workcells",),
    "chain3": ("chain",),
    "chain4": ("chain_4",),
    "chain5": ("chain_5",),
}
#: public instances per team template in a team pool (each as its matched set of bindings)
TEAM_INSTANCES = 8


@cache(maxsize=32)
def _team_pool(name: str, seed: int) -> tuple[Cluster, ...]:
    p = prior()
    out: list[Cluster] = []
    for tid in TEAM_POOLS[name]:
        t = p.template(tid)
        for instance in _instances(p, t.quantities, _rng(seed, tid, "teams"))[:TEAM_INSTANCES]:
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
    if name in TEAM_POOLS:
        return _team_pool(name, seed)
    if name in _CORE_PAIRS or name == "crossproduct":
        return _core_pools(seed)[name]
    if name == "horizon":
        return _split_pool(name, "horizon", POOL_SIZES["horizon"] // 2 // 4, seed)
    if name == "visibility":
        return _split_pool(name, "visibility", POOL_SIZES["visibility"] // 2 // 3, seed)
    if name == "goal_capability":
        return _goal_capability_pool()
    known = [*POOL_SIZES, *TEAM_POOLS]
    raise ValueError(unknown("pool", name, sorted(known)))
