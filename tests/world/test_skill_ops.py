"""The op table ``data/skill_ops.json``: what every world checks skill calls against."""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

from gencoord_env.world.types import OP_ARGS, SKILL_OPS_PATH, SKILL_OPS, ArgType, OpTableError, load_skill_ops, parse_skill_ops


def test_ops_and_their_arguments_in_call_order() -> None:
    assert dict(SKILL_OPS) == {
        "goto": ("station",),
        "withdraw": ("station", "item", "count"),
        "deposit": ("station", "item", "count"),
        "give": ("to", "item", "count"),
        "await_handoff": ("from", "item", "count"),
        "craft": ("item", "count", "station"),
        "place": ("site", "item", "count"),
        "furnace_input": ("station", "item", "count"),
        "furnace_fuel": ("station", "item", "count"),
        "furnace_output": ("station", "item", "count"),
        "wait": ("ticks",),
    }
    assert OP_ARGS["craft"]["station"] == ArgType("grid", "string", 0, 128)
    assert OP_ARGS["goto"]["station"] == ArgType("station", "string", 1, 128)
    assert OP_ARGS["give"]["count"] == ArgType("count", "int", 1, 2304)


def test_arg_types_accept_exactly_their_values() -> None:
    items = frozenset({"stone"})
    count, grid, item = OP_ARGS["give"]["count"], OP_ARGS["craft"]["station"], OP_ARGS["give"]["item"]
    assert [count.accepts(v, items) for v in (1, 2304, 0, 2305, True, 1.0, "1")] == [True, True] + [False] * 5
    assert [grid.accepts(v, items) for v in ("", "t", "x" * 129, None)] == [True, True, False, False]
    assert [item.accepts(v, items) for v in ("stone", "stones", 3)] == [True, False, False]
    assert (count.expected(), grid.expected(), item.expected()) == (
        "an int in [1, 2304]", "a string of 0 to 128 characters", "a Minecraft item name")


def _raw() -> dict[str, Any]:
    return json.loads(SKILL_OPS_PATH.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda o: o.pop("types"), "ops: expected an object with the objects 'types' and 'ops'"),
        (lambda o: o["types"]["count"].update(kind="integer"),
         "ops.types.count: expected an object whose kind is one of ['string', 'int', 'item']"),
        (lambda o: o["types"]["ticks"].update(min=5, max=1), "ops.types.ticks: expected 0 <= min <= max, got min 5 and max 1"),
        (lambda o: o["types"]["ticks"].pop("limit"), "ops.types.ticks.min: expected an int, got None"),
        (lambda o: o["types"]["ticks"].update(limit="tick"),
         "ops.types.ticks.limit: 'tick' is not a limit of limits.json's args; expected one of "
         "['count', 'name_chars', 'path_tasks', 'task_args', 'ticks']"),
        (lambda o: o["types"]["ticks"].update(max="many"), "ops.types.ticks.max: expected an int, got 'many'"),
        (lambda o: o["ops"]["give"]["args"].update(to="agnt"),
         "ops.ops.give.args.to: unknown type 'agnt'; expected one of ['agent', 'count', 'grid', 'item', 'station', 'ticks']; "
         "did you mean 'agent'?"),
        (lambda o: o["ops"]["wait"].pop("args"), "ops.ops.wait: expected an object with an object 'args'"),
    ],
)
def test_op_table_validation(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    raw = _raw()
    mutate(raw)
    with pytest.raises(OpTableError, match=re.escape(message)):
        parse_skill_ops(raw)


def test_missing_op_table(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OpTableError, match="is missing; reinstall gencoord_env"):
        load_skill_ops(tmp_path / "skill_ops.json")


def test_types_take_their_bounds_from_the_limits_table() -> None:
    """One set of numbers: the op table's bounds are limits.json's (the contract and the sidecar read it too)."""
    from gencoord_env.limits import LIMITS

    count, ticks, name = (LIMITS.args[k] for k in ("count", "ticks", "name_chars"))
    assert (OP_ARGS["withdraw"]["count"].min, OP_ARGS["withdraw"]["count"].max) == (count.min, count.max)
    assert (OP_ARGS["wait"]["ticks"].min, OP_ARGS["wait"]["ticks"].max) == (ticks.min, ticks.max)
    assert OP_ARGS["goto"]["station"].max == OP_ARGS["give"]["to"].max == name.max
    assert OP_ARGS["craft"]["station"].min == 0  # the grid's own min overrides the limit's
    raw = _raw()
    raw["types"]["count"]["max"] = 7  # a bound given in the op table overrides the limit
    assert parse_skill_ops(raw)["give"]["count"].max == 7
