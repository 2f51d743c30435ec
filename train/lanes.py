"""Lanes: independent chains of training and evaluation, several at once, each in a process of its own.

A lane is any picklable value; ``run_lanes(work, lanes, jobs, threads, done)`` calls ``work(lane)`` for
every lane, ``jobs`` at a time in spawned processes (spawned, so CUDA works in each), each process's CPU
thread pools limited to ``threads``. ``done(lane, result, error)`` runs in the calling process as each
lane ends: ``error`` is the traceback of a lane that raised (the other lanes still run). With
``jobs == 1`` the lanes run one after another in the calling process.

``lane_device("cuda", k)`` puts lane ``k`` on GPU ``k % count`` of a machine with several GPUs, so lanes
started together spread over them. ``versions()``, ``git_commit()`` and ``device_name()`` are the
provenance every lane-based command records (``gencoord train transfer``, ``gencoord train tables``).

Example::

    failures = run_lanes(run_lane, lanes, jobs=12, threads=1, done=lambda lane, result, error: print(lane, error))
"""
from __future__ import annotations

import multiprocessing
import os
import platform
import subprocess
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, TypeVar

import tokenizers
import torch
import transformers

import gencoord_env

from gencoord_env.errors import UsageError

__all__ = ["device_name", "git_commit", "lane_device", "run_lanes", "threads_per_lane", "versions"]

L = TypeVar("L")


def threads_per_lane(jobs: int) -> int:
    """CPU threads each of ``jobs`` concurrent lanes gets: the machine's cores shared evenly."""
    return max(1, (os.cpu_count() or 1) // jobs)


def lane_device(device: str | None, k: int) -> str | None:
    """``--device cuda`` on a machine of several GPUs spreads the lanes over them, round robin."""
    if device != "cuda":
        return device
    count = torch.cuda.device_count()
    return f"cuda:{k % count}" if count > 1 else device


def device_name(device: str | None) -> str:
    """The name of the device a lane ran on (``cpu`` when it had no GPU)."""
    on_cuda = device.startswith("cuda") if device else torch.cuda.is_available()
    return torch.cuda.get_device_name(torch.device(device or "cuda")) if on_cuda else "cpu"


def _init_worker(threads: int) -> None:
    # Before torch starts its thread pool: concurrent lanes share the cores. The tokenizers' pool stays
    # whole: lanes tokenize at their start, before their training loops compete for the cores.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    # cuBLAS reads it once, at the process's first use: before any lane's work (see sft._determinism)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def _on_lane_device(work: Callable[[L], dict[str, Any]], lane: L) -> dict[str, Any]:
    """``work(lane)`` with the lane's GPU current: a worker process runs lanes of several GPUs in turn, and
    whatever uses the current device (CUDA graphs and their streams) must see the lane's."""
    device = getattr(lane, "device", None)
    if device and str(device).startswith("cuda:"):
            torch.cuda.set_device(torch.device(device))
    return work(lane)


def run_lanes(work: Callable[[L], dict[str, Any]], lanes: Sequence[L], jobs: int, threads: int,
              done: Callable[[L, dict[str, Any] | None, str | None], None]) -> list[str]:
    """Run ``work`` on every lane, ``jobs`` at a time; returns one line per failed lane.

    ``work`` must be a module-level function (it is pickled into the worker processes).
    """
    if jobs < 1:
        raise UsageError(f"jobs must be >= 1, got {jobs}")
    failures: list[str] = []

    def finish(lane: L, result: dict[str, Any] | None, error: str | None) -> None:
        if error is not None:
            failures.append(f"{getattr(lane, 'name', lane)}: {error}")
        done(lane, result, error)

    if jobs == 1:
        for lane in lanes:
            try:
                result = _on_lane_device(work, lane)
            except Exception:  # noqa: BLE001 - one lane's failure is reported, the others still run
                finish(lane, None, traceback.format_exc())
            else:
                finish(lane, result, None)
        return failures
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_init_worker, initargs=(threads,)) as pool:
        futures = {pool.submit(_on_lane_device, work, lane): lane for lane in lanes}
        for future in as_completed(futures):
            lane = futures[future]
            try:
                result = future.result()
            except Exception:  # noqa: BLE001
                finish(lane, None, traceback.format_exc())
            else:
                finish(lane, result, None)
    return failures


def versions() -> dict[str, str]:
    """Python, torch, transformers, tokenizers and this package's versions (and CUDA's, where present)."""
    out = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
           "tokenizers": tokenizers.__version__, "gencoord_env": gencoord_env.__version__}
    if torch.cuda.is_available():
        out["cuda"] = str(torch.version.cuda)
    return out


def git_commit() -> str | None:
    """The checkout's commit, ``+dirty`` when tracked files differ from it; None outside a git checkout."""
    try:
        root = Path(__file__).resolve().parent
        proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
