"""What the GPU runs execute, run on the CPU first, so a device call does not spend its time finding a broken
path. The latency benchmark on a tiny model: every measurement the GPU run reports (batch 1, batch N, prefix reuse, sampled with and without the cached
head, plain ``generate``, the agreement checks) runs and writes its figures; in float32 the cached head and a
full prefill give the same greedy tokens, and so do two full prefills batched differently (the floor)."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "lm_latency.py"


def test_every_measurement_runs_on_a_tiny_model(tmp_path: Path) -> None:
    out = tmp_path / "lm_latency.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--tiny", "--prefix-tokens", "590", "--reps", "1", "--batch-reps", "1",
         "--sampled-reps", "1", "--baseline-reps", "1", "--batch", "2", "--output-tokens", "8", "--no-compile",
         "--no-graphs", "--float32-agreement", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    agreement = result["prefix"]["agreement"]
    assert agreement["identical_rows"] == agreement["rows"] == 8
    assert agreement["floor_identical_rows"] == 8
    sampled = result["batchN_sampled"]
    assert set(sampled) == {"static_prefix", "static", "generate"}
    assert all(math.isfinite(s["commitments_per_s"]) and s["commitments_per_s"] > 0 for s in sampled.values())
    assert result["baseline"]["identical_prefix_tokens"] == result["baseline"]["compared_tokens"] == 8
    assert "prefix590_batch2_sampled_static=" in proc.stdout
    assert result["prefix_agreement_float32"]["identical_rows"] == 8 and "float32_prefix_identical_rows=8/8" in proc.stdout


def test_the_sft_benchmark_times_each_variant_side_by_side(tmp_path: Path) -> None:
    """Today's padded path and the packed one on a tiny Qwen3.5 in one run, from the same weights and first step."""
    out = tmp_path / "sft.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sft_step_time.py"), "--arch", "qwen3_5", "--hidden-size", "32", "--layers", "2", "--steps", "2",
                           "--warmup", "0", "--variants", "today", "packed", "--device", "cpu", "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(out.read_text())
    today, packed = report["variants"]
    assert today["variant"] == "today" and packed["variant"] == "packed" and "error" not in packed
    assert packed["batches"]["packing"] and today["tokens_per_second"] > 0 and packed["tokens_per_second"] > 0
    assert abs(packed["loss_first"] - today["loss_first"]) < 1e-3  # the same weights, the same first step
    assert report["fastest"] in {"today", "packed"} and "fastest:" in proc.stdout


def test_the_bf16_padding_check_runs_against_the_installed_package(tmp_path: Path) -> None:
    """Every case of ``scripts/bf16_padding_nan.py`` (kernels, padded forwards, sampled ``generate`` of procedural
    prompts) at sizes the CPU runs in seconds (the GPU sizes took 4 min here on a loaded machine and tell the CPU
    nothing more: its kernels return zeros for all-masked rows); on the CPU no case meets NaN."""
    pads = (0, 5, 24)
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bf16_padding_nan.py"), "--episodes", "1",
                           "--pads", ",".join(map(str, pads)), "--length", "16", "--hidden-size", "32", "--layers", "1",
                           "--new-tokens", "2"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    kernels = [line for line in lines if line.startswith("kernel ")]
    forwards = [line for line in lines if "NaN at real positions" in line]
    sampled = [line for line in lines if line.startswith("sampled generate")]
    assert len(kernels) == 4 * 2, proc.stdout[-2000:]  # four SDPA backends x fp32, bf16 (available or not)
    assert any("of 80 all-False rows 0 NaN, 80 zero" in line for line in kernels), proc.stdout[-2000:]
    # three implementations x the pad widths asked for x three precisions; two implementations x three precisions
    assert [line.split(":")[0].split()[2] for line in forwards] == [str(p) for _ in range(3) for p in pads for _ in range(3)]
    assert len(sampled) == 2 * 3, proc.stdout[-2000:]
    assert all(line.endswith("NaN at real positions 0, at pad positions 0") for line in forwards)
    assert all(line.endswith(": ok") for line in sampled)


def test_the_bf16_padding_check_names_a_bad_pad_list(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bf16_padding_nan.py"), "--pads", "0,wide"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    assert "--pads takes comma-separated integers such as 0,33,800, not '0,wide'" in proc.stderr
