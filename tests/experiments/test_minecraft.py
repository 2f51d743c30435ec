"""The harness on the Minecraft backend: a matched Goal x Capability pair reproduces 50 / 100 / 0 / 100."""
from __future__ import annotations

import json
from pathlib import Path

from sidecar_installed import needs_sidecar


@needs_sidecar
def test_goal_capability_on_minecraft_matched_pair(tmp_path: Path) -> None:
    from gencoord_env.commands.experiments.cli import main

    assert main(["goal-capability", "--backend", "minecraft", "--episodes", "4", "--out", str(tmp_path), "--quiet"]) == 0
    records = json.loads((tmp_path / "results.json").read_text())
    assert [r["backend"] for r in records] == ["minecraft"] * 4
    assert [r["episodes"] for r in records] == [4] * 4
    assert [r["success_rate"] for r in records] == [0.5, 1.0, 0.0, 1.0]
    assert all(r["episode_seconds_p50"] > 0 for r in records)
