"""Wall time of one SFT run of the Qwen3.5-0.8B architecture (random weights) on the forward rows.

The paper's budget is 240 optimizer steps (1,920 rows, two epochs, effective batch 16); the target on an
H100 is at most 3 minutes. Weights are random and the tokenizer is the offline BPE (shorter prompts than
the Qwen tokenizer's ~950 tokens), so this times the optimizer work, not learning.

    python benchmarks/sft_step_time.py --steps 240
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=240)
    p.add_argument("--data", help="forward.jsonl (default: built into a temporary directory)")
    p.add_argument("--arch", default="qwen3_5_08b", choices=["qwen3_5_08b", "qwen3_5", "qwen3"])
    a = p.parse_args()

    from gencoord_env.agents.lm.generate import kernel_report
    from gencoord_env.train.data import build_all
    from gencoord_env.train.sft import ScratchConfig, SFTConfig, train

    with tempfile.TemporaryDirectory() as tmp:
        data = a.data or os.path.join(tmp, "forward.jsonl")
        if not a.data:
            build_all(tmp, ["forward"])
        t0 = time.perf_counter()
        # A line every 10 steps, so a run stopped early still says how fast it went.
        result = train(SFTConfig(data=(data,), out_dir=os.path.join(tmp, "run"), scratch=ScratchConfig(arch=a.arch),
                                 max_steps=a.steps, save=False, progress=False),
                       on_log=lambda step, loss, sec: print(f"step {step:4d} loss {loss:.4f} {sec:7.1f} s", flush=True))
        total = time.perf_counter() - t0
    prov = result.provenance
    exposure = prov["token_exposure"]
    print(json.dumps({
        "device": prov["libraries"]["device_name"],
        "arch": a.arch,
        "parameters": prov["base_model"]["parameters"],
        "optimizer_steps": prov["optimizer_steps"],
        "train_seconds": round(prov["train_seconds"], 2),
        "seconds_per_step": round(prov["train_seconds"] / prov["optimizer_steps"], 4),
        "tokens_per_second": round(exposure["total_tokens"] / prov["train_seconds"]),
        "mean_tokens_per_row": round(exposure["total_tokens"] / exposure["samples"], 1),
        "wall_seconds_with_setup": round(total, 2),
        "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None,
        "precision": prov["precision"],
        "loss_first": round(prov["loss_first"], 4),
        "loss_final": round(prov["loss_final"], 4),
        "kernels": kernel_report(),
    }, indent=2))


if __name__ == "__main__":
    main()
