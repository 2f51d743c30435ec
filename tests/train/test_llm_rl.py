"""The TRL environment_factory adapter: its contract, self-play through the commit tool, and real GRPOTrainer steps."""
from __future__ import annotations

import inspect
import math
import re
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("datasets")

import gencoord_env  # noqa: E402
from gencoord_env.agents import make_policy  # noqa: E402
from gencoord_env.agents.lm.loading import CHAT_TEMPLATE, load_model, train_tokenizer  # noqa: E402
from gencoord_env.agents.lm.prompt import prompt_text, split_prior  # noqa: E402
from gencoord_env.commands.llm_rl import (  # noqa: E402
    GencoordToolEnv,
    commit_record,
    episode_dataset,
    staged_reward,
    success_reward,
    tool_call_text,
    tool_rows,
    tool_tokenizer,
)

EPISODES = 4


def reference_records(pool: str, index: int) -> list[tuple[str, str, str]]:
    """(agent, observation, the rule agent's record) of every decision of an episode, from a plain env."""
    env = gencoord_env.parallel_env(backend="sim", pool=pool)
    policy = make_policy("rule")
    obs, infos = env.reset(options={"index": index})
    out = []
    while env.agents:
        agent = next(a for a, i in infos.items() if i["deciding"])
        record = policy.act(obs[agent], infos[agent])
        out.append((agent, obs[agent], record))
        obs, _, _, _, infos = env.step({**{a: "" for a in env.agents}, agent: record})
    return out


def test_the_tool_template_renders_plain_chats_as_before_and_parses_its_calls() -> None:
    from trl.chat_template_utils import parse_response, supports_tool_calling

    tok = train_tokenizer(["SELF REQ agent_a agent_b PRIOR " * 20] * 20, vocab_size=300)
    chat = [{"role": "system", "content": "PRIOR x"}, {"role": "user", "content": "AGENT agent_a"}]
    before = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert not supports_tool_calling(tok)  # the plain template cannot carry a tool call
    tool_tokenizer(tok)
    assert tok.chat_template != CHAT_TEMPLATE and supports_tool_calling(tok)
    assert tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == before
    assert tok.eos_token == "<|im_end|>"
    record = 'SELF resource.obtain(q=5,item=oak_planks)\nREQ agent_b build.component(bind="A",q=5)'
    call = tool_call_text(tok, record)
    assert call == '<tool_call>\n{"name": "commit", "arguments": {"record": ' + __import__("json").dumps(record) + "}}\n</tool_call>"
    prompt_ids = tok(before, add_special_tokens=False)["input_ids"]
    ids = tok(before + call + "<|im_end|>", add_special_tokens=False)["input_ids"][len(prompt_ids):]
    parsed = parse_response(tok, ids, prefix=prompt_ids)
    assert parsed["tool_calls"] == [{"type": "function", "function": {"name": "commit", "arguments": {"record": record}}}]
    other = train_tokenizer(["a b"] * 5, vocab_size=270)
    other.chat_template = "{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}"
    with pytest.raises(ValueError, match=re.escape("writes a commit call as '<|im_start|>', which commit_record() does not read")):
        tool_tokenizer(other)
    other.chat_template = None
    with pytest.raises(ValueError, match="has no chat template"):
        tool_tokenizer(other)


@pytest.mark.parametrize("template", ["qwen3_5", "qwen3"])
def test_a_qwen_checkpoints_template_is_kept_and_its_calls_are_read(template: str, make_qwen_tokenizer) -> None:
    """Qwen3.5 writes XML calls (<function=commit><parameter=record>), Qwen3 JSON ones: both are read back,
    by commit_record and by TRL's parser that tool_tokenizer installs, and the template is the checkpoint's."""
    import json

    from trl.chat_template_utils import parse_response

    tok = make_qwen_tokenizer(["SELF REQ agent_a agent_b PRIOR " * 20] * 20, template, vocab_size=300)
    own = tok.chat_template
    assert tool_tokenizer(tok) is tok and tok.chat_template == own and tok.eos_token == "<|im_end|>"
    record = 'SELF resource.obtain(q=5,item=oak_planks)\nREQ agent_b build.component(bind="A",q=5)'
    call = tool_call_text(tok, record)
    if template == "qwen3_5":
        assert call == f"<tool_call>\n<function=commit>\n<parameter=record>\n{record}\n</parameter>\n</function>\n</tool_call>"
    else:
        assert call.endswith('<tool_call>\n{"name": "commit", "arguments": {"record": ' + json.dumps(record) + "}}\n</tool_call>")
    assert commit_record(call) == record and commit_record("thinking aloud") is None
    assert commit_record(call.replace("commit", "other")) is None
    assert commit_record(record) is None  # a bare record is no call: the episode stays unfinished
    assert commit_record("<tool_call>\n{not json}\n</tool_call>") is None
    assert commit_record('<tool_call>\n{"name": "commit", "arguments": {"record": 5}}\n</tool_call>') is None
    head = tok.apply_chat_template([{"role": "user", "content": "AGENT agent_a"}], tokenize=False, add_generation_prompt=True)
    prompt_ids = tok(head, add_special_tokens=False)["input_ids"]
    ids = tok(head + call + "<|im_end|>", add_special_tokens=False)["input_ids"][len(prompt_ids):]
    parsed = parse_response(tok, ids, prefix=prompt_ids)
    assert parsed["tool_calls"] == [{"type": "function", "function": {"name": "commit", "arguments": {"record": record}}}]


def test_trl_sees_one_tool_and_self_play_decides_every_turn_of_both_agents() -> None:
    env = GencoordToolEnv()  # the no-argument constructor TRL's environment_factory calls
    public = [n for n, _ in inspect.getmembers(GencoordToolEnv, predicate=inspect.isfunction) if not n.startswith("_")]
    assert sorted(public) == ["commit", "reset"]  # every public function but reset is a tool
    from transformers.utils import get_json_schema

    schema = get_json_schema(env.commit)["function"]
    assert schema["name"] == "commit" and list(schema["parameters"]["properties"]) == ["record"]

    ds = episode_dataset("train", range(EPISODES))
    for row in ds:
        steps = reference_records("train", row["index"])
        prior, local = split_prior(steps[0][1])
        assert row["prompt"] == [{"role": "system", "content": prior}, {"role": "user", "content": ""}]
        assert env.reset(**row) == local  # the user turn: the first observation without the prior
        answers = [env.commit(record) for _, _, record in steps]
        # each answer is the next deciding agent's observation (the other agent's: self-play), then the end
        assert answers[:-1] == [split_prior(obs)[1] for _, obs, _ in steps[1:]]
        assert [a for a, _, _ in steps] == ["agent_a", "agent_b"] or [a for a, _, _ in steps] == ["agent_b", "agent_a"]
        assert answers[-1] == "END outcome=SUCCESS" and env.outcome == "SUCCESS"
    assert env.reset(index=0) == reference_records("train", 0)[0][1]  # no prompt carrying the prior: the whole text


def test_one_role_lets_the_partner_play_the_others_and_rewards_read_the_environments() -> None:
    receiver = GencoordToolEnv(plays="receiver")
    steps = reference_records("train", 0)
    receiver_obs = [obs for _, obs, _ in steps if "ROLE receiver" in obs]
    assert receiver.reset(index=0) == receiver_obs[0]  # the rule partner already played the sender's turn
    assert receiver.turn is not None and receiver.turn.role == "receiver"
    unfinished = GencoordToolEnv()
    unfinished.reset(index=1)
    broken = GencoordToolEnv()
    broken.reset(index=2)
    assert broken.commit("not a record") == "END outcome=PARSE_FAILURE"
    rejected = GencoordToolEnv()
    rejected.reset(index=3)
    assert rejected.commit("SELF -\nREQ -") == "END outcome=CONTRACT_REJECT"
    receiver.commit(next(r for _, obs, r in steps if "ROLE receiver" in obs))
    envs = [receiver, unfinished, broken, rejected]
    assert success_reward(envs) == [1.0, 0.0, 0.0, 0.0]
    assert staged_reward(envs) == [1.0, 0.0, 0.0, 0.2]
    with pytest.raises(ValueError, match="plays='builder' is no role of episode"):
        GencoordToolEnv(plays="builder").reset(index=0)
    with pytest.raises(RuntimeError, match="has ended \\(PARSE_FAILURE\\)"):
        broken.commit("SELF -\nREQ -")


def test_grpo_trainer_steps_with_self_play_through_the_commit_tool(tmp_path: Path) -> None:
    from trl import GRPOConfig, GRPOTrainer

    from gencoord_env.train.data import build_set, write_rows
    from gencoord_env.train.sft import SFTConfig, ScratchConfig, train

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    # SFT warm start: the forward rows of the same episodes, each target the assistant's commit call
    rows = build_set("forward")[: 2 * EPISODES]
    template = tool_tokenizer(train_tokenizer(["x"], vocab_size=270))
    rows = tool_rows(rows, template)
    tok = tool_tokenizer(train_tokenizer([r.prompt + "\n" + r.target for r in rows], vocab_size=1000))
    tok.save_pretrained(tmp_path / "tokenizer")
    write_rows(rows, tmp_path / "rows.jsonl")
    sft = train(SFTConfig(data=(str(tmp_path / "rows.jsonl"),), out_dir=str(tmp_path / "sft"),
                          scratch=ScratchConfig(vocab_size=1000, hidden_size=64, num_layers=2, tokenizer=str(tmp_path / "tokenizer")),
                          lr=1e-2, max_steps=100, micro_batch=4, grad_accum=1, progress=False, seed=1))
    lm = load_model(str(sft.checkpoint), device="cpu", dtype=torch.float32)
    tok = tool_tokenizer(lm.tokenizer)
    assert prompt_text(tok, rows[0].prompt).endswith("<|im_start|>assistant\n")
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}

    seen: list[list[tuple[str | None, int, str | None]]] = []

    def reward(environments: list[GencoordToolEnv], **kwargs: object) -> list[float]:
        seen.append([(e.outcome, len(e.records), e.turn.agent if e.turn else None) for e in environments])
        return staged_reward(environments)

    reward.__name__ = "staged_reward"
    args = GRPOConfig(output_dir=str(tmp_path / "trainer"), max_steps=2, per_device_train_batch_size=16, num_generations=8,
                      max_completion_length=400, max_tool_calling_iterations=3, learning_rate=1e-4, beta=0.0,
                      loss_type="dapo", logging_steps=1, save_strategy="no", report_to="none", use_cpu=True,
                      disable_dropout=True, activation_checkpointing=False, dataloader_num_workers=0, disable_tqdm=True,
                      seed=0)
    trainer = GRPOTrainer(model=lm.model, processing_class=tok, reward_funcs=[reward], args=args,
                          train_dataset=episode_dataset("train", range(EPISODES)),
                          environment_factory=GencoordToolEnv.factory(pool="train", plays="both"))
    trainer.train()

    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2 and all(math.isfinite(h["loss"]) for h in logs)
    assert all(h["tools/call_frequency"] > 0 for h in logs)  # the model called commit
    assert len(seen) == 2 and all(len(batch) == 16 for batch in seen)
    assert any(h["reward_std"] > 0 for h in logs)  # GRPO has something to learn from
    assert any(h["frac_reward_zero_std"] < 1 for h in logs)
    committed = [r for batch in seen for r in batch if r[1] > 0]
    assert committed, "no completion committed a record"
    # self-play: after an accepted first record the episode went on with the other agent's decision
    assert any(n >= 1 and outcome is None and agent is not None for outcome, n, agent in committed) or \
        any(n >= 2 for _, n, _ in committed)
    after = lm.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
