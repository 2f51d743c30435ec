"""The rule table as steps: every transformation a generated chain may use, the public layout it may use
them in, and the budgets every draw keeps within."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gencoord_env.caches import cache
from gencoord_env.tasks.prior import prior
from gencoord_env.world.recipes import load_recipes

STACK = 64  # no task moves more than one stack: furnace slots hold one, Minecraft tosses stay small
MIN_QMAX = 2  # a template serves at least two order quantities
MAX_STEPS = 3  # transformations in one chain


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
class Layout:
    chests: tuple[str, ...]  # public chests a task may fill
    sites: tuple[str, ...]
    cells: Mapping[str, int]  # site -> number of cells
    table: str
    furnace: str
    kinds: Mapping[str, str]  # station name -> kind
    decoy_receiver_items: frozenset[str]


@cache(maxsize=1)
def layout() -> Layout:
    p = prior()
    public = [s for s in p.stations if s.suite is None]
    return Layout(
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
