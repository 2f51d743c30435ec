"""Learned-agent generation on a tiny model built in the test (offline tokenizer, small config)."""

from __future__ import annotations

import re

import pytest
import torch
from transformers import AutoModelForCausalLM

from gencoord_env.agents.lm.generate import GenerationConfig, Generator
from gencoord_env.agents.lm.loading import LoadedModel, ModelLoadError, build_qwen35_08b_config, build_tiny, load_model

CORPUS = [
    f"inventory oak_log={i % 7} stick={i % 5}\n"
    f"SELF resource.obtain(q={i % 9},item=oak_log) > resource.deliver(q={i % 9},item=oak_log,to=agent_b)\n"
    "REQ agent_b craft.item(q=1,item=stick)"
    for i in range(300)
]
CONTEXTS = [f"inventory oak_log={i} stick={i * 3 % 5} goal craft" + " more" * i for i in range(5)]


def _tiny(arch: str) -> LoadedModel:
    lm = build_tiny(CORPUS, arch=arch, hidden_size=64, num_layers=2)
    # Default initialisation (std 0.02) makes every prompt decode to the same token, and so can a draw of
    # larger random weights (a saturated Gated-DeltaNet layer): take the first seeded draw whose greedy
    # continuations, by transformers' own generate, differ between the contexts, so that the equality
    # checks below can fail.
    prompt = Generator(lm.model, lm.tokenizer, GenerationConfig()).prompt_text
    ids = [lm.tokenizer(prompt(c), return_tensors="pt", add_special_tokens=False)["input_ids"] for c in CONTEXTS]
    for seed in range(16):
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for param in lm.model.parameters():
                if param.dim() == 2:
                    param.copy_(torch.randn(param.shape, generator=gen) * 0.3)
            outs = {tuple(lm.model.generate(x, max_new_tokens=8, do_sample=False)[0, x.shape[1]:].tolist()) for x in ids}
        if len(outs) > 1:
            return lm
    raise AssertionError(f"no draw of random {arch} weights decodes differently for different contexts")


@pytest.fixture(scope="module", params=["qwen3", "qwen3_5"])
def tiny(request: pytest.FixtureRequest) -> LoadedModel:
    return _tiny(request.param)


def test_outputs_depend_on_the_prompt(tiny: LoadedModel) -> None:
    # the model's own continuations differ between the contexts (the fixture's draw); the package's
    # generator, batched with left padding and a static cache, must keep them apart too
    gen = Generator(tiny.model, tiny.tokenizer, GenerationConfig(max_new_tokens=16, stop_at_record_end=False))
    records = gen.generate(CONTEXTS)
    assert len({r.tokens for r in records}) > 1


@pytest.mark.parametrize("backend", ["static", "generate"])
def test_batched_equals_per_prompt(tiny: LoadedModel, backend: str) -> None:
    gen = Generator(tiny.model, tiny.tokenizer, GenerationConfig(max_new_tokens=16, backend=backend))
    batched = gen.generate(CONTEXTS)
    single = [gen.generate([c])[0] for c in CONTEXTS]
    assert [r.tokens for r in batched] == [r.tokens for r in single]
    assert [r.text for r in batched] == [r.text for r in single]
    assert [r.tokens for r in gen.generate(CONTEXTS)] == [r.tokens for r in batched]  # deterministic on repeat


@pytest.mark.parametrize("record_end", [True, False])
def test_static_loop_matches_transformers_generate(tiny: LoadedModel, record_end: bool) -> None:
    config = dict(max_new_tokens=20, stop_at_record_end=record_end)
    fast = Generator(tiny.model, tiny.tokenizer, GenerationConfig(**config, backend="static")).generate(CONTEXTS)
    ref = Generator(tiny.model, tiny.tokenizer, GenerationConfig(**config, backend="generate")).generate(CONTEXTS)
    assert [(r.tokens, r.stop_reason) for r in fast] == [(r.tokens, r.stop_reason) for r in ref]


def test_records_carry_token_counts_and_latency(tiny: LoadedModel) -> None:
    gen = Generator(tiny.model, tiny.tokenizer, GenerationConfig(max_new_tokens=12, min_new_tokens=12, stop_at_record_end=False))
    records = gen.generate(CONTEXTS[:3])
    for context, record in zip(CONTEXTS, records):
        prompt_ids = tiny.tokenizer(gen.prompt_text(context), add_special_tokens=False)["input_ids"]
        assert record.input_tokens == len(prompt_ids)
        assert record.output_tokens == 12 == len(record.tokens)
        assert record.stop_reason == "max_new_tokens"
        assert record.latency_s > 0
        assert record.batch_size == 3
    assert len({r.latency_s for r in records}) == 1  # one batched call, one wall time


def test_structured_cap_bounds_output(tiny: LoadedModel) -> None:
    gen = Generator(tiny.model, tiny.tokenizer, GenerationConfig(max_new_tokens=5, stop_at_record_end=False))
    for record in gen.generate(CONTEXTS):
        assert record.output_tokens <= 5
        assert record.stop_reason in {"eos", "max_new_tokens"}


def test_record_end_cuts_after_the_second_line(tiny: LoadedModel) -> None:
    gen = Generator(tiny.model, tiny.tokenizer)
    ids = tiny.tokenizer("SELF a.b(q=1)\nREQ - \nSELF extra", add_special_tokens=False)["input_ids"]
    kept, reason = gen._cut(ids)
    assert reason == "record_end"
    assert tiny.tokenizer.decode(kept) == "SELF a.b(q=1)\nREQ - "
    eos = tiny.tokenizer.eos_token_id
    assert gen._cut([ids[0], eos, ids[1]]) == ([ids[0]], "eos")


def test_prompt_uses_the_chat_template(tiny: LoadedModel) -> None:
    gen = Generator(tiny.model, tiny.tokenizer)
    assert gen.prompt_text("ctx") == "<|im_start|>user\nctx<|im_end|>\n<|im_start|>assistant\n"
    plain = Generator(tiny.model, tiny.tokenizer, GenerationConfig(use_chat_template=False))
    assert plain.prompt_text("ctx") == "ctx"


def test_generation_config_rejects_bad_bounds() -> None:
    with pytest.raises(ValueError, match=re.escape("min_new_tokens must be in [0, max_new_tokens=4], got 5")):
        GenerationConfig(max_new_tokens=4, min_new_tokens=5)


def test_save_load_round_trip(tmp_path, tiny: LoadedModel) -> None:  # type: ignore[no-untyped-def]
    tiny.model.save_pretrained(tmp_path)
    tiny.tokenizer.save_pretrained(tmp_path)
    loaded = load_model(tmp_path, device="cpu")
    assert loaded.dtype == torch.float32 and loaded.device.type == "cpu"
    config = GenerationConfig(max_new_tokens=10)
    before = Generator(tiny.model, tiny.tokenizer, config).generate(CONTEXTS[:2])
    after = Generator(loaded.model, loaded.tokenizer, config).generate(CONTEXTS[:2])
    assert [r.tokens for r in before] == [r.tokens for r in after]


def test_missing_directory_says_what_to_do(tmp_path) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "no" / "such" / "model"
    with pytest.raises(ModelLoadError, match=re.escape(f"no model directory at {str(missing)!r}")):
        load_model(missing, device="cpu")


def test_directory_without_config_is_rejected(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ModelLoadError, match="is not a model directory"):
        load_model(tmp_path, device="cpu")


def test_absent_hub_weights_offline_say_what_to_do(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelLoadError, match=re.escape("hf download Qwen/Qwen3.5-0.8B --local-dir DIR")):
        load_model("Qwen/Qwen3.5-0.8B", device="cpu")


def test_qwen35_08b_config_has_the_published_shape() -> None:
    config = build_qwen35_08b_config()
    assert config.layer_types == (["linear_attention"] * 3 + ["full_attention"]) * 6
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    assert 0.70e9 < params < 0.80e9, params


# ------------------------------------------------------------------ hybrid Qwen3.5 forward and its kernels


def test_qwen35_static_loop_runs_the_hybrid_forward(tiny: LoadedModel) -> None:
    gen = Generator(tiny.model, tiny.tokenizer, GenerationConfig(max_new_tokens=6, backend="static"))
    gen.generate(CONTEXTS[:1])
    expected = "hybrid" if tiny.model.config.model_type.startswith("qwen3_5") else "transformers"
    assert all(status.startswith(expected) for status in gen.graph_status().values())


@pytest.mark.parametrize("hybrid", [True, False])
def test_short_prompts_match_generate(hybrid: bool) -> None:
    # Prompts shorter than the 4-tap convolution exercise the zero left context of the conv state.
    lm = _tiny("qwen3_5")
    prompts = [[5, 9, 40][:n] for n in (1, 2, 3)] + [list(range(20, 27))]
    config = dict(max_new_tokens=12, stop_at_record_end=False)
    fast = Generator(lm.model, lm.tokenizer, GenerationConfig(**config, backend="static", hybrid=hybrid)).generate_tokens(prompts)
    ref = Generator(lm.model, lm.tokenizer, GenerationConfig(**config, backend="generate")).generate_tokens(prompts)
    assert [r.tokens for r in fast] == [r.tokens for r in ref]


def test_model_dtype_recurrent_state_is_a_choice() -> None:
    lm = _tiny("qwen3_5")
    config = dict(max_new_tokens=10, stop_at_record_end=False, backend="static")
    fp32 = Generator(lm.model, lm.tokenizer, GenerationConfig(**config)).generate(CONTEXTS)
    model_dtype = Generator(lm.model, lm.tokenizer, GenerationConfig(**config, recurrent_state="model")).generate(CONTEXTS)
    assert [r.tokens for r in fp32] == [r.tokens for r in model_dtype]  # float32 model: the same dtype
    with pytest.raises(ValueError, match=re.escape("recurrent_state must be 'float32' or 'model', got 'fp8'")):
        GenerationConfig(recurrent_state="fp8")  # type: ignore[arg-type]


def test_conv_step_matches_the_reference_update() -> None:
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mod

    from gencoord_env.agents.lm.kernels import conv_step

    gen = torch.Generator().manual_seed(3)
    state = torch.randn(2, 6, 4, generator=gen)
    weight = torch.randn(6, 4, generator=gen)
    x = torch.randn(2, 6, generator=gen)
    reference_state = state.clone()
    reference = getattr(mod.causal_conv1d_update, "__wrapped__", mod.causal_conv1d_update)
    expected = reference(x[:, :, None], reference_state, weight, None, "silu")[:, :, 0]
    got = conv_step(x, state, weight)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert torch.equal(state, reference_state)  # shifted in place, newest input last


def test_delta_rule_step_updates_the_state_in_place() -> None:
    from gencoord_env.agents.lm.kernels import delta_rule_chunk, delta_rule_step

    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 5, 3, 8, generator=gen) for _ in range(3))
    g = -torch.rand(2, 5, 3, generator=gen)
    beta = torch.rand(2, 5, 3, generator=gen)
    out_all, final = delta_rule_chunk(q, k, v, g, beta)
    # Prefill four tokens, then one recurrent step on the fifth: same output and state as all five at once.
    _, state = delta_rule_chunk(q[:, :4], k[:, :4], v[:, :4], g[:, :4], beta[:, :4])
    address = state.data_ptr()
    out_last = delta_rule_step(q[:, 4:], k[:, 4:], v[:, 4:], g[:, 4:], beta[:, 4:], state)
    assert state.data_ptr() == address
    torch.testing.assert_close(out_last, out_all[:, 4:], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(state, final, rtol=1e-4, atol=1e-5)
