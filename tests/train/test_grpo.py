"""GRPO through TRL on the env's decisions: the prompt dataset, the reward adapter, and a short real run
from a tiny model fine-tuned in the test on the forward rows."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from gencoord_env.agents.lm.loading import train_tokenizer  # noqa: E402
from gencoord_env.agents.lm.policy import prompt_text  # noqa: E402
from gencoord_env.train.data import build_set, write_rows  # noqa: E402
from gencoord_env.train.decisions import DecisionPoint, Replay, decision_points  # noqa: E402
from gencoord_env.train.grpo import EnvReward, GRPORunConfig, prompt_dataset, run  # noqa: E402
from gencoord_env.train.sft import SFTConfig, ScratchConfig, train, tree_sha256  # noqa: E402

EPISODES = 4


@pytest.fixture(scope="module")
def points() -> list[DecisionPoint]:
    return decision_points("train", "forward", episodes=EPISODES)


def test_prompts_are_the_chat_templated_observations(points: list[DecisionPoint]) -> None:
    tok = train_tokenizer([p.prompt + "\n" + p.reference for p in points], vocab_size=400)
    ds = prompt_dataset(points, tok)
    assert ds.column_names == ["prompt", "decision_id", "index", "stage", "agent"]
    assert ds["prompt"] == [prompt_text(tok, p.prompt) for p in points]
    assert ds["decision_id"] == [p.id for p in points]
    # TRL tokenizes text prompts with the tokenizer's defaults: the same ids SFT trained on.
    assert tok(ds["prompt"][0])["input_ids"] == tok(prompt_text(tok, points[0].prompt), add_special_tokens=False)["input_ids"]
    with pytest.raises(ValueError, match="decision point ids repeat"):
        prompt_dataset(points + points[:1], tok)


def test_reward_maps_each_completion_to_its_decision_point(points: list[DecisionPoint]) -> None:
    reward = EnvReward(points, Replay("train", "forward", partial_credit=True))
    ids = [p.id for p in points] + [points[0].id, points[1].id]
    completions = [p.reference for p in points] + ["", points[1].reference]
    assert reward(prompts=[""] * len(ids), completions=completions, decision_id=ids) == [1.0] * len(points) + [0.0, 1.0]
    assert reward.scored == len(points) + 1  # the repeated completion of one decision is replayed once
    entry = reward.history[-1]
    assert entry["groups"][points[0].id] == [1.0, 0.0] and entry["outcomes"] == {"SUCCESS": 9, "PARSE_FAILURE": 1}
    chat = [[{"role": "assistant", "content": points[1].reference}]]
    assert reward(prompts=[[]], completions=chat, decision_id=[points[1].id]) == [1.0]
    with pytest.raises(KeyError, match=re.escape("decision id 'nope' is not among this reward's 8 decision points")):
        reward(prompts=[""], completions=[""], decision_id=["nope"])
    with pytest.raises(ValueError, match="the dataset has no 'decision_id' column"):
        reward(prompts=[""], completions=[""])


def test_grpo_steps_from_a_briefly_fine_tuned_tiny_model(points: list[DecisionPoint], tmp_path: Path) -> None:
    rows = build_set("forward")[: 2 * EPISODES]  # the forward rows of the same episodes, in pool order
    assert [r.prompt for r in rows] == [p.prompt for p in points]
    write_rows(rows, tmp_path / "rows.jsonl")
    sft = train(SFTConfig(data=(str(tmp_path / "rows.jsonl"),), out_dir=str(tmp_path / "sft"),
                          scratch=ScratchConfig(vocab_size=1000, hidden_size=64, num_layers=2), lr=1e-2, max_steps=150,
                          micro_batch=4, grad_accum=1, progress=False, seed=1))
    assert sft.checkpoint is not None and sft.losses[-1] < 0.3 * sft.losses[0]

    result = run(GRPORunConfig(model=str(sft.checkpoint), out_dir=str(tmp_path / "grpo"), pool="train", route="forward",
                               episodes=EPISODES, steps=2, prompts_per_step=2, num_generations=8,
                               max_completion_length=80, partial_credit=True, lr=1e-4, device="cpu", seed=0,
                               eval_pool="heldout", eval_episodes=4))

    curve = json.loads((tmp_path / "grpo" / "reward_curve.json").read_text())
    assert curve == result.curve and [row["step"] for row in curve] == [1, 2]
    assert all(math.isfinite(row["loss"]) for row in curve)
    assert all(sum(row["outcomes"].values()) == 16 for row in curve)  # 2 prompts x 8 completions per step
    # GRPO learns only from groups whose completions earned different rewards.
    assert any(row["groups_with_variance"] > 0 and row["group_var_max"] > 0 for row in curve)
    for row in curve:  # our statistics and TRL's log describe the same rewards
        assert row["trl_reward"] == pytest.approx(row["reward_mean"], abs=1e-6)

    prov = json.loads((tmp_path / "grpo" / "provenance.json").read_text())
    assert prov["optimizer_steps"] == 2 and prov["completions_scored"] > 0
    assert prov["base_model"]["tree_sha256"] == tree_sha256(sft.checkpoint)[0]
    assert prov["data"]["decision_points"] == 2 * EPISODES and prov["libraries"]["trl"].startswith("1.16")
    # the lane played the eval pool with the SFT checkpoint as it was, then with the GRPO one, paired by cluster
    before, after = prov["eval_before"], prov["eval_after"]
    assert before["episodes"] == after["episodes"] == 4 and before["clusters"] == 2 and len(before["ci95"]) == 2
    assert set(before["success_by_episode"]) == set(after["success_by_episode"])
    assert prov["eval_change"]["clusters"] == 2
    lane = json.loads((tmp_path / "grpo" / "grpo.json").read_text())
    assert set(lane["runs"]) == {"before", "grpo"} and not lane["runs"]["before"]["retrained"]
    before, after = load_file(sft.checkpoint / "model.safetensors"), load_file(tmp_path / "grpo" / "final" / "model.safetensors")
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the optimizer steps moved the weights


def test_grpo_takes_a_qwen35_checkpoint_with_its_own_chat_template(points: list[DecisionPoint], tmp_path: Path,
                                                                   make_qwen_checkpoint) -> None:
    """A local Qwen3.5 folder (tiny random weights, the Qwen3.5-0.8B chat template, thinking off): its prompts are
    its own template's (the empty think block opens the answer), GRPO steps, the saved model keeps the template."""
    from transformers import AutoTokenizer

    rows = build_set("forward")[: 2 * EPISODES]
    base = make_qwen_checkpoint(tmp_path / "qwen", [r.prompt + "\n" + r.target for r in rows])
    tokenizer = AutoTokenizer.from_pretrained(base)
    assert all(row["prompt"].endswith("<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
               for row in prompt_dataset(points, tokenizer))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = run(GRPORunConfig(model=str(base), out_dir=str(tmp_path / "grpo"), pool="train", route="forward",
                                   episodes=2, steps=1, prompts_per_step=2, num_generations=2, max_completion_length=8,
                                   device="cpu", eval_pool="heldout", eval_episodes=2))
    finally:
        torch.set_num_threads(threads)
    assert result.provenance["optimizer_steps"] == 1 and result.provenance["base_model"]["model_type"] == "qwen3_5_text"
    assert sum(result.provenance["eval_after"]["outcomes"].values()) == 2
    assert result.checkpoint is not None
    assert AutoTokenizer.from_pretrained(result.checkpoint).chat_template == tokenizer.chat_template
