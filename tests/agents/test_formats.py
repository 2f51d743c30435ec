"""Output formats: each entry's target and decoder agree with the reference records; a checkpoint records its
format and is played in it (a Factor-Code checkpoint through ``gencoord rollout`` plays as Factor-Code); asking
for another format raises, naming both."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, Qwen3Config  # noqa: E402

from gencoord_env import dsl  # noqa: E402
from gencoord_env.agents.formats import (  # noqa: E402
    FORMATS, RECORD, FormatMismatchError, checkpoint_format, expand_code, output_format, resolve_format,
)
from gencoord_env.agents.lm.loading import train_tokenizer  # noqa: E402
from gencoord_env.agents.lm.policy import load_policy  # noqa: E402
from gencoord_env.agents.registry import learned_checkpoint, make_policy  # noqa: E402
from gencoord_env.commands.cli import main  # noqa: E402
from gencoord_env.envs.gencoord.surfaces import SURFACES  # noqa: E402
from gencoord_env.outcomes import FailureCode  # noqa: E402
from gencoord_env.tasks import Episode, pool, prior  # noqa: E402
from gencoord_env.tasks import references as ref  # noqa: E402
from gencoord_env.tasks.contexts import build_context, render  # noqa: E402
from gencoord_env.train.data import DATASETS, PROCEDURAL  # noqa: E402

CODE = "CHEST_A"


def code_writer(out: Path, code: str, output_format: str | None) -> Path:
    """A checkpoint whose greedy completion of any prompt is ``code``, then EOS, and which records ``output_format``.

    A one-layer Qwen3 built from a config with every weight zero but the embeddings, the head and the norms: its
    layer adds nothing to the residual stream (zero output projections), so the next token is read from the
    current token's embedding alone. Every token but ``code`` embeds along one axis, which the head reads as
    ``code``; ``code`` embeds along another, which the head reads as EOS.
    """
    contexts = [render(build_context(Episode(c, 0), Episode(c, 0).first, "sender_initial")) for c in pool("train")[:8]]
    tokenizer = train_tokenizer(contexts, vocab_size=300)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=4096,
                         tie_word_embeddings=False, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    model = AutoModelForCausalLM.from_config(config)
    code_id = tokenizer.convert_tokens_to_ids(code)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.fill_(1.0 if name.endswith("norm.weight") else 0.0)
        embed, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
        embed[:, 0] = 1.0
        embed[code_id] = 0.0
        embed[code_id, 1] = 1.0
        head[code_id, 0] = 10.0
        head[tokenizer.eos_token_id, 1] = 10.0
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if output_format is not None:
        (out / RECORD).write_text(json.dumps({"format": output_format, "lineage": []}) + "\n", encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def factor_code_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return code_writer(tmp_path_factory.mktemp("factor_code"), CODE, "factor_code")


def test_every_format_has_a_surface_of_the_env_and_every_set_a_format() -> None:
    assert list(FORMATS) == ["direct", "factor_code", "json", "freeform", "commit_tool"]
    for fmt in FORMATS.values():
        assert fmt.surface in SURFACES and output_format(fmt.name) is fmt
    assert {s.format for s in (*DATASETS.values(), *PROCEDURAL.values())} == {"direct", "factor_code", "json", "freeform"}
    with pytest.raises(ValueError, match=re.escape("unknown output format 'factor'; expected one of direct, factor_code, "
                                                   "json, freeform, commit_tool (did you mean 'factor_code'?)")):
        output_format("factor")


@pytest.mark.parametrize("name", ["direct", "factor_code", "json"])
def test_a_formats_target_decodes_to_the_reference_record(name: str) -> None:
    """Target builder and decoder are inverse on the train pool: the decoded target is the reference's record."""
    fmt = output_format(name)
    assert fmt.target is not None
    for cluster in pool("train")[:16]:
        ep = Episode(cluster, 0)
        sender = ref.sender_initial(ep)
        ctx = build_context(ep, ep.first, "sender_initial")
        written = dsl.to_json(sender) if fmt.surface == "json" else dsl.format(sender)
        target = fmt.target("sender_initial", ep.binding, written)
        assert fmt.decode(target, {"context": ctx}) == written
        span = fmt.code_span(target, ep.binding)
        assert span is not None and target[span[0]:span[1]] == ep.binding


def test_factor_code_targets_name_the_stage_field_and_renaming_swaps_codes() -> None:
    fmt = output_format("factor_code")
    assert fmt.target is not None
    assert fmt.target("sender_initial", "SITE_B", "") == "active_binding_id=SITE_B"
    assert fmt.target("receiver_after_request", "SITE_B", "") == "accepted_binding_id=SITE_B"
    with pytest.raises(ValueError, match="Factor-Code has no field for stage 'centralized'"):
        fmt.target("centralized", "SITE_B", "")
    assert fmt.rename("active_binding_id=SITE_B", {"SITE_B": "ROOF"}) == "active_binding_id=ROOF"
    with pytest.raises(ValueError, match="freeform format"):
        output_format("freeform").rename("put it on site_b", {"SITE_B": "ROOF"})


def test_the_commit_tool_format_reads_the_record_of_the_first_commit_call() -> None:
    fmt = output_format("commit_tool")
    call = '<tool_call>\n{"name": "commit", "arguments": {"record": "SELF -\\nREQ -"}}\n</tool_call>'
    assert fmt.decode(call, {}) == "SELF -\nREQ -"
    assert fmt.decode("SELF -", {}) == "SELF -"  # no call: the env sees the completion (a parse failure)


def test_model_path_is_read_in_one_place() -> None:
    assert learned_checkpoint("model:runs/x/final") == "runs/x/final" and learned_checkpoint("rule") is None
    with pytest.raises(ValueError, match="names no checkpoint"):
        learned_checkpoint("model:")


def test_a_factor_code_checkpoint_through_rollout_plays_as_factor_code(factor_code_checkpoint: Path, tmp_path: Path) -> None:
    """The checkpoint records factor_code and writes a bare binding code: ``gencoord rollout --policy model:PATH``
    expands it with the public composer wherever the episode's template has that code (so the env gets Short
    DSL, no parse failure), and passes it on as a parse failure where it does not."""
    assert checkpoint_format(factor_code_checkpoint) == "factor_code"
    trace = tmp_path / "trace.jsonl"
    assert main(["rollout", "--backend", "sim", "--pool", "heldout", "--episodes", "16", "--policy",
                 f"model:{factor_code_checkpoint}", "--trace", str(trace), "--json", str(tmp_path / "s.json")]) == 0
    episodes = [json.loads(line) for line in trace.read_text().splitlines()]
    has_code = [e for e in episodes if CODE in prior().template(e["episode"]["cluster"]["template"]).bindings]
    assert 0 < len(has_code) < len(episodes) == 16
    for e in episodes:
        first = e["actions"][0]["action"]
        if e in has_code:
            assert e["outcome"] != str(FailureCode.PARSE_FAILURE), e["episode_id"]
            assert first.startswith("SELF ") and "\nREQ " in first and f"bind={CODE}" in first
        else:
            assert e["outcome"] == str(FailureCode.PARSE_FAILURE) and first == CODE
    assert json.loads((tmp_path / "s.json").read_text())["policy"] == f"model:{factor_code_checkpoint}"


def test_the_same_weights_recorded_as_direct_play_their_code_as_the_action(tmp_path: Path) -> None:
    checkpoint = code_writer(tmp_path / "direct", CODE, "direct")
    policy = make_policy(f"model:{checkpoint}")
    assert policy.format.name == "direct"
    ep = Episode(next(c for c in pool("heldout") if c.binding == CODE), 0)
    ctx = build_context(ep, ep.first, "sender_initial")
    assert policy.act(render(ctx), {"context": ctx, "stage": "sender_initial"}) == CODE
    assert expand_code(CODE, ctx) == dsl.format(ref.sender_initial(ep))


def test_a_mismatched_format_raises_naming_both(factor_code_checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> None:
    message = (f"{factor_code_checkpoint} was trained in the factor_code format (Factor-Code + Rule), not direct "
               "(Direct Short DSL); play it as factor_code, or leave the format out and the checkpoint's own is used")
    with pytest.raises(FormatMismatchError, match=re.escape(message)):
        load_policy(factor_code_checkpoint, "direct")
    assert resolve_format(factor_code_checkpoint, "factor_code").name == "factor_code"
    assert main(["train", "evaluate", "--model", str(factor_code_checkpoint), "--format", "direct", "--episodes", "2"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"


def test_a_checkpoint_without_a_record_plays_as_asked_or_direct(tmp_path: Path) -> None:
    checkpoint = code_writer(tmp_path / "bare", CODE, None)
    assert checkpoint_format(checkpoint) is None
    assert resolve_format(checkpoint).name == "direct" and resolve_format(checkpoint, "factor_code").name == "factor_code"
