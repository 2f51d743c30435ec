"""Seeded sampling with per-token log-probabilities, on tiny models built in the test.

The log-probabilities a sampler returns must be the ones a policy-gradient loss recomputes: a
teacher-forced forward pass of the same model over prompt + completion (CPU, float32). For Qwen3
(attention only) they agree within 1e-5. Qwen3.5's Gated-DeltaNet layers compute a whole sequence with
the chunked algorithm but decode with the recurrent one; the two round differently in float32, so
there the agreement is within 1e-4 (measured 1.4e-5 at these weights).
"""
from __future__ import annotations

import re

import pytest
import torch

from gencoord_env.agents.lm.generate import GenerationConfig, Generator, _sample
from gencoord_env.agents.lm.loading import LoadedModel, build_tiny

CORPUS = [
    f"inventory oak_log={i % 7} stick={i % 5}\n"
    f"SELF resource.obtain(q={i % 9},item=oak_log) > resource.deliver(q={i % 9},item=oak_log,to=agent_b)\n"
    "REQ agent_b craft.item(q=1,item=stick)"
    for i in range(300)
]
# Different lengths, so batched calls left-pad.
CONTEXTS = [f"inventory oak_log={i} stick={i * 3 % 5} goal craft" + " more" * i for i in range(4)]


TOLERANCE = {"tiny-qwen3": 1e-5, "tiny-qwen3_5": 1e-4}


def _tiny(arch: str) -> LoadedModel:
    lm = build_tiny(CORPUS, arch=arch, hidden_size=64, num_layers=2)
    # Larger random weights than the default initialisation: prompt-dependent distributions, so samples
    # differ from each other and from greedy decoding, and EOS still occurs within the cap.
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in lm.model.parameters():
            if param.dim() == 2:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.15)
    return lm


@pytest.fixture(scope="module", params=["qwen3", "qwen3_5"])
def tiny(request: pytest.FixtureRequest) -> LoadedModel:
    return _tiny(request.param)


def _sampler(lm: LoadedModel, backend: str = "static", **kw: object) -> Generator:
    config = dict(max_new_tokens=24, do_sample=True, temperature=1.0, top_p=0.95, seed=3, backend=backend)
    return Generator(lm.model, lm.tokenizer, GenerationConfig(**{**config, **kw}))


def _teacher_forced(lm: LoadedModel, gen: Generator, context: str, completion: tuple[int, ...]) -> torch.Tensor:
    prompt = lm.tokenizer(gen.prompt_text(context), add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + list(completion)])
    with torch.no_grad():
        logits = lm.model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    return logits.log_softmax(-1).gather(-1, torch.tensor(completion).view(-1, 1)).view(-1)


@pytest.mark.parametrize("backend", ["static", "generate"])
def test_sampled_logprobs_equal_a_teacher_forced_recomputation(tiny: LoadedModel, backend: str) -> None:
    gen = _sampler(tiny, backend, max_new_tokens=64)
    records = gen.generate(CONTEXTS * 4)
    assert any(r.stop_reason != "max_new_tokens" for r in records)  # the stopping token is scored too
    for context, record in zip(CONTEXTS * 4, records):
        assert record.logprobs is not None and len(record.logprobs) == len(record.completion_ids) == record.output_tokens
        assert record.completion_ids[: len(record.tokens)] == record.tokens
        expected = _teacher_forced(tiny, gen, context, record.completion_ids)
        assert torch.allclose(torch.tensor(record.logprobs), expected, atol=TOLERANCE[tiny.source], rtol=0)


def test_greedy_records_can_carry_the_same_logprobs_without_changing_tokens(tiny: LoadedModel) -> None:
    base = dict(max_new_tokens=20)
    plain = Generator(tiny.model, tiny.tokenizer, GenerationConfig(**base)).generate(CONTEXTS)
    scored = Generator(tiny.model, tiny.tokenizer, GenerationConfig(**base, logprobs=True)).generate(CONTEXTS)
    assert all(r.logprobs is None for r in plain)
    assert [r.tokens for r in scored] == [r.tokens for r in plain]
    for context, record in zip(CONTEXTS, scored):
        expected = _teacher_forced(tiny, Generator(tiny.model, tiny.tokenizer), context, record.completion_ids)
        assert torch.allclose(torch.tensor(record.logprobs), expected, atol=TOLERANCE[tiny.source], rtol=0)


def test_a_fixed_seed_reproduces_the_samples(tiny: LoadedModel) -> None:
    first = [r.completion_ids for r in _sampler(tiny).generate(CONTEXTS * 2)]
    second_gen = _sampler(tiny)
    assert [r.completion_ids for r in second_gen.generate(CONTEXTS * 2)] == first
    # The stream moves on between calls; a per-call seed pins one call.
    assert [r.completion_ids for r in second_gen.generate(CONTEXTS * 2)] != first
    pinned = [r.completion_ids for r in second_gen.generate(CONTEXTS, seed=11)]
    assert [r.completion_ids for r in _sampler(tiny, seed=99).generate(CONTEXTS, seed=11)] == pinned
    assert [r.completion_ids for r in second_gen.generate(CONTEXTS, seed=12)] != pinned


def test_both_decoding_paths_sample_the_same_tokens(tiny: LoadedModel) -> None:
    fast = _sampler(tiny, "static").generate(CONTEXTS * 2, seed=5)
    ref = _sampler(tiny, "generate").generate(CONTEXTS * 2, seed=5)
    assert [(r.completion_ids, r.stop_reason) for r in fast] == [(r.completion_ids, r.stop_reason) for r in ref]


def test_samples_vary_and_a_vanishing_nucleus_is_greedy(tiny: LoadedModel) -> None:
    group = _sampler(tiny, top_p=1.0).generate([CONTEXTS[0]] * 8)
    assert len({r.completion_ids for r in group}) > 1
    greedy = Generator(tiny.model, tiny.tokenizer, GenerationConfig(max_new_tokens=24)).generate(CONTEXTS)
    nucleus = _sampler(tiny, top_p=1e-6).generate(CONTEXTS)
    assert [r.tokens for r in nucleus] == [r.tokens for r in greedy]


def test_inverse_cdf_draws_follow_the_tempered_nucleus() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0, float("-inf")]])
    n = 20000
    uniform = (torch.arange(n, dtype=torch.float32) + 0.5) / n  # stratified: frequencies are the masses
    for temperature, top_p in [(1.0, 1.0), (0.7, 1.0), (1.3, 0.8)]:
        drawn = _sample(logits.expand(n, -1), uniform, temperature, top_p)
        probs = torch.softmax(logits[0] / temperature, -1)
        ordered = probs.sort(descending=True).values
        keep = int(((ordered.cumsum(0) - ordered) < top_p).sum())
        nucleus = torch.zeros_like(probs)
        nucleus[probs.argsort(descending=True)[:keep]] = probs[probs.argsort(descending=True)[:keep]]
        nucleus /= nucleus.sum()
        freq = torch.bincount(drawn, minlength=5).float() / n
        assert torch.allclose(freq, nucleus, atol=1e-3), (temperature, top_p, freq, nucleus)
        assert freq[4] == 0


@pytest.mark.parametrize(("field", "value", "message"), [
    ("temperature", 0.0, "temperature must be > 0 (greedy decoding is do_sample=False), got 0.0"),
    ("top_p", 0.0, "top_p must be in (0, 1], got 0.0"),
    ("top_p", 1.5, "top_p must be in (0, 1], got 1.5"),
])
def test_bad_sampling_settings_are_refused(field: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        GenerationConfig(do_sample=True, **{field: value})
