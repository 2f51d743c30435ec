"""The self-play GRPO script end to end on a CPU with a tiny model and budget (the GPU run is the same code)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("scipy")

from gencoord_env.train.selfplay import _record, main  # noqa: E402


def test_a_completions_commit_call_is_its_record() -> None:
    call = '<tool_call>\n{"name": "commit", "arguments": {"record": "SELF a\\nREQ agent_b b"}}\n</tool_call>'
    assert _record(call) == "SELF a\nREQ agent_b b"
    assert _record("SELF a\nREQ agent_b b") is None  # a bare record is no call: the episode stays unfinished
    assert _record(call.replace("commit", "other")) is None
    assert _record('<tool_call>\n{"name": "commit", "arguments": {"record": 5}}\n</tool_call>') is None
    assert _record("<tool_call>\n{not json}\n</tool_call>") is None


def test_tiny_run_writes_the_curve_and_paired_before_after(tmp_path: Path) -> None:
    assert main(["--out", str(tmp_path), "--tiny", "--seeds", "3"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [row["seed"] for row in summary] == [3] and "error" not in summary[0]
    curve = json.loads((tmp_path / "seed3" / "reward_curve.json").read_text())
    assert [row["step"] for row in curve] == [1, 2]
    assert all(sum(row["outcomes"].values()) == 8 and math.isfinite(row["loss"]) for row in curve)  # 2 prompts x 4
    prov = json.loads((tmp_path / "seed3" / "provenance.json").read_text())
    assert prov["optimizer_steps"] == 2 and prov["config"]["seed"] == 3
    for key in ("eval_before", "eval_after"):
        assert prov[key]["pool"] == "heldout" and prov[key]["episodes"] == 8 and prov[key]["clusters"] == 4
        assert sum(prov[key]["outcomes"].values()) == 8 and prov[key]["ci95"] is not None
    assert prov["eval_change"]["clusters"] == 4 and len(prov["eval_change"]["ci95"]) == 2
    assert set(prov["seconds"]) == {"warm_start", "eval_before", "grpo", "eval_after"}
    assert prov["warm_start"]["loss_last"] < prov["warm_start"]["loss_first"]
