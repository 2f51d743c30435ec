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
         "--no-graphs", "--out", str(out)],
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


def test_the_bf16_padding_check_runs_against_the_installed_package(tmp_path: Path) -> None:
    """Every case of ``scripts/bf16_padding_nan.py`` (kernels, padded forwards, sampled ``generate`` of procedural
    prompts); on the CPU no case meets NaN."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bf16_padding_nan.py"), "--episodes", "2"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    forwards = [line for line in lines if "NaN at real positions" in line]
    sampled = [line for line in lines if line.startswith("sampled generate")]
    assert len(forwards) >= 3 * 3 * 2 and len(sampled) >= 6, proc.stdout[-2000:]
    assert all(line.endswith("NaN at real positions 0, at pad positions 0") for line in forwards)
    assert all(line.endswith(": ok") for line in sampled)
