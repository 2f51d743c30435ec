"""Suite-wide: the tests that start Minecraft servers and Node sidecars run in three xdist groups.

Under ``pytest -n N --dist loadgroup`` (the README's command) every test in ``SIDECAR_TESTS`` is marked
with its group's ``xdist_group`` and so runs on that group's worker, one after another, as in a serial
run; the other workers take the rest. On a 2-core machine four sidecars starting at once (each a
flying-squid server and its bots) starved one another past their start-up timeouts, which is a fault of
the test run, not of the code under test; all of them on one worker made that worker the run's long pole
(8 min 32 s). Without xdist the marks do nothing.

Tests that share an expensive fixture (the built data sets, one tiny transfer run) share a worker too
(``SHARED_FIXTURES``): spread over workers, each worker built the fixture again.

Each xdist worker also keeps torch, OpenMP and BLAS to one thread (N workers of two threads each on two
cores spin-wait against one another: the same suite took twice the CPU time that way), and OpenMP threads
that wait sleep instead of spinning (``OMP_WAIT_POLICY=PASSIVE``), for the one example that measured its
budget with two torch threads (its CPU time in a loaded run: 48 s instead of 121 s, the same result).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # the suite's workers start sidecars and Minecraft servers beside each other and beside whatever else the machine
    # runs: at load 10-12 on two cores bots took over 40 s to spawn, and a starved sidecar's server kicked its own bot
    # for a keep-alive 30 s late. The startup and liveness deadlines (spawn, keep-alive kick, open_arena, reset, READY)
    # stretch; the tests of those deadlines set their own.
    os.environ.setdefault("GENCOORD_TIMEOUT_SCALE", "3")

ROOT = Path(__file__).parent
#: This test process's Ray temp folder (inherited by the Ray processes and CLI runs it starts); removed at exit.
RAY_TMPDIR = os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="gencoord-ray-")
#: files and folders (relative to tests/) whose tests start real sidecars or servers, in three groups of
#: about equal time: three sidecars at most start at once, each group's tests one after another
SIDECAR_TESTS = {
    "sidecar-arenas": ("minecraft/test_arenas_cli.py", "test_distributed.py", "envs/test_on_fault.py"),
    "sidecar-episodes": ("minecraft/",),
    "sidecar-world": ("world/minecraft/", "test_node_suite.py", "experiments/test_minecraft.py", "test_readme.py",
                       "test_doctor.py"),
}
#: group name -> files whose tests share a session- or module-scoped fixture that takes seconds to build
SHARED_FIXTURES = {
    "train-data": ("train/test_data.py", "train/test_sft.py", "train/test_tables.py", "train/test_fit.py",
                   "train/test_removal.py", "train/test_packed.py"),  # data_dir
    "train-transfer": ("train/test_transfer.py",),  # one tiny transfer run
    "train-selfplay": ("train/test_selfplay.py",),  # one tiny self-play run (70 s), built by each worker before
}


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "dist", None) == "loadgroup" and tuple(pytest.version_tuple[:2]) >= (9, 2):
        # pytest 9.2 keeps a test's id where pytest-xdist 3.8 writes its group: every group is spread
        raise pytest.UsageError(f"--dist loadgroup cannot group tests under pytest {pytest.__version__} "
                                "(pytest-xdist writes the group into an id that pytest 9.2 no longer reads); "
                                "install the pytest that setup.cfg's test extra pins: pip install -e '.[test]'")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        try:
            import torch
        except ImportError:
            return
        torch.set_num_threads(1)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(RAY_TMPDIR, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the marks into the test ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(ROOT.resolve()).as_posix()
        for group, files in (*SIDECAR_TESTS.items(), *SHARED_FIXTURES.items()):
            if rel.startswith(files):  # the first group that names the file or its folder
                item.add_marker(pytest.mark.xdist_group(group))
                break
