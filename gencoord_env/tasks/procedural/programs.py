"""Branch programs: one binding's branch as drafts of tasks with per-q amounts, drawn job by job.

A job obtains a source item, runs a chain of transformations (the first ``cut`` by the sender, before its
handoff) and ends it (stored, built or kept). ``emit_handed`` and ``emit_own`` write a job into a program.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import lcm
from typing import Any

from gencoord_env.dsl.syntax import MAX_PATH_TASKS
from gencoord_env.tasks.procedural.quantities import Fuel, Lin, per_q
from gencoord_env.tasks.procedural.steps import MAX_STEPS, MIN_QMAX, STACK, Step, layout, source_items, steps_from
from gencoord_env.world.recipes import load_recipes

_FUELS: tuple[str, ...] = ("coal", "charcoal", "oak_planks", "oak_log", "stick")


@dataclass
class Draft:
    key: str
    actor: str  # role
    skill: str
    args: dict[str, Any]  # "q": Lin (per q) or Fuel until resolved
    preds: list[str]
    name: str  # base of the public node id
    end: bool = False  # the task that discharges a part of the order (store, build, or the last craft kept)


class Program:
    """One binding's branch, as drafts with per-q amounts; the two programs of a template are merged later."""

    def __init__(self) -> None:
        self.drafts: dict[str, Draft] = {}
        self.needs: list[tuple[str, Lin | Fuel]] = []  # what the receiver must hold from the start
        self.smelts = 0

    def add(self, actor: str, skill: str, args: dict[str, Any], preds: Sequence[str], name: str,
            end: bool = False) -> str:
        key = f"n{len(self.drafts)}"
        self.drafts[key] = Draft(key, actor, skill, args, list(dict.fromkeys(p for p in preds if p)), name, end)
        return key

    def obtain(self, item: str, amount: Lin | Fuel) -> str:
        """The sender's one obtain task of ``item`` in this branch, grown by ``amount``."""
        key = f"obtain:{item}"
        d = self.drafts.get(key)
        if d is None:
            d = self.drafts[key] = Draft(key, "sender", "resource.obtain", {"q": []}, [], f"obtain_{item}")
        d.args["q"].append(amount)
        d.args["item"] = item
        return key

    def need(self, item: str, amount: Lin | Fuel) -> None:
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
class Job:
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


def step_amounts(steps: Sequence[Step], final: Fraction) -> list[tuple[Fraction, Fraction]]:
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
    for s, (a_in, a_out) in zip(steps, step_amounts(steps, Fraction(1))):
        batches = a_out / s.count if s.kind == "craft" else a_out
        dens += [a_in.denominator, a_out.denominator, batches.denominator]
    return lcm(*dens)


def _receiver_cost(steps: Sequence[Step], end: str) -> int:
    return sum(3 if s.kind == "smelt" else 1 for s in steps) + (0 if end == "keep" else 1)


def fits_twice(steps: Sequence[Step], final: Fraction, end: str, where: str) -> bool:
    """Whether the job stays within one stack per task, and its site within its cells, at q = 2."""
    book = load_recipes()
    peaks: list[tuple[str, Fraction]] = [(steps[0].src if steps else "", final)]
    for s, (a_in, a_out) in zip(steps, step_amounts(steps, final)):
        peaks += [(s.src, a_in), (s.out, a_out)] + [(i, a_out / s.count * n) for i, n in s.inputs]
    if end == "build" and final * MIN_QMAX > layout().cells[where]:
        return False
    return all(n * MIN_QMAX <= min(STACK, book.stack_size(i) if i else STACK) for i, n in peaks)


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


def draw_job(rng: random.Random, *, end: str, where: str, max_steps: int = MAX_STEPS, min_steps: int = 0,
              source: str | None = None, own: bool = False, received: bool = False, tries: int = 40) -> Job | None:
    """A job that fits the budgets: ``end`` in ``where``. ``own``: the sender does all of it (crafts only);
    ``received``: the receiver does all of it; else the chain is cut at a drawn handoff."""
    L = layout()
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
        if not fits_twice(steps, final, end, where):
            final = Fraction(unit)
            if not fits_twice(steps, final, end, where):
                continue
        room = not own and _receiver_cost(steps[cut:], end) < MAX_PATH_TASKS
        items = {src, *(s.out for s in steps), *(i for s in steps for i, _ in s.inputs)}
        styles = tuple(_draw_style(rng, s, items, room) for s in steps)
        return Job(src, steps, styles, cut, end, where, final)
    return None


class NoDesign(Exception):
    """A draw ran into a dead end (no fuel left to pick); the draw is rejected and redrawn."""


def _draw_style(rng: random.Random, s: Step, items: set[str], room: bool) -> _Style:
    if s.kind == "craft":
        return _Style(at_table=s.table or rng.random() < 0.25)
    fuels = [f for f in _FUELS if f not in items]  # a fuel the chain also uses would blur what is consumed where
    if not fuels:
        raise NoDesign("no fuel outside the chain's items")
    wait = rng.choice((20, 40, 60)) if room and rng.random() < 0.3 else 0
    return _Style(fuel=rng.choice(fuels), fuel_constant=rng.random() < 0.5, input_first=rng.random() < 0.5, wait=wait)


def _run(prog: Program, actor: str, steps: Sequence[Step], styles: Sequence[_Style],
         amounts: Sequence[tuple[Fraction, Fraction]], prev: str) -> str:
    """Emit ``steps`` for ``actor`` after ``prev``; returns the task that makes the last item."""
    L = layout()
    for s, style, (a_in, a_out) in zip(steps, styles, amounts):
        if s.kind == "craft":
            batches = a_out / s.count
            extra = []
            for item, per in s.inputs:
                if item == s.src:
                    continue
                if actor == "sender":
                    extra.append(prog.obtain(item, per_q(batches * per)))
                else:
                    prog.need(item, per_q(batches * per))
            args: dict[str, Any] = {"q": per_q(a_out), "input": s.src, "item": s.out}
            if style.at_table:
                args["station"] = L.table
            prev = prog.add(actor, "craft.item", args, [prev, *extra], f"craft_{s.out}")
            continue
        if actor != "receiver":
            raise AssertionError("only the receiver smelts: the sender's path has no room for it")
        prog.smelts += 1
        fuel = Fuel(a_in, style.fuel, style.fuel_constant)
        prog.need(fuel.item, fuel)
        supply_input = ("transform.supply_input", {"q": per_q(a_in), "item": s.src, "station": L.furnace},
                        f"input_{s.src}")
        supply_fuel = ("transform.supply_fuel", {"q": fuel, "item": fuel.item, "station": L.furnace},
                       f"fuel_{fuel.item}")
        first, second = (supply_input, supply_fuel) if style.input_first else (supply_fuel, supply_input)
        prev = prog.add(actor, second[0], second[1], [prog.add(actor, first[0], first[1], [prev], first[2])], second[2])
        if style.wait:
            prev = prog.add(actor, "control.wait", {"ticks": Lin(0, style.wait)}, [prev], "wait_furnace")
        prev = prog.add(actor, "transform.collect_output", {"q": per_q(a_out), "item": s.out, "station": L.furnace},
                        [prev], f"collect_{s.out}")
    return prev


def _finish(prog: Program, actor: str, job: Job, prev: str) -> str:
    """The job's last task: store in a chest, build at a site, or keep what the last task made."""
    amount = per_q(job.final)
    if job.end == "deliver":
        return prog.add(actor, "resource.deliver", {"q": amount, "item": job.product, "dst": job.where}, [prev],
                        f"store_{job.where}", end=True)
    if job.end == "build":
        return prog.add(actor, "build.component", {"q": amount, "item": job.product, "site": job.where}, [prev],
                        f"build_{job.where}", end=True)
    prog.drafts[prev].end = True
    return prev


def emit_handed(prog: Program, job: Job, *, before: Sequence[str] = (), cont: Job | None = None,
                 handed_amount: Fraction | None = None) -> str:
    """Sender part of ``job`` up to the handoff (after ``before``), then the receiver's rest of it.

    ``cont`` replaces the receiver's rest by another job starting from the handed item (active branch), and
    ``handed_amount`` fixes how many are handed (at least what the rest needs)."""
    rest, rest_styles = (cont.steps, cont.styles) if cont is not None else (job.steps[job.cut:], job.styles[job.cut:])
    rest_amounts = step_amounts(rest, (cont or job).final)
    need = rest_amounts[0][0] if rest else (cont or job).final
    handed = handed_amount if handed_amount is not None else need
    pre = job.steps[:job.cut]
    pre_amounts = step_amounts(pre, handed)
    prev = prog.obtain(job.source, per_q(pre_amounts[0][0] if pre else handed))
    prev = _run(prog, "sender", pre, job.styles[:job.cut], pre_amounts, prev)
    h = prog.add("sender", "resource.deliver", {"q": per_q(handed), "item": job.handed, "to": "$receiver"},
                 [prev, *before], f"handoff_{job.handed}")
    prev = _run(prog, "receiver", rest, rest_styles, rest_amounts, h)
    _finish(prog, "receiver", cont or job, prev)
    return h


def emit_own(prog: Program, job: Job, *, after: str = "") -> str:
    """A job the sender does alone (after ``after``, when given); returns its last task."""
    amounts = step_amounts(job.steps, job.final)
    prev = prog.obtain(job.source, per_q(amounts[0][0] if job.steps else job.final))
    if after and job.steps:
        first = _run(prog, "sender", job.steps[:1], job.styles[:1], amounts[:1], prev)
        prog.drafts[first].preds.append(after)
        prev = _run(prog, "sender", job.steps[1:], job.styles[1:], amounts[1:], first)
        return _finish(prog, "sender", job, prev)
    end = _finish(prog, "sender", job, _run(prog, "sender", job.steps, job.styles, amounts, prev))
    if after:
        prog.drafts[end].preds.append(after)
    return end
