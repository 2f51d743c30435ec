"""The procedural SFT sets: deterministic by seed whatever the number of workers, both forward stages of
whole matched pairs, and prompts that are exactly the env's observations of ``pool="procedural"``
(replaying the targets there succeeds, for the Direct and the Factor-Code targets alike)."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from gencoord_env.agents.lm.policy import expand_code
from gencoord_env.tasks.procedural import procedural_episodes
from gencoord_env.train.data import Row, build_all, build_set, file_sha256, load_rows, procedural_rows
from gencoord_env.train.evaluate import evaluate


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return procedural_rows(32, seed=0)


def test_rows_are_whole_pairs_on_both_forward_stages(rows: list[Row]) -> None:
    assert len(rows) == 32
    assert Counter(r.stage for r in rows) == {"sender_initial": 16, "receiver_after_request": 16}
    episodes = procedural_episodes(0)[:16]
    assert [r.episode for r in rows[::2]] == [e.id for e in episodes]
    pairs = Counter(e.template.id for e in episodes)
    assert len(pairs) == 4 and set(pairs.values()) == {4}  # 2 bindings x 2 role permutations each
    assert all(r.set == "procedural" and r.route == "forward" for r in rows)


def test_rows_are_deterministic_by_seed_and_independent_of_workers(rows: list[Row]) -> None:
    assert procedural_rows(32, seed=0) == rows
    assert procedural_rows(32, seed=0, workers=2) == rows
    assert procedural_rows(32, seed=1) != rows
    assert procedural_rows(16, seed=0) == rows[:16]  # a smaller set is a prefix of a larger one


def test_row_count_must_be_whole_pairs() -> None:
    with pytest.raises(ValueError, match=re.escape("rows must be a positive multiple of 8")):
        procedural_rows(12)
    with pytest.raises(ValueError, match=re.escape("rows=16 applies to the procedural sets")):
        build_set("forward", rows=16)
    with pytest.raises(ValueError, match="did you mean 'procedural'"):
        build_set("procedurl")


class _Replay:
    """Answers each observation with the row whose prompt is exactly that observation."""

    name = "replay"

    def __init__(self, rows: list[Row], codes: bool = False) -> None:
        self.table = {r.prompt: r.target for r in rows}
        assert len(self.table) == len(rows)
        self.codes = codes
        self.seen: set[str] = set()

    def act_batch(self, observations: list[str], infos: list[dict]) -> list[str]:
        out = []
        for obs, info in zip(observations, infos):
            assert obs in self.table, f"the env showed a context no row has:\n{obs}"
            self.seen.add(obs)
            target = self.table[obs]
            out.append(expand_code(target, info["context"]) if self.codes else target)
        return out


@pytest.mark.parametrize("codes", [False, True], ids=["direct", "factor_code"])
def test_prompts_are_env_observations_and_targets_succeed(rows: list[Row], codes: bool) -> None:
    data = procedural_rows(32, seed=0, codes=codes)
    assert [r.prompt for r in data] == [r.prompt for r in rows]
    if codes:
        assert all(r.target == f"{'active' if r.stage == 'sender_initial' else 'accepted'}_binding_id={r.binding}" for r in data)
    policy = _Replay(data, codes)
    report = evaluate(policy, "procedural", route="forward", episodes=16, batch_size=4)
    assert report["metrics"]["episodes"] == 16 and report["metrics"]["success_rate"] == 1.0
    assert policy.seen == set(policy.table)


def test_build_all_writes_procedural_sets_with_the_manifest(tmp_path: Path) -> None:
    manifest = build_all(tmp_path, ["procedural", "procedural_factor_code"], rows=16)
    for name in ("procedural", "procedural_factor_code"):
        entry = manifest["files"][name]
        assert entry["rows"] == 16 and entry["stages"] == {"receiver_after_request": 8, "sender_initial": 8}
        assert entry["sha256"] == file_sha256(tmp_path / entry["file"])
        assert load_rows(tmp_path / entry["file"]) == build_set(name, rows=16)
    assert json.loads((tmp_path / "manifest.json").read_text())["files"] == manifest["files"]
