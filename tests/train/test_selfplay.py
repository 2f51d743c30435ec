"""Self-play GRPO end to end on a CPU with tiny models and budgets (the GPU runs are the same code).

One tiny run (``--tiny``, seed 3) is shared by the module: its warm start serves every later run of the same seed
(the pipeline reuses a run whose checkpoint is there under the same key), so only the first test trains one."""
from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("datasets")
pytest.importorskip("scipy")

from gencoord_env.agents.formats import output_format  # noqa: E402
from gencoord_env.train import selfplay  # noqa: E402
from gencoord_env.train.episode_grpo import advantages  # noqa: E402
from gencoord_env.train.pipeline import Inputs, Player, batched_rows, role_checkpoints, success_record  # noqa: E402
from gencoord_env.train.selfplay import SelfPlayConfig, main  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Two threads on a loaded 2-core machine spin against each other (10x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny self-play run (seed 3, --steps 2 beside --tiny's other settings), shared."""
    out = tmp_path_factory.mktemp("selfplay")
    assert main(["--out", str(out), "--tiny", "--seeds", "3", "--steps", "2"]) == 0
    return out


def test_group_advantages_centre_and_scale_each_group() -> None:
    assert advantages([1.0, 0.0, 0.2, 0.2], 2) == pytest.approx([1.0, -1.0, 0.0, 0.0], abs=1e-3)
    assert advantages([1.0, 0.0], 2, scale=False) == [0.5, -0.5]
    with pytest.raises(ValueError, match="3 rewards do not split into groups of 2"):
        advantages([1.0, 0.0, 1.0], 2)


def test_a_seed_is_a_lane_of_the_pipeline_whose_grpo_key_ignores_how_it_runs(tmp_path: Path) -> None:
    """The warm start is an SFT run on the tool rows measured by a greedy and a sampled play of the train pool; the
    lane plays the eval pool before (the warm start) and after (GRPO, a Trainer from it); resuming and the lane's
    start are not part of GRPO's key, its budget is."""
    config = SelfPlayConfig(out_dir=str(tmp_path / "out"), seed=3, steps=5, warm_episodes=6, eval_episodes=4, temperature=0.9)
    warm = selfplay.warm_run(config, 8.0)
    assert (warm.name, warm.data, warm.format.name, warm.recipe.epochs, warm.recipe.fit_rows) == ("warm_e8", "tool", "commit_tool", 8.0, 0)
    assert [(p.name, p.episodes, p.temperature) for p in warm.plays] == [("train/greedy", 6, None), ("train/sampled", 6, 0.9)]
    inputs = Inputs("data", "tok", {"tool": "a" * 64}, "b" * 64)
    lane = selfplay.lane(config, inputs, warm, started=1.0)
    before, grpo = lane.runs
    assert [p.name for p in before.plays] == ["eval"] and before.plays[0].condition.pool == "heldout" and before.plays[0].episodes == 4
    assert grpo.init.run == "warm_e8" and grpo.recipe.steps == 5 and grpo.plays == before.plays
    assert Path(lane.work) == tmp_path / "out" and Path(lane.results) == tmp_path / "out" / "lanes"
    again = selfplay.lane(dataclasses.replace(config, resume_every=2), inputs, warm, started=99.0)
    assert again.run_key(again.runs[1]) == lane.run_key(grpo)
    budget = selfplay.lane(dataclasses.replace(config, max_seconds=60.0), inputs, warm)
    assert budget.run_key(budget.runs[1]) != lane.run_key(grpo)
    assert [r.name for r in selfplay.lane(dataclasses.replace(config, steps=0), inputs, warm).runs] == ["warm_e8"]
    weights = selfplay.lane(dataclasses.replace(config, weights_dir=str(tmp_path / "w")), inputs, warm)
    assert Path(weights.work) == tmp_path / "w" and Path(weights.results) == tmp_path / "out" / "lanes"


def test_auto_warm_start_moves_through_the_epochs_until_the_train_pool_success_is_in_band() -> None:
    """--sft-epochs auto: from auto_start up while the measured train-pool success is below the band, down while
    above, never back; the chosen warm start is the last in band, else the nearest, warned about."""
    success = {1.0: 0.05, 2.0: 0.1, 3.0: 0.15, 4.0: 0.45, 6.0: 0.8, 8.0: 0.95, 12.0: 1.0, 16.0: 1.0}
    tried: list[dict[str, float]] = []

    def measure(epochs: float) -> float:
        tried.append({"epochs": epochs, "train_success": success[epochs]})
        return success[epochs]

    selfplay.search(selfplay.AUTO_EPOCHS, 2.0, (0.2, 0.7), measure)
    assert [t["epochs"] for t in tried] == [2.0, 3.0, 4.0] and selfplay.choose(tried, (0.2, 0.7))["epochs"] == 4.0
    tried.clear()
    success.update({2.0: 0.9, 1.0: 0.75})  # above the band at 2 and 1 epochs: down to the end, outside the band
    selfplay.search(selfplay.AUTO_EPOCHS, 2.0, (0.2, 0.7), measure)
    with pytest.warns(RuntimeWarning, match="outside the band"):
        assert selfplay.choose(tried, (0.2, 0.7))["epochs"] == 1.0
    assert [t["epochs"] for t in tried] == [2.0, 1.0]
    tried.clear()
    success.update({8.0: 0.1, 12.0: 0.5})  # below at 8, in band at 12: up once
    selfplay.search(selfplay.AUTO_EPOCHS, 8.0, (0.2, 0.7), measure)
    assert [t["epochs"] for t in tried] == [8.0, 12.0]


def test_tiny_run_learns_with_reward_variance_and_its_saved_model_plays_again(tiny: Path) -> None:
    """--tiny keeps the arguments it is given (--steps 2), its groups disagree (reward std > 0), the outputs a user
    reads are there, and the saved GRPO model reloads and plays the held-out episodes as the lane played them."""
    summary = json.loads((tiny / "summary.json").read_text())
    assert [row["seed"] for row in summary] == [3] and "error" not in summary[0] and summary[0]["optimizer_steps"] == 2
    curve = json.loads((tiny / "seed3" / "reward_curve.json").read_text())
    assert [row["step"] for row in curve] == [1, 2]
    assert all(sum(row["outcomes"].values()) == 8 and math.isfinite(row["learners"]["self"]["loss"]) for row in curve)  # 2 x 4
    assert any(row["reward_std"] > 0 for row in curve), "no GRPO group disagreed: nothing to learn from"
    assert any(row["learners"]["self"]["trained_decisions"] > 0 for row in curve)
    # the decoder's recorded log-probabilities are the training forward's
    assert all(row["learners"]["self"]["logprob_gap"] < 1e-4 for row in curve if row["learners"]["self"]["trained_decisions"])
    prov = json.loads((tiny / "seed3" / "provenance.json").read_text())
    assert prov["complete"] and prov["optimizer_steps"] == 2 and prov["config"]["seed"] == 3 and prov["config"]["steps"] == 2
    warm = prov["warm_start"]["chosen"]
    assert warm["epochs"] == 60 and warm["rows"] == 8 and warm["train_episodes"] == 4 and not warm["reused"]
    assert 0.0 <= warm["train_success"] <= 1.0 and sum(warm["train_outcomes"].values()) == 4 and warm["temperature"] == 0.7
    for key in ("eval_before", "eval_after"):
        assert prov[key]["pool"] == "heldout" and prov[key]["episodes"] == 8 and prov[key]["clusters"] == 4
        assert sum(prov[key]["outcomes"].values()) == 8 and prov[key]["ci95"] is not None
    assert prov["eval_change"]["clusters"] == 4 and len(prov["eval_change"]["ci95"]) == 2
    assert set(prov["seconds"]) == {"warm_start", "eval_before", "grpo", "eval_after"}
    final = Path(prov["checkpoints"]["self"]["dir"])
    record = json.loads((final / "training_record.json").read_text())
    assert record["format"] == "commit_tool" and [e["from"] for e in record["lineage"]] == ["scratch", "grpo"]
    assert record["lineage"][-1]["optimizer_steps"] == 2 and set(prov["role_checkpoints"].values()) == {str(final)}
    config = SelfPlayConfig(out_dir="", eval_episodes=8)
    player = Player(final, output_format(selfplay.FORMAT), 160, "cpu", "float32")
    again = success_record(batched_rows(config.condition("heldout"), player.policy, 8, 8))
    assert again["success_by_episode"] == prov["eval_after"]["success_by_episode"] and again["outcomes"] == prov["eval_after"]["outcomes"]


def test_two_policies_train_their_own_weights_and_cross_play(tiny: Path, tmp_path: Path) -> None:
    """Sender and receiver as two models from one warm start (reused, not retrained), saved as one model per role:
    each trainable one changes and they differ; a frozen partner stays the warm start; cross-play puts each run's
    sender beside each run's receiver."""
    from safetensors.torch import load_file

    assert main(["--out", str(tmp_path / "both"), "--weights-dir", str(tiny), "--tiny", "--seeds", "3",
                 "--policies", "two", "--steps", "1", "--eval-episodes", "2"]) == 0
    both = json.loads((tmp_path / "both" / "seed3" / "provenance.json").read_text())
    assert both["warm_start"]["chosen"]["reused"] and set(both["checkpoints"]) == {"sender", "receiver"}
    warm = load_file(Path(both["warm_checkpoint"]) / "model.safetensors")
    sender = load_file(Path(both["checkpoints"]["sender"]["dir"]) / "model.safetensors")
    receiver = load_file(Path(both["checkpoints"]["receiver"]["dir"]) / "model.safetensors")
    assert any(not torch.equal(sender[k], receiver[k]) for k in sender)  # two sets of weights
    assert any(not torch.equal(sender[k], warm[k]) for k in sender) and any(not torch.equal(receiver[k], warm[k]) for k in receiver)
    pair = role_checkpoints(Path(both["checkpoints"]["sender"]["dir"]).parent)
    assert pair == {"sender": Path(both["checkpoints"]["sender"]["dir"]), "receiver": Path(both["checkpoints"]["receiver"]["dir"])}
    curve = json.loads((tmp_path / "both" / "seed3" / "reward_curve.json").read_text())
    assert all(set(row["learners"]) == {"sender", "receiver"} for row in curve)

    # one trainable beside its frozen partner (the warm start as it is: --sft-epochs 0)
    assert main(["--out", str(tmp_path / "frozen"), "--weights-dir", str(tmp_path / "w"), "--tiny", "--seeds", "3",
                 "--policies", "two", "--train-roles", "sender", "--steps", "1", "--sft-epochs", "0", "--eval-episodes", "2",
                 "--warm-episodes", "2", "--model", both["warm_checkpoint"]]) == 0
    frozen = json.loads((tmp_path / "frozen" / "seed3" / "provenance.json").read_text())
    assert set(frozen["checkpoints"]) == {"sender"} and frozen["role_checkpoints"]["receiver"] == both["warm_checkpoint"]
    assert role_checkpoints(Path(frozen["checkpoints"]["sender"]["dir"]).parent)["receiver"] == Path(both["warm_checkpoint"]).resolve()

    runs = {0: both["role_checkpoints"], 1: frozen["role_checkpoints"]}
    cross = selfplay.cross_play(runs, SelfPlayConfig(out_dir="", eval_episodes=2, device="cpu", max_new_tokens=160), tmp_path / "x")
    assert sorted((p["sender_seed"], p["receiver_seed"]) for p in cross["pairs"]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(sum(p["outcomes"].values()) == 2 for p in cross["pairs"])
    assert cross["within_seed"] is not None and cross["across_seeds"] is not None and "across_minus_within" in cross
    diagonal = next(p for p in cross["pairs"] if p["sender_seed"] == p["receiver_seed"] == 0)
    assert diagonal["success_by_episode"] == both["eval_after"]["success_by_episode"]  # the same pair, played again


def test_a_qwen35_checkpoint_keeps_its_template_through_selfplay(tmp_path: Path, make_qwen_checkpoint) -> None:
    """A local Qwen3.5 folder (tiny random weights, the real Qwen3.5-0.8B chat template) warm-starts in its own
    XML tool-call format, the evaluation reads the calls it writes, and GRPO saves a Qwen3.5 model."""
    from gencoord_env.train.data import build_set, load_rows

    rows = build_set("forward")[:8]
    base = make_qwen_checkpoint(tmp_path / "qwen", [r.prompt + "\n" + r.target for r in rows])
    assert main(["--out", str(tmp_path / "run"), "--tiny", "--model", str(base), "--steps", "1", "--sft-epochs", "20", "--sft-rows", "4",
                 "--eval-episodes", "2", "--warm-episodes", "2"]) == 0
    prov = json.loads((tmp_path / "run" / "seed0" / "provenance.json").read_text())
    warm = Path(prov["warm_checkpoint"])
    assert (warm / "chat_template.jinja").read_text() == (base / "chat_template.jinja").read_text()
    sft_rows = load_rows(tmp_path / "run" / "seed0" / "inputs" / "tool.jsonl")
    assert len(sft_rows) == 4 and all(r.target.startswith("<tool_call>\n<function=commit>\n<parameter=record>\n") for r in sft_rows)
    config = SelfPlayConfig(out_dir="")
    player = Player(warm, output_format(selfplay.FORMAT), 160, "cpu", "float32")
    played = batched_rows(config.condition("train"), player.policy, 2, 2, actions=True)
    actions = [a["action"] for r in played for a in r["actions"]]
    assert any("<tool_call>" not in a for a in actions), f"no Qwen3.5 call was read: {actions}"
    assert json.loads((Path(prov["checkpoints"]["self"]["dir"]) / "config.json").read_text())["model_type"] == "qwen3_5_text"


@pytest.mark.parametrize("trainer", ["trl", "trl-static"])
def test_trl_trainers_step_from_the_same_warm_start(trainer: str, tiny: Path, tmp_path: Path) -> None:
    """--trainer trl (TRL's GRPOTrainer over transcripts, model.generate) and trl-static (the same, every generation
    turn through the package's static decoder) are the GRPO step of the same lane: from the tiny run's warm start,
    they save their model and it plays the eval pool."""
    pytest.importorskip("trl")
    assert main(["--out", str(tmp_path), "--weights-dir", str(tiny), "--tiny", "--seeds", "3", "--trainer", trainer,
                 "--steps", "1", "--eval-episodes", "2"]) == 0
    prov = json.loads((tmp_path / "seed3" / "provenance.json").read_text())
    curve = json.loads((tmp_path / "seed3" / "reward_curve.json").read_text())
    assert prov["warm_start"]["chosen"]["reused"] and prov["optimizer_steps"] == 1 and math.isfinite(curve[0]["loss"])
    assert sum(curve[0]["outcomes"].values()) == 8 and curve[0]["tools/call_frequency"] > 0
    assert (Path(prov["checkpoints"]["self"]["dir"]) / "model.safetensors").is_file()
    assert prov["eval_after"]["episodes"] == 2 and prov["config"]["trainer"] == trainer
