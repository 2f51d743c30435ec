"""Self-play GRPO end to end on a CPU with tiny models and budgets (the GPU runs are the same code)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("datasets")
pytest.importorskip("scipy")

from gencoord_env.train.episode_grpo import Learner, advantages  # noqa: E402
from gencoord_env.train.selfplay import ROLES, _load, evaluate, main  # noqa: E402


def test_group_advantages_centre_and_scale_each_group() -> None:
    assert advantages([1.0, 0.0, 0.2, 0.2], 2) == pytest.approx([1.0, -1.0, 0.0, 0.0], abs=1e-3)
    assert advantages([1.0, 0.0], 2, scale=False) == [0.5, -0.5]
    with pytest.raises(ValueError, match="3 rewards do not split into groups of 2"):
        advantages([1.0, 0.0, 1.0], 2)


def _replay(checkpoint: dict[str, str], prov: dict) -> dict:  # type: ignore[type-arg]
    """The saved checkpoint(s) loaded again and played on the evaluation episodes."""
    config = prov["config"]
    learners = {path: Learner(f"m{k}", *(lambda lm: (lm.model, lm.tokenizer))(_load(path, "cpu")), trainable=False,
                              max_new_tokens=config["max_new_tokens"]) for k, path in enumerate(sorted(set(checkpoint.values())))}
    policies = {role: learners[checkpoint[role]] for role in ROLES}
    return evaluate(policies, config["eval_pool"], list(range(config["eval_episodes"])), {"route": config["route"]})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny self-play run (seed 3, --steps 3 beside --tiny's other settings), shared: its warm start serves the
    two-policy runs of the same seed."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # two threads on a loaded 2-core machine spin against each other (10x slower)
    out = tmp_path_factory.mktemp("selfplay")
    try:
        assert main(["--out", str(out), "--tiny", "--seeds", "3", "--steps", "3"]) == 0
    finally:
        torch.set_num_threads(threads)
    return out


def test_tiny_run_learns_with_reward_variance_and_its_saved_model_plays_again(tiny: Path) -> None:
    """--tiny keeps the arguments it is given (--steps 3), its groups disagree (reward std > 0), and the saved
    GRPO model reloads and plays the held-out episodes exactly as it did at the end of the run."""
    summary = json.loads((tiny / "summary.json").read_text())
    assert [row["seed"] for row in summary] == [3] and "error" not in summary[0]
    curve = json.loads((tiny / "seed3" / "reward_curve.json").read_text())
    assert [row["step"] for row in curve] == [1, 2, 3]
    assert all(sum(row["outcomes"].values()) == 8 and math.isfinite(row["learners"]["self"]["loss"]) for row in curve)  # 2 x 4
    assert any(row["reward_std"] > 0 for row in curve), "no GRPO group disagreed: nothing to learn from"
    assert any(row["learners"]["self"]["trained_decisions"] > 0 for row in curve)
    # the decoder's recorded log-probabilities are the training forward's
    assert all(row["learners"]["self"]["logprob_gap"] < 1e-4 for row in curve if row["learners"]["self"]["trained_decisions"])
    prov = json.loads((tiny / "seed3" / "provenance.json").read_text())
    assert prov["optimizer_steps"] == 3 and prov["config"]["seed"] == 3 and prov["config"]["steps"] == 3
    warm = prov["warm_start"]["chosen"]
    assert warm["epochs"] == 60 and warm["train_episodes"] == 4 and 0.0 <= warm["train_success"] <= 1.0
    for key in ("eval_before", "eval_after"):
        assert prov[key]["pool"] == "heldout" and prov[key]["episodes"] == 8 and prov[key]["clusters"] == 4
        assert sum(prov[key]["outcomes"].values()) == 8 and prov[key]["ci95"] is not None
    assert prov["eval_change"]["clusters"] == 4 and len(prov["eval_change"]["ci95"]) == 2
    assert set(prov["seconds"]) == {"warm_start", "eval_before", "grpo", "eval_after"}
    final = Path(prov["checkpoints"]["self"]["dir"])
    record = json.loads((final / "training_record.json").read_text())
    assert [e["from"] for e in record["lineage"]] == ["scratch", "grpo"] and record["lineage"][-1]["optimizer_steps"] == 3
    again = _replay(prov["role_checkpoints"], prov)
    assert again["success_by_episode"] == prov["eval_after"]["success_by_episode"]
    assert again["outcomes"] == prov["eval_after"]["outcomes"]


def test_a_qwen35_checkpoint_keeps_its_template_through_selfplay(tmp_path: Path, make_qwen_checkpoint) -> None:
    """A local Qwen3.5 folder (tiny random weights, the real Qwen3.5-0.8B chat template) warm-starts in its own
    XML tool-call format, and the evaluation reads the calls it writes."""
    from gencoord_env.train.data import build_set

    rows = build_set("forward")[:8]
    base = make_qwen_checkpoint(tmp_path / "qwen", [r.prompt + "\n" + r.target for r in rows])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(["--out", str(tmp_path / "run"), "--tiny", "--model", str(base), "--steps", "1", "--sft-epochs", "20"]) == 0
    finally:
        torch.set_num_threads(threads)
    prov = json.loads((tmp_path / "run" / "seed0" / "provenance.json").read_text())
    warm = Path(prov["warm_checkpoint"])
    assert (warm / "chat_template.jinja").read_text() == (base / "chat_template.jinja").read_text()
    sft_rows = [json.loads(line) for line in (warm.parent / "sft_rows.jsonl").read_text().splitlines()]
    assert all(r["target"].startswith("<tool_call>\n<function=commit>\n<parameter=record>\n") for r in sft_rows)
    played = prov["warm_start"]["chosen"]["train_outcomes"]
    assert played.get("UNFINISHED", 0) < sum(played.values()), f"no Qwen3.5 call was read: {played}"
    assert json.loads((Path(prov["checkpoints"]["self"]["dir"]) / "config.json").read_text())["model_type"] == "qwen3_5_text"


def test_two_policies_train_their_own_weights_and_cross_play(tiny: Path, tmp_path: Path) -> None:
    """Sender and receiver as two models from one warm start: each trainable one changes and they differ, a frozen
    partner stays the warm start, and cross-play puts each run's sender beside each run's receiver."""
    from safetensors.torch import load_file

    from gencoord_env.train.selfplay import cross_play

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:  # the tiny run's weights folder: the same seed's warm start, reused
        assert main(["--out", str(tmp_path / "both"), "--weights-dir", str(tiny), "--tiny", "--seeds", "3",
                     "--policies", "two", "--steps", "2"]) == 0
        both = json.loads((tmp_path / "both" / "seed3" / "provenance.json").read_text())
        assert both["warm_start"]["chosen"]["reused"]
        assert set(both["checkpoints"]) == {"sender", "receiver"}
        warm = load_file(Path(both["warm_checkpoint"]) / "model.safetensors")
        sender = load_file(Path(both["checkpoints"]["sender"]["dir"]) / "model.safetensors")
        receiver = load_file(Path(both["checkpoints"]["receiver"]["dir"]) / "model.safetensors")
        assert any(not torch.equal(sender[k], receiver[k]) for k in sender)  # two sets of weights
        assert any(not torch.equal(sender[k], warm[k]) for k in sender)
        curve = json.loads((tmp_path / "both" / "seed3" / "reward_curve.json").read_text())
        assert all(set(row["learners"]) == {"sender", "receiver"} for row in curve)

        # one trainable beside its frozen partner (the warm start)
        assert main(["--out", str(tmp_path / "frozen"), "--weights-dir", str(tmp_path / "w"), "--tiny", "--seeds", "3",
                     "--policies", "two", "--train-roles", "sender", "--steps", "1", "--sft-epochs", "0",
                     "--model", both["warm_checkpoint"]]) == 0
        frozen = json.loads((tmp_path / "frozen" / "seed3" / "provenance.json").read_text())
        assert set(frozen["checkpoints"]) == {"sender"} and frozen["role_checkpoints"]["receiver"] == both["warm_checkpoint"]

        runs = {0: both["role_checkpoints"], 1: frozen["role_checkpoints"]}
        cross = cross_play(runs, "heldout", {"route": "forward"}, episodes=4, device="cpu", max_new_tokens=160)
    finally:
        torch.set_num_threads(threads)
    assert sorted((p["sender_seed"], p["receiver_seed"]) for p in cross["pairs"]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(sum(p["outcomes"].values()) == 4 for p in cross["pairs"])
    assert cross["within_seed"] is not None and cross["across_seeds"] is not None and "across_minus_within" in cross


def test_auto_warm_start_moves_through_the_epochs_until_the_train_pool_success_is_in_band(tmp_path: Path, monkeypatch) -> None:
    """--sft-epochs auto: from auto_start up while the measured train-pool success (sampled at GRPO's temperature)
    is below the band, down while above, never back; the chosen warm start is the last in band, every one tried
    recorded with its greedy success beside."""
    from gencoord_env.train import selfplay

    success = {1.0: 0.05, 2.0: 0.1, 3.0: 0.15, 4.0: 0.45, 6.0: 0.8, 8.0: 0.95, 12.0: 1.0, 16.0: 1.0}
    trained: list[float] = []

    def fake_sft(config, epochs, out):  # type: ignore[no-untyped-def]
        trained.append(epochs)
        return str(out / "final"), {"epochs": epochs}

    class Lm:
        model = tokenizer = None

    monkeypatch.setattr(selfplay, "_sft", fake_sft)
    monkeypatch.setattr(selfplay, "_load", lambda path, device: Lm())
    monkeypatch.setattr(selfplay, "pool_size", lambda pool, kwargs: 960)
    monkeypatch.setattr("gencoord_env.train.episode_grpo.Learner", lambda *a, **k: None)
    monkeypatch.setattr(selfplay, "evaluate", lambda policies, pool, indices, kwargs, turns, sample=False: {
        "success_rate": success[trained[-1]] + (0.0 if sample else 0.1), "outcomes": {}, "episodes": len(indices)})
    config = selfplay.SelfPlayConfig(out_dir=str(tmp_path), auto_start=2.0)
    path, warm = selfplay._warm_start(config, tmp_path)
    assert trained == [2.0, 3.0, 4.0] and warm["chosen"]["epochs"] == 4.0 and warm["in_band"]
    assert path == str(tmp_path / "warm_e4" / "final") and [t["train_success"] for t in warm["tried"]] == [0.1, 0.15, 0.45]
    assert warm["chosen"]["train_success_greedy"] == pytest.approx(0.55)  # the band reads the sampled success
    trained.clear()
    success.update({2.0: 0.9, 1.0: 0.75})  # above the band at 2 and 1 epochs: down to the end, outside the band
    with pytest.warns(RuntimeWarning, match="outside the band"):
        _, warm = selfplay._warm_start(selfplay.SelfPlayConfig(out_dir=str(tmp_path), auto_start=2.0), tmp_path)
    assert trained == [2.0, 1.0] and warm["chosen"]["epochs"] == 1.0 and not warm["in_band"]


@pytest.mark.parametrize("trainer", ["trl", "trl-static"])
def test_trl_trainers_step_from_the_same_warm_start(trainer: str, tiny: Path, tmp_path: Path) -> None:
    """--trainer trl (TRL's GRPOTrainer over transcripts, model.generate) and trl-static (the same, every generation
    turn through the package's static decoder) run from the tiny run's warm start and save their model."""
    pytest.importorskip("trl")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(["--out", str(tmp_path), "--weights-dir", str(tiny), "--tiny", "--seeds", "3", "--trainer", trainer,
                     "--steps", "1"]) == 0
    finally:
        torch.set_num_threads(threads)
    prov = json.loads((tmp_path / "seed3" / "provenance.json").read_text())
    curve = json.loads((tmp_path / "seed3" / "reward_curve.json").read_text())
    assert prov["warm_start"]["chosen"]["reused"] and prov["optimizer_steps"] == 1 and math.isfinite(curve[0]["loss"])
    assert sum(curve[0]["outcomes"].values()) == 8 and curve[0]["tools/call_frequency"] > 0
    assert (Path(prov["checkpoints"]["self"]["dir"]) / "model.safetensors").is_file()
