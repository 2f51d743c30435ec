"""Latency of the learned-agent decoding path on a model of the Qwen3.5-0.8B architecture.

Random weights (no hub here); the shapes, not the values, set the cost. Each call is forced to the
output length (``--output-tokens``; EOS suppressed, record-end stop off) from ``--input-tokens`` (950,
the paper's) input tokens. Targets: time to commitment p50 <= 0.25 s for Direct Short DSL
(79 output tokens) and <= 0.1 s for Factor-Code (19); >= 200 commitments/s at batch 64.

- time to commitment: two sequential calls at batch 1 (sender, then receiver), p50 / p95 over reps;
- commitments per second: two sequential calls of batch 64, greedy; then sampled (``do_sample``, the
  reinforcement-learning setting: temperature 1, top-p ``--top-p``, per-token log-probabilities) through
  the static path and through plain ``model.generate`` (``--sampled-reps``; 0 skips both), in the same
  run. Every sampled log-probability must be finite (a NaN or infinite one stops the run).

``--prefix-tokens N`` repeats both measurements with the first N input tokens of every prompt one
shared head (the shared prior, which prompts carry first: ``gencoord_env.agents.lm.prompt``): the
generator computes the head's state once (timed and printed apart: the one-off cost of a new prior)
and each call splices it in and prefills only the 950 - N suffix tokens. It prints both figures, full
prefill and prefix reuse, and their ratio, and the JSON keeps both (``prefix``); with ``--sampled-reps``
it also times sampled calls from the cached head (``sampled.static_prefix``: what GRPO's rollouts run, the
setting of the >= 200 commitments/s target), first, before the sampled calls without it. In the paper's
observations the prior is 57-72% of the text (mean 62%, the ``forward`` SFT set), so N = 590 of 950
is the realistic setting; the receiver's call shares its sender's prior. With ``--profile`` the split
of prefill / decode step also times the splice plus suffix prefill.

Prints the device, library versions and the kernels transformers bound for the Gated-DeltaNet layers,
and writes the raw numbers as JSON (``--out``; default ``$OUT/lm_latency.json`` when ``OUT`` is set).

Measured on one NVIDIA H100 80GB HBM3 (torch 2.11 cu130, transformers 5.24, fla 0.6.0), hybrid forward,
full prefill: time to commitment p50 0.308 s Direct / 0.079 s Factor-Code (prefill 5.4 ms, decode step
1.90 ms); batch 64: 60.3 / 105.8 commitments/s (prefill 200 ms, decode step 3.8 ms per call). A
commitment's two 950-token prefills are ~2.1 TFLOP, so 64 of them take >= 0.2 s of bf16 matrix work
at a realistic ~650 TFLOP/s before any decoding; as measured (2 x 200 ms per 64 commitments) the full
prefills alone cap the rate at 160/s, which is what prefix reuse removes. Prefix reuse
(``--prefix-tokens``) and the sampled rows: not yet measured on GPU.
Expected from the figures above, not measured: the suffix prefill scales with the suffix (~0.4 of the
prompt at N = 590), so Factor-Code at batch 64 should clear 200/s, while Direct stays bound by its
decode steps (79 per call) at both batch sizes.

    python benchmarks/lm_latency.py --output-tokens 79 --prefix-tokens 590   # on a CUDA machine
    python benchmarks/lm_latency.py --tiny --reps 3 --prefix-tokens 600      # smoke run on a CPU
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import statistics
import time
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM

from gencoord_env.agents.lm.generate import _PREFILL_BUCKET, GenerationConfig, Generator, kernel_report
from gencoord_env.agents.lm.hybrid import HybridState, hybrid_forward, supports_hybrid
from gencoord_env.agents.lm.loading import build_qwen35_08b_config, build_tiny, train_tokenizer


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _prompts(generator: torch.Generator, count: int, length: int, vocab: int, avoid: set[int], head: list[int] | None = None) -> list[list[int]]:
    """``count`` random prompts of ``length`` tokens; with ``head``, each starts with it (a shared prior)."""
    head = head or []
    ids = torch.randint(16, vocab, (count, length - len(head)), generator=generator)
    for token in avoid:
        ids[ids == token] = 16
    return [head + row for row in ids.tolist()]


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _profile(fast: Generator, rng: torch.Generator, vocab: int, avoid: set[int], args: argparse.Namespace) -> dict[str, object]:
    """Prefill time, time per decode step (graph replay) and the kernels of one eager step, per batch size."""
    from torch.profiler import ProfilerActivity, profile

    report: dict[str, object] = {}
    width = -(-args.input_tokens // _PREFILL_BUCKET) * _PREFILL_BUCKET if fast._graphs else args.input_tokens
    for batch in (1, args.batch):
        ids, mask = fast._left_pad(_prompts(rng, batch, args.input_tokens, vocab, avoid), width)
        decoder = fast._decoder(batch, ((width + args.output_tokens + 255) // 256) * 256)
        with torch.inference_mode():
            ids, mask = ids.to(decoder.device), mask.to(decoder.device)
            prefill, step = [], []
            for _ in range(3):
                _sync()
                t0 = time.perf_counter()
                decoder._prefill(ids, mask)
                _sync()
                t1 = time.perf_counter()
                for _ in range(args.output_tokens - 1):
                    decoder.graph.replay() if decoder.graph is not None else decoder._decode()
                _sync()
                prefill.append(t1 - t0)
                step.append((time.perf_counter() - t1) / (args.output_tokens - 1))
            cuda = decoder.device.type == "cuda"
            activities = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
            key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
            with profile(activities=activities) as prof:
                decoder._prefill(ids, mask)
                _sync()
            prefill_table = prof.key_averages().table(sort_by=key, row_limit=14, max_name_column_width=70)
            with profile(activities=activities) as prof:
                for _ in range(4):
                    decoder._step()
                _sync()
            step_table = prof.key_averages().table(sort_by=key, row_limit=18, max_name_column_width=70)
            # The step as the graph runs it (compiled, fused kernels), outside the graph so its kernels show.
            with profile(activities=activities) as prof:
                for _ in range(4):
                    decoder._decode()
                _sync()
            compiled_table = prof.key_averages().table(sort_by=key, row_limit=24, max_name_column_width=70)
        report[f"batch{batch}"] = {"prefill_s": min(prefill), "step_s": min(step)}
        print(f"[profile] batch {batch}: prefill {min(prefill) * 1000:.1f} ms, decode step {min(step) * 1000:.2f} ms")
        if args.prefix_tokens and fast.prefixes is not None:
            # Splice a cached head into every row, then prefill the suffixes (what a call with reuse does first).
            head = _prompts(rng, 1, args.prefix_tokens, vocab, avoid)[0]
            entry = fast.prefixes.get(tuple(head))
            prompts = _prompts(rng, batch, args.input_tokens, vocab, avoid, head)
            s_ids, s_mask, layout, cache_len = fast._suffix_batch(prompts, [entry] * batch)
            suffix_decoder = fast._decoder(batch, cache_len)
            timings = []
            with torch.inference_mode():
                for _ in range(3):
                    _sync()
                    t0 = time.perf_counter()
                    suffix_decoder._extend(s_ids.to(suffix_decoder.device), s_mask.to(suffix_decoder.device), layout)
                    _sync()
                    timings.append(time.perf_counter() - t0)
            report[f"batch{batch}"]["splice_and_suffix_prefill_s"] = min(timings)  # type: ignore[index]
            print(f"[profile] batch {batch}: splice {args.prefix_tokens}-token head + prefill "
                  f"{s_ids.shape[1]}-wide suffixes {min(timings) * 1000:.1f} ms")
        print(f"[profile] batch {batch} prefill kernels\n{prefill_table}")
        print(f"[profile] batch {batch} eager decode kernels (4 steps)\n{step_table}", flush=True)
        print(f"[profile] batch {batch} compiled decode kernels (4 steps)\n{compiled_table}", flush=True)
    return report


def _batch_throughput(
    gen: Generator, rng: torch.Generator, vocab: int, avoid: set[int], args: argparse.Namespace, label: str,
    head: list[int] | None = None,
) -> dict[str, object]:
    """Commitments per second: ``batch`` envs, each one sender call then one receiver call; with ``head``
    every prompt starts with it and the generator starts from its cached state."""
    shared = len(head) if head else None

    def call() -> list:
        return gen.generate_tokens(_prompts(rng, args.batch, args.input_tokens, vocab, avoid, head), shared=shared)

    start = time.perf_counter()
    call()
    _sync()
    warmup_s = time.perf_counter() - start
    pairs, calls = [], []
    for _ in range(args.batch_reps):
        _sync()
        t0 = time.perf_counter()
        first = call()
        t1 = time.perf_counter()
        second = call()
        pairs.append(time.perf_counter() - t0)
        calls += [t1 - t0, pairs[-1] - (t1 - t0)]
        assert all(r.output_tokens == args.output_tokens for r in first + second)
    if gen.config.do_sample:  # what RL trains on must be finite
        bad = [r for r in first + second if r.logprobs is None or not all(map(math.isfinite, r.logprobs))]
        if bad:
            raise FloatingPointError(f"{label}: {len(bad)} of {2 * args.batch} sampled records have non-finite log-probabilities")
    result = {
        "batch": args.batch,
        "label": label,
        "warmup_s": round(warmup_s, 2),
        "pair_p50_s": statistics.median(pairs),
        "call_p50_s": statistics.median(calls),
        "commitments_per_s": args.batch / statistics.median(pairs),
        "pair_s": pairs,
    }
    print(
        f"batch {args.batch} ({label}): two calls p50 {result['pair_p50_s']:.3f} s (per call {result['call_p50_s'] * 1000:.0f} ms, "
        f"warm-up {warmup_s:.1f} s) -> {result['commitments_per_s']:.1f} commitments/s",
        flush=True,
    )
    return result


def _time_to_commitment(
    gen: Generator, rng: torch.Generator, vocab: int, avoid: set[int], args: argparse.Namespace, label: str,
    head: list[int] | None = None,
) -> dict[str, object]:
    """Two sequential batch-1 calls (sender, then receiver), p50 / p95 over ``args.reps``; with ``head``
    both prompts start with it (both agents of an episode see the same prior)."""
    shared = len(head) if head else None

    def call() -> list:
        return gen.generate_tokens(_prompts(rng, 1, args.input_tokens, vocab, avoid, head), shared=shared)

    start = time.perf_counter()
    for _ in range(args.warmup):
        call()
    _sync()
    warmup_s = time.perf_counter() - start
    pairs, calls, out_tokens = [], [], set()
    for _ in range(args.reps):
        _sync()
        t0 = time.perf_counter()
        first = call()
        t1 = time.perf_counter()
        second = call()
        t2 = time.perf_counter()
        pairs.append(t2 - t0)
        calls += [t1 - t0, t2 - t1]
        out_tokens.update(r.output_tokens for r in first + second)
    result = {
        "label": label,
        "warmup_s": round(warmup_s, 2),
        "commit_p50_s": statistics.median(pairs),
        "commit_p95_s": _percentile(pairs, 95),
        "call_p50_s": statistics.median(calls),
        "output_tokens_seen": sorted(out_tokens),
        "commit_s": pairs,
    }
    print(
        f"batch 1 ({label}): time to commitment p50 {result['commit_p50_s']:.3f} s  p95 {result['commit_p95_s']:.3f} s  "
        f"(per call p50 {result['call_p50_s'] * 1000:.1f} ms, {len(pairs)} reps, warm-up {warmup_s:.1f} s, "
        f"output tokens {sorted(out_tokens)})",
        flush=True,
    )
    return result


def _prefix_comparison(
    gen: Generator, head: list[int], rng: torch.Generator, vocab: int, avoid: set[int], args: argparse.Namespace,
    b1: dict[str, object], bn: dict[str, object],
) -> dict[str, object]:
    """The same measurements with ``head`` (``--prefix-tokens`` of each prompt) shared, its state cached."""
    _sync()
    start = time.perf_counter()
    assert gen.prefixes is not None, "the prefix cache is off for this model / backend"
    gen.prefixes.get(tuple(head))  # the one-off cost of a new prior: one batch-1 prefill of the head
    _sync()
    head_s = time.perf_counter() - start
    print(f"shared head of {args.prefix_tokens} tokens: computed once in {head_s * 1000:.1f} ms "
          f"({gen.prefixes.get(tuple(head)).nbytes / 2**20:.1f} MiB)", flush=True)
    agreement = _prefix_agreement(gen, head, rng, vocab, avoid, args)
    print(f"prefix reuse against a full prefill, same prompts, greedy: {json.dumps(agreement)}", flush=True)
    label = f"prefix reuse, {args.prefix_tokens} of {args.input_tokens} tokens shared"
    reuse_b1 = _time_to_commitment(gen, rng, vocab, avoid, args, label, head) if b1 else {}
    reuse_bn = _batch_throughput(gen, rng, vocab, avoid, args, label, head)
    ttc_ratio = float(b1["commit_p50_s"]) / float(reuse_b1["commit_p50_s"]) if b1 else None
    rate_ratio = float(reuse_bn["commitments_per_s"]) / float(bn["commitments_per_s"])
    print(
        f"prefix reuse ({args.prefix_tokens} of {args.input_tokens} tokens shared): "
        + (f"time to commitment p50 {reuse_b1['commit_p50_s']:.3f} s vs {b1['commit_p50_s']:.3f} s full prefill "
           f"({ttc_ratio:.2f}x faster); " if b1 else "")
        + f"batch {args.batch}: {reuse_bn['commitments_per_s']:.1f} vs {bn['commitments_per_s']:.1f} commitments/s ({rate_ratio:.2f}x)",
        flush=True,
    )
    return {
        "prefix_tokens": args.prefix_tokens,
        "head_prefill_s": head_s,
        "agreement": agreement,
        "batch1": reuse_b1,
        "batchN": reuse_bn,
        "commit_p50_ratio": ttc_ratio,
        "commitments_per_s_ratio": rate_ratio,
    }


def _prefix_agreement(gen: Generator, head: list[int], rng: torch.Generator, vocab: int, avoid: set[int],
                      args: argparse.Namespace, rows: int = 8) -> dict[str, object]:
    """Greedy tokens of ``rows`` prompts (the head, then suffixes of different lengths) decoded from the cached
    head state and from a full prefill of the same prompts (eager decoding): how many leading tokens each row shares.

    Beside it, the same count for two full prefills that differ only in batching (each row alone against the
    batch): the floor that precision sets. A model with near-flat logits (random weights) in bf16 changes its
    greedy choice under any change of summation order, with or without a cached head (seen on the CPU as on
    the GPU); reuse is wrong only where it diverges much earlier than that floor."""
    suffix = args.input_tokens - args.prefix_tokens
    prompts = [head + p for p in _prompts(rng, rows, suffix, vocab, avoid)]
    prompts = [p[: len(p) - 7 * k] for k, p in enumerate(prompts)]  # suffixes of different lengths: padding too
    # Eager decoding (no graphs, no compile): the check is of what the tokens are, and each new shape under
    # compilation costs a minute of warm-up; the cached head and its splice are the same either way.
    eager = dict(cuda_graphs=False, compile_decode=False, compile_prefill=False)
    gen = Generator(gen.model, gen.tokenizer, dataclasses.replace(gen.config, **eager))
    reused = gen.generate_tokens(prompts, shared=len(head))
    plain = Generator(gen.model, gen.tokenizer, dataclasses.replace(gen.config, prefix_cache=False))
    full = plain.generate_tokens(prompts)
    alone = [plain.generate_tokens([p])[0] for p in prompts]

    def leading(a: list, b: list) -> list[int]:
        return [next((i for i, (x, y) in enumerate(zip(r.tokens, s.tokens)) if x != y), len(r.tokens)) for r, s in zip(a, b)]

    return {"rows": rows, "tokens_per_row": len(full[0].tokens), "identical_rows": sum(x.tokens == y.tokens for x, y in zip(reused, full)),
            "leading_identical_tokens": leading(reused, full),
            "floor_identical_rows": sum(x.tokens == y.tokens for x, y in zip(alone, full)),
            "floor_leading_identical_tokens": leading(alone, full)}


def _prefill_agreement(model: torch.nn.Module, prompt: list[int], device: torch.device) -> dict[str, float]:
    """Last-position logits of the hybrid prefill against transformers' forward on the same prompt."""
    with torch.inference_mode():
        ids = torch.tensor([prompt], device=device)
        ref = model(input_ids=ids, logits_to_keep=1).logits[:, -1].float()
        state = HybridState.allocate(model, batch=1, cache_len=len(prompt) + 8)
        positions = torch.arange(len(prompt), device=device)[None]
        got = hybrid_forward(model, state, ids, positions, positions[0], decode=False).float()
    return {
        "prefill_logits_rel_err": float((got - ref).norm() / ref.norm()),
        "prefill_argmax_equal": bool(got.argmax() == ref.argmax()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input-tokens", type=int, default=950)
    parser.add_argument("--output-tokens", type=int, default=79)
    parser.add_argument("--reps", type=int, default=30, help="timed commitments at batch 1")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--batch-reps", type=int, default=5)
    parser.add_argument("--baseline-reps", type=int, default=2, help="plain model.generate calls at batch 1 (0: skip)")
    parser.add_argument("--sampled-reps", type=int, default=2,
                        help="timed pairs of sampled calls at batch N, static path and plain model.generate (0: skip)")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus of the sampled calls (default: 1.0, TRL's default)")
    parser.add_argument("--sampled-paths", nargs="+", choices=["prefix", "static", "generate"], default=["prefix", "static", "generate"],
                        help="which sampled measurements run (prefix: the static path from the cached head, with --prefix-tokens)")
    parser.add_argument("--float32-agreement", action="store_true",
                        help="last: the model in float32, greedy tokens from the cached head against a full prefill (eager decoding)")
    parser.add_argument("--no-graphs", action="store_true", help="decode without CUDA graphs")
    parser.add_argument("--no-compile", action="store_true", help="capture the eager decode step and prefill (no torch.compile)")
    parser.add_argument("--no-hybrid", action="store_true", help="decode through transformers' forward, not gencoord_env.agents.lm.hybrid")
    parser.add_argument(
        "--state-variant", action="store_true", help="also time batch N with the recurrent state kept in the model dtype"
    )
    parser.add_argument(
        "--fuse-projections", action="store_true",
        help="one matrix multiply per layer for projections that read the same input (GenerationConfig.fuse_projections)",
    )
    parser.add_argument(
        "--prefix-tokens", type=int, default=0,
        help="also time every measurement with this many of the input tokens a shared head whose state is cached (0: skip)",
    )
    parser.add_argument("--tiny", action="store_true", help="a tiny Qwen3.5 instead of the 0.8B shape (CPU smoke)")
    parser.add_argument("--profile", action="store_true", help="split prefill / decode time and list the top GPU kernels")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not 0 <= args.prefix_tokens < args.input_tokens:
        parser.error(f"--prefix-tokens must be in [0, --input-tokens={args.input_tokens}), got {args.prefix_tokens}")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    corpus = [f"SELF resource.obtain(q={i % 9},item=oak_log)\nREQ agent_b craft.item(q=1,item=stick)" for i in range(200)]
    torch.manual_seed(0)
    start = time.perf_counter()
    if args.tiny:
        lm = build_tiny(corpus, arch="qwen3_5", device=device, dtype=dtype)
        model, tokenizer = lm.model, lm.tokenizer
    else:
        tokenizer = train_tokenizer(corpus)
        config = build_qwen35_08b_config(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
    build_s = time.perf_counter() - start
    params = sum(p.numel() for p in model.parameters())
    vocab = model.get_output_embeddings().weight.shape[0]
    fixed = dict(max_new_tokens=args.output_tokens, min_new_tokens=args.output_tokens, stop_at_record_end=False)
    fast_config = GenerationConfig(
        **fixed,
        backend="static",
        cuda_graphs=not args.no_graphs,
        compile_decode=False if args.no_compile else None,
        hybrid=False if args.no_hybrid else None,
        prefix_cache=True,
        min_prefix_tokens=1,  # the benchmark says what is shared (--prefix-tokens); calls without it prefill all
        fuse_projections=args.fuse_projections,
    )
    fast = Generator(model, tokenizer, fast_config)
    avoid = set(fast.eos_ids)
    rng = torch.Generator().manual_seed(1)

    info = {
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "dtype": str(dtype),
        "params": params,
        "model_build_s": round(build_s, 2),
        "kernels": kernel_report(),
        "backend": fast.backend,
        "cuda_graphs": not args.no_graphs and device.type == "cuda",
        "compiled_decode": not args.no_compile and not args.no_graphs and device.type == "cuda",
        "hybrid_forward": not args.no_hybrid and supports_hybrid(model),
        "fused_projections_bytes": fast.fused.nbytes if fast.fused is not None else 0,
        "input_tokens": args.input_tokens,
        "output_tokens": args.output_tokens,
    }
    print(json.dumps(info, indent=1), flush=True)

    # ---- batch 1: time to commitment = two sequential calls (--reps 0: skipped)
    b1 = _time_to_commitment(fast, rng, vocab, avoid, args, "full prefill") if args.reps > 0 else {}

    # ---- batch N: commitments per second over two sequential calls
    bn = _batch_throughput(fast, rng, vocab, avoid, args, "float32 recurrent state")
    head = _prompts(rng, 1, args.prefix_tokens, vocab, avoid)[0] if args.prefix_tokens else None
    prefix = _prefix_comparison(fast, head, rng, vocab, avoid, args, b1, bn) if head else {}
    variant: dict[str, object] = {}
    if args.state_variant:
        bf16_state = Generator(model, tokenizer, dataclasses.replace(fast_config, recurrent_state="model"))
        variant = _batch_throughput(bf16_state, rng, vocab, avoid, args, f"{dtype} recurrent state")
        del bf16_state

    # ---- batch N, sampled (reinforcement learning): the static path and plain model.generate, same prompts' shape
    sampled: dict[str, object] = {}
    if args.sampled_reps > 0:
        reps = argparse.Namespace(**{**vars(args), "batch_reps": args.sampled_reps})
        sampling = dict(do_sample=True, temperature=1.0, top_p=args.top_p, seed=0)
        static_sampler = Generator(model, tokenizer, dataclasses.replace(fast_config, **sampling))
        if head and "prefix" in args.sampled_paths:  # what GRPO's rollouts run: sampled, every prompt after the shared prior
            sampled["static_prefix"] = _batch_throughput(static_sampler, rng, vocab, avoid, reps,
                                                         "sampled, static path, prefix reuse", head)
            print(f"batch {args.batch} sampled with prefix reuse ({args.prefix_tokens} of {args.input_tokens} tokens "
                  f"shared): {sampled['static_prefix']['commitments_per_s']:.1f} commitments/s (target >= 200)", flush=True)
        if "static" in args.sampled_paths:
            sampled["static"] = _batch_throughput(static_sampler, rng, vocab, avoid, reps, "sampled, static path")
        del static_sampler
        if "generate" in args.sampled_paths:
            plain_sampler = Generator(model, tokenizer, GenerationConfig(**fixed, backend="generate", **sampling))
            sampled["generate"] = _batch_throughput(plain_sampler, rng, vocab, avoid, reps, "sampled, plain model.generate")
            del plain_sampler
        print(f"batch {args.batch} sampled: " + ", ".join(f"{k} {v['commitments_per_s']:.1f}" for k, v in sampled.items())
              + f" commitments/s (greedy static {bn['commitments_per_s']:.1f})", flush=True)

    # ---- reference: plain model.generate at batch 1, and agreement of the two paths
    baseline: dict[str, object] = {}
    if args.baseline_reps > 0:
        plain = Generator(model, tokenizer, GenerationConfig(**fixed, backend="generate"))
        prompt = _prompts(rng, 1, args.input_tokens, vocab, avoid)
        plain.generate_tokens(prompt)
        times = []
        for _ in range(args.baseline_reps):
            _sync()
            t0 = time.perf_counter()
            ref = plain.generate_tokens(prompt)
            times.append(time.perf_counter() - t0)
        with torch.inference_mode():
            ids = torch.tensor(prompt, device=device)
            ref_ids = model.generate(
                input_ids=ids, do_sample=False, max_new_tokens=args.output_tokens,
                min_new_tokens=args.output_tokens, pad_token_id=fast.pad_id,
            )[0, args.input_tokens :].tolist()
        fast_ids = fast._decode_static(prompt)[0][0]  # (rows, logprobs): the first row
        agree = next((i for i, (a, b) in enumerate(zip(ref_ids, fast_ids)) if a != b), len(ref_ids))
        baseline = {"generate_call_s": times, "identical_prefix_tokens": agree, "compared_tokens": len(ref_ids)}
        if supports_hybrid(model):
            baseline.update(_prefill_agreement(model, prompt[0], device))
        print(
            f"plain generate batch 1: {statistics.median(times):.3f} s per call; static path agrees on the first "
            f"{agree}/{len(ref_ids)} greedy tokens; {json.dumps({k: v for k, v in baseline.items() if k.startswith('prefill')})}",
            flush=True,
        )
        del ref

    info["decode_graphs"] = fast.graph_status()
    print(f"decode step per shape: {info['decode_graphs']}")
    profile = _profile(fast, rng, vocab, avoid, args) if args.profile else {}
    if baseline and supports_hybrid(model) and device.type == "cuda":
        # bf16 rounding through 24 random-weight layers moves near-tied logits; in float32 both forwards
        # must agree closely if they compute the same function. Last: it replaces the weights under the
        # captured graphs.
        fast._decoders.clear()
        baseline["float32"] = _prefill_agreement(model.float(), prompt[0], device)
        print(f"float32 prefill agreement: {baseline['float32']}", flush=True)
    agreement32: dict[str, object] = {}
    out = args.out or (Path(os.environ["OUT"]) / "lm_latency.json" if os.environ.get("OUT") else None)
    if out is not None:  # the timings first: the float32 check below must not be able to lose them
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"info": info, "profile": profile, "batch1": b1, "batchN": bn, "prefix": prefix,
                                   "batchN_state_variant": variant, "baseline": baseline, "batchN_sampled": sampled}, indent=1))
    if args.float32_agreement and head:
        # Reuse against a full prefill where precision cannot hide a difference: bf16 rounding moves near-tied
        # logits of a random-weight model under any change of summation order (the floor printed above).
        fast._decoders.clear()
        model32 = model.float()
        try:
            gen32 = Generator(model32, tokenizer, fast_config)
            agreement32 = _prefix_agreement(gen32, head, rng, vocab, avoid, args)
        except Exception as exc:  # noqa: BLE001 - reported; the timings are already written
            agreement32 = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
        print(f"float32: prefix reuse against a full prefill, same prompts, greedy: {json.dumps(agreement32)}", flush=True)
    result = {
        "info": info, "profile": profile, "batch1": b1, "batchN": bn, "prefix": prefix, "batchN_state_variant": variant,
        "baseline": baseline, "batchN_sampled": sampled, "prefix_agreement_float32": agreement32,
    }
    if out is not None:
        out.write_text(json.dumps(result, indent=1))
        print(f"wrote {out}")
    print(
        f"SUMMARY device={info['device']} torch={info['torch']} transformers={info['transformers']} "
        + (f"commit_p50={b1['commit_p50_s']:.3f}s commit_p95={b1['commit_p95_s']:.3f}s " if b1 else "")
        + f"batch{args.batch}={bn['commitments_per_s']:.1f}/s"
        + (f" batch{args.batch}_model_dtype_state={variant['commitments_per_s']:.1f}/s" if variant else "")
        + (f" prefix{args.prefix_tokens}_commit_p50={prefix['batch1']['commit_p50_s']:.3f}s" if prefix and prefix["batch1"] else "")
        + (f" prefix{args.prefix_tokens}_batch{args.batch}={prefix['batchN']['commitments_per_s']:.1f}/s" if prefix else "")
        + "".join(f" batch{args.batch}_sampled_{k}={sampled[k]['commitments_per_s']:.1f}/s" for k in ("static", "generate") if k in sampled)
        + (f" prefix{args.prefix_tokens}_batch{args.batch}_sampled_static={sampled['static_prefix']['commitments_per_s']:.1f}/s"
           if "static_prefix" in sampled else "")
        + (f" float32_prefix_identical_rows={agreement32['identical_rows']}/{agreement32['rows']}" if "rows" in agreement32 else "")
        + f" graphs={info['cuda_graphs']} hybrid={info['hybrid_forward']} fused={args.fuse_projections}"
    )


if __name__ == "__main__":
    main()
