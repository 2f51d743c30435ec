"""A furnace's three slots and the rule that settles them, shared by both world backends.

A vanilla furnace smelts on its own as soon as its input slot holds something smeltable, its fuel slot
holds fuel and its output slot has room; nobody has to "start" it. The worlds therefore report a
*settled* furnace: after every ``furnace_input`` or ``furnace_fuel`` the furnace runs until it can do
nothing more, which is what a Minecraft furnace shows once enough ticks have passed (and what the
Minecraft backend shows at once with ``cook_ticks == 0``).

Settling follows the vanilla tick loop (one fuel item is lit only when an item can be smelted and the
fire is out; cooking progress carries over from one fuel item to the next):

* each smelted item needs ``COOK_TICKS`` of burn time; fuel items are lit one at a time as needed;
* when the last lit fuel runs out in the middle of an item, that fuel is still used up, the item is
  not smelted and its progress is lost;
* burn time left over when nothing more can be smelted is lost (the fire burns out), so a settled
  furnace is fully described by its three slots.

A slot holds one item kind, at most one stack of it (stack sizes from the rule table).
"""
from __future__ import annotations

from gencoord_env.world.recipes import COOK_TICKS, RecipeBook


class FurnaceSlots:
    """The mutable slots of one furnace: input, fuel and output, each an item name and a count.

    An empty slot has item ``""`` and count ``0``.
    """

    __slots__ = ("input_item", "input_count", "fuel_item", "fuel_count", "output_item", "output_count")

    def __init__(self) -> None:
        self.input_item = ""
        self.input_count = 0
        self.fuel_item = ""
        self.fuel_count = 0
        self.output_item = ""
        self.output_count = 0

    def describe(self) -> str:
        """``"input 2 cobblestone, fuel empty, output 1 stone"`` for failure reasons."""
        def slot(item: str, count: int) -> str:
            return f"{count} {item}" if count else "empty"
        return (f"input {slot(self.input_item, self.input_count)}, fuel {slot(self.fuel_item, self.fuel_count)}"
                f", output {slot(self.output_item, self.output_count)}")


def settle(slots: FurnaceSlots, book: RecipeBook) -> tuple[int, int]:
    """Smelt everything the slots allow; return ``(items smelted, fuel items burned)``.

    >>> from gencoord_env.world.recipes import load_recipes
    >>> f = FurnaceSlots()
    >>> f.input_item, f.input_count, f.fuel_item, f.fuel_count = "cobblestone", 3, "oak_planks", 3
    >>> settle(f, load_recipes()), f.describe()
    ((3, 2), 'input empty, fuel 1 oak_planks, output 3 stone')
    """
    if not slots.input_count or not slots.fuel_count:
        return 0, 0
    output = book.smelting.get(slots.input_item)
    if output is None or (slots.output_count and slots.output_item != output):
        return 0, 0
    target = min(slots.input_count, book.stack_size(output) - slots.output_count)
    fuel_ticks = book.fuel_ticks.get(slots.fuel_item, 0)
    if fuel_ticks <= 0:
        return 0, 0
    fuel_left = slots.fuel_count
    burn = smelted = 0
    while smelted < target:
        while burn < COOK_TICKS and fuel_left:
            fuel_left -= 1
            burn += fuel_ticks
        if burn < COOK_TICKS:
            break
        burn -= COOK_TICKS
        smelted += 1
    burned = slots.fuel_count - fuel_left
    if burned:
        slots.fuel_count = fuel_left
        if not fuel_left:
            slots.fuel_item = ""
    if smelted:
        slots.input_count -= smelted
        if not slots.input_count:
            slots.input_item = ""
        slots.output_item = output
        slots.output_count += smelted
    return smelted, burned
