"""SFT throughput of the Qwen3.5-0.8B architecture (random weights) on the forward rows, every batching path
side by side in one run, and the GPU time of every learned table and of ``train transfer`` at that shape.

Variants (``--variants``; each a ``train`` run of ``--steps`` optimizer steps of the paper's effective batch,
16 rows, unless it says otherwise; a variant that fails is reported and the others still run):

- ``today``: micro-batch 4 x accumulation 4, rows padded to the longest of their micro-batch in drawn order
  (the path every run took before packing);
- ``bucketed``: the same, rows of like length sharing a micro-batch (the padded default now);
- ``micro16``: one padded micro-batch of 16 rows;
- ``packed``: the step's rows packed into one sequence (``gencoord_env.train.packed``: fla's Gated-DeltaNet
  kernels with ``cu_seqlens``, varlen flash attention), no padding;
- ``packed-b32``: packed, 32 rows a step (twice the paper's batch: what a larger step buys).

Throughput is steady state: tokens (prompt and target, padding excluded) over the steps after ``--warmup``
(the first steps compile and autotune kernels), with every step synchronised. Peak memory is per variant.
Every variant starts from the same weights and draws the same first step, so their first losses agree
(bf16) when they compute the same function: printed side by side. Weights are random and the tokenizer is
the offline BPE (prompts ~600 tokens against the Qwen tokenizer's ~950), so this times the optimizer's work,
not learning; ``--plan`` scales the token counts to the Qwen tokenizer's (``--prompt-tokens``, the paper's
949 per Direct decision) and turns them into GPU time: every model's steps at the fastest variant's rate,
plus every evaluation decision at ``--decisions-per-s`` (``lm_latency.py``'s batched greedy rate; pass its
JSON with ``--latency``).

    python benchmarks/sft_step_time.py --steps 12 --plan --latency lm_latency.json   # on a CUDA machine
    python benchmarks/sft_step_time.py --arch qwen3_5 --hidden-size 32 --layers 2 --steps 2 --warmup 0 --variants today packed  # CPU
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
import traceback
from pathlib import Path

import torch

VARIANTS: dict[str, dict[str, object]] = {
    "today": {"micro_batch": 4, "grad_accum": 4, "bucket": False},
    "bucketed": {"micro_batch": 4, "grad_accum": 4, "bucket": True},
    "micro16": {"micro_batch": 16, "grad_accum": 1},
    "packed": {"micro_batch": 16, "grad_accum": 1, "packing": True, "pack_tokens": 16384},
    "packed-b32": {"micro_batch": 32, "grad_accum": 1, "packing": True, "pack_tokens": 32768},
}


def _steady(pace: dict[str, list], warmup: int) -> tuple[float, float]:
    """Tokens per second over the logged steps after ``warmup``, and the seconds per step there."""
    steps, seconds, tokens = pace["steps"], pace["seconds"], pace["tokens"]
    k = min(warmup, len(steps) - 2)
    span = seconds[-1] - seconds[k]
    return (tokens[-1] - tokens[k]) / span, span / (steps[-1] - steps[k])


def run_variant(name: str, data: str, arch: str, steps: int, warmup: int, device: str | None,
                hidden_size: int = 256, layers: int = 4) -> dict[str, object]:
    from gencoord_env.train.sft import ScratchConfig, SFTConfig, train

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    with tempfile.TemporaryDirectory() as tmp:
        config = SFTConfig(data=(data,), out_dir=tmp, scratch=ScratchConfig(arch=arch, hidden_size=hidden_size, num_layers=layers), max_steps=steps, save=False,
                           progress=False, fit_rows=0, log_every=1, deterministic=False, device=device,
                           **VARIANTS[name])  # type: ignore[arg-type]
        t0 = time.perf_counter()
        result = train(config, on_log=lambda step, loss, sec: print(f"  [{name}] step {step:3d} loss {loss:.4f} {sec:7.1f} s", flush=True))
        wall = time.perf_counter() - t0
    prov = result.provenance
    rate, per_step = _steady(prov["pace"], warmup)
    out = {
        "variant": name, **{k: v for k, v in VARIANTS[name].items()},
        "tokens_per_second": round(rate), "seconds_per_step": round(per_step, 4),
        "rows_per_step": config.micro_batch * config.grad_accum,
        "mean_tokens_per_row": round(prov["token_exposure"]["total_tokens"] / prov["token_exposure"]["samples"], 1),
        "first_step_seconds": round(prov["pace"]["seconds"][0], 2), "wall_seconds": round(wall, 1),
        "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None,
        "loss_first": round(prov["loss_first"], 4), "loss_final": round(prov["loss_final"], 4),
        "batches": prov["batches"], "parameters": prov["base_model"]["parameters"], "device": prov["libraries"]["device_name"],
        "precision": prov["precision"],
    }
    del result
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return out


# ------------------------------------------------------------------------------------------- the plan


def _set_tokens(tmp: str, sets: list[str], prompt_tokens: float) -> dict[str, dict[str, float]]:
    """Rows and mean tokens per row of each set, prompts scaled to ``prompt_tokens`` per forward prompt."""
    from gencoord_env.agents.lm.loading import train_tokenizer
    from gencoord_env.agents.lm.policy import prompt_text
    from gencoord_env.train.data import build_all, load_rows, procedural_rows

    build_all(tmp, sets)
    rows = {s: load_rows(Path(tmp) / f"{s}.jsonl") for s in sets}
    rows["procedural"] = procedural_rows(400, workers=min(8, os.cpu_count() or 1))
    tok = train_tokenizer([r.prompt + "\n" + r.target for rs in rows.values() for r in rs[:400]], vocab_size=2048)

    def mean(texts: list[str]) -> float:
        return sum(len(x) for x in tok(texts, add_special_tokens=False)["input_ids"]) / len(texts)

    forward_prompt = mean([prompt_text(tok, r.prompt) for r in rows["forward"][:400]])
    scale = prompt_tokens / forward_prompt
    out = {}
    for s, rs in rows.items():
        sample = rs[:400]
        out[s] = {"rows": len(rs), "prompt_tokens": mean([prompt_text(tok, r.prompt) for r in sample]) * scale,
                  "target_tokens": mean([r.target for r in sample]) + 1}
    out["_scale"] = {"offline_forward_prompt_tokens": forward_prompt, "scale": scale}  # type: ignore[dict-item]
    return out


def plan(rate: float, decisions_per_s: float, prompt_tokens: float, seeds: int = 3) -> dict[str, object]:
    """GPU seconds of every learned table (``train tables --init`` a 0.8B checkpoint: the paper's epochs) and of
    ``train transfer`` (its ``full`` budget's steps) at the 0.8B shape: training tokens over ``rate``, evaluation
    decisions over ``decisions_per_s``."""
    from gencoord_env.commands.experiments.runner import episode_indices
    from gencoord_env.tasks import pool as load_pool
    from gencoord_env.train.tables import MODELS, TABLES
    from gencoord_env.train.transfer import BACKENDS, BUDGETS, POOLS

    with tempfile.TemporaryDirectory() as tmp:
        sets = sorted({m.data for m in MODELS.values()} | {"factor_code"})
        tokens = _set_tokens(tmp, sets, prompt_tokens)

    def row_tokens(s: str) -> float:
        return tokens[s]["prompt_tokens"] + tokens[s]["target_tokens"]

    calls_per_episode = {"forward": 2.0, "single_step": 3.0, "feedback": 2.0, "centralized": 1.0}
    models: dict[str, dict[str, float]] = {}
    for name, m in MODELS.items():
        train_tokens = tokens[m.data]["rows"] * m.epochs * row_tokens(m.data)
        models[name] = {"train_s": train_tokens / rate, "train_tokens": train_tokens}
    tables: dict[str, dict[str, float]] = {}
    for name, t in TABLES.items():
        learned = {m for m in t.models.values()}
        decisions = 0.0
        for c in t.experiment.conditions:
            if c.name in t.models:
                route = "freeform" if c.surface == "freeform" else c.route
                decisions += len(episode_indices(c, None)) * calls_per_episode.get(route, 2.5)
        train_s = sum(models[m]["train_s"] for m in learned)
        tables[name] = {"models": sorted(learned), "train_s": seeds * train_s, "eval_decisions": seeds * decisions,
                        "eval_s": seeds * decisions / decisions_per_s}
    every_model = sum(models[m]["train_s"] for m in MODELS) * seeds
    every_eval = sum(t["eval_s"] for t in tables.values())
    b = BUDGETS["full"]
    transfer: dict[str, float] = {}
    pool_decisions = 0
    for pool_name in POOLS:  # two decisions an episode; a held-out pool again with the model in each role
        pool_decisions += 2 * 2 * len(load_pool(pool_name)) * (1 if pool_name == "train" else 3)
    pool_decisions += 2 * 2 * len(load_pool("heldout"))  # the decode check replays heldout
    for backend, (paper, _procedural) in BACKENDS.items():
        paper_row = row_tokens(paper)
        pre = b.pretrain_rows * b.pretrain_epochs * row_tokens("procedural")
        protocol = tokens[paper]["rows"] * b.protocol_epochs * paper_row
        finetune = tokens[paper]["rows"] * b.finetune_epochs * paper_row
        transfer[backend] = seeds * ((pre + protocol + finetune) / rate + 3 * pool_decisions / decisions_per_s)
    return {
        "assumptions": {"tokens_per_s": rate, "decisions_per_s": decisions_per_s, "seeds": seeds,
                        "prompt_tokens_per_forward_prompt": prompt_tokens, "token_scale": tokens["_scale"]},
        "models_train_s_per_seed": {k: round(v["train_s"], 1) for k, v in models.items()},
        "tables": {k: {**v, "train_s": round(v["train_s"], 1), "eval_s": round(v["eval_s"], 1),
                       "gpu_hours": round((v["train_s"] + v["eval_s"]) / 3600, 3)} for k, v in tables.items()},
        "every_table": {"train_s": round(every_model, 1), "eval_s": round(every_eval, 1),
                        "gpu_hours": round((every_model + every_eval) / 3600, 3),
                        "note": "each model trained once for every table that plays it"},
        "transfer": {k: {"gpu_s": round(v, 1), "gpu_hours": round(v / 3600, 3)} for k, v in transfer.items()},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12, help="optimizer steps per variant")
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the steady-state rate")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    p.add_argument("--data", help="forward.jsonl (default: built into a temporary directory)")
    p.add_argument("--arch", default="qwen3_5_08b", choices=["qwen3_5_08b", "qwen3_5"])
    p.add_argument("--device")
    p.add_argument("--hidden-size", type=int, default=256, help="with --arch qwen3_5: its width")
    p.add_argument("--layers", type=int, default=4, help="with --arch qwen3_5: its depth")
    p.add_argument("--plan", action="store_true", help="GPU time of every learned table and of train transfer")
    p.add_argument("--latency", type=Path, help="lm_latency.py's JSON: its batch-N greedy rate sets --decisions-per-s")
    p.add_argument("--decisions-per-s", type=float, default=134.0,
                   help="batched greedy model calls per second (default: 2 x 67 commitments/s, batch 64, one H200)")
    p.add_argument("--prompt-tokens", type=float, default=949.0, help="Qwen-tokenizer tokens of a forward prompt (the paper's)")
    p.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) / "sft_step_time.json" if os.environ.get("OUT") else None)
    a = p.parse_args()

    from gencoord_env.agents.lm.generate import kernel_report
    from gencoord_env.train.data import build_all

    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = a.data or os.path.join(tmp, "forward.jsonl")
        if not a.data:
            build_all(tmp, ["forward"])
        for name in a.variants:
            print(f"variant {name}: {VARIANTS[name]}", flush=True)
            try:
                results.append(run_variant(name, data, a.arch, a.steps, a.warmup, a.device, a.hidden_size, a.layers))
            except Exception as exc:  # noqa: BLE001 - one path failing must not hide the others' numbers
                traceback.print_exc()
                results.append({"variant": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"})
                gc.collect()
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
            print(json.dumps(results[-1]), flush=True)
    ok = [r for r in results if "error" not in r]
    report: dict[str, object] = {"variants": results, "kernels": kernel_report()}

    def write() -> None:  # after every stage: a later one failing leaves the earlier numbers
        if a.out:
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.write_text(json.dumps(report, indent=1) + "\n")

    print("\nvariant      tokens/s  s/step  peak GiB  first loss  first step s  error")
    for r in results:
        if "error" in r:
            print(f"{r['variant']:<12} {'-':>8} {'-':>7} {'-':>9} {'-':>11} {'-':>13}  {r['error'][:80]}")
        else:
            print(f"{r['variant']:<12} {r['tokens_per_second']:>8} {r['seconds_per_step']:>7} {r['peak_gpu_gib'] or '-':>9} "
                  f"{r['loss_first']:>11} {r['first_step_seconds']:>13}")
    if ok:
        best = max(ok, key=lambda r: float(r["tokens_per_second"]))  # type: ignore[arg-type]
        today = next((r for r in ok if r["variant"] == "today"), None)
        report["fastest"] = best["variant"]
        if today:
            report["speedup_over_today"] = round(float(best["tokens_per_second"]) / float(today["tokens_per_second"]), 2)  # type: ignore[arg-type]
        print(f"fastest: {report['fastest']}" + (f" ({report['speedup_over_today']}x today's)" if "speedup_over_today" in report else ""),
              flush=True)
    write()
    if ok and a.plan:
        try:
            per_s = a.decisions_per_s
            if a.latency and a.latency.is_file():
                per_s = 2 * float(json.loads(a.latency.read_text())["batchN"]["commitments_per_s"])
            report["plan"] = pl = plan(float(best["tokens_per_second"]), per_s, a.prompt_tokens)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - the timings above stand without it
            traceback.print_exc()
            return
        write()
        print(f"plan at {pl['assumptions']['tokens_per_s']:.0f} tokens/s and {pl['assumptions']['decisions_per_s']:.0f} decisions/s:")  # type: ignore[index]
        for k, v in pl["tables"].items():  # type: ignore[index]
            print(f"  table {k:<16} train {v['train_s']:>8.0f} s  eval {v['eval_s']:>7.0f} s  {v['gpu_hours']:.2f} GPU-h")
        print(f"  every table (each model once): {pl['every_table']['gpu_hours']:.2f} GPU-h")  # type: ignore[index]
        for k, v in pl["transfer"].items():  # type: ignore[index]
            print(f"  transfer {k:<12} {v['gpu_hours']:.2f} GPU-h")


if __name__ == "__main__":
    main()
