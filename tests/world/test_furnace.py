"""Settling a furnace follows the vanilla tick loop (see gencoord_env/world/furnace.py)."""
from __future__ import annotations

import pytest

from gencoord_env.world.furnace import FurnaceSlots, settle
from gencoord_env.world.recipes import load_recipes

BOOK = load_recipes()


def furnace(inp: tuple[str, int] = ("", 0), fuel: tuple[str, int] = ("", 0),
            out: tuple[str, int] = ("", 0)) -> FurnaceSlots:
    f = FurnaceSlots()
    f.input_item, f.input_count = inp
    f.fuel_item, f.fuel_count = fuel
    f.output_item, f.output_count = out
    return f


def slots(f: FurnaceSlots) -> tuple[str, int, str, int, str, int]:
    return f.input_item, f.input_count, f.fuel_item, f.fuel_count, f.output_item, f.output_count


@pytest.mark.parametrize(
    ("inp", "fuel", "result", "after"),
    [
        # one coal smelts 8; leftover burn time is lost once the input is used up
        (("cobblestone", 3), ("coal", 2), (3, 1), ("", 0, "coal", 1, "stone", 3)),
        (("cobblestone", 9), ("coal", 2), (9, 2), ("", 0, "", 0, "stone", 9)),
        (("cobblestone", 17), ("coal", 2), (16, 2), ("cobblestone", 1, "", 0, "stone", 16)),
        # planks smelt 1.5: progress carries over from one plank to the next
        (("sand", 3), ("oak_planks", 2), (3, 2), ("", 0, "", 0, "glass", 3)),
        (("sand", 4), ("oak_planks", 2), (3, 2), ("sand", 1, "", 0, "glass", 3)),
        # a stick smelts half an item: two sticks per item; a lone stick burns for nothing
        (("raw_iron", 1), ("stick", 1), (0, 1), ("raw_iron", 1, "", 0, "", 0)),
        (("raw_iron", 2), ("stick", 3), (1, 3), ("raw_iron", 1, "", 0, "iron_ingot", 1)),
        (("oak_log", 2), ("oak_log", 2), (2, 2), ("", 0, "", 0, "charcoal", 2)),
    ],
)
def test_settle(inp: tuple[str, int], fuel: tuple[str, int], result: tuple[int, int],
                after: tuple[str, int, str, int, str, int]) -> None:
    f = furnace(inp, fuel)
    assert settle(f, BOOK) == result
    assert slots(f) == after


def test_nothing_happens_without_input_or_fuel() -> None:
    f = furnace(fuel=("coal", 1))
    assert settle(f, BOOK) == (0, 0)
    assert slots(f) == ("", 0, "coal", 1, "", 0)
    f = furnace(inp=("sand", 1))
    assert settle(f, BOOK) == (0, 0)
    assert slots(f) == ("sand", 1, "", 0, "", 0)


def test_output_of_another_kind_blocks_smelting() -> None:
    f = furnace(("sand", 2), ("coal", 1), ("stone", 1))
    assert settle(f, BOOK) == (0, 0)
    assert slots(f) == ("sand", 2, "coal", 1, "stone", 1)


def test_output_stack_limit_stops_smelting_and_fuel() -> None:
    f = furnace(("sand", 10), ("oak_planks", 10), ("glass", 60))
    assert settle(f, BOOK) == (4, 3)
    assert slots(f) == ("sand", 6, "oak_planks", 7, "glass", 64)


def test_describe() -> None:
    assert furnace(("sand", 2), out=("glass", 1)).describe() == "input 2 sand, fuel empty, output 1 glass"
