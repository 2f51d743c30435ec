"""Costs as the paper counts them: the representation experiment's five cost panels (calls, input tokens,
output tokens, wire bytes, TTC p50 with a pale extension to p95), tokens summed per episode from the
policy's own call records; and Goal x Capability's bounded response reported on its own beside the request."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_rgba

from gencoord_env.agents.lm.generate import GenerationRecord
from gencoord_env.agents.lm.policy import DirectDSLPolicy
from gencoord_env.agents import make_policy
from gencoord_env.commands.experiments.analysis import analyze
from gencoord_env.commands.experiments.cli import main
from gencoord_env.commands.experiments.plot import COST_PANELS, OURS, figure
from gencoord_env.commands.experiments.runner import EpisodeRow, episode_indices, make_env, run_experiment
from gencoord_env.commands.experiments.specs import EXPERIMENTS, Condition

REP = EXPERIMENTS["representation"]
GC = EXPERIMENTS["goal-capability"]


class _Scripted:
    """Stands in for the model's Generator: answers each observation with the rule agent's action; an input
    token per observation word and an output token per action character."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table

    def generate(self, contexts: Sequence[str]) -> list[GenerationRecord]:
        return [GenerationRecord(text=self.table[c], tokens=(), input_tokens=len(c.split()),
                                 output_tokens=len(self.table[c]), latency_s=0.0, stop_reason="eos",
                                 batch_size=len(contexts), backend="scripted") for c in contexts]


def _rule_answers(condition: Condition, episodes: int) -> dict[str, str]:
    """What the rule agent says to every observation of the condition's selected episodes."""
    env, rule, table = make_env(condition, "sim", None), make_policy("rule"), {}
    for k in episode_indices(condition, episodes):
        obs, infos = env.reset(options={"index": k})
        while env.agents:
            turn = next(a for a, i in infos.items() if i.get("deciding"))
            table[obs[turn]] = action = rule.act(obs[turn], infos[turn])
            obs, _, _, _, infos = env.step({a: (action if a == turn else "") for a in env.agents})
    return table


@pytest.fixture(scope="module")
def learned() -> tuple[list[dict[str, Any]], dict[str, list[EpisodeRow]], DirectDSLPolicy]:
    dsl = REP.conditions[0]
    policy = DirectDSLPolicy(_Scripted(_rule_answers(dsl, 8)))  # type: ignore[arg-type]
    rows = run_experiment(REP, lambda c: policy if c.subject else make_policy(c.policy), episodes=8)
    return analyze(REP, rows, {c.name: "scripted" if c.subject else c.policy for c in REP.conditions}), rows, policy


def test_tokens_per_episode_are_the_sums_of_the_policys_call_records(
        learned: tuple[list[dict[str, Any]], dict[str, list[EpisodeRow]], DirectDSLPolicy]) -> None:
    records, rows, policy = learned
    dsl = records[0]
    assert dsl["success_rate"] == 1.0 and dsl["model_calls_per_episode"] == 2.0
    for row in rows["DSL"]:
        mine = [r for r in policy.records if r.episode == row.episode_id]
        assert row.metrics["model_calls"] == len(mine) == row.metrics["decisions"] == row.model_calls
        assert row.metrics["model_input_tokens"] == sum(r.input_tokens for r in mine) > 0
        assert row.metrics["model_output_tokens"] == sum(r.output_tokens for r in mine) > 0
    assert dsl["input_tokens_per_episode"] == pytest.approx(
        sum(r.metrics["model_input_tokens"] for r in rows["DSL"]) / 8)
    assert dsl["output_tokens_per_episode"] == pytest.approx(sum(len(r.text) for r in policy.records) / 8)
    # the rule agents of the other rows make no model calls and have no tokens to count
    for r, name in zip(records[1:], ("JSON", "free-form")):
        assert r["model_calls_per_episode"] == 0.0
        assert r["input_tokens_per_episode"] is None and r["output_tokens_per_episode"] is None
        assert all(row.metrics["model_calls"] == 0 and "model_input_tokens" not in row.metrics for row in rows[name])


def test_cost_figure_has_the_papers_five_panels(
        learned: tuple[list[dict[str, Any]], dict[str, list[EpisodeRow]], DirectDSLPolicy]) -> None:
    records, _, _ = learned
    fig = figure(REP, records, "sim")
    try:
        titles = [ax.get_title() for ax in fig.axes]
        assert titles == [header for _, header in COST_PANELS] == [
            "calls / episode", "input tokens / episode", "output tokens / episode", "wire bytes / episode",
            "time to commitment (s)"]
        ttc = fig.axes[4]
        # dark bars end at p50; pale extensions (ours, then the paper's) run on to p95
        ours = to_rgba(OURS)
        ours_p50 = [p for p in ttc.patches if p.get_facecolor() == ours][0]
        extensions = [p for p in ttc.patches if p.get_facecolor()[3] < 1.0]
        assert len(extensions) == 2 * len(records)
        assert ours_p50.get_width() == pytest.approx(records[0]["time_to_commitment_p50"])
        ours_ext = [p for p in extensions if abs(p.get_x() - records[0]["time_to_commitment_p50"]) < 1e-12]
        assert ours_ext[0].get_x() + ours_ext[0].get_width() == pytest.approx(records[0]["time_to_commitment_p95"])
        # the token panels of the rule rows say why they are empty
        tokens = fig.axes[1]
        assert [t.get_text() for t in tokens.texts].count(" n/a") == 2
    finally:
        plt.close(fig)


def test_rule_agents_only_say_they_make_no_model_calls(tmp_path: Path) -> None:
    assert main(["representation", "--episodes", "4", "--out", str(tmp_path), "--quiet"]) == 0
    records = json.loads((tmp_path / "results.json").read_text())
    assert all(r["input_tokens_per_episode"] is None and r["model_calls_per_episode"] == 0.0 for r in records)
    assert [r["paper"]["input_tokens_per_episode"] for r in records] == [949.1, 1154.7, 1585.2]
    fig = figure(REP, records, "sim")
    try:
        notes = [t.get_text() for ax in fig.axes[1:3] for t in ax.texts if "no model calls" in t.get_text()]
        assert len(notes) == 2
    finally:
        plt.close(fig)


def test_goal_capability_reports_the_response_apart_from_the_request(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["goal-capability", "--episodes", "8", "--out", str(tmp_path), "--quiet"]) == 0
    by = {r["condition"]: r for r in json.loads((tmp_path / "results.json").read_text())}
    episodes = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    correct = by["correct feedback"]
    mine = [e["metrics"] for e in episodes if e["condition"] == "correct feedback"]
    assert correct["response_bytes_mean"] == pytest.approx(sum(m["response_bytes"] for m in mine) / len(mine))
    assert correct["request_bytes_mean"] == pytest.approx(sum(m["request_bytes"] for m in mine) / len(mine))
    assert 0 < correct["response_bytes_mean"] <= correct["response_bytes_p95"]
    assert all(m["wire_bytes"] == m["request_bytes"] + m["response_bytes"] for m in mine)
    assert correct["response_bytes_mean"] < correct["wire_bytes_mean"]
    # the paper's 103 B (p95 118 B) is compared with the response alone, never with request + response
    assert correct["paper"]["response_bytes_mean"] == 103.0 and correct["paper"]["response_bytes_p95"] == 118.0
    assert "wire_bytes_mean" not in correct["paper"]
    assert by["centralized full info"]["paper"]["wire_bytes_mean"] == 956.0
    assert by["A-only"]["wire_bytes_mean"] == 0.0
    header = " ".join(col.header for col in _table_columns())
    assert "request B" in header and "response B" in header and "response B p95" in header
    assert "response B" in capsys.readouterr().out


def _table_columns() -> list[Any]:
    from gencoord_env.commands.experiments.report import table

    return table(GC, [], "sim").columns


def test_byte_and_token_figures_of_older_records_are_not_measured_rather_than_zero() -> None:
    old = EpisodeRow("correct feedback", "e0", "c0", 0, "goal_capability", None, "SUCCESS",
                     {"decisions": 2, "wire_bytes": 270, "time_to_commitment": 0.1, "episode_seconds": 0.2}, 0)
    records = analyze(GC, {"correct feedback": [old]}, {"correct feedback": "rule"})
    r = records[0]
    assert r["wire_bytes_mean"] == 270.0
    assert r["request_bytes_mean"] is None and r["response_bytes_mean"] is None and r["response_bytes_p95"] is None
    assert r["input_tokens_per_episode"] is None
