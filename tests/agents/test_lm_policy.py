"""Learned policies: Factor-Code expansion equals the canonical Short DSL, actions go through the env's
parser, and every model call's tokens and latency are attributed to its episode."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from gencoord_env.agents.lm.generate import GenerationConfig, GenerationRecord
from gencoord_env.agents.lm.policy import CallRecord, DirectDSLPolicy, FactorCodePolicy, expand_code, make_policy
from gencoord_env.agents.rules import ExplicitFactorComposer
from gencoord_env import dsl
from gencoord_env.outcomes import FailureCode
from gencoord_env.tasks import Episode, pool
from gencoord_env.tasks import references as ref
from gencoord_env.messages import RequestMessage
from gencoord_env.tasks.contexts import build_context, request_payload
from gencoord_env.train.data import build_set, write_rows
from gencoord_env.train.evaluate import evaluate
from gencoord_env.train.sft import SFTConfig, ScratchConfig, train


@pytest.mark.parametrize("pool_name", ["train", "heldout", "request", "crossproduct", "horizon"])
def test_factor_code_expansion_equals_the_canonical_short_dsl(pool_name: str) -> None:
    for cluster in pool(pool_name):
        for perm in (0, 1):
            ep = Episode(cluster, perm)
            sender = ref.sender_initial(ep)
            ctx = build_context(ep, ep.first, "sender_initial")
            composed = expand_code(f"active_binding_id={ep.binding}", ctx)
            assert composed == dsl.format(sender), ep.id
            q = ep.quantities["q"]
            assert composed == ExplicitFactorComposer.compose_factors(cluster.template, ep.binding, q, ep.first, ep.second)
            req = sender.peer_requests[0]
            rctx = build_context(ep, ep.second, "receiver_after_request",
                                 messages=[RequestMessage(ep.first, req, request_payload(req.target, req.requested_plan))])
            assert expand_code(f"accepted_binding_id={ep.binding}", rctx) == dsl.format(ref.receiver_after_request(req))


def test_codes_outside_the_codebook_or_for_the_wrong_stage_expand_to_nothing() -> None:
    ep = Episode(pool("heldout")[0], 0)
    ctx = build_context(ep, ep.first, "sender_initial")
    other = next(b for b in ep.template.bindings if b != ep.binding)
    assert expand_code(ep.binding, ctx) == dsl.format(ref.sender_initial(ep))  # a bare code is accepted
    assert expand_code(f"active_binding_id={other}", ctx) is not None  # admissible, just not the active one
    assert expand_code("active_binding_id=NOT_A_CODE", ctx) is None
    assert expand_code(f"accepted_binding_id={ep.binding}", ctx) is None  # the receiver's field at the sender
    assert expand_code("SELF -\nREQ -", ctx) is None


class _Scripted:
    """Stands in for Generator: answers each context from a table, with made-up token counts."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table
        self.calls: list[int] = []

    def generate(self, contexts: Sequence[str]) -> list[GenerationRecord]:
        self.calls.append(len(contexts))
        out = []
        for c in contexts:
            text = self.table.get(c, "garbage")
            fields = {"text": text, "tokens": tuple(range(len(text))), "input_tokens": len(c) // 10, "output_tokens": len(text),
                      "latency_s": 0.01 * len(contexts), "stop_reason": "eos", "batch_size": len(contexts), "backend": "scripted"}
            names = GenerationRecord.__dataclass_fields__
            out.append(GenerationRecord(**{k: v for k, v in fields.items() if k in names}))
        return out


@pytest.mark.parametrize(("policy_cls", "set_name"), [(DirectDSLPolicy, "forward"), (FactorCodePolicy, "factor_code")])
def test_policies_in_closed_loop_record_calls_and_tokens_per_episode(policy_cls: type, set_name: str) -> None:
    rows = build_set(set_name)
    table = {r.prompt: r.target for r in rows}
    policy = policy_cls(_Scripted(table))
    report = evaluate(policy, "train", episodes=12, batch_size=5)
    m = report["metrics"]
    assert m["success_rate"] == 1.0 and m["calls"] == 2.0
    assert policy.model_calls == 24 and all(isinstance(r, CallRecord) for r in policy.records)
    for episode in report["episodes"]:
        mine = [r for r in policy.records if r.episode == episode["episode_id"]]
        assert [r.stage for r in mine] == ["sender_initial", "receiver_after_request"]
        assert episode["input_tokens"] == sum(r.input_tokens for r in mine)
        assert episode["output_tokens"] == sum(r.output_tokens for r in mine)
    assert max(policy.generator.calls) == 5  # one batched call answers every deciding env


def test_a_wrong_code_reaches_the_env_as_a_parse_failure() -> None:
    policy = FactorCodePolicy(_Scripted({}))
    report = evaluate(policy, "heldout", episodes=2, batch_size=2)
    assert report["metrics"]["outcomes"] == {str(FailureCode.PARSE_FAILURE): 2}
    assert report["episodes"][0]["actions"][0]["action"] == "garbage"


def test_untrained_model_output_is_parsed_by_the_env_and_counted(tmp_path: Path) -> None:
    from gencoord_env.agents.lm.loading import build_tiny

    rows = build_set("forward")[:4]
    lm = build_tiny([r.prompt + r.target for r in rows], hidden_size=32, num_layers=1, vocab_size=400)
    policy = make_policy(lm.model, lm.tokenizer, "direct", GenerationConfig(max_new_tokens=12))
    report = evaluate(policy, "heldout", episodes=2, batch_size=2)
    for episode in report["episodes"]:
        assert isinstance(episode["outcome"], FailureCode) and episode["outcome"] is not FailureCode.SUCCESS
        assert 1 <= episode["output_tokens"] <= 12
    prompt_len = len(lm.tokenizer(policy.generator.prompt_text(rows[0].prompt), add_special_tokens=False)["input_ids"])
    first = next(r for r in policy.records if r.stage == "sender_initial")
    assert first.input_tokens > 100 and prompt_len > 100


def test_a_model_trained_on_one_episodes_rows_plays_it_to_success(tmp_path: Path) -> None:
    """Generation -> env parser -> resolution -> execution, with a learned (memorized) policy."""
    rows = [r for r in build_set("forward") if r.episode == Episode(pool("train")[0], 0).id]
    assert len(rows) == 2
    write_rows(rows, tmp_path / "one.jsonl")
    result = train(SFTConfig(data=(str(tmp_path / "one.jsonl"),), out_dir=str(tmp_path / "run"), lr=1e-2, max_steps=150,
                             micro_batch=2, grad_accum=1, progress=False, seed=1,
                             scratch=ScratchConfig(vocab_size=400, hidden_size=64, num_layers=2)))
    assert result.checkpoint is not None
    from gencoord_env.agents.lm.policy import load_policy

    policy = load_policy(result.checkpoint, "direct", device="cpu")
    report = evaluate(policy, [Episode(pool("train")[0], 0)], batch_size=1)
    assert report["metrics"]["success_rate"] == 1.0, report["episodes"][0]["actions"]
    assert [a["action"] for a in report["episodes"][0]["actions"]] == [r.target for r in rows]
