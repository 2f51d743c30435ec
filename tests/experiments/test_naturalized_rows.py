"""Naturalized private facts: the frozen factor parser and the complete surface table beside TF-IDF and the
oracle factors, every figure read back from the episodes the command line played."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from gencoord_env.commands.experiments.analysis import matrix
from gencoord_env.commands.experiments.cli import main
from gencoord_env.commands.experiments.runner import run_condition
from gencoord_env.commands.experiments.specs import EXPERIMENTS, Condition

from gencoord_env.agents import make_policy

FORMS = ("C1", "C2", "C3")
RULES = ("frozen factor parser", "TF-IDF rule", "complete surface table", "oracle factors")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict], list[dict], Path]:
    out = tmp_path_factory.mktemp("naturalized")
    # 16 clusters: every held-out template under both of its bindings, both role permutations
    assert main(["naturalized", "--episodes", "32", "--out", str(out), "--quiet"]) == 0
    records = json.loads((out / "results.json").read_text())
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    return {r["condition"]: r for r in records}, episodes, out


def _success_from_episodes(episodes: list[dict], condition: str) -> float:
    mine = [e for e in episodes if e["condition"] == condition]
    assert mine, condition
    return sum(e["outcome"] == "SUCCESS" for e in mine) / len(mine)


def test_every_method_has_a_row_for_every_form(run: tuple[dict[str, dict], list[dict], Path]) -> None:
    by, episodes, _ = run
    for method in RULES:
        for form in FORMS:
            r = by[f"{method} / {form}"]
            assert r["method"] == method and r["column"] == form and r["episodes"] == 32
            assert r["success_rate"] == _success_from_episodes(episodes, r["condition"])
    assert by["frozen factor parser / C1"]["policy"] == "frozen_parser"
    assert by["complete surface table / C2"]["policy"] == "surface_table"
    assert by["frozen factor parser / C2"]["private_fact"] == "C2"
    assert not any(c.startswith("learned policy") for c in by)  # only with --policy


def test_parser_reads_recombinations_but_not_paraphrases_and_the_table_reads_neither(
        run: tuple[dict[str, dict], list[dict], Path]) -> None:
    by, episodes, _ = run
    assert by["frozen factor parser / C1"]["success_rate"] == 1.0
    assert by["frozen factor parser / C2"]["success_rate"] == 0.0
    assert by["frozen factor parser / C3"]["success_rate"] == 0.0
    assert [by[f"complete surface table / {f}"]["success_rate"] for f in FORMS] == [0.0, 0.0, 0.0]
    assert [by[f"oracle factors / {f}"]["success_rate"] for f in FORMS] == [1.0, 1.0, 1.0]
    # an unread description is no plan: no commitment is ever formed, so nothing is executed
    for condition in ("frozen factor parser / C2", "frozen factor parser / C3", "complete surface table / C1"):
        mine = [e for e in episodes if e["condition"] == condition]
        assert not any(e["metrics"]["commitment_validity"] for e in mine), condition


def test_the_oracle_minus_each_rule_is_the_reported_difference(run: tuple[dict[str, dict], list[dict], Path]) -> None:
    by, _, _ = run
    r = by["complete surface table / C1"]
    assert r["paired"]["taken_as"] == "oracle factors / C1 - complete surface table / C1"
    assert r["paired"]["success"]["versus_minus_condition"] == 1.0


def test_matrix_lays_the_rows_out_as_the_paper_does(run: tuple[dict[str, dict], list[dict], Path]) -> None:
    by, _, out = run
    m = matrix(EXPERIMENTS["naturalized"], list(by.values()))
    assert m["rows"] == ["learned policy", *RULES] and m["columns"] == list(FORMS)
    assert m["success"][0] == [None, None, None]  # the learned row without --policy
    for i, method in enumerate(RULES, start=1):
        assert m["success"][i] == [by[f"{method} / {f}"]["success_rate"] for f in FORMS]
    with (out / "matrix.csv").open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["method", "C1 success (%)", "C2 success (%)", "C3 success (%)"]
    assert rows[1] == ["learned policy", "", "", ""]
    assert rows[2][0] == "frozen factor parser" and rows[2][1] == "100.0"


@pytest.mark.parametrize("policy", ["frozen_parser", "surface_table"])
def test_both_rules_read_every_training_surface(policy: str) -> None:
    """On the training phrasings themselves both rules recover every binding: their misses above are the forms'."""
    condition = Condition(f"{policy} / train", "heldout", policy, private_fact="train")
    rows = run_condition(condition, make_policy(policy), episodes=32)
    assert len(rows) == 32 and all(r.success for r in rows)
