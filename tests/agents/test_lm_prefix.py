"""Prompt layout with the shared prior first, and decoding from a cached prefix state.

The prefix cache must change nothing but speed: greedy tokens identical to a full prefill (float32),
log-probabilities equal within float rounding, for attention-only (Qwen3) and hybrid (Qwen3.5) tiny
models, at batch 1 and over batches whose suffixes differ in length. The state-splicing code that the
CUDA graphs capture is the code these tests run on the CPU.
"""
from __future__ import annotations

import re

import pytest
import torch

from gencoord_env.agents.lm.generate import GenerationConfig, Generator
from gencoord_env.agents.lm.hybrid import HybridState, hybrid_forward
from gencoord_env.agents.lm.loading import LoadedModel, build_tiny
from gencoord_env.agents.lm.policy import prompt_text as policy_prompt_text
from gencoord_env.agents.lm.prefix import PrefixCache, compute_prefix, splice
from gencoord_env.agents.lm.prompt import prompt_parts, split_prior
from gencoord_env.messages import RequestMessage
from gencoord_env.tasks import Episode, pool, pool_episodes
from gencoord_env.tasks import references as ref
from gencoord_env.tasks.contexts import build_context, render, request_payload
from gencoord_env.train.data import build_set

CORPUS = [
    f"inventory oak_log={i % 7} stick={i % 5}\n"
    f"SELF resource.obtain(q={i % 9},item=oak_log) > resource.deliver(q={i % 9},item=oak_log,to=agent_b)\n"
    "REQ agent_b craft.item(q=1,item=stick)"
    for i in range(300)
]
HEAD = 70  # tokens of the shared head in the token-level tests
SUFFIXES = (1, 5, 17, 40, 3)  # suffix lengths of one batch: right padding of every width


def _tiny(arch: str) -> LoadedModel:
    lm = build_tiny(CORPUS, arch=arch, hidden_size=64, num_layers=2)
    # Larger random weights than the default initialisation, so outputs depend on the whole prompt.
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in lm.model.parameters():
            if param.dim() == 2:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.3)
    return lm


@pytest.fixture(scope="module", params=["qwen3", "qwen3_5"])
def tiny(request: pytest.FixtureRequest) -> LoadedModel:
    return _tiny(request.param)


@pytest.fixture(scope="module")
def hybrid() -> LoadedModel:
    return _tiny("qwen3_5")


def _prompts(lm: LoadedModel, seed: int = 1, head: int = HEAD, suffixes: tuple[int, ...] = SUFFIXES) -> list[list[int]]:
    rng = torch.Generator().manual_seed(seed)
    vocab = lm.model.config.vocab_size - 8  # clear of the special tokens at the end
    shared = torch.randint(10, vocab, (head,), generator=rng).tolist()
    return [shared + torch.randint(10, vocab, (n,), generator=rng).tolist() for n in suffixes]


def _config(**kw: object) -> GenerationConfig:
    return GenerationConfig(**{"max_new_tokens": 8, "stop_at_record_end": False, "backend": "static", "logprobs": True,
                               "prefix_cache": True, **kw})


# ------------------------------------------------------------------------------------------- layout


@pytest.mark.parametrize("pool_name", ["train", "heldout", "crossproduct", "teams"])
def test_the_prior_block_is_found_exactly_in_every_rendered_context(pool_name: str) -> None:
    for ep in pool_episodes(pool_name)[:24]:
        first, second = ep.role_agents[0], ep.role_agents[1]
        contexts = [build_context(ep, first, "sender_initial"), build_context(ep, second, "centralized", route="centralized")]
        if not ep.is_team:
            req = ref.sender_initial(ep).peer_requests[0]
            message = RequestMessage(first, req, request_payload(req.target, req.requested_plan))
            contexts.append(build_context(ep, second, "receiver_after_request", messages=[message]))
        for ctx in contexts:
            assert split_prior(render(ctx)) == (ctx.prior.text, render(ctx, with_prior=False)), (ep.id, ctx.stage)


@pytest.mark.parametrize("set_name", ["forward", "freeform", "gc_requester"])
def test_every_training_prompt_puts_its_prior_first_and_keeps_every_line(set_name: str, hybrid: LoadedModel) -> None:
    for row in build_set(set_name)[::40]:
        parts = prompt_parts(hybrid.tokenizer, row.prompt)
        prior, local = split_prior(row.prompt)  # type: ignore[misc]
        assert parts.text.startswith(parts.shared)
        assert parts.shared == f"<|im_start|>system\n{prior}<|im_end|>\n<|im_start|>user\n"
        assert parts.text == f"{parts.shared}{local}<|im_end|>\n<|im_start|>assistant\n"
        assert sorted(prior.split("\n") + local.split("\n")) == sorted(row.prompt.split("\n"))
        # Training builds its prompts with the same function the decoder uses.
        assert policy_prompt_text(hybrid.tokenizer, row.prompt) == parts.text == Generator(hybrid.model, hybrid.tokenizer).prompt_text(row.prompt)


def test_both_agents_of_an_episode_share_the_head() -> None:
    ep = Episode(pool("heldout")[0], 0)
    lm = build_tiny([render(build_context(ep, ep.first, "sender_initial"))] * 4, arch="qwen3", hidden_size=32, num_layers=1)
    sender = prompt_parts(lm.tokenizer, render(build_context(ep, ep.first, "sender_initial")))
    receiver = prompt_parts(lm.tokenizer, render(build_context(ep, ep.second, "receiver_after_request")))
    assert sender.shared == receiver.shared and len(sender.shared) > len(sender.text) / 2
    plain = prompt_parts(lm.tokenizer, "no prior here", use_chat_template=False)
    assert (plain.shared, plain.text) == ("", "no prior here")
    bare = prompt_parts(lm.tokenizer, render(build_context(ep, ep.first, "sender_initial")), use_chat_template=False)
    assert bare.text.startswith(bare.shared) and bare.shared.startswith("PRIOR ")


# --------------------------------------------------------------------------------- state splicing


def test_a_suffix_after_a_spliced_prefix_continues_the_hybrid_state_exactly(hybrid: LoadedModel) -> None:
    """Logits, conv windows, recurrent states and keys after prefix + right-padded suffix equal a fresh prefill."""
    model = hybrid.model
    prompts = _prompts(hybrid, seed=2, suffixes=(1, 2, 6, 9))
    head = compute_prefix(model, prompts[0][:HEAD], hybrid=True)
    batch, start, width = len(prompts), 80, 12  # start > HEAD: a gap of unused slots before the head
    state = HybridState.allocate(model, batch=batch, cache_len=start + width)
    allowed = torch.zeros(batch, start + width, dtype=torch.bool)
    splice([head] * batch, start, conv=state.conv, recurrent=state.recurrent, keys=state.keys, values=state.values, allowed=allowed)
    ids = torch.zeros(batch, width, dtype=torch.long)
    mask = torch.zeros(batch, width, dtype=torch.bool)
    for row, prompt in enumerate(prompts):
        ids[row, : len(prompt) - HEAD] = torch.tensor(prompt[HEAD:])
        mask[row, : len(prompt) - HEAD] = True
    allowed[:, start:] = mask
    slots = torch.arange(width) + start
    visible = (allowed[:, None, :] & (torch.arange(start + width)[None, :] <= slots[:, None])[None]) | (
        torch.arange(start + width)[None, None, :] == slots[None, :, None]
    )
    with torch.inference_mode():
        logits = hybrid_forward(model, state, ids, HEAD + torch.arange(width)[None].expand(batch, -1), slots, visible[:, None], mask,
                                decode=False, extend=True, last=mask.sum(1) - 1)
    for row, prompt in enumerate(prompts):
        fresh = HybridState.allocate(model, batch=1, cache_len=len(prompt))
        positions = torch.arange(len(prompt))[None]
        with torch.inference_mode():
            expected = hybrid_forward(model, fresh, torch.tensor([prompt]), positions, positions[0], decode=False)
        torch.testing.assert_close(logits[row], expected[0], rtol=1e-4, atol=1e-4)
        for layer in fresh.conv:
            torch.testing.assert_close(state.conv[layer][row], fresh.conv[layer][0], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(state.recurrent[layer][row], fresh.recurrent[layer][0], rtol=1e-4, atol=1e-5)
        for layer in fresh.keys:
            suffix = len(prompt) - HEAD
            torch.testing.assert_close(state.keys[layer][row, :, start - HEAD : start], fresh.keys[layer][0, :, :HEAD])
            torch.testing.assert_close(state.keys[layer][row, :, start : start + suffix], fresh.keys[layer][0, :, HEAD:], rtol=1e-4, atol=1e-5)
    assert not torch.equal(state.recurrent[0][0], state.recurrent[0][3])  # rows of different suffixes did diverge


def test_splicing_marks_only_the_prefix_slots_and_clears_rows_without_one(hybrid: LoadedModel) -> None:
    head = compute_prefix(hybrid.model, _prompts(hybrid)[0][:HEAD], hybrid=True)
    state = HybridState.allocate(hybrid.model, batch=3, cache_len=128)
    for tensor in (*state.conv.values(), *state.recurrent.values()):
        tensor.fill_(7.0)  # a previous call's leftovers
    allowed = torch.ones(3, 128, dtype=torch.bool)
    splice([head, None, head], 96, conv=state.conv, recurrent=state.recurrent, keys=state.keys, values=state.values, allowed=allowed)
    assert allowed[0, :96].nonzero().view(-1).tolist() == list(range(96 - HEAD, 96)) == allowed[2, :96].nonzero().view(-1).tolist()
    assert not allowed[1, :96].any() and allowed[:, 96:].all()
    for layer in state.recurrent:
        assert torch.equal(state.recurrent[layer][1], torch.zeros_like(state.recurrent[layer][1]))
        assert torch.equal(state.recurrent[layer][0], head.recurrent[layer][0])
    with pytest.raises(ValueError, match=re.escape(f"a prefix of {HEAD} tokens does not fit before slot 64")):
        splice([head], 64, conv={}, recurrent={}, keys={}, values={}, allowed=torch.zeros(1, 128, dtype=torch.bool))


# ------------------------------------------------------------------------------------ the Generator


def test_greedy_tokens_are_identical_with_and_without_the_prefix_cache(tiny: LoadedModel) -> None:
    prompts = _prompts(tiny)
    full = Generator(tiny.model, tiny.tokenizer, _config(prefix_cache=False)).generate_tokens(prompts, shared=HEAD)
    reuse = Generator(tiny.model, tiny.tokenizer, _config())
    batched = reuse.generate_tokens(prompts, shared=HEAD)
    assert reuse.prefixes is not None and reuse.prefixes.misses == 1 and len(reuse.prefixes) == 1  # one head, computed once
    singles = [reuse.generate_tokens([prompts[i]], shared=HEAD)[0] for i in (0, 3)]  # batch 1: no padding, most padding
    assert reuse.prefixes.misses == 1
    assert len({r.tokens for r in full}) > 1  # the outputs depend on the suffix
    for records, expected_records in ((batched, full), (singles, [full[0], full[3]])):
        assert [r.tokens for r in records] == [r.tokens for r in expected_records]
        for got, expected in zip(records, expected_records):
            assert got.input_tokens == expected.input_tokens
            torch.testing.assert_close(torch.tensor(got.logprobs), torch.tensor(expected.logprobs), rtol=0, atol=1e-4)


def test_the_head_state_matters(tiny: LoadedModel) -> None:
    """Same suffixes after two different heads: different completions, each equal to its full prefill."""
    first, second = _prompts(tiny, seed=3), _prompts(tiny, seed=4)
    crossed = [second[0][:HEAD] + p[HEAD:] for p in first]
    reuse = Generator(tiny.model, tiny.tokenizer, _config())
    full = Generator(tiny.model, tiny.tokenizer, _config(prefix_cache=False))
    a, b = reuse.generate_tokens(first, shared=HEAD), reuse.generate_tokens(crossed, shared=HEAD)
    assert [r.tokens for r in a] != [r.tokens for r in b]
    assert [r.tokens for r in b] == [r.tokens for r in full.generate_tokens(crossed)]
    assert reuse.prefixes is not None and reuse.prefixes.misses == 2


def test_a_batch_mixes_heads_of_different_lengths_and_prompts_without_one(tiny: LoadedModel) -> None:
    long_head = _prompts(tiny, seed=5, head=HEAD + 30, suffixes=(4, 9))
    short_head = _prompts(tiny, seed=6, head=HEAD - 20, suffixes=(2, 11))
    loose = _prompts(tiny, seed=7, head=8, suffixes=(30,))
    prompts = [long_head[0], short_head[0], loose[0], long_head[1], short_head[1]]
    shared = [HEAD + 30, HEAD - 20, 0, HEAD + 30, HEAD - 20]
    reuse = Generator(tiny.model, tiny.tokenizer, _config())
    got = reuse.generate_tokens(prompts, shared=shared)
    expected = Generator(tiny.model, tiny.tokenizer, _config(prefix_cache=False)).generate_tokens(prompts)
    assert [r.tokens for r in got] == [r.tokens for r in expected]
    assert reuse.prefixes is not None and reuse.prefixes.misses == 2


def test_sampling_after_a_cached_head_draws_the_same_tokens(hybrid: LoadedModel) -> None:
    prompts = _prompts(hybrid, seed=8)
    kw = dict(do_sample=True, temperature=1.0, top_p=0.95, seed=3, max_new_tokens=16)
    reuse = Generator(hybrid.model, hybrid.tokenizer, _config(**kw)).generate_tokens(prompts, shared=HEAD, seed=9)
    full = Generator(hybrid.model, hybrid.tokenizer, _config(**kw, prefix_cache=False)).generate_tokens(prompts, seed=9)
    assert [r.completion_ids for r in reuse] == [r.completion_ids for r in full]


def test_a_weight_update_forgets_the_cached_heads_and_recopies_fused_weights(hybrid: LoadedModel) -> None:
    model = _tiny("qwen3_5").model  # its own copy: this test writes to the weights
    prompts = _prompts(hybrid, seed=9)
    reuse = Generator(model, hybrid.tokenizer, _config(fuse_projections=True))
    before = reuse.generate_tokens(prompts, shared=HEAD)
    with torch.no_grad():
        model.model.layers[0].linear_attn.in_proj_qkv.weight.mul_(-1.0)  # an optimizer step writes in place
    after = reuse.generate_tokens(prompts, shared=HEAD)
    expected = Generator(model, hybrid.tokenizer, _config(prefix_cache=False)).generate_tokens(prompts)
    assert [r.tokens for r in after] == [r.tokens for r in expected] != [r.tokens for r in before]
    assert reuse.prefixes is not None and reuse.prefixes.misses == 2


def test_generate_reuses_the_prior_of_real_observations(hybrid: LoadedModel) -> None:
    by_prior: dict[str, list[str]] = {}
    for row in build_set("forward"):
        by_prior.setdefault(split_prior(row.prompt)[0], []).append(row.prompt)  # type: ignore[index]
    observations = [o for group in list(by_prior.values())[:2] for o in group[:2]]  # two priors, two decisions each
    rows = observations
    lm = build_tiny(rows * 3, arch="qwen3_5", hidden_size=64, num_layers=2, vocab_size=600)
    reuse = Generator(lm.model, lm.tokenizer, _config(max_new_tokens=8))
    got = reuse.generate(observations)
    assert reuse.prefixes is not None and reuse.prefixes.misses == len({split_prior(o)[0] for o in observations}) == 2  # type: ignore[index]
    expected = Generator(lm.model, lm.tokenizer, _config(max_new_tokens=8, prefix_cache=False)).generate(observations)
    assert [r.tokens for r in got] == [r.tokens for r in expected]
    head = len(lm.tokenizer(prompt_parts(lm.tokenizer, observations[0]).shared, add_special_tokens=False)["input_ids"])
    assert head > got[0].input_tokens / 2


def test_prefix_settings_are_checked() -> None:
    with pytest.raises(ValueError, match=re.escape("min_prefix_tokens must be >= 1, got 0")):
        GenerationConfig(min_prefix_tokens=0)
    with pytest.raises(ValueError, match=re.escape("max_prefixes must be >= 1, got 0")):
        GenerationConfig(max_prefixes=0)
    with pytest.raises(ValueError, match=re.escape("got 2 prompts but 1 shared lengths")):
        Generator(*_tiny_parts()).generate_tokens([[5, 6], [7, 8]], shared=[1])


def _tiny_parts() -> tuple[torch.nn.Module, object]:
    lm = build_tiny(CORPUS[:20], arch="qwen3", hidden_size=32, num_layers=1, vocab_size=300)
    return lm.model, lm.tokenizer


def test_the_cache_keeps_the_most_recent_heads(hybrid: LoadedModel) -> None:
    computed: list[tuple[int, ...]] = []

    def compute(tokens: tuple[int, ...]):  # type: ignore[no-untyped-def]
        computed.append(tokens)
        return compute_prefix(hybrid.model, tokens, hybrid=True)

    cache = PrefixCache(compute, max_entries=2)
    for tokens in [(5, 6), (7, 8), (5, 6), (9, 10), (7, 8)]:
        cache.get(tokens)
    assert computed == [(5, 6), (7, 8), (9, 10), (7, 8)] and len(cache) == 2
    assert cache.get((9, 10)).length == 2 and cache.hits == 2
    cache.clear()
    assert len(cache) == 0 and cache.get((9, 10)) is not None and computed[-1] == (9, 10)


def test_fused_projections_compute_the_same_tokens(hybrid: LoadedModel) -> None:
    prompts = _prompts(hybrid, seed=10)
    fused = Generator(hybrid.model, hybrid.tokenizer, _config(fuse_projections=True))
    assert fused.fused is not None and len(fused.fused.weights) == 2 * 2  # per layer: its mixer, its MLP
    for shared in (None, HEAD):  # the fresh prefill and the suffix prefill after a cached head
        got = fused.generate_tokens(prompts, shared=shared)
        expected = Generator(hybrid.model, hybrid.tokenizer, _config(prefix_cache=False)).generate_tokens(prompts)
        assert [r.tokens for r in got] == [r.tokens for r in expected]
        for a, b in zip(got, expected):
            torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), rtol=0, atol=1e-4)
