"""The four families: what a template's two bindings differ in, each drawn as two branch programs."""
from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from gencoord_env.dsl.syntax import MAX_PATH_TASKS
from gencoord_env.errors import DataError
from gencoord_env.tasks.prior import prior
from gencoord_env.tasks.procedural.programs import (Job, Program, draw_job, emit_handed, emit_own, fits_twice,
                                                    step_amounts)
from gencoord_env.tasks.procedural.steps import layout, source_items, steps_from

#: The families a generated template belongs to: the core templates' (``data/tasks.json``), in listing order.
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(t.family for t in prior().templates.values() if t.split == "core"))
_PRODUCT_NAMES: Mapping[str, str] = {"stick": "STICKS", "oak_planks": "PLANKS"}  # the codebook's names
CHANGED_FIELD: Mapping[str, str] = {
    "destination": "destination",
    "recipe": "transform; handoff item",
    "allocation": "actor and remaining work",
    "active_branch": "downstream continuation",
}


@dataclass
class Design:
    family: str
    programs: list[Program]
    bindings: list[str]
    order: Callable[[int], str]  # the order text, given the factor that made every amount whole
    title: str


def _product_name(item: str) -> str:
    return _PRODUCT_NAMES.get(item, item.upper())


def _lots(amount: Fraction, item: str) -> str:
    return f"{{q}} {item}" if amount == 1 else f"{{q}} lots of {amount} {item}"


def _end_kind(rng: random.Random, keep: bool) -> str:
    return rng.choices(["deliver", "build", "keep"], weights=[5, 3, 2 if keep else 0])[0]


def _place(job: Job) -> str:
    return {"deliver": f"in {job.where}", "build": f"at {job.where}", "keep": "kept by the receiver"}[job.end]


def _destination(rng: random.Random) -> Design | None:
    L = layout()
    end = rng.choice(["deliver", "build"])
    where = list(rng.sample(L.chests if end == "deliver" else L.sites, 2))
    job = draw_job(rng, end=end, where=where[0])
    if job is None:
        return None
    programs = []
    for w in where:
        prog = Program()
        emit_handed(prog, dataclasses.replace(job, where=w))
        programs.append(prog)
    kind = "chest" if end == "deliver" else "site"
    verb = "store" if end == "deliver" else "build"
    made = f"turn {job.source} into {job.product}, then " if job.steps else ""
    def order(f: int) -> str:
        return (f"{made}{verb} {_lots(job.final * f, job.product)} {'in' if end == 'deliver' else 'at'} the active "
                f"{kind} ({where[0]} or {where[1]})")
    return Design("destination", programs, [w.upper() for w in where], order, f"{job.product}: {where[0]}/{where[1]}")


def _recipe(rng: random.Random) -> Design | None:
    L = layout()
    end = _end_kind(rng, keep=True)
    where = rng.choice(L.chests) if end == "deliver" else rng.choice(L.sites) if end == "build" else ""
    first = draw_job(rng, end=end, where=where, min_steps=1 if end == "keep" else 0)
    if first is None:
        return None
    for _ in range(20):
        second = draw_job(rng, end=end, where=where, min_steps=1 if end == "keep" or not first.steps else 0)
        if second is not None and second.handed != first.handed and second.product != first.product:
            break
    else:
        return None
    programs = []
    for job in (first, second):
        prog = Program()
        emit_handed(prog, job)
        programs.append(prog)
    jobs = (first, second)
    def order(f: int) -> str:
        choice = " or ".join(f"{j.final * f} {j.product}" for j in jobs)
        return f"make {{q}} lots of {choice}, {_place(first)}; the active recipe decides which"
    return Design("recipe", programs, [_product_name(j.product) for j in jobs], order,
                   f"{first.product}/{second.product} {_place(first)}")


def _allocation(rng: random.Random) -> Design | None:
    for _ in range(10):  # parts whose extra ingredients crowd the sender's path are drawn again
        design = _allocation_once(rng)
        if design is not None:
            return design
    return None


def _allocation_once(rng: random.Random) -> Design | None:
    L = layout()
    # three parts: sender P1 + receiver P2, or sender P2 + receiver P3 (P2 changes actor);
    # two parts: receiver P1, or sender P1 + receiver P2 (P1 changes actor, P2 is the remaining work)
    three = rng.random() < 0.5
    places = rng.sample([("deliver", c) for c in L.chests] + [("build", s) for s in L.sites], 3 if three else 2)
    shared_source = rng.choice(source_items()) if rng.random() < 0.5 else None
    parts = []
    for end, where in places:
        job = (shared_source
               and draw_job(rng, end=end, where=where, max_steps=1, source=shared_source, own=True, tries=10)
               or draw_job(rng, end=end, where=where, max_steps=1, own=True))
        if job is None:
            return None
        parts.append(job)
    def handed(job: Job) -> Job:  # the receiver's part: the sender may do its first step before the handoff
        return dataclasses.replace(job, cut=rng.randint(0, len(job.steps)) if job.steps else 0)
    assignments = [(parts[0], handed(parts[1])), (parts[1], handed(parts[2]))] if three else \
                  [(None, handed(parts[0])), (parts[0], handed(parts[1]))]
    programs = []
    own_first = rng.random() < 0.5
    for own, part in assignments:
        for cut in dict.fromkeys((part.cut, 0)):  # the drawn cut, else hand the raw material over
            prog = Program()
            part = dataclasses.replace(part, cut=cut)
            if own is None:
                emit_handed(prog, part)
            elif own_first:
                emit_handed(prog, part, before=[emit_own(prog, own)])
            else:
                emit_own(prog, own, after=emit_handed(prog, part))
            if prog.count("sender") <= MAX_PATH_TASKS:
                break
        else:
            return None
        programs.append(prog)
    n = "two of three parts" if three else "one or two parts"
    def order(f: int) -> str:
        listed = "; ".join(f"{j.final * f} {j.product} {_place(j)}" for j in parts)
        return f"{{q}} lots of work, {n}: {listed}; the allocation decides who does which and what remains"
    return Design("allocation", programs, [f"RECEIVER_{part.where.upper()}" for _, part in assignments], order,
                   " / ".join(_place(j) for j in parts))


def _active_branch(rng: random.Random) -> Design | None:
    L = layout()
    for _ in range(20):  # what the sender makes and hands over: something the receiver can go on with
        base = draw_job(rng, end="deliver", where=L.chests[0], max_steps=1, own=True)
        if base is not None and base.handed in steps_from():
            break
    else:
        return None
    handed = base.handed
    conts: list[Job] = []
    for _ in range(30):
        end = _end_kind(rng, keep=True)
        where = rng.choice(L.chests) if end == "deliver" else rng.choice(L.sites) if end == "build" else ""
        job = draw_job(rng, end=end, where=where, source=handed, max_steps=2, min_steps=1 if end == "keep" else 0,
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
    def need(c: Job) -> Fraction:
        return step_amounts(c.steps, c.final)[0][0] if c.steps else c.final

    amount = max(need(c) for c in conts)
    for i, c in enumerate(conts):  # mostly, the continuation that needs less uses up the handoff too
        grown = dataclasses.replace(c, final=c.final * amount / need(c))
        if need(c) < amount and grown.final.denominator == 1 and rng.random() < 0.7 \
                and fits_twice(c.steps, grown.final, c.end, c.where):
            conts[i] = grown
    programs = []
    for cont in conts:
        prog = Program()
        emit_handed(prog, base, cont=cont, handed_amount=amount)
        programs.append(prog)
    names = [_product_name(c.product) if c.steps else c.where.upper() for c in conts]
    if names[0] == names[1]:
        names = [f"{n}_{c.where.upper() or 'KEPT'}" for n, c in zip(names, conts)]
    if names[0] == names[1]:
        return None
    made = f"make {handed} from {base.source} and " if base.steps else ""
    def order(f: int) -> str:
        return f"{made}hand over {_lots(amount * f, handed)}; the active order decides what they become"
    return Design("active_branch", programs, [f"{n}_BRANCH" for n in names], order,
                   f"{handed} -> {conts[0].product} {_place(conts[0])} / {conts[1].product} {_place(conts[1])}")


BUILDERS = {"destination": _destination, "recipe": _recipe, "allocation": _allocation, "active_branch": _active_branch}
if set(BUILDERS) != set(FAMILIES):
    raise DataError(f"the core templates' families {list(FAMILIES)} (data/tasks.json) differ from the families a "
                    f"template can be generated in {list(BUILDERS)}")
