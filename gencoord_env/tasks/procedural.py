"""Procedural tasks: endless matched pairs of task templates generated from the shared prior.

``procedural_episodes(seed)`` is the single entry point. It returns a lazy, read-only sequence of
``Episode`` values that reads as endless (``len`` is ``2**31 - 1``); item ``k`` is a pure function of
``(seed, k)``:

- ``k // 4`` is the matched pair: one generated template, one public instance (order quantity, world
  variant, decoy objects) under both of the template's bindings;
- ``k // 2`` is the cluster (one binding of that pair; which one comes first follows the clusters' opaque
  ids, as in ``gencoord_env.tasks.pools``);
- ``k % 2`` is the role permutation (0: ``agent_a`` is the sender).

>>> eps = procedural_episodes(seed=0)
>>> a, b = eps[0], eps[2]  # the two clusters of pair 0
>>> a.template.id == b.template.id and a.binding != b.binding
True

Consumers index the sequence or take a finite slice (``eps[:400]``); iterating it never ends, so neither
does ``tuple(eps)``. Pairs are built on first use and kept in a bounded memo (``gencoord_env.caches``).
Besides the sequence: ``generate(seed, pair)`` returns one checked pair (template, extended prior,
clusters, and why earlier draws of it were redrawn); ``signature`` and ``held_out`` say what is held out;
``template_problems`` and ``instance_problems`` are the checks, usable on any template.

Every episode carries a ``Prior`` that extends the package's prior with its generated template (and the
codebook entries of its bindings), so ``Episode``, the composer, the reference commitments, the contexts
and the whole pipeline work unchanged. Generated templates use the same frozen ``TemplateSpec`` /
``NodeSpec`` values as ``data/tasks.json``; their ``split`` is ``"procedural"`` and their ids name the
draw, ``proc<seed>_<pair>_<draw>`` (never a prior template id, never a binding name).

What is generated
    A template is a public task DAG over the eight catalog skills, built from the rule table
    (``data/recipes.json``): 2x2 crafts, crafting-table crafts, furnace smelting
    (``transform.supply_input`` / ``supply_fuel`` / ``collect_output``, input or fuel first, sometimes a
    ``control.wait``), chained up to three transformations, with every source item the table uses
    (``oak_log``, ``oak_planks``, ``stick``, ``coal``, ``cobblestone``, ``stone``, ``sand``, ``glass``,
    ``raw_iron``, ``iron_ingot``, ``oak_slab``). Quantities are whole recipe batches (``A*q``), so every
    count is exact. One of four families decides what the two bindings change:

    ============== ==========================================================================================
    family         the bindings differ in
    ============== ==========================================================================================
    destination    where the receiver's result goes: which chest, or which build site
    recipe         which transformation, hence which item is handed off and what ends up at the destination
                   (the sender may do part of the chain before the handoff)
    allocation     who does which part of the work: a part moves between sender and receiver, and the
                   remaining work changes (2 or 3 parts, each a chain ending in a chest or a site)
    active_branch  the receiver's continuation after a shared handoff (what the handed items become, and
                   whether they are stored, built or kept; leftovers stay in the receiver's inventory)
    ============== ==========================================================================================

    Each role-local path has at most five tasks (the Short DSL's limit): the sender's two to five (it
    always obtains and hands off), the receiver's one to five. The order of steps varies: fuel before or
    after input and the sender's own part before or after its handoff are drawn into the DAG's edges;
    where the DAG leaves the order open (several obtains, independent parts), the listing order is drawn,
    and the composer follows it.

What every generated template satisfies (checked before it is served; a failing draw is redrawn)
    - two bindings, equally represented (each pair holds both), in a drawn slot order;
    - each binding's branch has exactly one sender-to-receiver handoff and a ``bind``-tagged receiver task;
    - binding-specific terminal predicates, derived by exact accounting of each branch's world effect;
    - stages never decrease along an edge (acquire, build, handoff, transform, terminal);
    - the reference commitments of both bindings - what the rule agents send and realize - pass the
      contract and succeed in the sim under both role permutations, at the pair's order quantity and at
      the template's largest one; the consistent plan of the other binding executes, delivers its handoff
      and fails the terminal predicate (paired worlds are disjoint);
    - ``signature(template)`` is not that of a held-out template (``split`` ``horizon`` or ``visibility``
      in ``data/tasks.json``), and a template with a core template's signature never has that template's
      crossproduct quantity (``CROSSPRODUCT_Q``), nor any quantity whose grounded counts equal it.

``signature`` compares structure up to ids and quantities: per branch, the multiset of tasks (actor
role, skill, items, the *kind* of each station it names) with their predecessors, ignoring node ids,
binding ids, quantities and listing order. Station names count as ids: storing planks in ``depot`` or
``chest_a`` has the signature of ``chest_ab_planks``, so neither is generated.

Receiver views are identical across a pair by construction: the pair shares the template, the order
quantity, the world variant and the decoys, and the source stock covers either branch.

The bindings' ids name the changed field in the codebook's style: the destination (``CHEST_A``,
``DEPOT``, ``SITE_B``), the product (``STICKS``, ``TORCH``, ``STONE_BRICKS``), the receiver's part
(``RECEIVER_SITE_A``) or the continuation (``TORCH_BRANCH``). In every even-numbered pair the two
bindings are instead named by two codes of the public codebook (``data/tasks.json``: ``BUILD``, ``ROOF``,
``STORAGE_BRANCH``, ...; :func:`codebook_names`), consistently in every node, terminal and context: the
codes are dealt two per pair from a seeded shuffle of the codebook, so every code is named once in each run
of 2 x (codes / 2) pairs (the first 26 pairs, 208 forward rows, name all 26), each time in another pairing.
Codes are public vocabulary, not held-out structure: a model pretrained on these pairs has read every code
in a private line and copied it into a request, and because a code means something different in every
pair, it can only succeed by reading the code it is shown, never by remembering which code a template
uses. Naturalized private facts (``private_fact`` other than ``"id"``) are not available
for generated bindings.
"""
from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import ceil, lcm
from typing import Any, overload

from gencoord_env.caches import cache
from gencoord_env.contract import check as contract_check
from gencoord_env.dsl.syntax import MAX_PATH_TASKS
from gencoord_env.outcomes import FailureCode
from gencoord_env.pipeline import compile_plan, materialize, resolve_forward, verify
from gencoord_env.tasks import references as R
from gencoord_env.tasks.episode import Cluster, Episode
from gencoord_env.tasks.pools import CROSSPRODUCT_Q
from gencoord_env.tasks.prior import STAGE_ORDER, NodeSpec, Prior, TemplateSpec, TerminalSpec, eval_quantity, prior
from gencoord_env.world.recipes import COOK_TICKS, load_recipes
from gencoord_env.world.sim import SimWorld

#: The pool name generated clusters carry (``Cluster.pool``).
POOL = "procedural"
#: ``len(procedural_episodes(seed))``: large enough to read as endless, small enough for any index type.
LENGTH = 2**31 - 1
#: The families a generated template belongs to: the core templates' (``data/tasks.json``), in listing order.
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(t.family for t in prior().templates.values() if t.split == "core"))
#: Draws of one pair before giving up (a bug, not bad luck: the reject rate is a few percent).
MAX_ATTEMPTS = 64
#: Every this many pairs, one has its bindings named by codes of the public codebook (see the docstring).
CODEBOOK_EVERY = 2

#: order quantities 1.._MAX_Q, as in the prior's core templates (``data/tasks.json``)
_MAX_Q = max(q for t in prior().templates.values() if t.split == "core" for q in t.quantities)
_STACK = 64  # no task moves more than one stack: furnace slots hold one, Minecraft tosses stay small
_MIN_QMAX = 2  # a template serves at least two order quantities
_MAX_STEPS = 3  # transformations in one chain
_FUELS: tuple[str, ...] = ("coal", "charcoal", "oak_planks", "oak_log", "stick")
_PRODUCT_NAMES: Mapping[str, str] = {"stick": "STICKS", "oak_planks": "PLANKS"}  # the codebook's names
_CHANGED_FIELD: Mapping[str, str] = {
    "destination": "destination",
    "recipe": "transform; handoff item",
    "allocation": "actor and remaining work",
    "active_branch": "downstream continuation",
}


# ------------------------------------------------------------------------------ the rule table as steps


@dataclass(frozen=True)
class Step:
    """One transformation of the rule table: a craft (2x2, or at the crafting table) or a smelt."""

    kind: str  # "craft" | "smelt"
    src: str  # the input the chain carries on
    out: str
    count: int  # outputs per batch (a smelt makes one per input)
    inputs: tuple[tuple[str, int], ...]  # per batch, ``src`` included
    table: bool


@dataclass(frozen=True)
class _Layout:
    chests: tuple[str, ...]  # public chests a task may fill
    sites: tuple[str, ...]
    cells: Mapping[str, int]  # site -> number of cells
    table: str
    furnace: str
    kinds: Mapping[str, str]  # station name -> kind
    decoy_receiver_items: frozenset[str]


@cache(maxsize=1)
def _layout() -> _Layout:
    p = prior()
    public = [s for s in p.stations if s.suite is None]
    return _Layout(
        chests=tuple(s.name for s in public if s.kind == "chest" and s.owner is None),
        sites=tuple(s.name for s in public if s.kind == "site"),
        cells={s.name: len(s.cells) for s in public if s.kind == "site"},
        table=next(s.name for s in public if s.kind == "crafting_table"),
        furnace=next(s.name for s in public if s.kind == "furnace"),
        kinds={s.name: s.kind for s in p.stations},
        decoy_receiver_items=frozenset(i for d in p.decoys for i in d.receiver_inventory),
    )


@cache(maxsize=1)
def steps_from() -> Mapping[str, tuple[Step, ...]]:
    """Every transformation of the rule table, by the item it starts from.

    Outputs that stack below 16 (tools) are left out: a task moving them would need many slots.
    """
    book = load_recipes()
    out: dict[str, list[Step]] = {}
    for item, r in sorted(book.crafting.items()):
        if book.stack_size(item) < 16:
            continue
        for src in sorted(r.inputs):
            out.setdefault(src, []).append(Step("craft", src, item, r.count, tuple(sorted(r.inputs.items())), r.table))
    for src, item in sorted(book.smelting.items()):
        out.setdefault(src, []).append(Step("smelt", src, item, 1, ((src, 1),), False))
    return {k: tuple(v) for k, v in sorted(out.items())}


def source_items() -> tuple[str, ...]:
    """Items a sender may draw from its source chest: every item some transformation starts from."""
    return tuple(steps_from())


# ------------------------------------------------------------------------------ linear quantities


@dataclass(frozen=True)
class Lin:
    """A quantity ``k*q + c`` of the cluster's order quantity ``q`` (fractions while a template is drawn,
    whole numbers once it is scaled)."""

    k: Fraction | int = 0
    c: Fraction | int = 0

    def __add__(self, other: Lin) -> Lin:
        return Lin(self.k + other.k, self.c + other.c)

    def __sub__(self, other: Lin) -> Lin:
        return Lin(self.k - other.k, self.c - other.c)

    def scale(self, f: Fraction | int) -> Lin:
        return Lin(self.k * f, self.c * f)

    def at(self, q: int) -> Fraction | int:
        return self.k * q + self.c

    @property
    def zero(self) -> bool:
        return not self.k and not self.c

    def expr(self) -> str:
        """The template's quantity expression (``eval_quantity`` reads it back)."""
        if self.k.denominator != 1 or self.c.denominator != 1 or self.k < 0 or self.c < 0:
            raise ValueError(f"quantity {self} is not a whole, non-negative A*q+B")
        k, c = int(self.k), int(self.c)
        if not k:
            return str(c)
        head = "q" if k == 1 else f"{k}*q"
        return head if not c else f"{head}+{c}"


def _per_q(k: Fraction | int) -> Lin:
    return Lin(Fraction(k))


@dataclass
class _Fuel:
    """A fuel quantity, fixed once the template's largest order quantity is known."""

    smelts: Fraction  # items to smelt per unit of q
    item: str
    constant: bool  # one count for every q (enough for the largest), else a multiple of q


# ------------------------------------------------------------------------------ branch programs


@dataclass
class _Draft:
    key: str
    actor: str  # role
    skill: str
    args: dict[str, Any]  # "q": Lin (per q) or _Fuel until resolved
    preds: list[str]
    name: str  # base of the public node id
    end: bool = False  # the task that discharges a part of the order (store, build, or the last craft kept)


class _Program:
    """One binding's branch, as drafts with per-q amounts; the two programs of a template are merged later."""

    def __init__(self) -> None:
        self.drafts: dict[str, _Draft] = {}
        self.needs: list[tuple[str, Lin | _Fuel]] = []  # what the receiver must hold from the start
        self.smelts = 0

    def add(self, actor: str, skill: str, args: dict[str, Any], preds: Sequence[str], name: str,
            end: bool = False) -> str:
        key = f"n{len(self.drafts)}"
        self.drafts[key] = _Draft(key, actor, skill, args, list(dict.fromkeys(p for p in preds if p)), name, end)
        return key

    def obtain(self, item: str, amount: Lin | _Fuel) -> str:
        """The sender's one obtain task of ``item`` in this branch, grown by ``amount``."""
        key = f"obtain:{item}"
        d = self.drafts.get(key)
        if d is None:
            d = self.drafts[key] = _Draft(key, "sender", "resource.obtain", {"q": []}, [], f"obtain_{item}")
        d.args["q"].append(amount)
        d.args["item"] = item
        return key

    def need(self, item: str, amount: Lin | _Fuel) -> None:
        """The receiver uses ``amount`` of ``item`` from the inventory it starts with."""
        self.needs.append((item, amount))

    def count(self, actor: str) -> int:
        return sum(1 for d in self.drafts.values() if d.actor == actor)


@dataclass(frozen=True)
class _Style:
    """The incidental choices of one step, drawn once per job so that a job reads alike in both branches."""

    at_table: bool = False  # craft at the crafting_table (always, for a 3x3 recipe)
    fuel: str = ""  # smelt: the fuel item
    fuel_constant: bool = False  # smelt: one fuel count for every q, else a multiple of q
    input_first: bool = True  # smelt: input before fuel
    wait: int = 0  # smelt: ticks of a control.wait before collecting (0: none)


@dataclass(frozen=True)
class _Job:
    """A piece of work: obtain ``source``, run ``steps`` (the first ``cut`` by the sender), end it."""

    source: str
    steps: tuple[Step, ...]
    styles: tuple[_Style, ...]
    cut: int  # steps[:cut] run before the handoff (by the sender); a job the sender keeps runs all of them
    end: str  # "deliver" | "build" | "keep"
    where: str  # chest or site; "" for keep
    final: Fraction  # per q: how many of the last item the job delivers, builds or keeps

    @property
    def product(self) -> str:
        return self.steps[-1].out if self.steps else self.source

    @property
    def handed(self) -> str:
        return self.steps[self.cut - 1].out if self.cut else self.source

    def items(self) -> set[str]:
        return {self.source, *(s.out for s in self.steps), *(i for s in self.steps for i, _ in s.inputs)}


def _amounts(steps: Sequence[Step], final: Fraction) -> list[tuple[Fraction, Fraction]]:
    """(input amount, output amount) per step, per q, for ``final`` of the last output."""
    out: list[tuple[Fraction, Fraction]] = []
    need = final
    for s in reversed(steps):
        used = need / s.count * dict(s.inputs)[s.src] if s.kind == "craft" else need
        out.append((used, need))
        need = used
    return out[::-1]


def _whole(steps: Sequence[Step]) -> int:
    """The least final amount per q for which every step runs whole batches."""
    dens = [1]
    for s, (a_in, a_out) in zip(steps, _amounts(steps, Fraction(1))):
        batches = a_out / s.count if s.kind == "craft" else a_out
        dens += [a_in.denominator, a_out.denominator, batches.denominator]
    return lcm(*dens)


def _receiver_cost(steps: Sequence[Step], end: str) -> int:
    return sum(3 if s.kind == "smelt" else 1 for s in steps) + (0 if end == "keep" else 1)


def _fits_twice(steps: Sequence[Step], final: Fraction, end: str, where: str) -> bool:
    """Whether the job stays within one stack per task, and its site within its cells, at q = 2."""
    book = load_recipes()
    peaks: list[tuple[str, Fraction]] = [(steps[0].src if steps else "", final)]
    for s, (a_in, a_out) in zip(steps, _amounts(steps, final)):
        peaks += [(s.src, a_in), (s.out, a_out)] + [(i, a_out / s.count * n) for i, n in s.inputs]
    if end == "build" and final * _MIN_QMAX > _layout().cells[where]:
        return False
    return all(n * _MIN_QMAX <= min(_STACK, book.stack_size(i) if i else _STACK) for i, n in peaks)


def _draw_steps(rng: random.Random, source: str, n: int, *, smelt: bool) -> tuple[Step, ...] | None:
    """A random chain of ``n`` transformations from ``source`` (at most one smelt), or None."""
    chain: list[Step] = []
    seen = {source}
    item = source
    for _ in range(n):
        options = [s for s in steps_from().get(item, ()) if s.out not in seen
                   and (smelt and not any(c.kind == "smelt" for c in chain) or s.kind == "craft")]
        if not options:
            return None
        s = rng.choice(options)
        chain.append(s)
        seen.add(s.out)
        item = s.out
    return tuple(chain)


def _draw_job(rng: random.Random, *, end: str, where: str, max_steps: int = _MAX_STEPS, min_steps: int = 0,
              source: str | None = None, own: bool = False, received: bool = False, tries: int = 40) -> _Job | None:
    """A job that fits the budgets: ``end`` in ``where``. ``own``: the sender does all of it (crafts only);
    ``received``: the receiver does all of it; else the chain is cut at a drawn handoff."""
    L = _layout()
    book = load_recipes()
    lengths = [k for k in range(min_steps, max_steps + 1) for _ in range(2 if 1 <= k <= 2 else 1)]
    for _ in range(tries):
        src = source or rng.choice(source_items())
        steps = _draw_steps(rng, src, rng.choice(lengths), smelt=not own)
        if steps is None:
            continue
        product = steps[-1].out if steps else src
        if end == "build" and product not in book.blocks:
            continue
        if end == "keep" and (not steps or product in L.decoy_receiver_items):
            continue
        smelt_at = next((i for i, s in enumerate(steps) if s.kind == "smelt"), len(steps))
        if own:
            cut = len(steps)
        else:
            # the sender never smelts (obtain, fuel, input, fuel, collect and the handoff are six tasks);
            # half the time the receiver does the whole chain
            cut = 0 if received or rng.random() < 0.5 else rng.randint(0, min(smelt_at, len(steps), 2))
            if end == "keep" and cut == len(steps) and cut:
                cut -= 1
            if _receiver_cost(steps[cut:], end) > MAX_PATH_TASKS:
                continue
        unit = _whole(steps)
        final = Fraction(unit * rng.choice((1, 1, 1, 2, 2, 3)))
        if not _fits_twice(steps, final, end, where):
            final = Fraction(unit)
            if not _fits_twice(steps, final, end, where):
                continue
        room = not own and _receiver_cost(steps[cut:], end) < MAX_PATH_TASKS
        items = {src, *(s.out for s in steps), *(i for s in steps for i, _ in s.inputs)}
        styles = tuple(_draw_style(rng, s, items, room) for s in steps)
        return _Job(src, steps, styles, cut, end, where, final)
    return None


class _NoDesign(Exception):
    """A draw ran into a dead end (no fuel left to pick); the draw is rejected and redrawn."""


def _draw_style(rng: random.Random, s: Step, items: set[str], room: bool) -> _Style:
    if s.kind == "craft":
        return _Style(at_table=s.table or rng.random() < 0.25)
    fuels = [f for f in _FUELS if f not in items]  # a fuel the chain also uses would blur what is consumed where
    if not fuels:
        raise _NoDesign("no fuel outside the chain's items")
    wait = rng.choice((20, 40, 60)) if room and rng.random() < 0.3 else 0
    return _Style(fuel=rng.choice(fuels), fuel_constant=rng.random() < 0.5, input_first=rng.random() < 0.5, wait=wait)


def _run(prog: _Program, actor: str, steps: Sequence[Step], styles: Sequence[_Style],
         amounts: Sequence[tuple[Fraction, Fraction]], prev: str) -> str:
    """Emit ``steps`` for ``actor`` after ``prev``; returns the task that makes the last item."""
    L = _layout()
    for s, style, (a_in, a_out) in zip(steps, styles, amounts):
        if s.kind == "craft":
            batches = a_out / s.count
            extra = []
            for item, per in s.inputs:
                if item == s.src:
                    continue
                if actor == "sender":
                    extra.append(prog.obtain(item, _per_q(batches * per)))
                else:
                    prog.need(item, _per_q(batches * per))
            args: dict[str, Any] = {"q": _per_q(a_out), "input": s.src, "item": s.out}
            if style.at_table:
                args["station"] = L.table
            prev = prog.add(actor, "craft.item", args, [prev, *extra], f"craft_{s.out}")
            continue
        if actor != "receiver":
            raise ValueError("only the receiver smelts: the sender's path has no room for it")
        prog.smelts += 1
        fuel = _Fuel(a_in, style.fuel, style.fuel_constant)
        prog.need(fuel.item, fuel)
        supply_input = ("transform.supply_input", {"q": _per_q(a_in), "item": s.src, "station": L.furnace},
                        f"input_{s.src}")
        supply_fuel = ("transform.supply_fuel", {"q": fuel, "item": fuel.item, "station": L.furnace},
                       f"fuel_{fuel.item}")
        first, second = (supply_input, supply_fuel) if style.input_first else (supply_fuel, supply_input)
        prev = prog.add(actor, second[0], second[1], [prog.add(actor, first[0], first[1], [prev], first[2])], second[2])
        if style.wait:
            prev = prog.add(actor, "control.wait", {"ticks": Lin(0, style.wait)}, [prev], "wait_furnace")
        prev = prog.add(actor, "transform.collect_output", {"q": _per_q(a_out), "item": s.out, "station": L.furnace},
                        [prev], f"collect_{s.out}")
    return prev


def _finish(prog: _Program, actor: str, job: _Job, prev: str) -> str:
    """The job's last task: store in a chest, build at a site, or keep what the last task made."""
    amount = _per_q(job.final)
    if job.end == "deliver":
        return prog.add(actor, "resource.deliver", {"q": amount, "item": job.product, "dst": job.where}, [prev],
                        f"store_{job.where}", end=True)
    if job.end == "build":
        return prog.add(actor, "build.component", {"q": amount, "item": job.product, "site": job.where}, [prev],
                        f"build_{job.where}", end=True)
    prog.drafts[prev].end = True
    return prev


def _emit_handed(prog: _Program, job: _Job, *, before: Sequence[str] = (), cont: _Job | None = None,
                 handed_amount: Fraction | None = None) -> str:
    """Sender part of ``job`` up to the handoff (after ``before``), then the receiver's rest of it.

    ``cont`` replaces the receiver's rest by another job starting from the handed item (active branch), and
    ``handed_amount`` fixes how many are handed (at least what the rest needs)."""
    rest, rest_styles = (cont.steps, cont.styles) if cont is not None else (job.steps[job.cut:], job.styles[job.cut:])
    rest_amounts = _amounts(rest, (cont or job).final)
    need = rest_amounts[0][0] if rest else (cont or job).final
    handed = handed_amount if handed_amount is not None else need
    pre = job.steps[:job.cut]
    pre_amounts = _amounts(pre, handed)
    prev = prog.obtain(job.source, _per_q(pre_amounts[0][0] if pre else handed))
    prev = _run(prog, "sender", pre, job.styles[:job.cut], pre_amounts, prev)
    h = prog.add("sender", "resource.deliver", {"q": _per_q(handed), "item": job.handed, "to": "$receiver"},
                 [prev, *before], f"handoff_{job.handed}")
    prev = _run(prog, "receiver", rest, rest_styles, rest_amounts, h)
    _finish(prog, "receiver", cont or job, prev)
    return h


def _emit_own(prog: _Program, job: _Job, *, after: str = "") -> str:
    """A job the sender does alone (after ``after``, when given); returns its last task."""
    amounts = _amounts(job.steps, job.final)
    prev = prog.obtain(job.source, _per_q(amounts[0][0] if job.steps else job.final))
    if after and job.steps:
        first = _run(prog, "sender", job.steps[:1], job.styles[:1], amounts[:1], prev)
        prog.drafts[first].preds.append(after)
        prev = _run(prog, "sender", job.steps[1:], job.styles[1:], amounts[1:], first)
        return _finish(prog, "sender", job, prev)
    end = _finish(prog, "sender", job, _run(prog, "sender", job.steps, job.styles, amounts, prev))
    if after:
        prog.drafts[end].preds.append(after)
    return end


# ------------------------------------------------------------------------------ the four families


@dataclass
class _Design:
    family: str
    programs: list[_Program]
    bindings: list[str]
    order: Callable[[int], str]  # the order text, given the factor that made every amount whole
    title: str


def _product_name(item: str) -> str:
    return _PRODUCT_NAMES.get(item, item.upper())


def _lots(amount: Fraction, item: str) -> str:
    return f"{{q}} {item}" if amount == 1 else f"{{q}} lots of {amount} {item}"


def _end_kind(rng: random.Random, keep: bool) -> str:
    return rng.choices(["deliver", "build", "keep"], weights=[5, 3, 2 if keep else 0])[0]


def _place(job: _Job) -> str:
    return {"deliver": f"in {job.where}", "build": f"at {job.where}", "keep": "kept by the receiver"}[job.end]


def _destination(rng: random.Random) -> _Design | None:
    L = _layout()
    end = rng.choice(["deliver", "build"])
    where = list(rng.sample(L.chests if end == "deliver" else L.sites, 2))
    job = _draw_job(rng, end=end, where=where[0])
    if job is None:
        return None
    programs = []
    for w in where:
        prog = _Program()
        _emit_handed(prog, dataclasses.replace(job, where=w))
        programs.append(prog)
    kind = "chest" if end == "deliver" else "site"
    verb = "store" if end == "deliver" else "build"
    made = f"turn {job.source} into {job.product}, then " if job.steps else ""
    def order(f: int) -> str:
        return (f"{made}{verb} {_lots(job.final * f, job.product)} {'in' if end == 'deliver' else 'at'} the active "
                f"{kind} ({where[0]} or {where[1]})")
    return _Design("destination", programs, [w.upper() for w in where], order, f"{job.product}: {where[0]}/{where[1]}")


def _recipe(rng: random.Random) -> _Design | None:
    L = _layout()
    end = _end_kind(rng, keep=True)
    where = rng.choice(L.chests) if end == "deliver" else rng.choice(L.sites) if end == "build" else ""
    first = _draw_job(rng, end=end, where=where, min_steps=1 if end == "keep" else 0)
    if first is None:
        return None
    for _ in range(20):
        second = _draw_job(rng, end=end, where=where, min_steps=1 if end == "keep" or not first.steps else 0)
        if second is not None and second.handed != first.handed and second.product != first.product:
            break
    else:
        return None
    programs = []
    for job in (first, second):
        prog = _Program()
        _emit_handed(prog, job)
        programs.append(prog)
    jobs = (first, second)
    def order(f: int) -> str:
        choice = " or ".join(f"{j.final * f} {j.product}" for j in jobs)
        return f"make {{q}} lots of {choice}, {_place(first)}; the active recipe decides which"
    return _Design("recipe", programs, [_product_name(j.product) for j in jobs], order,
                   f"{first.product}/{second.product} {_place(first)}")


def _allocation(rng: random.Random) -> _Design | None:
    for _ in range(10):  # parts whose extra ingredients crowd the sender's path are drawn again
        design = _allocation_once(rng)
        if design is not None:
            return design
    return None


def _allocation_once(rng: random.Random) -> _Design | None:
    L = _layout()
    # three parts: sender P1 + receiver P2, or sender P2 + receiver P3 (P2 changes actor);
    # two parts: receiver P1, or sender P1 + receiver P2 (P1 changes actor, P2 is the remaining work)
    three = rng.random() < 0.5
    places = rng.sample([("deliver", c) for c in L.chests] + [("build", s) for s in L.sites], 3 if three else 2)
    shared_source = rng.choice(source_items()) if rng.random() < 0.5 else None
    parts = []
    for end, where in places:
        job = (shared_source
               and _draw_job(rng, end=end, where=where, max_steps=1, source=shared_source, own=True, tries=10)
               or _draw_job(rng, end=end, where=where, max_steps=1, own=True))
        if job is None:
            return None
        parts.append(job)
    def handed(job: _Job) -> _Job:  # the receiver's part: the sender may do its first step before the handoff
        return dataclasses.replace(job, cut=rng.randint(0, len(job.steps)) if job.steps else 0)
    assignments = [(parts[0], handed(parts[1])), (parts[1], handed(parts[2]))] if three else \
                  [(None, handed(parts[0])), (parts[0], handed(parts[1]))]
    programs = []
    own_first = rng.random() < 0.5
    for own, part in assignments:
        for cut in dict.fromkeys((part.cut, 0)):  # the drawn cut, else hand the raw material over
            prog = _Program()
            part = dataclasses.replace(part, cut=cut)
            if own is None:
                _emit_handed(prog, part)
            elif own_first:
                _emit_handed(prog, part, before=[_emit_own(prog, own)])
            else:
                _emit_own(prog, own, after=_emit_handed(prog, part))
            if prog.count("sender") <= MAX_PATH_TASKS:
                break
        else:
            return None
        programs.append(prog)
    n = "two of three parts" if three else "one or two parts"
    def order(f: int) -> str:
        listed = "; ".join(f"{j.final * f} {j.product} {_place(j)}" for j in parts)
        return f"{{q}} lots of work, {n}: {listed}; the allocation decides who does which and what remains"
    return _Design("allocation", programs, [f"RECEIVER_{part.where.upper()}" for _, part in assignments], order,
                   " / ".join(_place(j) for j in parts))


def _active_branch(rng: random.Random) -> _Design | None:
    L = _layout()
    for _ in range(20):  # what the sender makes and hands over: something the receiver can go on with
        base = _draw_job(rng, end="deliver", where=L.chests[0], max_steps=1, own=True)
        if base is not None and base.handed in steps_from():
            break
    else:
        return None
    handed = base.handed
    conts: list[_Job] = []
    for _ in range(30):
        end = _end_kind(rng, keep=True)
        where = rng.choice(L.chests) if end == "deliver" else rng.choice(L.sites) if end == "build" else ""
        job = _draw_job(rng, end=end, where=where, source=handed, max_steps=2, min_steps=1 if end == "keep" else 0,
                        received=True)
        if job is None:
            continue
        if conts and (job.product, job.end) == (conts[0].product, conts[0].end):
            continue  # the continuations must differ in more than the place
        if conts and job.steps[:1] == conts[0].steps[:1] and job.steps:
            continue  # and from their first task on, so that each has a task of its own to carry the binding
        conts.append(job)
        if len(conts) == 2:
            break
    else:
        return None
    def need(c: _Job) -> Fraction:
        return _amounts(c.steps, c.final)[0][0] if c.steps else c.final

    amount = max(need(c) for c in conts)
    for i, c in enumerate(conts):  # mostly, the continuation that needs less uses up the handoff too
        grown = dataclasses.replace(c, final=c.final * amount / need(c))
        if need(c) < amount and grown.final.denominator == 1 and rng.random() < 0.7 \
                and _fits_twice(c.steps, grown.final, c.end, c.where):
            conts[i] = grown
    programs = []
    for cont in conts:
        prog = _Program()
        _emit_handed(prog, base, cont=cont, handed_amount=amount)
        programs.append(prog)
    names = [_product_name(c.product) if c.steps else c.where.upper() for c in conts]
    if names[0] == names[1]:
        names = [f"{n}_{c.where.upper() or 'KEPT'}" for n, c in zip(names, conts)]
    if names[0] == names[1]:
        return None
    made = f"make {handed} from {base.source} and " if base.steps else ""
    def order(f: int) -> str:
        return f"{made}hand over {_lots(amount * f, handed)}; the active order decides what they become"
    return _Design("active_branch", programs, [f"{n}_BRANCH" for n in names], order,
                   f"{handed} -> {conts[0].product} {_place(conts[0])} / {conts[1].product} {_place(conts[1])}")


_BUILDERS = {"destination": _destination, "recipe": _recipe, "allocation": _allocation, "active_branch": _active_branch}
if set(_BUILDERS) != set(FAMILIES):
    raise ImportError(f"the core templates' families {list(FAMILIES)} (data/tasks.json) differ from the families a "
                      f"template can be generated in {list(_BUILDERS)}")


# ------------------------------------------------------------------------------ from programs to a template


def _resolve(value: Any, qmax: int) -> Lin:
    if isinstance(value, Lin):
        return value
    if isinstance(value, _Fuel):
        ticks = load_recipes().fuel_ticks[value.item]
        if value.constant:
            return Lin(0, ceil(value.smelts * qmax * COOK_TICKS / ticks))  # type: ignore[arg-type]
        return Lin(ceil(value.smelts * COOK_TICKS / ticks), 0)  # type: ignore[arg-type]
    if isinstance(value, list):  # an obtain: the sum of what its consumers take
        total = Lin()
        for v in value:
            total = total + _resolve(v, qmax)
        return total
    raise TypeError(f"not a quantity: {value!r}")


def _whole_int(x: Fraction) -> int:
    if x.denominator != 1:
        raise ValueError(f"amount {x} is not whole after scaling")
    return int(x)


def _scale(value: Any, f: int) -> Any:
    """``value`` times ``f``, with whole amounts as ints from here on (int arithmetic is much faster)."""
    if isinstance(value, Lin):
        return Lin(_whole_int(value.k * f), _whole_int(value.c))  # type: ignore[arg-type]
    if isinstance(value, _Fuel):
        return dataclasses.replace(value, smelts=value.smelts * f)
    if isinstance(value, list):
        return [_scale(v, f) for v in value]
    return value


def _fractions(value: Any) -> list[Fraction]:
    if isinstance(value, Lin):
        return [value.k]
    if isinstance(value, _Fuel):
        return [value.smelts]
    if isinstance(value, list):
        return [x for v in value for x in _fractions(v)]
    return []


def _whole_scale(programs: Sequence[_Program]) -> int:
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

    drafts: tuple[_Draft, ...]
    needs: Mapping[str, Lin]


def _resolve_program(prog: _Program, qmax: int) -> _Resolved:
    drafts = []
    for d in prog.drafts.values():
        args = {k: (_resolve(v, qmax) if k in ("q", "ticks") else v) for k, v in d.args.items()}
        drafts.append(dataclasses.replace(d, args=args, preds=list(d.preds)))
    needs: dict[str, Lin] = {}
    for item, amount in prog.needs:
        needs[item] = needs.get(item, Lin()) + _resolve(amount, qmax)
    return _Resolved(tuple(drafts), needs)


def _fits(programs: Sequence[_Program], qmax: int) -> bool:
    """Whether every task stays within one stack and every site within its cells at ``qmax``."""
    L = _layout()
    book = load_recipes()
    for prog in programs:
        sites: dict[str, Fraction] = {}
        for d in prog.drafts.values():
            q = d.args.get("q")
            if q is None:
                continue
            n = _resolve(q, qmax).at(qmax)
            if n > min(_STACK, book.stack_size(d.args["item"])) or n < 1:
                return False
            if d.skill == "build.component":
                sites[d.args["site"]] = sites.get(d.args["site"], 0) + n
        if any(n > L.cells[s] for s, n in sites.items()):
            return False
        needs: dict[str, Lin] = {}
        for item, amount in prog.needs:
            needs[item] = needs.get(item, Lin()) + _resolve(amount, qmax)
        if any(n.at(qmax) > _STACK for n in needs.values()):
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
    L = _layout()
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


def _content(drafts: Mapping[str, _Draft]) -> dict[str, tuple[Any, ...]]:
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


def _linear_extension(rng: random.Random, nodes: Sequence[str], preds: Mapping[str, Sequence[str]]) -> list[str]:
    """A random topological order of ``nodes`` (predecessors outside ``nodes`` count as done)."""
    pending = list(nodes)
    inside = set(nodes)
    done: set[str] = set()
    out = []
    while pending:
        ready = [n for n in pending if all(p in done or p not in inside for p in preds[n])]
        n = rng.choice(ready)
        pending.remove(n)
        done.add(n)
        out.append(n)
    return out


def _descendants(start: str, children: Mapping[str, Sequence[str]]) -> set[str]:
    out: set[str] = set()
    stack = [start]
    while stack:
        for c in children.get(stack.pop(), ()):
            if c not in out:
                out.add(c)
                stack.append(c)
    return out


def _stage(d: _Draft, after_handoff: bool) -> str:
    if d.skill == "resource.obtain":
        return "acquire"
    if d.actor == "sender" and d.skill == "resource.deliver" and "to" in d.args:
        return "handoff"
    if d.actor == "sender" and not after_handoff:
        return "build"  # the sender's work before its handoff
    return "terminal" if d.end else "transform"


def _build_template(rng: random.Random, design: _Design) -> tuple[TemplateSpec | None, str]:
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
    if qmax < _MIN_QMAX:
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
    nodes: dict[tuple[Any, ...], tuple[_Draft, int | None]] = {}  # content -> (draft, branch index or None)
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
        source=str(obtains[0].args["item"]), split=POOL, changed_field=_CHANGED_FIELD[design.family],
        bindings=tuple(design.bindings), quantities=tuple(range(1, qmax + 1)), order=design.order(f),
        nodes=tuple(specs), terminal=terminal,
        receiver_inventory={item: n.expr() for item, n in sorted(start.items())} or None,
    )
    return t, ""


# ------------------------------------------------------------------------------ held-out structure


Signature = frozenset  # of per-branch tuples of task labels


def _label_args(args: Mapping[str, Any], source: str, q: int | None) -> tuple[tuple[str, Any], ...]:
    kinds = _layout().kinds
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
    branches = []
    for b in t.bindings:
        nodes = {n.id: n for n in t.nodes if n.branch in (None, b)}
        memo: dict[str, tuple[Any, ...]] = {}

        def label(node_id: str) -> tuple[Any, ...]:
            if node_id not in memo:
                n = nodes[node_id]
                memo[node_id] = (n.actor, n.skill, _label_args(n.args, t.source, q),
                                 tuple(sorted(label(p) for p in n.preds if p in nodes)))
            return memo[node_id]

        branches.append(tuple(sorted(label(i) for i in nodes)))
    return frozenset(branches)


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


def _allowed_quantities(t: TemplateSpec) -> tuple[int, ...]:
    h = held_out()
    core = h.core.get(signature(t))
    if core is None:  # a grounded instance can only equal a core one when the structures are equal
        return t.quantities
    return tuple(q for q in t.quantities if q != core[1] and _signature(t, q) not in h.instances)


# ------------------------------------------------------------------------------ checks


def template_problems(t: TemplateSpec, base: Prior | None = None) -> tuple[str, ...]:
    """What makes ``t`` unfit to serve, checked from the template alone; empty when it is fit."""
    base = base or prior()
    out: list[str] = []
    if t.id in base.templates or not t.id.startswith("proc"):
        out.append(f"template id {t.id!r} collides with the prior or lacks the proc prefix")
    if len(t.bindings) != 2 or len(set(t.bindings)) != 2:
        out.append(f"expected two distinct bindings, got {t.bindings}")
    for b in t.bindings:
        if b.lower() in t.id.lower():
            out.append(f"template id {t.id!r} names binding {b}")
    ids = [n.id for n in t.nodes]
    if len(set(ids)) != len(ids):
        out.append("node ids repeat")
    by_id = {n.id: n for n in t.nodes}
    for n in t.nodes:
        for p in n.preds:
            if p not in by_id:
                out.append(f"node {n.id} names unknown predecessor {p}")
            elif STAGE_ORDER.index(by_id[p].stage) > STAGE_ORDER.index(n.stage):
                out.append(f"edge {p} -> {n.id} goes from stage {by_id[p].stage} back to {n.stage}")
    for b in t.bindings:
        branch = [n for n in t.nodes if n.branch in (None, b)]
        handoffs = [n for n in branch if n.skill == "resource.deliver" and n.args.get("to") == "$receiver"]
        if len(handoffs) != 1 or handoffs[0].actor != "sender":
            out.append(f"branch {b}: expected one sender handoff, got {[n.id for n in handoffs]}")
        if not any(n.args.get("bind") == b and n.actor == "receiver" for n in branch):
            out.append(f"branch {b}: no receiver task carries bind={b}")
        lengths = {r: sum(1 for n in branch if n.actor == r) for r in t.roles}
        if not 2 <= lengths["sender"] <= MAX_PATH_TASKS or not 1 <= lengths["receiver"] <= MAX_PATH_TASKS:
            out.append(f"branch {b}: path lengths {lengths} outside sender 2..5, receiver 1..5")
    if len(t.bindings) == 2 and t.terminal[t.bindings[0]] == t.terminal[t.bindings[1]]:
        out.append("the two bindings share one terminal predicate")
    h = held_out()
    sig = signature(t)
    if sig in h.templates:
        out.append(f"structure of held-out template {h.templates[sig]}")
    if not t.quantities or _allowed_quantities(t) != t.quantities:
        out.append(f"quantities {t.quantities} include a crossproduct combination")
    return tuple(out)


def _play(ep: Episode, binding: str, world: SimWorld) -> tuple[FailureCode, str]:
    """Run the reference commitment of ``binding`` (what the rule agents send and realize) in ``ep``'s world."""
    q = R.joint(ep, binding)
    r = R.receiver_after_request(q.peer_requests[0])
    violations = contract_check(q, ep.scope(ep.first)) + contract_check(r, ep.scope(ep.second))
    if violations:
        return FailureCode.CONTRACT_REJECT, violations[0].message
    res = resolve_forward(q, r, ep)
    if res.commitment is None:
        return res.code, res.reason
    plan = materialize(res.commitment, ep)
    world.reset(ep.world)
    verdict = verify(plan, world.run(compile_plan(plan)), world.observe())
    return verdict.code, "; ".join(verdict.reasons)


def instance_problems(clusters: Sequence[Cluster], p: Prior) -> tuple[str, ...]:
    """Sim check of a matched pair: each binding succeeds under both role permutations, and the other
    binding's consistent plan executes, hands off and fails the terminal predicate."""
    world = SimWorld()
    out: list[str] = []
    for c in clusters:
        other = next(b for b in p.template(c.template).bindings if b != c.binding)
        episodes = [Episode(c, perm, p) for perm in (0, 1)]
        for perm, ep in enumerate(episodes):
            code, why = _play(ep, c.binding, world)
            if code is not FailureCode.SUCCESS:
                out.append(f"{c.binding} R{perm} q={c.q}: {code.value} {why}")
        code, why = _play(episodes[0], other, world)
        if code is not FailureCode.TERMINAL_FAILURE:
            out.append(f"{other} in the world of {c.binding} q={c.q}: {code.value}, expected TERMINAL_FAILURE {why}")
    return tuple(out)


# ------------------------------------------------------------------------------ pairs and the sequence


@dataclass(frozen=True)
class ProceduralPair:
    """One matched pair: its generated template, the prior extended with it, and its two clusters."""

    seed: int
    index: int
    template: TemplateSpec
    prior: Prior
    clusters: tuple[Cluster, Cluster]
    rejected: tuple[str, ...]  # why each earlier draw of this pair was redrawn (empty: the first draw served)


def template_id(seed: int, index: int, attempt: int = 0) -> str:
    """``proc<seed>_<pair>_<draw>``: the id of a draw's template (only letters, digits and ``_``, so a word
    tokenizer reads it as a few fixed words and digits; never a prior template id or a binding name)."""
    return f"{_id_prefix(seed)}{index}_{attempt}"


def _id_prefix(seed: int) -> str:
    return f"proc{seed}_"


def _rng(seed: int, index: int, attempt: int, part: str) -> random.Random:
    return random.Random(f"procedural:{seed}:{index}:{attempt}:{part}")


def draw(seed: int, index: int, attempt: int = 0) -> tuple[TemplateSpec | None, str]:
    """One draw of pair ``index``'s template, checked from the template alone: (template, "") or (None, why)."""
    rng = _rng(seed, index, attempt, "template")
    family = rng.choice(FAMILIES)
    try:
        design = _BUILDERS[family](rng)
        if design is None:
            return None, f"{family}: no design within the budgets"
        t, why = _build_template(rng, design)
    except _NoDesign as e:
        return None, f"{family}: {e}"
    if t is None:
        return None, f"{family}: {why}"
    if signature(t) in held_out().templates:
        return None, f"{family}: held-out structure"
    allowed = _allowed_quantities(t)
    if len(allowed) < _MIN_QMAX:
        return None, f"{family}: crossproduct quantities"
    if allowed != t.quantities:
        t = dataclasses.replace(t, quantities=allowed)
    bindings = list(t.bindings)
    rng.shuffle(bindings)  # which binding is listed first carries no information
    names = codebook_names(seed, index)
    if names is not None:
        t = rename_bindings(t, dict(zip(bindings, names)))
        bindings = list(t.bindings)
    # the id names the draw, which fixes the template: one id, one template, in every process
    t = dataclasses.replace(t, id=template_id(seed, index, attempt), bindings=tuple(bindings),
                            terminal={b: t.terminal[b] for b in bindings})
    problems = template_problems(t)
    if problems:
        return None, f"{family}: {problems[0]}"
    return t, ""


def codebook_names(seed: int, index: int) -> tuple[str, str] | None:
    """The two public codes that name pair ``index``'s bindings, or None for a pair named by its own draw.

    >>> sorted(c for k in range(0, 26, 2) for c in codebook_names(0, k)) == sorted(prior().codebook)
    True
    """
    if index % CODEBOOK_EVERY:
        return None
    codes = sorted(prior().codebook)
    cycle, slot = divmod(index // CODEBOOK_EVERY, len(codes) // 2)
    random.Random(f"procedural:{seed}:codes:{cycle}").shuffle(codes)
    return codes[2 * slot], codes[2 * slot + 1]


def rename_bindings(t: TemplateSpec, names: Mapping[str, str]) -> TemplateSpec:
    """``t`` with its bindings renamed by ``names`` (old -> new) in bindings, nodes, ``bind`` tags and terminals."""
    if sorted(names) != sorted(t.bindings) or len(set(names.values())) != len(names):
        raise ValueError(f"renaming {dict(names)} must map each of {list(t.bindings)} to a distinct new name")
    nodes = tuple(dataclasses.replace(n, branch=names.get(n.branch, n.branch) if n.branch else None,
                                      args={k: (names[v] if k == "bind" else v) for k, v in n.args.items()})
                  for n in t.nodes)
    return dataclasses.replace(t, bindings=tuple(names[b] for b in t.bindings), nodes=nodes,
                               terminal={names[b]: v for b, v in t.terminal.items()})


def _codebook(t: TemplateSpec) -> dict[str, str]:
    return {b: f"a {t.family.replace('_', ' ')} binding of {t.title}" for b in t.bindings}


def extend_prior(t: TemplateSpec, base: Prior | None = None) -> Prior:
    """``base`` (default: the package prior) with template ``t`` added and its bindings in the codebook
    (a binding named by a public code keeps the codebook's entry: only its id reaches a context)."""
    base = base or prior()
    return dataclasses.replace(base, templates={**base.templates, t.id: t},
                               codebook={**_codebook(t), **base.codebook})


@cache(maxsize=1024)
def generate(seed: int, index: int) -> ProceduralPair:
    """Matched pair ``index`` of ``seed``: the first draw that passes every check (see the module docstring).

    Memoized (bounded) so that the four episodes of a pair build their template and prior once.
    """
    base = prior()
    rejected: list[str] = []
    for attempt in range(MAX_ATTEMPTS):
        t, why = draw(seed, index, attempt)
        if t is None:
            rejected.append(why)
            continue
        rng = _rng(seed, index, attempt, "instance")
        q = rng.choice(t.quantities)
        variant, decoy = rng.choice(base.variants).id, rng.choice(base.decoys).id
        p = extend_prior(t, base)
        clusters = sorted((Cluster(POOL, t.id, b, q, variant, decoy) for b in t.bindings), key=lambda c: c.id)
        # the served instance, and the largest quantity (where stacks and sites are fullest)
        checks = [clusters]
        if q != max(t.quantities):
            checks.append([dataclasses.replace(c, q=max(t.quantities)) for c in clusters])
        problems = [x for cs in checks for x in instance_problems(cs, p)]
        if problems:
            rejected.append(f"{t.family}: sim: {problems[0]}")
            continue
        return ProceduralPair(seed, index, t, p, (clusters[0], clusters[1]), tuple(rejected))
    raise RuntimeError(f"procedural pair {index} of seed {seed}: no draw passed in {MAX_ATTEMPTS} attempts; "
                       f"last reasons: {rejected[-3:]}")


class ProceduralEpisodes(Sequence[Episode]):
    """Endless matched pairs of generated tasks for one seed; see the module docstring.

    Read-only and lazy: ``eps[k]`` builds (or finds in a bounded memo) pair ``k // 4`` and returns its
    cluster ``(k // 2) % 2`` under role permutation ``k % 2``. Slices return tuples.
    """

    def __init__(self, seed: int = 0) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"Expected seed to be an int but got {type(seed).__name__}")
        self.seed = seed

    def __len__(self) -> int:
        return LENGTH

    @overload
    def __getitem__(self, k: int) -> Episode: ...

    @overload
    def __getitem__(self, k: slice) -> tuple[Episode, ...]: ...

    def __getitem__(self, k: int | slice) -> Episode | tuple[Episode, ...]:
        if isinstance(k, slice):
            return tuple(self[i] for i in range(LENGTH)[k])
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"procedural episode indices must be int or slice, not {type(k).__name__}")
        if k < 0:
            k += LENGTH
        if not 0 <= k < LENGTH:
            raise IndexError(f"procedural episode index {k} out of range [0, {LENGTH})")
        pair = self.pair(k // 4)
        return Episode(pair.clusters[(k // 2) % 2], k % 2, pair.prior)

    def __iter__(self) -> Iterator[Episode]:
        for k in range(LENGTH):
            yield self[k]

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        """Where ``value`` sits, read off its template id (a search would never end)."""
        prefix = _id_prefix(self.seed)
        tid = value.cluster.template if isinstance(value, Episode) else ""
        parts = tid[len(prefix):].split("_") if tid.startswith(prefix) else []
        if len(parts) == 2 and all(p.isdigit() for p in parts):
            pair = int(parts[0])
            for k in range(4 * pair, 4 * pair + 4):
                if start <= k < (LENGTH if stop is None else stop) and self[k] == value:
                    return k
        raise ValueError(f"{value!r} is not an episode of {self!r}")

    def __contains__(self, value: object) -> bool:
        try:
            self.index(value)
        except ValueError:
            return False
        return True

    def count(self, value: Any) -> int:
        return int(value in self)

    def pair(self, index: int) -> ProceduralPair:
        """Matched pair ``index`` (episodes ``4*index`` .. ``4*index + 3``)."""
        return generate(self.seed, index)

    def template(self, index: int) -> TemplateSpec:
        return self.pair(index).template

    def __repr__(self) -> str:
        return f"ProceduralEpisodes(seed={self.seed})"


def procedural_episodes(seed: int = 0) -> ProceduralEpisodes:
    """The procedural pool of ``seed``: endless paired episodes (see the module docstring).

    >>> eps = procedural_episodes(0)
    >>> len(eps) == LENGTH and eps[5].cluster.pool == POOL
    True
    """
    return ProceduralEpisodes(seed)


__all__ = [
    "CODEBOOK_EVERY", "FAMILIES", "LENGTH", "POOL", "HeldOut", "Lin", "ProceduralEpisodes", "ProceduralPair", "Step", "draw",
    "extend_prior", "generate", "held_out", "instance_problems", "procedural_episodes", "codebook_names", "rename_bindings",
    "signature", "source_items", "steps_from", "template_id", "template_problems",
]
