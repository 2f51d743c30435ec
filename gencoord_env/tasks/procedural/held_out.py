"""Held-out structure: a template's signature (its structure up to ids and quantities), and what generation
must never produce (held-out structures, core crossproduct instances)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gencoord_env.caches import cache
from gencoord_env.tasks.pools import CROSSPRODUCT_Q
from gencoord_env.tasks.prior import NodeSpec, TemplateSpec, eval_quantity, prior
from gencoord_env.tasks.procedural.steps import layout


#: a template's structure: per branch, the sorted tuple of its task labels
Signature = frozenset[tuple[tuple[Any, ...], ...]]


def _label_args(args: Mapping[str, Any], source: str, q: int | None) -> tuple[tuple[str, Any], ...]:
    kinds = layout().kinds
    out = []
    for k, v in args.items():
        if k == "bind" or k == "ticks" or (k == "q" and q is None):
            continue
        if k == "q":
            v = eval_quantity(v, {"q": q})  # type: ignore[dict-item]
        elif v == "$source":
            v = source
        elif k in ("dst", "site", "station", "loc"):
            v = f"<{kinds.get(v, v)}>"
        out.append((k, v))
    return tuple(sorted(out, key=lambda kv: kv[0]))


def _signature(t: TemplateSpec, q: int | None) -> Signature:
    return frozenset(_branch_labels({n.id: n for n in t.nodes if n.branch in (None, b)}, t.source, q)
                     for b in t.bindings)


def _branch_labels(nodes: Mapping[str, NodeSpec], source: str, q: int | None) -> tuple[tuple[Any, ...], ...]:
    """One branch's tasks, each labelled with its ancestors' labels (ids and listing order left out)."""
    memo: dict[str, tuple[Any, ...]] = {}

    def label(node_id: str) -> tuple[Any, ...]:
        if node_id not in memo:
            n = nodes[node_id]
            memo[node_id] = (n.actor, n.skill, _label_args(n.args, source, q),
                             tuple(sorted(label(p) for p in n.preds if p in nodes)))
        return memo[node_id]

    return tuple(sorted(label(i) for i in nodes))


def signature(t: TemplateSpec) -> Signature:
    """A template's structure up to ids and quantities (see the module docstring); order-free over bindings.

    >>> signature(prior().template("chest_ab_planks")) == signature(prior().template("chest_ab"))
    False
    """
    return _signature(t, None)


@dataclass(frozen=True)
class HeldOut:
    """What generation must never produce: held-out structures and crossproduct instances."""

    templates: Mapping[Signature, str]  # signature -> the held-out template's id (horizon, visibility)
    core: Mapping[Signature, tuple[str, int]]  # signature -> (core template id, its crossproduct quantity)
    instances: frozenset[Signature]  # grounded signatures of each core template at its crossproduct quantity


@cache(maxsize=1)
def held_out() -> HeldOut:
    """The held-out material of the package prior: horizon and visibility structures, core crossproducts."""
    p = prior()
    templates = {signature(t): t.id for t in p.templates.values() if t.split in ("horizon", "visibility")}
    core = {signature(t): (t.id, CROSSPRODUCT_Q[t.id]) for t in p.templates.values() if t.split == "core"}
    instances = frozenset(_signature(p.template(tid), q) for tid, q in core.values())
    return HeldOut(templates, core, instances)


def allowed_quantities(t: TemplateSpec) -> tuple[int, ...]:
    h = held_out()
    core = h.core.get(signature(t))
    if core is None:  # a grounded instance can only equal a core one when the structures are equal
        return t.quantities
    return tuple(q for q in t.quantities if q != core[1] and _signature(t, q) not in h.instances)
