"""The game rules of the shared prior, loaded from ``gencoord_env/data/recipes.json``.

Both world backends read the same table, so the pure-Python world and the Minecraft game-logic plugin
agree on what a ``craft`` or a furnace turns into what. The rules are data; this module only types them
and answers the two questions the worlds ask:

* how many whole recipe batches, consumed inputs and produced outputs does "craft ``count`` of ``item``"
  mean (:meth:`RecipeBook.craft_plan`), and
* what does a furnace with some input and fuel smelt (:func:`gencoord_env.world.furnace.settle`).

Crafting happens in whole batches, as in Minecraft: ``craft(item, count)`` means "craft until at least
``count`` outputs were made", i.e. ``ceil(count / recipe.count)`` batches. The stick recipe makes 4
sticks from 2 oak planks, so crafting 5 sticks runs it twice, consumes 4 oak planks and yields 8 sticks. (Mineflayer's ``bot.craft(recipe,
times)`` takes the number of batches, so the Minecraft side passes ``batches`` unchanged.)
"""
from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from typing import cast
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from gencoord_env.data_files import data_path
from gencoord_env.errors import DataError, UnknownName, UsageError
from gencoord_env.suggest import close_matches

#: Game ticks one item takes to smelt in a vanilla furnace; fuel values are expressed in these.
COOK_TICKS = 200
#: Stack size of every item the table does not list under ``stack``.
DEFAULT_STACK = 64

_RECIPES_PATH = data_path("recipes.json")


class RecipeTableError(DataError):
    """``recipes.json`` is malformed; the message names the entry and what was expected."""


@dataclass(frozen=True)
class Recipe:
    """One crafting recipe: one batch consumes ``inputs`` and makes ``count`` of ``output``.

    ``table`` is true when the shape needs the 3x3 grid of a crafting table.
    """

    output: str
    count: int
    inputs: Mapping[str, int]
    table: bool


@dataclass(frozen=True)
class CraftPlan:
    """What crafting ``requested`` items of ``recipe.output`` does, in whole batches.

    >>> book = load_recipes()
    >>> plan = book.craft_plan("stick", 5)
    >>> plan.batches, plan.produced, dict(plan.inputs)
    (2, 8, {'oak_planks': 4})
    """

    recipe: Recipe
    requested: int
    batches: int
    produced: int
    inputs: Mapping[str, int]


@dataclass(frozen=True)
class RecipeBook:
    """The whole rule table: crafting recipes, smelting, fuels, placeable blocks and stack sizes."""

    crafting: Mapping[str, Recipe]
    smelting: Mapping[str, str]  # input item -> output item, one for one
    fuel_ticks: Mapping[str, int]  # fuel item -> burn time in ticks (COOK_TICKS per smelted item)
    blocks: frozenset[str]
    stack: Mapping[str, int]

    def recipe(self, item: str) -> Recipe | None:
        """The recipe making ``item``, or ``None`` when nothing crafts it."""
        return self.crafting.get(item)

    def craft_plan(self, item: str, count: int) -> CraftPlan:
        """Batches, inputs and outputs of crafting at least ``count`` of ``item``.

        Raises ``KeyError`` (with close-match suggestions) when no recipe makes ``item``; worlds check
        :meth:`recipe` first and report a failed event instead.
        """
        recipe = self.crafting.get(item)
        if recipe is None:
            raise UnknownName("craftable item", item, self.crafting,
                              message=unknown_item_message(item, self.crafting, "craftable item"))
        if count < 1:
            raise UsageError(f"craft count must be a positive int, got {count!r}")
        batches = -(-count // recipe.count)
        inputs = {name: n * batches for name, n in recipe.inputs.items()}
        return CraftPlan(recipe, count, batches, batches * recipe.count, MappingProxyType(inputs))

    def stack_size(self, item: str) -> int:
        """How many of ``item`` fit in one slot."""
        return self.stack.get(item, DEFAULT_STACK)


def unknown_item_message(item: str, known: Mapping[str, object] | frozenset[str], what: str) -> str:
    """``"no <what> named 'x'; did you mean 'y'?"`` with close matches from ``known``."""
    close = close_matches(item, sorted(known), n=3)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"no {what} named {item!r}{hint}"


def _positive_int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RecipeTableError(f"{where}: expected a positive int, got {value!r}")
    return value


def parse_recipes(raw: Mapping[str, object]) -> RecipeBook:
    """Type-check and freeze a decoded ``recipes.json`` document."""
    for key in ("crafting", "smelting", "fuels", "blocks", "stack"):
        if key not in raw:
            raise RecipeTableError(f"recipes table has no {key!r} section; expected crafting, smelting, "
                                   "fuels, blocks and stack")
    crafting: dict[str, Recipe] = {}
    for output, entry in dict(raw["crafting"]).items():  # type: ignore[call-overload]
        where = f"crafting.{output}"
        if set(entry) != {"count", "inputs", "table"}:
            raise RecipeTableError(f"{where}: expected keys count, inputs, table; got {sorted(entry)}")
        inputs = {name: _positive_int(n, f"{where}.inputs.{name}") for name, n in entry["inputs"].items()}
        if not inputs:
            raise RecipeTableError(f"{where}: a recipe needs at least one input")
        if not isinstance(entry["table"], bool):
            raise RecipeTableError(f"{where}.table: expected true or false, got {entry['table']!r}")
        crafting[output] = Recipe(output, _positive_int(entry["count"], f"{where}.count"),
                                  MappingProxyType(inputs), entry["table"])
    smelting = {str(k): str(v) for k, v in dict(raw["smelting"]).items()}  # type: ignore[call-overload]
    fuel_ticks: dict[str, int] = {}
    for item, smelts in dict(raw["fuels"]).items():  # type: ignore[call-overload]
        ticks = smelts * COOK_TICKS if isinstance(smelts, (int, float)) and not isinstance(smelts, bool) else 0
        if ticks <= 0 or ticks != int(ticks):
            raise RecipeTableError(f"fuels.{item}: expected items smelted per fuel item as a positive "
                                   f"multiple of 1/{COOK_TICKS}, got {smelts!r}")
        fuel_ticks[item] = int(ticks)
    stack = {item: _positive_int(n, f"stack.{item}") for item, n in dict(raw["stack"]).items()}  # type: ignore[call-overload]
    return RecipeBook(MappingProxyType(crafting), MappingProxyType(smelting), MappingProxyType(fuel_ticks),
                      frozenset(cast(Iterable[str], raw["blocks"])), MappingProxyType(stack))


@functools.cache
def load_recipes(path: Path | None = None) -> RecipeBook:
    """The rule table (read once per process). ``path`` overrides the packaged ``recipes.json``."""
    with open(path or _RECIPES_PATH, encoding="utf-8") as f:
        return parse_recipes(json.load(f))
