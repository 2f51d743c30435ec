"""From programs to a template: fix every quantity, account each branch's world effect exactly, derive the
terminal predicates, and merge the two programs into one task DAG (tasks equal in both become shared nodes)."""
from __future__ import annotations

import dataclasses
import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import ceil, lcm
from typing import Any, TypeVar

from gencoord_env.dsl.syntax import MAX_PATH_TASKS
from gencoord_env.tasks.prior import NodeSpec, TemplateSpec, TerminalSpec, prior
from gencoord_env.tasks.procedural.families import CHANGED_FIELD, Design
from gencoord_env.tasks.procedural.programs import Draft, Program
from gencoord_env.tasks.procedural.quantities import Fuel, Lin
from gencoord_env.tasks.procedural.steps import MIN_QMAX, STACK, layout
from gencoord_env.world.recipes import COOK_TICKS, load_recipes

#: The pool name generated clusters carry (``Cluster.pool``), and generated templates' ``split``.
POOL = "procedural"
#: a node of a DAG the helpers below order: a draft's content key
K = TypeVar("K", bound=Hashable)
#: order quantities 1.._MAX_Q, as in the prior's core templates (``data/tasks.json``)
_MAX_Q = max(q for t in prior().templates.values() if t.split == "core" for q in t.quantities)


def _resolve(value: Any, qmax: int) -> Lin:
    if isinstance(value, Lin):
        return value
    if isinstance(value, Fuel):
        ticks = load_recipes().fuel_ticks[value.item]
        if value.constant:
            return Lin(0, ceil(value.smelts * qmax * COOK_TICKS / ticks))
        return Lin(ceil(value.smelts * COOK_TICKS / ticks), 0)
    if isinstance(value, list):  # an obtain: the sum of what its consumers take
        total = Lin()
        for v in value:
            total = total + _resolve(v, qmax)
        return total
    raise TypeError(f"not a quantity: {value!r}")


def _whole_int(x: Fraction) -> int:
    if x.denominator != 1:
        raise AssertionError(f"amount {x} is not whole after scaling")
    return int(x)


def _scale(value: Any, f: int) -> Any:
    """``value`` times ``f``, with whole amounts as ints from here on (int arithmetic is much faster)."""
    if isinstance(value, Lin):
        return Lin(_whole_int(value.k * f), _whole_int(value.c))  # type: ignore[arg-type]
    if isinstance(value, Fuel):
        return dataclasses.replace(value, smelts=value.smelts * f)
    if isinstance(value, list):
        return [_scale(v, f) for v in value]
    return value


def _fractions(value: Any) -> list[Fraction | int]:
    if isinstance(value, Lin):
        return [value.k]
    if isinstance(value, Fuel):
        return [value.smelts]
    if isinstance(value, list):
        return [x for v in value for x in _fractions(v)]
    return []


def _whole_scale(programs: Sequence[Program]) -> int:
    """The least factor making every per-q amount, and every craft's batch count, whole."""
    book = load_recipes()
    dens = [1]
    for prog in programs:
        for d in prog.drafts.values():
            for f in _fractions(d.args.get("q")):
                dens.append(f.denominator)
            if d.skill == "craft.item":
                dens.append((d.args["q"].k / book.crafting[d.args["item"]].count).denominator)
        for _, amount in prog.needs:
            dens += [f.denominator for f in _fractions(amount)]
    return lcm(*dens)


@dataclass(frozen=True)
class _Resolved:
    """A program with every quantity fixed: drafts (q as Lin) and the receiver's starting needs."""

    drafts: tuple[Draft, ...]
    needs: Mapping[str, Lin]


def _resolve_program(prog: Program, qmax: int) -> _Resolved:
    drafts = []
    for d in prog.drafts.values():
        args = {k: (_resolve(v, qmax) if k in ("q", "ticks") else v) for k, v in d.args.items()}
        drafts.append(dataclasses.replace(d, args=args, preds=list(d.preds)))
    needs: dict[str, Lin] = {}
    for item, amount in prog.needs:
        needs[item] = needs.get(item, Lin()) + _resolve(amount, qmax)
    return _Resolved(tuple(drafts), needs)


def _fits(programs: Sequence[Program], qmax: int) -> bool:
    """Whether every task stays within one stack and every site within its cells at ``qmax``."""
    L = layout()
    book = load_recipes()
    for prog in programs:
        sites: dict[str, Fraction | int] = {}
        for d in prog.drafts.values():
            q = d.args.get("q")
            if q is None:
                continue
            n = _resolve(q, qmax).at(qmax)
            if n > min(STACK, book.stack_size(d.args["item"])) or n < 1:
                return False
            if d.skill == "build.component":
                sites[d.args["site"]] = sites.get(d.args["site"], 0) + n
        if any(n > L.cells[s] for s, n in sites.items()):
            return False
        needs: dict[str, Lin] = {}
        for item, amount in prog.needs:
            needs[item] = needs.get(item, Lin()) + _resolve(amount, qmax)
        if any(n.at(qmax) > STACK for n in needs.values()):
            return False
    return True


_Places = dict[tuple[str, str, str], Lin]  # (kind, chest or site, item) -> count


def _account(r: _Resolved, start: Mapping[str, Lin]) -> tuple[_Places, dict[str, Lin], set[str]]:
    """Exact world effect of one branch: what ends up in chests and sites, the receiver's final inventory
    and the items the receiver gains (is handed, crafts or collects) on the way.

    Read from each skill's catalog row: ``produces`` adds to the actor's inventory, ``consumes`` takes from
    it (a crafting count takes every input of the recipe), ``handoff`` gives to the receiver, ``stores``
    leaves the items in the container or at the site its ``at`` key names."""
    from gencoord_env.catalog import CATALOG

    book = load_recipes()
    inv: dict[str, dict[str, Lin]] = {"sender": {}, "receiver": dict(start)}
    places: _Places = {}
    gains: set[str] = set()

    def move(actor: str, item: str, n: Lin) -> None:
        inv[actor][item] = inv[actor].get(item, Lin()) + n
        if actor == "receiver" and (n.k > 0 or n.c > 0):
            gains.add(item)

    for d in r.drafts:
        a, skill = d.args, CATALOG.skills[d.skill]
        if skill.produces is not None:
            move(d.actor, skill.produces.item.fill(a), skill.produces.count.fill(a) if skill.produces.count else Lin())
        if skill.consumes is not None and skill.consumes.crafting is not None:
            made: Lin = skill.consumes.made.fill(a) if skill.consumes.made else Lin()
            recipe = book.crafting[skill.consumes.crafting.fill(a)]
            batches = Lin(made.k // recipe.count, made.c // recipe.count)  # whole batches by construction
            for item, per in recipe.inputs.items():
                move(d.actor, item, batches.scale(-per))
        elif skill.consumes is not None and skill.consumes.count is not None:
            move(d.actor, skill.consumes.item.fill(a), skill.consumes.count.fill(a).scale(-1))
        if skill.handoff is not None and skill.handoff.to is not None and skill.handoff.to.name in a:
            move("receiver", skill.handoff.item.fill(a), skill.handoff.count.fill(a) if skill.handoff.count else Lin())
        if skill.stores is not None and skill.stores.at.name in a:
            key = (skill.stores.kind, skill.stores.at.fill(a), skill.stores.item.fill(a))
            places[key] = places.get(key, Lin()) + skill.stores.count.fill(a)
    return places, inv["receiver"], gains


def _terminal(resolved: Sequence[_Resolved], start: Mapping[str, Lin]) -> list[_Places]:
    """Each branch's terminal predicate: every chest and site any branch fills, with this branch's count,
    and every item the receiver gains in some branch (decoy items aside) whose final count differs between
    the branches: what it keeps, and what is left of a handoff."""
    L = layout()
    effects = [_account(r, start) for r in resolved]
    keys = sorted({k for places, _, _ in effects for k, v in places.items() if not v.zero})
    items = sorted({i for _, _, gains in effects for i in gains} - L.decoy_receiver_items)
    out = []
    for places, inv, _ in effects:
        clauses = {k: places.get(k, Lin()) for k in keys}
        for item in items:
            values = [e[1].get(item, Lin()) for e in effects]
            if values[0] != values[1]:
                clauses[("inventory", "receiver", item)] = inv.get(item, Lin())
        out.append(clauses)
    return out


def _content(drafts: Mapping[str, Draft]) -> dict[str, tuple[Any, ...]]:
    """A key per draft that equals across programs exactly when the task and all its ancestors do."""
    memo: dict[str, tuple[Any, ...]] = {}

    def key(k: str) -> tuple[Any, ...]:
        if k not in memo:
            d = drafts[k]
            args = tuple(sorted((a, v.expr() if isinstance(v, Lin) else v) for a, v in d.args.items()))
            memo[k] = (d.actor, d.skill, args, tuple(sorted(key(p) for p in d.preds)))
        return memo[k]

    out: dict[str, tuple[Any, ...]] = {}
    seen: dict[tuple[Any, ...], int] = {}
    for k in drafts:
        c = key(k)
        seen[c] = seen.get(c, 0) + 1
        out[k] = (c, seen[c])  # identical twins inside one branch stay apart
    return out


def _linear_extension(rng: random.Random, nodes: Sequence[K], preds: Mapping[K, Sequence[K]]) -> list[K]:
    """A random topological order of ``nodes`` (predecessors outside ``nodes`` count as done)."""
    pending = list(nodes)
    inside = set(nodes)
    done: set[K] = set()
    out = []
    while pending:
        ready = [n for n in pending if all(p in done or p not in inside for p in preds[n])]
        n = rng.choice(ready)
        pending.remove(n)
        done.add(n)
        out.append(n)
    return out


def _descendants(start: K, children: Mapping[K, Sequence[K]]) -> set[K]:
    out: set[K] = set()
    stack = [start]
    while stack:
        for c in children.get(stack.pop(), ()):
            if c not in out:
                out.add(c)
                stack.append(c)
    return out


def _stage(d: Draft, after_handoff: bool) -> str:
    if d.skill == "resource.obtain":
        return "acquire"
    if d.actor == "sender" and d.skill == "resource.deliver" and "to" in d.args:
        return "handoff"
    if d.actor == "sender" and not after_handoff:
        return "build"  # the sender's work before its handoff
    return "terminal" if d.end else "transform"


def build_template(rng: random.Random, design: Design) -> tuple[TemplateSpec | None, str]:
    """Merge the two programs into one template; returns (template, "") or (None, why not)."""
    programs = design.programs
    for prog in programs:
        if prog.smelts > 1:
            return None, "budget"
        if not 2 <= prog.count("sender") <= MAX_PATH_TASKS or not 1 <= prog.count("receiver") <= MAX_PATH_TASKS:
            return None, "budget"
    f = _whole_scale(programs)
    for prog in programs:
        for d in prog.drafts.values():
            if "q" in d.args:
                d.args["q"] = _scale(d.args["q"], f)
        prog.needs = [(item, _scale(a, f)) for item, a in prog.needs]
    # the caps only tighten as q grows: the largest q that fits, by bisection
    lo, hi = 0, _MAX_Q
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _fits(programs, mid) else (lo, mid - 1)
    qmax = lo
    if qmax < MIN_QMAX:
        return None, "quantity caps"
    resolved = [_resolve_program(p, qmax) for p in programs]
    # the receiver starts with what either branch needs (public, so both views stay equal)
    start: dict[str, Lin] = {}
    for r in resolved:
        for item, n in r.needs.items():
            old = start.get(item, Lin())
            start[item] = Lin(max(old.k, n.k), max(old.c, n.c))
    terminals = _terminal(resolved, start)
    if terminals[0] == terminals[1]:
        return None, "terminal"

    # merge: tasks equal in both branches (with all their ancestors) become shared nodes
    contents = [_content({d.key: d for d in r.drafts}) for r in resolved]
    common = set(contents[0].values()) & set(contents[1].values())
    nodes: dict[tuple[Any, ...], tuple[Draft, int | None]] = {}  # content -> (draft, branch index or None)
    preds_of: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for i, r in enumerate(resolved):
        for d in r.drafts:
            c = contents[i][d.key]
            if c in nodes:
                continue
            nodes[c] = (d, None if c in common else i)
            preds_of[c] = [contents[i][p] for p in d.preds]
    shared = [c for c, (_, b) in nodes.items() if b is None]
    order = _linear_extension(rng, shared, preds_of)
    for i in rng.sample(range(2), 2):
        order += _linear_extension(rng, [c for c, (_, b) in nodes.items() if b == i], preds_of)
    children: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for c in order:
        for p in preds_of[c]:
            children.setdefault(p, []).append(c)
    after: set[tuple[Any, ...]] = set()
    for c in order:
        d, _ = nodes[c]
        if d.actor == "sender" and d.skill == "resource.deliver" and "to" in d.args:
            after |= _descendants(c, children)
    names: dict[str, int] = {}
    ids: dict[tuple[Any, ...], str] = {}
    for c in order:
        base = nodes[c][0].name
        names[base] = names.get(base, 0) + 1
        ids[c] = base if names[base] == 1 else f"{base}{names[base]}"
    tagged: set[int] = set()
    specs = []
    for c in order:
        d, b = nodes[c]
        args = {k: (v.expr() if isinstance(v, Lin) else v) for k, v in d.args.items()}
        branch = None if b is None else design.bindings[b]
        if b is not None and d.actor == "receiver" and b not in tagged:
            args = {"bind": branch, **args}
            tagged.add(b)
        preds = tuple(ids[p] for p in preds_of[c])
        specs.append(NodeSpec(ids[c], d.actor, d.skill, args, _stage(d, c in after), preds, branch))
    if tagged != {0, 1}:
        return None, "receiver path shared"
    terminal = {
        b: tuple(TerminalSpec(kind, "receiver" if kind == "inventory" else where, item, v.expr())
                 for (kind, where, item), v in t.items())
        for b, t in zip(design.bindings, terminals)
    }
    obtains = [s for s in specs if s.skill == "resource.obtain"]
    t = TemplateSpec(
        id="", family=design.family, title=f"Procedural {design.family.replace('_', ' ')}: {design.title}",
        source=str(obtains[0].args["item"]), split=POOL, changed_field=CHANGED_FIELD[design.family],
        bindings=tuple(design.bindings), quantities=tuple(range(1, qmax + 1)), order=design.order(f),
        nodes=tuple(specs), terminal=terminal,
        receiver_inventory={item: n.expr() for item, n in sorted(start.items())} or None,
    )
    return t, ""
