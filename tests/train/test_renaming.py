"""Code renaming against the environment itself: a Direct row whose binding codes are renamed is exactly the
row the env writes when its prior names those branches with the new codes, for every template and binding.

So every span of a Direct target that depends on the binding is renamed with the code or is a fact of the
world that no code names (``site=site_a`` stays: the station of the branch, whatever its code), and no
span of the prompt names a code in a form that renaming misses (a lower-case copy, a node id, a task line).
"""
from __future__ import annotations

import json
import random

import pytest

from gencoord_env import caches
from gencoord_env.tasks import Cluster, Episode
from gencoord_env.tasks.prior import load_prior, prior, raw_tasks
from gencoord_env.train.data import _rows
from gencoord_env.train.renaming import public_codes, rename_row, rename_text, renaming_for, row_codes

#: every two-role template the forward route plays: the paper's core, horizon and visibility templates
TEMPLATES = tuple(t.id for t in prior().templates.values() if len(t.roles) == 2)


def _relabeled(names: dict[str, str]):  # type: ignore[no-untyped-def]
    """The package prior with its codebook permuted: ``names`` extended to a bijection of the codebook."""
    perm = dict(names)
    free = iter(c for c in public_codes() if c not in perm.values())
    for code in public_codes():  # the codes ``names`` maps onto take over the codes it freed, keeping it one-to-one
        if code in perm.values() and code not in perm:
            perm[code] = next(c for c in [*names, *free] if c not in perm.values())
    assert sorted(perm.values()) == sorted(perm) or set(perm.values()) <= set(public_codes())
    text = rename_text(json.dumps(raw_tasks()), perm)
    return load_prior(json.loads(text)), perm


def _rows_of(template: str, binding: str, p) -> list:  # type: ignore[no-untyped-def]
    spec = p.template(template)
    q = spec.quantities[0]
    cluster = Cluster("train", template, binding, q, p.variants[0].id, p.decoys[0].id)
    return list(_rows("forward", [Episode(cluster, perm, p) for perm in (0, 1)], "forward"))


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_renamed_row_is_the_row_of_the_env_whose_prior_uses_the_new_codes(template: str) -> None:
    rng = random.Random(f"renaming:{template}")
    spec = prior().template(template)
    try:
        for binding in spec.bindings:
            caches.clear()  # memos key episodes by cluster, not prior: a relabeled episode may share a cluster
            original = _rows_of(template, binding, prior())
            assert original and all(row_codes(r.prompt) for r in original)
            for _ in range(2):  # a draw from the whole codebook, and one that swaps the template's own codes
                names = renaming_for(row_codes(original[0].prompt), rng, public_codes())
                caches.clear()  # memos key episodes by cluster, not prior
                relabeled, perm = _relabeled(names)
                played = _rows_of(template, perm[binding], relabeled)
                for want, got in zip(original, played, strict=True):
                    renamed = rename_row(want, names)
                    assert renamed.prompt == got.prompt, (template, binding, names)
                    assert renamed.target == got.target, (template, binding, names)
                    assert renamed.binding == got.binding
            swap = dict(zip(spec.bindings, reversed(spec.bindings)))
            caches.clear()
            relabeled, _ = _relabeled(swap)
            for want, got in zip(original, _rows_of(template, swap[binding], relabeled), strict=True):
                assert rename_row(want, swap).target == got.target, (template, binding, "swap")
    finally:
        caches.clear()
