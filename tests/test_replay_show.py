"""``gencoord replay --show TRACE``: one recorded episode's accounting table, without re-running it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from gencoord_env.agents.rollout import rollout
from gencoord_env.agents import make_policy

import gencoord_env
from gencoord_env.accounting import LABELS
from gencoord_env.commands.cli import main
from gencoord_env.tasks.episode import Cluster, Episode
from gencoord_env.wrappers import TraceRecorder

CLUSTER = Cluster("heldout", "active_order", "WORK_BRANCH", 1, "W0", "D0")


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    env = TraceRecorder(gencoord_env.parallel_env(pool=[Episode(CLUSTER, 0), Episode(CLUSTER, 1)], backend="sim"), path)
    rollout(env, make_policy("rule"), episodes=2)
    return path


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["episode_id"] for line in path.read_text().splitlines()]


def test_show_prints_the_accounting_table(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--show", str(trace)]) == 0
    out = capsys.readouterr().out
    for label in LABELS:
        assert label in out
    assert "Sender oak_planks (agent_a), before -> after" in out and "8 -> 0" in out
    assert "Receiver oak_planks (agent_b), before -> after" in out and "0 -> 8" in out
    assert "Terminal crafting_table in agent_b" in out
    assert "pass / pass" in out and "WORK_BRANCH" in out
    assert "Decision calls" in out and "Learned model" not in out  # rule agents called no model
    assert _ids(trace)[0] in out
    assert "record 1 of 2; choose another with --episode ID" in out


def test_show_picks_the_episode_by_id(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    second = _ids(trace)[1]
    assert main(["replay", "--show", str(trace), "--episode", second]) == 0
    out = capsys.readouterr().out
    assert second in out
    assert "Sender oak_planks (agent_b), before -> after" in out  # roles swapped in the second permutation


def test_show_names_a_close_id_for_an_unknown_one(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wrong = _ids(trace)[0][:-1] + "9"
    assert main(["replay", "--show", str(trace), "--episode", wrong]) == 2
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    assert f"the trace has no episode {wrong!r}; did you mean" in err


def test_replay_without_show_still_re_runs_and_compares(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(trace)]) == 0
    assert "replayed 2 episodes: 2 match, 0 differ" in capsys.readouterr().out
