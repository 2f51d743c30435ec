"""``gencoord train tables --budget tiny`` end to end on the CPU: every table's learned conditions trained
(one tiny model per condition's model) and played through the experiment harness, the rule rows beside
them, and per table results.json, a PNG and provenance.json, plus TABLES.md; the batched path gives the
harness's serial rows; ``--init`` starts every model from a given checkpoint."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gencoord_env.agents import make_policy
from gencoord_env.commands.experiments.runner import episode_indices, run_condition
from gencoord_env.train import cli
from gencoord_env.train.data import expected_rows
from gencoord_env.train.sft import CONTINUE_LR, SCRATCH_LR, read_record
from gencoord_env.train.pipeline import batched_rows
from gencoord_env.train.tables import BUDGETS, MODELS, TABLES, TIMING, TIMING_CLUSTERS, TablesConfig

SEED = 2026073101
TINY = BUDGETS["tiny"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> tuple[Path, Path, dict[str, Any]]:
    out, work = tmp_path_factory.mktemp("tables"), tmp_path_factory.mktemp("tables-work")
    (work / "data").symlink_to(data_dir)  # the session's built sets: the command reuses them
    assert cli.main(["tables", "--out", str(out), "--work", str(work), "--budget", "tiny", "--seeds", str(SEED), "--quiet"]) == 0
    results = {name: json.loads((out / name / "results.json").read_text()) for name in TABLES}
    return out, work, results


def test_every_table_has_its_files_and_every_condition_a_well_formed_record(run: tuple[Path, Path, dict[str, Any]]) -> None:
    out, _, results = run
    for name, table in TABLES.items():
        assert (out / name / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        res = results[name]
        assert res["table"] == name and res["budget"] == "tiny" and res["seeds"] == [SEED] and res["subset"] is True
        assert "at most 4 episodes" in res["note"]
        assert [r["condition"] for r in res["conditions"]] == [c.name for c in table.experiment.conditions]
        by = {c.name: c for c in table.experiment.conditions}
        for r in res["conditions"]:
            c = by[r["condition"]]
            model = table.models.get(c.name)
            assert r["model"] == model and r["policy"] == (f"model:{model}" if model else c.policy)
            assert r["episodes"] == TINY.eval_episodes == TINY.rule_episodes and r["clusters"] == 2
            assert r["pool_episodes"] == len(episode_indices(c, None)) and r["subset"]
            assert 0.0 <= r["success_rate"] <= 1.0 and r["success_rate"] == r["successes"] / r["episodes"]
            lo, hi = r["success_ci95"]
            assert 0.0 <= lo <= r["success_rate"] <= hi <= 1.0 and 0 <= r["strict_clusters"] <= r["clusters"]
            assert sum(r["outcomes"].values()) == r["episodes"]
            assert r["paper"] == dict(c.paper)
            if model:  # the model was called, and every call is counted
                assert r["seeds"] == [SEED] and set(r["success_by_seed"]) == {str(SEED)}
                assert r["model_calls_per_episode"] >= 1 and r["decisions_per_episode"] >= 1
                assert r["input_tokens_per_episode"] > 100 and r["output_tokens_per_episode"] >= 1
            else:
                assert r["seeds"] == [] and r["model_calls_per_episode"] == 0 and r["input_tokens_per_episode"] is None
            if model and table.timing:
                assert r["cost"]["episodes"] == TINY.timing_episodes and r["cost"]["clusters"] == 1
                assert f"{TIMING_CLUSTERS} clusters" in r["cost"]["pool"]
            elif model:
                assert r["time_to_commitment_p50"] is None  # lockstep batches time no commitment
    assert set(results["visibility"]["matrix"]["rows"]) == {"symbolic rule", "factor composer", "learned policy"}
    assert results["naturalized"]["matrix"]["rows"][:2] == ["learned policy", "learned factor + rule"]


def test_numbers_are_those_of_the_played_episodes(run: tuple[Path, Path, dict[str, Any]]) -> None:
    _, work, results = run
    lane = json.loads((work / "lanes" / f"{SEED}-direct.json").read_text())
    assert list(lane["runs"]) == ["direct"] and lane["device"] == "cpu"
    run_ = lane["runs"]["direct"]
    assert run_["format"] == "direct" and run_["summary"]["format"] == "direct"
    assert run_["timing_warm_up"] == f"representation/DSL{TIMING}"  # its first timing pool, played once before the timed pass
    assert json.loads((work / "lanes" / f"{SEED}-requester.json").read_text())["runs"]["requester"]["timing_warm_up"] is None
    plays = run_["plays"]
    quality = {k for k in plays if not k.endswith(TIMING)}
    assert quality == {f"{t}/{c}" for t, table in TABLES.items() for c, m in table.models.items() if m == "direct"}
    for key in quality:
        table, condition = key.split("/", 1)
        r = next(x for x in results[table]["conditions"] if x["condition"] == condition)
        rows = plays[key]["rows"]
        assert len(rows) == r["episodes"] and {x["condition"] for x in rows} == {condition}
        assert r["successes"] == sum(x["outcome"] == "SUCCESS" for x in rows)
        costs = plays[key + TIMING]["rows"] if TABLES[table].timing else rows  # a timing table's costs: its timing pool
        assert r["input_tokens_per_episode"] == sum(x["metrics"]["model_input_tokens"] for x in costs) / len(costs)
    # one setup in two tables (representation's DSL, backend's Direct DSL) plays once, under both names
    a, b = plays["representation/DSL"], plays["backend/Direct DSL"]
    assert a["key"] == b["key"] and [x["episode_id"] for x in a["rows"]] == [x["episode_id"] for x in b["rows"]]
    # the rule rows are the harness's own: the exact references hold on their subset
    by = {t: {r["condition"]: r for r in res["conditions"]} for t, res in results.items()}
    assert by["request"]["deterministic rule"]["success_rate"] == 1.0
    assert [by["naturalized"][f"oracle factors / {f}"]["success_rate"] for f in ("C1", "C2", "C3")] == [1.0] * 3
    assert by["naturalized"]["complete surface table / C1"]["success_rate"] == 0.0


def test_provenance_names_data_models_versions_and_seconds(run: tuple[Path, Path, dict[str, Any]]) -> None:
    out, work, _ = run
    for name, table in TABLES.items():
        p = json.loads((out / name / "provenance.json").read_text())
        models = set(table.models.values())
        assert p["table"] == name and p["seeds"] == [SEED] and p["budget"]["name"] == "tiny" and p["failures"] == []
        assert p["source"] == {"scratch": "qwen3"} and p["devices"] == ["cpu"]
        assert {"torch", "transformers", "tokenizers", "gencoord_env"} <= set(p["versions"])
        assert p["command"].startswith("gencoord train tables --out")
        assert set(p["models"]) == models and p["lanes"] == {"expected": len(models), "done": len(models)}
        for m in models:
            f = p["data"]["files"][MODELS[m].data]
            assert f["rows"] == expected_rows(MODELS[m].data) and re.fullmatch(r"[0-9a-f]{64}", f["sha256"])
            run_ = p["models"][m]["seeds"][str(SEED)]
            assert run_["optimizer_steps"] == TINY.steps and run_["parameters"] > 0 and run_["lr"] == SCRATCH_LR
            assert run_["data_files"][0]["sha256"] == f["sha256"] and len(run_["checkpoint_sha256"]) == 64
            assert run_["seconds"]["train"] > 0 and run_["seconds"]["eval_quality"] > 0
        assert {"train", "eval_quality", "eval_timing"} == set(p["seconds"]["phases"])
        assert len(p["tokenizer"]["sha256"]) == 64
    gc = json.loads((out / "goal-capability" / "provenance.json").read_text())["data"]["files"]
    assert gc["gc_requester"]["stages"] == {"requester_initial": 320, "requester_after_response": 320}
    assert gc["gc_centralized"]["stages"] == {"centralized": 320}
    # one tokenizer for every scratch model
    shared = (work / "tokenizer" / "tokenizer.json").read_bytes()
    assert all((work / "runs" / f"{SEED}-{m}" / m / "final" / "tokenizer.json").read_bytes() == shared for m in MODELS)


def test_markdown_sets_ours_beside_the_papers_and_summarize_only_rebuilds_a_table(run: tuple[Path, Path, dict[str, Any]]) -> None:
    out, work, results = run
    text = (out / "TABLES.md").read_text()
    for res in results.values():
        assert f"(`{res['table']}`)" in text
    assert "| A-only | requester | 4 of 80 |" in text
    assert re.search(r"\| deterministic rule \| rule: rule \| 4 of 320 \| 100\.0% \(100\.0%\)", text)
    # the lanes hold every table's rows: one table is rewritten from them alone, as the run wrote it
    before = (out / "request" / "results.json").read_text()
    (out / "request" / "results.json").unlink()
    assert cli.main(["tables", "--out", str(out), "--work", str(work), "--tables", "request", "--budget", "tiny",
                     "--seeds", str(SEED), "--summarize-only", "--quiet"]) == 0
    assert (out / "request" / "results.json").read_text() == before
    assert "(`request`)" in (out / "TABLES.md").read_text() and "(`horizon`)" not in (out / "TABLES.md").read_text()


def test_batched_rows_are_the_harness_serial_rows() -> None:
    condition = next(c for c in TABLES["request"].experiment.conditions if c.name == "removed")
    rule = make_policy("rule")
    batched = batched_rows(condition, rule, None, 16)
    serial = run_condition(condition, rule)
    assert [(r["episode_id"], r["outcome"], r["metrics"]["decisions"]) for r in batched] == \
           [(r.episode_id, r.outcome, r.metrics["decisions"]) for r in serial]
    assert len(batched) == 320 and sum(r["outcome"] == "SUCCESS" for r in batched) == 160  # the removal's paired 50% ceiling


def test_init_starts_every_model_from_the_given_checkpoint(run: tuple[Path, Path, dict[str, Any]], tmp_path: Path,
                                                            data_dir: Path) -> None:
    _, work, _ = run
    init = work / "runs" / f"{SEED}-direct" / "direct" / "final"
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "data").symlink_to(data_dir)
    assert cli.main(["tables", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), "--tables", "request",
                     "--init", str(init), "--budget", "tiny", "--seeds", str(SEED), "--quiet"]) == 0
    p = json.loads((tmp_path / "out" / "request" / "provenance.json").read_text())
    assert p["source"]["init"]["dir"] == "final" and len(p["source"]["init"]["tree_sha256"]) == 64
    assert p["tokenizer"] is None
    run_ = p["models"]["direct"]["seeds"][str(SEED)]
    assert run_["base"]["kind"] == "continued" and run_["lr"] == CONTINUE_LR
    record = read_record(tmp_path / "work" / "runs" / f"{SEED}-direct" / "direct" / "final")
    assert record is not None and [e["from"] for e in record["lineage"]] == ["scratch", "checkpoint"]
    assert not (tmp_path / "out" / "horizon").exists()


def test_a_table_added_later_plays_the_trained_model_again_without_training_it(tmp_path: Path, data_dir: Path) -> None:
    """Every set trains the one tokenizer and a lane's inputs are its own set's, so a model trained for one table is
    the model of every table it plays, whichever tables a command names."""
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "data").symlink_to(data_dir)
    args = ["--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), "--budget", "tiny", "--seeds", str(SEED), "--quiet"]
    assert cli.main(["tables", "--tables", "request", *args]) == 0
    lane = tmp_path / "work" / "lanes" / f"{SEED}-direct.json"
    first = json.loads(lane.read_text())
    tokenizer = (tmp_path / "work" / "tokenizer" / "tokenizer.json").read_bytes()
    # backend adds a model of another row set: the tokenizer and the direct lane's inputs stay as they were
    assert cli.main(["tables", "--tables", "visibility", "backend", *args]) == 0
    second = json.loads(lane.read_text())
    assert (tmp_path / "work" / "tokenizer" / "tokenizer.json").read_bytes() == tokenizer
    assert second["key"] == first["key"]
    a, b = first["runs"]["direct"], second["runs"]["direct"]
    assert b["summary"] == a["summary"] and not b["retrained"]  # not trained again
    assert b["seconds"]["train"] == a["seconds"]["train"]
    assert {k: b["plays"][k] for k in a["plays"]} == a["plays"]  # earlier rows kept as played
    assert any(k.startswith("visibility/") for k in b["plays"])
    assert any(k.startswith("backend/") for k in b["plays"])
    assert (tmp_path / "out" / "visibility" / "results.json").is_file()
    assert (tmp_path / "work" / "lanes" / f"{SEED}-factor_code.json").is_file()
    # tables of separate commands summarize together: lanes and rule rows of both are in the work folder
    request = (tmp_path / "out" / "request" / "results.json").read_text()
    assert cli.main(["tables", "--tables", "request", "visibility", "backend", "--summarize-only", *args]) == 0
    assert (tmp_path / "out" / "request" / "results.json").read_text() == request
    text = (tmp_path / "out" / "TABLES.md").read_text()
    assert all(f"(`{t}`)" in text for t in ("request", "visibility", "backend")) and "| deterministic rule | rule: rule |" in text
    # a checkpoint changed since is trained again rather than trusted
    weights = next((tmp_path / "work" / a["summary"]["checkpoint"]).glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes() + b"\0")
    assert cli.main(["tables", "--tables", "request", "naturalized", *args]) == 0
    assert json.loads(lane.read_text())["runs"]["direct"]["retrained"]


def test_bad_arguments_say_what_was_expected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["tables", "--out", str(tmp_path), "--tables", "reqest"]) == 2
    assert "did you mean 'request'?" in capsys.readouterr().err
    assert cli.main(["tables", "--out", str(tmp_path), "--init", str(tmp_path / "nothing")]) == 2
    assert "no checkpoint there" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["tables", "--out", str(tmp_path), "--scratch", "qwen3", "--init", str(tmp_path)])
    with pytest.raises(ValueError, match="exactly one of scratch"):
        TablesConfig(out=str(tmp_path), scratch=None)
