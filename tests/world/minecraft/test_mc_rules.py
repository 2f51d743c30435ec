"""The Node sidecar reads the Python package's rule tables: its furnaces smelt by ``recipes.json`` and it
checks skill calls against ``skill_ops.json``, the tables the pure-Python world uses."""
from __future__ import annotations

import json
import subprocess

import pytest

from gencoord_env.catalog import DATA_DIR
from gencoord_env.world.minecraft.errors import RuntimeMissing
from gencoord_env.world.minecraft.runtime import find_node, find_sidecar_dir
from gencoord_env.world.recipes import load_recipes
from gencoord_env.world.types import OP_ARGS

# what the sidecar loads from the directory the Python side passes it as --rules
SCRIPT = """
const { loadRules } = require('./src/rules')
const { smeltingTable } = require('./src/plugin/furnace')
const rules = loadRules(process.argv[1])
process.stdout.write(JSON.stringify({ furnace: smeltingTable(rules.recipes), ops: rules.ops, blocks: rules.recipes.blocks }))
"""


@pytest.fixture(scope="module")
def node_rules() -> dict:  # type: ignore[type-arg]
    try:
        node, _ = find_node()
    except RuntimeMissing as err:
        pytest.skip(str(err))
    out = subprocess.run([str(node), "-e", SCRIPT, str(DATA_DIR)], cwd=find_sidecar_dir(),
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_node_furnace_smelts_by_the_sims_recipes(node_rules: dict) -> None:  # type: ignore[type-arg]
    book = load_recipes()
    assert node_rules["furnace"]["smelting"] == dict(book.smelting)
    assert node_rules["furnace"]["fuelTicks"] == dict(book.fuel_ticks)
    assert set(node_rules["blocks"]) == book.blocks


def test_node_checks_calls_against_the_sims_op_table(node_rules: dict) -> None:  # type: ignore[type-arg]
    python = {op: {name: [t.kind, t.min, t.max] for name, t in args.items()} for op, args in OP_ARGS.items()}
    node = {op: {name: [t["kind"], t["min"], t["max"]] for name, t in args.items()} for op, args in node_rules["ops"].items()}
    assert node == python
    assert [list(args) for args in node_rules["ops"].values()] == [list(args) for args in OP_ARGS.values()]
