"""Suite-wide: the tests that start Minecraft servers and Node sidecars share one xdist worker.

Under ``pytest -n N --dist loadgroup`` (the README's command) every test in ``SIDECAR_TESTS`` is marked
``xdist_group("sidecar")`` and so runs on one worker, one after another, as in a serial run; the other
workers take the rest. On a 2-core machine several sidecars starting at once (each a flying-squid server
and its bots) starve one another past their start-up timeouts, which is a fault of the test run, not of the
code under test. Without xdist the mark does nothing.

Each xdist worker also keeps torch, OpenMP and BLAS to one thread: N workers of two threads each on two
cores spin-wait against one another (the same suite took twice the CPU time that way).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

ROOT = Path(__file__).parent
#: files and folders (relative to tests/) whose tests start real sidecars or servers
SIDECAR_TESTS = (
    "minecraft/",
    "world/minecraft/",
    "experiments/test_minecraft.py",
    "test_node_suite.py",
    "test_distributed.py",
    "test_readme.py",
    "envs/test_on_fault.py",
)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        try:
            import torch
        except ImportError:
            return
        torch.set_num_threads(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(ROOT.resolve()).as_posix()
        if rel.startswith(SIDECAR_TESTS):
            item.add_marker(pytest.mark.xdist_group("sidecar"))
