"""The light sidecar: ``gencoord setup`` keeps of the Node packages only what Minecraft 1.21.4 needs.

The prune table (``mineflayer_server/prune.json``) is checked against the installed minecraft-data (its keep
list is what data.js names for 1.21.4), the installed cache is checked to be pruned and to load every 1.21.4
table and every package the sidecar requires, and ``prune`` itself is checked on a tree built here. The whole
Minecraft suite (tests/minecraft, tests/world/minecraft, tests/test_node_suite.py) runs on the pruned install.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from gencoord_env.world.minecraft import runtime
from gencoord_env.world.minecraft.errors import RuntimeMissing
from sidecar_installed import RUNTIME, needs_sidecar

TABLE = json.loads((runtime.find_sidecar_dir() / runtime.PRUNE_TABLE).read_text(encoding="utf-8"))
DATA = "minecraft-data/minecraft-data/data"


@needs_sidecar
def test_the_keep_list_is_what_minecraft_data_names_for_the_served_version() -> None:
    assert RUNTIME.node_modules is not None
    mc = RUNTIME.node_modules / "minecraft-data"
    block = re.search(rf"^    '{re.escape(TABLE['minecraft'])}': {{\n(.*?)^    }}", (mc / "data.js").read_text(), re.S | re.M)
    assert block, f"minecraft-data's data.js has no entry for {TABLE['minecraft']}"
    named = set(re.findall(r"minecraft-data/data/(pc/[^\"']+)", block[1]))
    loaded_at_import = set(re.findall(r"require\('\./minecraft-data/data/([^']+)'\)", (mc / "index.js").read_text()))
    keep = TABLE["keep_only"][DATA]
    files = {k for k in keep if not k.endswith("/")}
    assert files == named, f"prune.json keeps {sorted(files ^ named)} unlike data.js"
    assert loaded_at_import and all(p.startswith(tuple(k for k in keep if k.endswith("/"))) for p in loaded_at_import)


@needs_sidecar
def test_the_installed_cache_is_pruned_and_loads_all_the_sidecar_needs() -> None:
    nm = RUNTIME.node_modules
    assert nm is not None
    assert not (nm / DATA / "pc" / "1.8").exists() and not (nm / DATA / "bedrock" / "1.20.0").exists()
    assert not (nm / "prismarine-provider-anvil" / "test").exists()
    script = (
        "const d = require('minecraft-data')('1.21.4');"
        "for (const m of ['flying-squid', 'mineflayer', 'mineflayer-pathfinder', 'zeromq', 'prismarine-item',"
        " 'prismarine-windows', '@msgpack/msgpack']) require(m);"
        "console.log(JSON.stringify([d.version.minecraftVersion, d.blocksArray.length, d.itemsArray.length,"
        " Object.keys(d.recipes).length, d.language['block.minecraft.oak_planks'], typeof d.loginPacket,"
        " d.windows !== undefined, d.blockLoot !== undefined]))"
    )
    out = subprocess.run([str(RUNTIME.node), "-e", script], capture_output=True, text=True, timeout=120,
                         env={**RUNTIME.env(), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    version, blocks, items, recipes, planks, login, windows, loot = json.loads(out.stdout)
    assert (version, planks, login, windows, loot) == ("1.21.4", "Oak Planks", "object", True, True)
    assert blocks > 1000 and items > 1000 and recipes > 500


def _tree(root: Path, files: list[str]) -> None:
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text(f)


def test_prune_keeps_the_listed_files_and_folders_and_the_running_platforms_build(tmp_path: Path) -> None:
    _tree(tmp_path, ["d/data/pc/common/a.json", "d/data/pc/1.21.4/blocks.json", "d/data/pc/1.21.4/other.json",
                     "d/data/pc/1.8/blocks.json", "d/data/bedrock/1.20/x.json", "d/index.js", "p/test/world.mca",
                     "p/index.js", "z/build/linux/x64/node/z.node", "z/build/linux/arm64/node/z.node",
                     "z/build/darwin/x64/node/z.node", "z/build/manifest.json"])
    table = {"keep_only": {"d/data": ["pc/common/", "pc/1.21.4/blocks.json"]}, "remove": ["p/test"],
             "platform_builds": ["z/build"]}
    runtime.prune(tmp_path, table, "linux/x64")
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["d/data/pc/1.21.4/blocks.json", "d/data/pc/common/a.json", "d/index.js", "p/index.js",
                    "z/build/linux/x64/node/z.node", "z/build/manifest.json"]
    assert not (tmp_path / "d/data/pc/1.8").exists() and not (tmp_path / "d/data/bedrock").exists()


def test_prune_removes_nothing_when_a_kept_file_is_missing(tmp_path: Path) -> None:
    _tree(tmp_path, ["d/data/pc/1.8/blocks.json"])
    with pytest.raises(RuntimeMissing, match=r"keeps pc/1.21.4/blocks.json .* does not match their lockfile"):
        runtime.prune(tmp_path, {"keep_only": {"d/data": ["pc/1.21.4/blocks.json"]}}, "linux/x64")
    assert (tmp_path / "d/data/pc/1.8/blocks.json").exists()


def test_prune_keeps_every_build_for_a_platform_without_one(tmp_path: Path) -> None:
    _tree(tmp_path, ["z/build/linux/x64/node/z.node", "z/build/darwin/arm64/node/z.node"])
    runtime.prune(tmp_path, {"platform_builds": ["z/build"]}, "freebsd/x64")
    assert len([p for p in tmp_path.rglob("*.node")]) == 2
