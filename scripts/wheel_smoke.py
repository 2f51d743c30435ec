"""Install a built wheel into a fresh virtualenv and use it the way a newcomer would.

    python scripts/wheel_smoke.py dist/gencoord_env-*.whl [--lm] [--keep]

Runs everything outside the checkout (so nothing is imported from it) with a private per-user cache
(``XDG_CACHE_HOME``), so ``gencoord setup`` really installs the sidecar's Node packages from the
``package.json`` and lockfile the wheel ships. In order:

1. core install (``pip install WHEEL``, what the README's main job installs): import, a sim rollout of a few
   episodes with rule agents, ``gencoord --version``; the commands that need an extra say which one;
2. ``gencoord setup`` and a 2-episode Minecraft rollout; nothing was written into site-packages, the log
   is in the cache, a second setup is a no-op;
   then the README's Python blocks, run where the Quick start leaves a reader: in the clone root, whose
   ``gencoord_env/`` comes ahead of the installed package on ``sys.path`` (a block that needs an extra not
   installed yet is skipped, saying which module it lacks);
3. the ``experiments`` extra: ``gencoord experiment request --backend sim --episodes 8 --out DIR``;
4. with ``--lm`` (``pip install torch==2.13.0`` first): ``gencoord train data`` / ``sft`` (a tiny scratch
   model, two steps) / ``evaluate``, and ``gencoord rollout --policy model:...`` on the sim.

Exit code 0 when every step passed; each step prints its wall time.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

TORCH = "torch==2.13.0"
#: the checkout this script belongs to (its README's blocks run in it)
CHECKOUT = Path(__file__).resolve().parents[1]
SIM_ROLLOUT = """
import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.agents.rollout import run_episode

env = gencoord_env.parallel_env(pool="heldout", backend="sim")
policy = make_policy("rule")
outcomes = [str(run_episode(env, policy, index=k)["outcome"]) for k in range(6)]
env.close()
assert outcomes == ["SUCCESS"] * 6, outcomes
print("sim rollout:", outcomes)
"""


class SmokeFailure(Exception):
    pass


class Smoke:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.venv = root / "venv"
        self.bin = self.venv / ("Scripts" if os.name == "nt" else "bin")
        self.cache = root / "cache"
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        self.env.update(XDG_CACHE_HOME=str(self.cache), CI=os.environ.get("CI", "true"))
        self.env["PATH"] = str(self.bin) + os.pathsep + self.env.get("PATH", "")
        self.timings: list[tuple[str, float]] = []

    def run(self, *cmd: str | Path, expect: int | None = 0, timeout: float = 900,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` (in the smoke folder unless ``cwd``); an exit code other than ``expect`` (None: any) fails."""
        argv = [str(c) for c in cmd]
        shown = " ".join(a.replace(str(self.root), "$SMOKE") if "\n" not in a else "'<script>'" for a in argv)
        t0 = time.monotonic()
        proc = subprocess.run(argv, cwd=cwd or self.root, env=self.env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        elapsed = time.monotonic() - t0
        self.timings.append((shown, elapsed))
        print(f"[{elapsed:6.1f} s] {shown} -> {proc.returncode}", flush=True)
        if expect is not None and proc.returncode != expect:
            raise SmokeFailure(f"`{shown}` exited {proc.returncode}, expected {expect}\n"
                               f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
        return proc

    def gencoord(self, *args: str | Path, expect: int = 0) -> subprocess.CompletedProcess[str]:
        return self.run(self.bin / "gencoord", *args, expect=expect)

    def python(self, code: str, *, cwd: Path | None = None, expect: int = 0) -> subprocess.CompletedProcess[str]:
        return self.run(self.bin / "python", "-c", code, cwd=cwd, expect=expect)

    def pip(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        """``pip install``, leaving bytecode to be compiled on import: a throwaway virtualenv imports a small part
        of what it installs (torch alone: 56 s to install with its bytecode, 21 s without, on the 2-core machine)."""
        return self.run(self.bin / "python", "-m", "pip", "install", "-q", "--no-compile", *args)


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SmokeFailure(what)


def site_files(smoke: Smoke) -> set[str]:
    site = smoke.python("import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    return {str(p.relative_to(site)) for p in Path(site).rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def wheel_version(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as z:
        [meta] = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return next(line.split(":", 1)[1].strip() for line in z.read(meta).decode().splitlines() if line.startswith("Version:"))


def core(smoke: Smoke, wheel: Path) -> None:
    smoke.run(sys.executable, "-m", "venv", smoke.venv)
    smoke.pip(wheel)
    smoke.python(SIM_ROLLOUT)
    out = smoke.gencoord("--version").stdout.strip()
    check(out == f"gencoord_env {wheel_version(wheel)}", f"gencoord --version printed {out!r}")
    smoke.gencoord("rollout", "--backend", "sim", "--episodes", "4", "--json", smoke.root / "sim.json")
    check(json.loads((smoke.root / "sim.json").read_text())["episodes"] == 4, "sim rollout summary")
    # without the extras, the commands that need one say which, in one line
    for args, extra in ((["experiment", "request", "--episodes", "2"], "experiments"),
                        (["rollout", "--backend", "sim", "--policy", "model:nowhere"], "lm")):
        err = smoke.gencoord(*args, expect=1).stderr.strip()
        check(len(err.splitlines()) == 1 and err.endswith(f"pip install 'gencoord_env[{extra}]'"), f"missing-extra message: {err!r}")
    err = smoke.gencoord("rollout", "--backend", "minecraft", "--episodes", "1", expect=1).stderr.strip()
    check(err.startswith("error: the sidecar's Node packages are not installed") and err.endswith("run `gencoord setup` "
          "(it installs the sidecar's Node packages with the pinned Node)"), f"before setup: {err!r}")


def minecraft(smoke: Smoke) -> None:
    before = site_files(smoke)
    smoke.gencoord("setup")
    check("up to date" in smoke.gencoord("setup").stdout, "a second `gencoord setup` is a no-op")
    summary = smoke.root / "minecraft.json"
    smoke.gencoord("rollout", "--backend", "minecraft", "--pool", "heldout", "--policy", "rule", "--episodes", "2",
                   "--json", summary)
    result = json.loads(summary.read_text())
    check(result["episodes"] == 2 and result["successes"] == 2, f"Minecraft rollout: {result}")
    added = site_files(smoke) - before
    check(not added, f"setup or the rollout wrote into site-packages: {sorted(added)[:10]}")
    check(any((smoke.cache / "gencoord_env" / "sidecar").glob("*/node_modules/mineflayer/package.json")),
          "the Node packages are not in the cache")
    logs = list((smoke.cache / "gencoord_env" / "logs").glob("sidecar-*.log"))
    check(bool(logs) and all(b"\x1b" not in p.read_bytes() for p in logs), "sidecar logs in the cache, without escapes")


def readme_blocks(smoke: Smoke) -> None:
    """Every Python block of the README, run as ``python -c`` in the clone root (as a saved script would run:
    the clone root first on ``sys.path``), against the wheel installed without ``-e``."""
    readme = (CHECKOUT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", readme, re.S | re.M)
    check(len(blocks) >= 1, "the README has no Python block")
    ran = 0
    for block in blocks:
        code = "import gencoord_env, sys; print('imported from', gencoord_env.__file__, file=sys.stderr)\n" + block
        proc = smoke.python(code, cwd=CHECKOUT, expect=None)
        missing = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", proc.stderr)
        if proc.returncode and missing and not missing[1].startswith("gencoord"):
            print(f"    skipped (needs {missing[1]}, an extra not installed yet): {block.splitlines()[0]}", flush=True)
            continue
        check(proc.returncode == 0, f"README block failed in the clone root:\n{block}\n{proc.stderr[-3000:]}")
        # the run really met the checkout's package first (what shadowed the installed one)
        check(f"imported from {CHECKOUT / 'gencoord_env' / '__init__.py'}" in proc.stderr, proc.stderr[-1000:])
        ran += 1
    check(ran >= 1, "no README block ran")


def experiments(smoke: Smoke, wheel: Path) -> None:
    smoke.pip(f"{wheel}[experiments]")
    out = smoke.root / "experiment"
    smoke.gencoord("experiment", "request", "--backend", "sim", "--episodes", "8", "--out", out, "--quiet")
    for name in ("results.json", "results.csv", "episodes.jsonl"):
        check((out / name).is_file(), f"experiment wrote no {name}")
    check(any(out.glob("*.png")), "experiment wrote no PNG")
    check(all(r["episodes"] == 8 for r in json.loads((out / "results.json").read_text())), "8 episodes per condition")


def lm(smoke: Smoke, wheel: Path) -> None:
    smoke.pip(TORCH)
    smoke.pip(f"{wheel}[lm]")
    data, run = smoke.root / "sft-data", smoke.root / "sft-run"
    smoke.gencoord("train", "data", "--out", data, "--sets", "forward")
    smoke.gencoord("train", "sft", "--data", data / "forward.jsonl", "--out", run, "--scratch", "qwen3",
                   "--hidden-size", "32", "--layers", "1", "--vocab-size", "384", "--max-steps", "2",
                   "--micro-batch", "2", "--grad-accum", "1", "--quiet")
    check((run / "final" / "config.json").is_file(), "sft wrote no checkpoint")
    report = smoke.root / "evaluate.json"
    smoke.gencoord("train", "evaluate", "--model", run / "final", "--episodes", "2", "--backend", "sim",
                   "--device", "cpu", "--out", report)
    played = json.loads(report.read_text())
    check([r["episodes"] for r in played["records"]] == [2] and len(played["episodes"]["heldout"]) == 2,
          "evaluate: 2 episodes of one pool")
    smoke.gencoord("rollout", "--backend", "sim", "--episodes", "2", "--policy", f"model:{run / 'final'}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheel", type=Path, help="the wheel built by `python -m build --wheel`")
    ap.add_argument("--lm", action="store_true", help=f"also install {TORCH} and the lm extra and train a tiny model")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (venv, cache, outputs)")
    args = ap.parse_args(argv)
    wheel = args.wheel.resolve()
    root = Path(tempfile.mkdtemp(prefix="gencoord-wheel-smoke-"))
    smoke = Smoke(root)
    t0 = time.monotonic()
    steps = [("core install", lambda: core(smoke, wheel)), ("minecraft", lambda: minecraft(smoke)),
             ("README blocks in the clone root", lambda: readme_blocks(smoke)),
             ("experiments extra", lambda: experiments(smoke, wheel))]
    if args.lm:
        steps.append(("lm extra", lambda: lm(smoke, wheel)))
    try:
        for name, step in steps:
            print(f"== {name}", flush=True)
            step()
    except (SmokeFailure, subprocess.TimeoutExpired) as e:
        print(f"wheel smoke FAILED in step {name!r}: {e}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"wheel smoke passed in {time.monotonic() - t0:.0f} s ({wheel.name}, {wheel.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
