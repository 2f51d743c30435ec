"""Evaluation and training pools, built deterministically from the prior.

Every pool is a tuple of clusters; each cluster is evaluated under both role permutations. For one seed
all pools are pairwise disjoint (no cluster key in two pools). How each pool is drawn:

| pool | clusters | construction |
| --- | --- | --- |
| ``train`` | 480 | 8 core templates x 2 bindings x 30; binding i draws quantities ``quantities[i::2]`` |
| ``heldout`` | 128 | 16 per core template, new (quantity, world variant, decoy) combinations, same factor sides |
| ``request`` | 160 | 20 per core template, further unseen combinations, same factor sides |
| ``crossproduct`` | 60 | binding i paired with quantities ``quantities[1-i::2]``: each factor seen in train, the combination never |
| ``horizon`` | 80 | 20 per held-out template (one per family, never in train) |
| ``goal_capability`` | 40 | 2 goals x 2 workcell modes x 10 world variants; 20 matched pairs |
| ``visibility`` | 96 | 32 per motif: familiar post-handoff craft, smelt input-then-fuel, smelt fuel-then-input |
"""
from __future__ import annotations

import random
from functools import lru_cache

from gencoord_env.tasks.episode import Cluster
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

_CORE_PER_BINDING = {"train": 30, "heldout": 8, "request": 10}


def _combos(p: Prior, t: TemplateSpec, quantities: tuple[int, ...], rng: random.Random) -> list[tuple[int, str, str]]:
    combos = [(q, v.id, d.id) for q in quantities for v in p.variants for d in p.decoys]
    rng.shuffle(combos)
    return combos


def _rng(seed: int, *parts: object) -> random.Random:
    return random.Random(f"{seed}:" + ":".join(map(str, parts)))


@lru_cache(maxsize=32)
def _core_pools(seed: int) -> dict[str, tuple[Cluster, ...]]:
    p = prior()
    out: dict[str, list[Cluster]] = {name: [] for name in (*_CORE_PER_BINDING, "crossproduct")}
    core = [t for t in p.templates.values() if t.split == "core"]
    cross_quota = _spread(POOL_SIZES["crossproduct"], len(core) * 2)
    for ti, t in enumerate(core):
        for bi, b in enumerate(t.bindings):
            side = _combos(p, t, t.quantities[bi::2], _rng(seed, t.id, b, "side"))
            start = 0
            for name, n in _CORE_PER_BINDING.items():
                out[name] += [Cluster(name, t.id, b, q, v, d) for q, v, d in side[start:start + n]]
                start += n
            cross = _combos(p, t, t.quantities[1 - bi::2], _rng(seed, t.id, b, "cross"))
            k = cross_quota[ti * 2 + bi]
            out["crossproduct"] += [Cluster("crossproduct", t.id, b, q, v, d) for q, v, d in cross[:k]]
    return {k: tuple(v) for k, v in out.items()}


def _spread(total: int, slots: int) -> list[int]:
    base, extra = divmod(total, slots)
    return [base + (1 if i < extra else 0) for i in range(slots)]


def _split_pool(name: str, split: str, per_template: int, seed: int) -> tuple[Cluster, ...]:
    p = prior()
    out: list[Cluster] = []
    for t in (t for t in p.templates.values() if t.split == split):
        for b, n in zip(t.bindings, _spread(per_template, len(t.bindings))):
            combos = _combos(p, t, t.quantities, _rng(seed, t.id, b, split))
            out += [Cluster(name, t.id, b, q, v, d) for q, v, d in combos[:n]]
    return tuple(out)


def _goal_capability_pool() -> tuple[Cluster, ...]:
    p = prior()
    gc = p.goal_capability
    return tuple(
        Cluster("goal_capability", GOAL_CAPABILITY, gc.modes[mode], goal.q, v.id, p.decoys[0].id, goal=goal.id, mode=mode)
        for goal in gc.goals
        for v in p.variants
        for mode in gc.modes
    )


def pool(name: str, seed: int = 0) -> tuple[Cluster, ...]:
    """The clusters of pool ``name`` (see the module docstring), drawn with ``seed``.

    >>> len(pool("heldout"))
    128
    """
    if name in _CORE_PER_BINDING or name == "crossproduct":
        return _core_pools(seed)[name]
    if name == "horizon":
        return _split_pool(name, "horizon", POOL_SIZES["horizon"] // 4, seed)
    if name == "visibility":
        return _split_pool(name, "visibility", POOL_SIZES["visibility"] // 3, seed)
    if name == "goal_capability":
        return _goal_capability_pool()
    import difflib

    hint = difflib.get_close_matches(name, POOL_SIZES, n=1)
    raise ValueError(f"unknown pool {name!r}; expected one of {sorted(POOL_SIZES)}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
