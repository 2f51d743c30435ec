"""Strict item conservation under random call sequences.

Every item is counted over inventories, chests, furnace slots, site blocks and items in flight. Only a
successful ``craft`` (recipe inputs -> outputs) and a furnace settling after ``furnace_input`` /
``furnace_fuel`` (input -> output one for one, fuel burned) may change a total, and exactly by the rule
table; a failed call changes no state at all.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gencoord_env.world.recipes import load_recipes
from gencoord_env.world.sim import SimWorld
from gencoord_env.world.types import SkillCall, Station, WorldSpec

BOOK = load_recipes()
AGENTS = ("agent_a", "agent_b")
STATIONS = (
    Station("chest_a", "chest", (0, 0, 0)),
    Station("table", "crafting_table", (3, 0, 3)),
    Station("furnace", "furnace", (0, 0, 6)),
    Station("site_a", "site", (5, 0, 5), cells=tuple((x, y, 5) for y in range(2) for x in range(5, 8))),
)
ITEMS = ("oak_log", "oak_planks", "stick", "cobblestone", "coal", "sand", "crafting_table", "chest", "oak_slab",
         "stone", "glass", "charcoal", "barrel", "ladder")
SPEC = WorldSpec(
    agents=AGENTS,
    stations=STATIONS,
    positions={"agent_a": (1, 0, 1), "agent_b": (9, 0, 1)},
    inventories={"agent_a": {"oak_log": 6, "cobblestone": 10, "coal": 4, "sand": 4}, "agent_b": {"oak_planks": 12, "sand": 5,
                                                                                     "stick": 9}},
    containers={"chest_a": {"oak_log": 4, "oak_planks": 8, "cobblestone": 6}},
)

counts = st.integers(min_value=1, max_value=6)
items = st.sampled_from(ITEMS)
agents = st.sampled_from(AGENTS)


def station(kind_name: str) -> st.SearchStrategy[str]:
    """Mostly the right station for the op, sometimes a wrong or unknown one."""
    return st.sampled_from((kind_name,) * 6 + ("chest_a", "table", "furnace", "site_a", "nowhere"))


def item(*likely: str) -> st.SearchStrategy[str]:
    """Mostly an item the op can use, sometimes any item."""
    return st.one_of(st.sampled_from(likely), items) if likely else items


ARG_STRATEGIES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "goto": st.fixed_dictionaries({"station": station("table")}),
    "withdraw": st.fixed_dictionaries({"station": station("chest_a"), "item": item("oak_log", "oak_planks",
                                                                                 "cobblestone"), "count": counts}),
    "deposit": st.fixed_dictionaries({"station": station("chest_a"), "item": items, "count": counts}),
    "give": st.fixed_dictionaries({"to": agents, "item": items, "count": counts}),
    "await_handoff": st.fixed_dictionaries({"from": agents, "item": items, "count": counts}),
    "craft": st.fixed_dictionaries({"item": item("oak_planks", "stick", "crafting_table", "chest", "oak_slab",
                                                 "barrel", "ladder", "furnace"),
                                    "count": counts, "station": st.sampled_from(("", "table", "table"))}),
    "place": st.fixed_dictionaries({"site": station("site_a"), "item": item("oak_planks", "cobblestone", "oak_log"),
                                    "count": st.integers(min_value=1, max_value=3)}),
    "furnace_input": st.fixed_dictionaries({"station": station("furnace"),
                                            "item": item("oak_log", "cobblestone", "sand"), "count": counts}),
    "furnace_fuel": st.fixed_dictionaries({"station": station("furnace"),
                                           "item": item("coal", "oak_planks", "stick", "oak_log", "charcoal"),
                                           "count": counts}),
    "furnace_output": st.fixed_dictionaries({"station": station("furnace"),
                                             "item": item("stone", "glass", "charcoal"),
                                             "count": st.integers(min_value=1, max_value=2)}),
    "wait": st.fixed_dictionaries({"ticks": st.integers(min_value=0, max_value=20)}),
}


@st.composite
def call_sequences(draw: st.DrawFn) -> list[SkillCall]:
    n = draw(st.integers(min_value=1, max_value=40))
    calls = []
    gives: list[SkillCall] = []
    loaded: list[str] = []
    for i in range(n):
        op = draw(st.sampled_from(sorted(ARG_STRATEGIES)))
        actor = draw(agents)
        args = draw(ARG_STRATEGIES[op])
        peer = AGENTS[1 - AGENTS.index(actor)]
        if op == "give" and draw(st.integers(0, 3)):
            args["to"] = peer  # mostly a real handoff
        if op == "await_handoff" and gives and draw(st.integers(0, 3)):
            give = draw(st.sampled_from(gives))  # mostly await something that was given
            actor, args = give.args["to"], {"from": give.actor, "item": give.args["item"],
                                             "count": draw(st.integers(1, give.args["count"]))}
        if op == "furnace_output" and loaded and draw(st.integers(0, 3)):
            args["item"] = BOOK.smelting[draw(st.sampled_from(loaded))]  # mostly what the furnace makes
        if op == "furnace_input" and args["item"] in BOOK.smelting:
            loaded.append(args["item"])
        # mostly no dependency, sometimes an earlier call (which may have failed), rarely a missing id
        after = draw(st.sampled_from(((),) * 8 + ((f"c{i - 1}",), ("c999",)))) if i else ()
        calls.append(SkillCall(f"c{i}", actor, op, args, after))
        if op == "give":
            gives.append(calls[-1])
    return calls


def totals(w: SimWorld) -> Counter[str]:
    truth = w.observe()
    total: Counter[str] = Counter()
    for c in (*truth.inventories.values(), *truth.containers.values()):
        total.update(c)
    for slots in truth.furnaces.values():
        for c in slots.values():
            total.update(c)
    for cells in truth.sites.values():
        total.update(block for *_, block in cells)
    for (_, _, item), n in w.in_flight().items():
        total[item] += n
    return +total


def state(w: SimWorld) -> tuple[dict[str, Any], dict[tuple[str, str, str], int]]:
    return w.observe().to_dict(), w.in_flight()


@settings(max_examples=200, deadline=None)
@given(call_sequences())
def test_only_recipes_change_item_totals(calls: list[SkillCall]) -> None:
    w = SimWorld()
    w.reset(SPEC)
    for call in calls:
        before_state = state(w)
        before = totals(w)
        furnace_before = w.observe().furnaces["furnace"]
        events = w.run([call])
        skill = events[0]
        if not skill.ok:
            assert skill.reason and skill.data.keys() == {"error"}
            assert state(w) == before_state, f"failed {call} changed the world"
            assert len(events) == 1
            continue
        expected = Counter(before)
        if call.op == "craft":
            plan = BOOK.craft_plan(call.args["item"], call.args["count"])
            expected.subtract(plan.inputs)
            expected[call.args["item"]] += plan.produced
            assert skill.data["consumed"] == dict(plan.inputs) and skill.data["produced"] == plan.produced
        elif call.op in ("furnace_input", "furnace_fuel"):
            smelted, burned = skill.data["smelted"], skill.data["burned"]
            slot = "input" if call.op == "furnace_input" else "fuel"
            other = "fuel" if slot == "input" else "input"
            loaded = call.args["item"]
            # the other slot's item is whatever it held before; the loaded slot now holds the call's item
            input_item = loaded if slot == "input" else next(iter(furnace_before["input"]), "")
            fuel_item = loaded if slot == "fuel" else next(iter(furnace_before[other]), "")
            if smelted:
                expected[input_item] -= smelted
                expected[BOOK.smelting[input_item]] += smelted
            if burned:
                expected[fuel_item] -= burned
        assert +expected == totals(w), f"{call} -> {skill}"
        if call.op == "await_handoff":
            assert [e.kind for e in events] == ["skill", "handoff"]
        else:
            assert len(events) == 1


@settings(max_examples=100, deadline=None)
@given(call_sequences())
def test_run_of_a_sequence_equals_call_by_call_until_first_failure(calls: list[SkillCall]) -> None:
    """``run(calls)`` is the same as running each call alone, stopping after the first failure."""
    whole, stepwise = SimWorld(), SimWorld()
    whole.reset(SPEC)
    stepwise.reset(SPEC)
    events = whole.run(calls)
    expected = []
    for call in calls:
        step = stepwise.run([call])
        expected.extend(step)
        if not step[0].ok:
            break
    assert events == expected
    assert whole.observe() == stepwise.observe()
    assert whole.positions() == stepwise.positions()
