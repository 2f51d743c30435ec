"""The rule table: vanilla counts, whole-batch crafting plans, and errors for malformed tables."""
from __future__ import annotations

import re

import pytest

from gencoord_env.world.recipes import COOK_TICKS, RecipeTableError, load_recipes, parse_recipes

BOOK = load_recipes()


@pytest.mark.parametrize(
    ("item", "count", "inputs", "table"),
    [
        ("oak_planks", 4, {"oak_log": 1}, False),
        ("stick", 4, {"oak_planks": 2}, False),
        ("crafting_table", 1, {"oak_planks": 4}, False),
        ("chest", 1, {"oak_planks": 8}, True),
        ("oak_slab", 6, {"oak_planks": 3}, True),
        ("ladder", 3, {"stick": 7}, True),
        ("barrel", 1, {"oak_planks": 6, "oak_slab": 2}, True),
        ("cobblestone_slab", 6, {"cobblestone": 3}, True),
        ("cobblestone_stairs", 4, {"cobblestone": 6}, True),
        ("furnace", 1, {"cobblestone": 8}, True),
    ],
)
def test_vanilla_recipes(item: str, count: int, inputs: dict[str, int], table: bool) -> None:
    recipe = BOOK.recipe(item)
    assert recipe is not None
    assert (recipe.count, dict(recipe.inputs), recipe.table) == (count, inputs, table)


def test_smelting_and_fuels() -> None:
    assert BOOK.smelting.items() >= {("cobblestone", "stone"), ("raw_iron", "iron_ingot"),
                                     ("oak_log", "charcoal"), ("sand", "glass")}
    smelts = {item: ticks / COOK_TICKS for item, ticks in BOOK.fuel_ticks.items()}
    assert smelts.items() >= {("coal", 8), ("charcoal", 8), ("oak_planks", 1.5), ("oak_log", 1.5), ("stick", 0.5)}


def test_every_recipe_input_is_obtainable_or_raw() -> None:
    """Inputs name items the table knows of or plain raw materials; catches typos like 'oak_plank'."""
    raw = {"oak_log", "cobblestone", "coal", "stone", "glass", "iron_ingot"}
    known = set(BOOK.crafting) | set(BOOK.smelting.values()) | raw
    for recipe in BOOK.crafting.values():
        assert set(recipe.inputs) <= known, recipe


@pytest.mark.parametrize(
    ("item", "count", "batches", "produced", "inputs"),
    [
        ("stick", 1, 1, 4, {"oak_planks": 2}),
        ("stick", 4, 1, 4, {"oak_planks": 2}),
        ("stick", 5, 2, 8, {"oak_planks": 4}),
        ("oak_planks", 9, 3, 12, {"oak_log": 3}),
        ("chest", 2, 2, 2, {"oak_planks": 16}),
        ("barrel", 3, 3, 3, {"oak_planks": 18, "oak_slab": 6}),
        ("glass_pane", 17, 2, 32, {"glass": 12}),
    ],
)
def test_craft_plan_whole_batches(item: str, count: int, batches: int, produced: int,
                                  inputs: dict[str, int]) -> None:
    plan = BOOK.craft_plan(item, count)
    assert (plan.batches, plan.produced, dict(plan.inputs)) == (batches, produced, inputs)
    assert plan.produced >= count > plan.produced - plan.recipe.count


def test_craft_plan_unknown_item_suggests() -> None:
    with pytest.raises(KeyError, match=re.escape("no craftable item named 'stik'; did you mean 'stick'?")):
        BOOK.craft_plan("stik", 1)


def test_craft_plan_rejects_non_positive_count() -> None:
    with pytest.raises(ValueError, match="positive int"):
        BOOK.craft_plan("stick", 0)


def test_stack_sizes() -> None:
    assert BOOK.stack_size("oak_planks") == 64
    assert BOOK.stack_size("oak_sign") == 16


def _table(**override: object) -> dict[str, object]:
    table: dict[str, object] = {
        "crafting": {"stick": {"count": 4, "inputs": {"oak_planks": 2}, "table": False}},
        "smelting": {"sand": "glass"}, "fuels": {"coal": 8}, "blocks": ["glass"], "stack": {},
    }
    table.update(override)
    return table


def test_parse_minimal_table() -> None:
    book = parse_recipes(_table())
    assert book.craft_plan("stick", 1).produced == 4
    assert book.fuel_ticks == {"coal": 1600}
    assert book.blocks == frozenset({"glass"})


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"crafting": {"stick": {"count": 0, "inputs": {"oak_planks": 2}, "table": False}}},
         "crafting.stick.count: expected a positive int, got 0"),
        ({"crafting": {"stick": {"count": 4, "inputs": {"oak_planks": 2}}}},
         "crafting.stick: expected keys count, inputs, table; got ['count', 'inputs']"),
        ({"crafting": {"stick": {"count": 4, "inputs": {}, "table": False}}},
         "crafting.stick: a recipe needs at least one input"),
        ({"crafting": {"stick": {"count": 4, "inputs": {"oak_planks": 2}, "table": "no"}}},
         "crafting.stick.table: expected true or false, got 'no'"),
        ({"fuels": {"coal": 0}}, "fuels.coal: expected items smelted per fuel item"),
        ({"fuels": {"coal": 1.001}}, "fuels.coal: expected items smelted per fuel item"),
        ({"stack": {"oak_sign": -1}}, "stack.oak_sign: expected a positive int, got -1"),
    ],
)
def test_parse_errors_name_the_entry(override: dict[str, object], message: str) -> None:
    with pytest.raises(RecipeTableError, match=re.escape(message)):
        parse_recipes(_table(**override))


def test_parse_missing_section() -> None:
    table = _table()
    del table["fuels"]
    with pytest.raises(RecipeTableError, match=re.escape("recipes table has no 'fuels' section")):
        parse_recipes(table)
