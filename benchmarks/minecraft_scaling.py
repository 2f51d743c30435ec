"""Minecraft episodes/s with 1, 2, 4, 8 arenas of one sidecar (and 1, 2 Ray workers), with memory.

Each setting runs in a fresh process (so its Python RSS is its own): rule agents play the same
``--episodes`` ``heldout`` episodes (indices 0, 1, 2, ... both role permutations, cycling through the pool)
on K arenas of one embedded server. A first round of one episode per arena starts the sidecar and its
bots and is not timed; the rate is episodes finished per second of wall time over the timed ones. RSS is read after the timed run: the sidecar's
(Node: server and every bot) and this Python process's; for Ray rows, the sum over every sidecar and the
driver. Every episode must succeed; the outcomes are compared with the serial run's.

    python benchmarks/minecraft_scaling.py [--episodes 96] [--no-ray] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

ARENAS = (1, 2, 4, 8)
RAY = ((1, 4), (2, 4))  # (workers, arenas each)


def rss_mb(pid: int | str = "self") -> float:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def sidecar_pids() -> list[int]:
    """Every running sidecar process of this user (Ray workers' sidecars are not our children)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(part.endswith(b"sidecar.js") for part in cmd):
                pids.append(int(d.name))
    return pids


def one(arenas: int, workers: int, n: int) -> dict:
    """One setting, in this process: returns its numbers."""
    from gencoord_env.arenas import ArenaRunner, RolloutSpec, play_rollout, rollout_slot

    import gencoord_env

    spec = RolloutSpec({"pool": "heldout", "backend": "minecraft"}, policy="rule")
    pool_size = len(gencoord_env.parallel_env(pool="heldout", backend="sim").episodes)
    slots = arenas * max(workers, 1)
    warm = list(range(slots))
    timed = [i % pool_size for i in range(n)]
    if workers:
        from gencoord_env.distributed import RayRunner

        runner = RayRunner(workers, "minecraft", arenas=arenas)
    else:
        runner = ArenaRunner("minecraft", arenas)
    with runner:
        build = partial(rollout_slot, spec)
        runner.run(warm, build, play_rollout)
        t0 = time.perf_counter()
        played = runner.run(timed, build, play_rollout)
        wall = time.perf_counter() - t0
        if workers:
            sidecar = sum(rss_mb(p) for p in sidecar_pids())
        else:
            sidecar = rss_mb(runner.pool.sidecar.process.pid)
        python = rss_mb()
    outcomes = [str(r["info"]["outcome"]) for r in played.results]
    return {"arenas": arenas, "workers": workers, "episodes": n, "wall_s": wall, "episodes_per_s": n / wall,
            "failed": sum(o != "SUCCESS" for o in outcomes), "retries": len(played.retries),
            "sidecar_rss_mb": sidecar, "python_rss_mb": python, "indices": timed, "outcomes": outcomes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=96, help="timed episodes per setting")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray rows")
    ap.add_argument("--json", default=None)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # "ARENAS,WORKERS": run one setting, print JSON
    args = ap.parse_args()
    if args.one:
        arenas, workers = map(int, args.one.split(","))
        print("RESULT " + json.dumps(one(arenas, workers, args.episodes)), flush=True)
        return
    settings = [(k, 0) for k in ARENAS] + ([] if args.no_ray else [(k, w) for w, k in RAY])
    rows = []
    for arenas, workers in settings:
        proc = subprocess.run([sys.executable, __file__, "--one", f"{arenas},{workers}",
                               "--episodes", str(args.episodes)],
                              capture_output=True, text=True, timeout=1200)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(f"arenas={arenas} workers={workers} failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
            continue
        rows.append(json.loads(line[len("RESULT "):]))
        r = rows[-1]
        print(f"done: {arenas} arenas, {workers} workers: {r['episodes_per_s']:.2f} episodes/s", file=sys.stderr, flush=True)
    base = next((r for r in rows if r["arenas"] == 1 and not r["workers"]), None)
    print(f"minecraft_scaling: heldout, rule agents, {os.cpu_count()} cores")
    print(f"{'setting':22s} {'episodes':>8s} {'ep/s':>6s} {'x1':>5s} {'failed':>6s} {'sidecar MB':>10s} "
          f"{'python MB':>9s} {'MB/arena+':>9s}")
    for r in rows:
        name = f"{r['arenas']} arenas" + (f" x {r['workers']} Ray workers" if r["workers"] else "")
        speedup = r["episodes_per_s"] / base["episodes_per_s"] if base else float("nan")
        slots = r["arenas"] * max(r["workers"], 1)
        growth = ""
        if base and not r["workers"] and r["arenas"] > 1:
            total, first = r["sidecar_rss_mb"] + r["python_rss_mb"], base["sidecar_rss_mb"] + base["python_rss_mb"]
            growth = f"{(total - first) / (slots - 1):.1f}"
        print(f"{name:22s} {r['episodes']:8d} {r['episodes_per_s']:6.2f} {speedup:5.2f} {r['failed']:6d} "
              f"{r['sidecar_rss_mb']:10.0f} {r['python_rss_mb']:9.0f} {growth:>9s}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
