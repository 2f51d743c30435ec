"""Minecraft episodes/s and CPU-seconds per episode with 1, 2, 4, 8, 16 arenas of one sidecar (and 1, 2 Ray
workers), with memory.

Each setting runs in a fresh process (so its Python RSS is its own): rule agents play the same
``--episodes`` ``heldout`` episodes (indices 0, 1, 2, ... both role permutations, cycling through the pool)
on K arenas of one embedded server. A first round of one episode per arena starts the sidecar and its
bots and is not timed; the rate is episodes finished per second of wall time over the timed ones, and the
CPU time per episode is the sidecar's (Node: server and every bot, from /proc) and this Python process's
(every thread) over the timed run, divided by its episodes. RSS is read after the timed run: the sidecar's
and this Python process's; for Ray rows, the sum over every sidecar and the driver (their CPU is not
counted). Every episode must succeed (and so have its handoff verified). The machine's load average is
printed before and after: on a shared machine compare rows of one run only.

    python benchmarks/minecraft_scaling.py [--episodes 96] [--arenas 1,2,4,8,16] [--no-ray] [--json out.json]
    python benchmarks/minecraft_scaling.py --compare DIR [...]                          # before/after, side by side
    python benchmarks/minecraft_scaling.py --profile DIR [--arenas 8] [--episodes 200]   # Node's --cpu-prof

``--compare DIR`` plays every setting twice, alternating, first with the sidecar sources in DIR (another
checkout's ``mineflayer_server/``, e.g. ``git archive REV mineflayer_server | tar -x -C DIR``) and then with
these, and prints the ratios: before/after figures measured side by side, under the same load.

``--profile DIR`` runs the first ``--arenas`` setting with the sidecar under ``node --cpu-prof`` (profile
written into DIR when it shuts down) and prints where its CPU time went: self time by package and the top
functions.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from functools import partial
from pathlib import Path

ARENAS = (1, 2, 4, 8, 16)
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (from /proc; 0 when it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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
    from gencoord_env.commands.arenas import ArenaRunner, RolloutSpec, play_rollout, rollout_slot

    import gencoord_env

    spec = RolloutSpec({"pool": "heldout", "backend": "minecraft", "timings": True}, policy="rule")
    pool_size = len(gencoord_env.parallel_env(pool="heldout", backend="sim").episodes)
    slots = arenas * max(workers, 1)
    warm = list(range(slots))
    timed = [i % pool_size for i in range(n)]
    if workers:
        from gencoord_env.commands.distributed import RayRunner

        runner = RayRunner(workers, "minecraft", arenas=arenas)
    else:
        runner = ArenaRunner("minecraft", arenas)
    with runner:
        build = partial(rollout_slot, spec)
        runner.run(warm, build, play_rollout)
        node_pid = 0 if workers else runner.pool.sidecar.process.pid
        node0, python0 = cpu_seconds(node_pid) if node_pid else 0.0, own_cpu_seconds()
        t0 = time.perf_counter()
        played = runner.run(timed, build, play_rollout)
        wall = time.perf_counter() - t0
        node_cpu = cpu_seconds(node_pid) - node0 if node_pid else float("nan")
        python_cpu = own_cpu_seconds() - python0
        if workers:
            sidecar = sum(rss_mb(p) for p in sidecar_pids())
        else:
            sidecar = rss_mb(runner.pool.sidecar.process.pid)
        python = rss_mb()
    outcomes = [str(r["info"]["outcome"]) for r in played.results]
    seconds = [r["info"]["timings"]["episode_seconds"] for r in played.results]
    return {"arenas": arenas, "workers": workers, "episodes": n, "wall_s": wall, "episodes_per_s": n / wall,
            "node_cpu_s_per_episode": node_cpu / n, "python_cpu_s_per_episode": python_cpu / n,
            "episode_p50_s": statistics.median(seconds),
            "failed": sum(o != "SUCCESS" for o in outcomes),
            "unverified": sum(not r["info"]["metrics"]["handoff_verified"] for r in played.results),
            "retries": len(played.retries),
            "sidecar_rss_mb": sidecar, "python_rss_mb": python, "indices": timed, "outcomes": outcomes}


def package_of(url: str) -> str:
    """Where a profiled function lives: a package of node_modules, the sidecar's own sources, or Node itself."""
    m = re.search(r"node_modules/((?:@[^/]+/)?[^/]+)", url)
    if m:
        return m[1]
    if "/mineflayer_server/" in url:
        return "sidecar src/"
    return "node:internal" if url.startswith("node:") else (url or "(native / vm)")


def summarize_profile(path: Path, top: int = 20) -> str:
    """Self time by package and the ``top`` functions of one ``.cpuprofile``."""
    prof = json.loads(path.read_text())
    nodes = {n["id"]: n for n in prof["nodes"]}
    self_us: Counter[int] = Counter()
    for node_id, dt in zip(prof["samples"], prof["timeDeltas"]):
        self_us[node_id] += dt
    total = sum(self_us.values()) or 1
    idle = sum(us for i, us in self_us.items() if nodes[i]["callFrame"]["functionName"] == "(idle)")
    by_package: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    for i, us in self_us.items():
        frame = nodes[i]["callFrame"]
        if frame["functionName"] == "(idle)":
            continue
        by_package[package_of(frame["url"])] += us
        short = re.sub(r".*node_modules/", "", frame["url"]) or "-"
        short = re.sub(r".*/mineflayer_server/", "", short)
        by_function[f"{frame['functionName'] or '(anonymous)'} {short}:{frame['lineNumber'] + 1}"] += us
    busy = total - idle
    lines = [f"profile {path.name}: {total / 1e6:.1f} s sampled, {busy / 1e6:.1f} s busy ({busy / total:.0%})",
             "self time by package (% of busy):"]
    lines += [f"  {us / busy:6.1%}  {name}" for name, us in by_package.most_common(12)]
    lines.append(f"top {top} functions by self time (% of busy):")
    lines += [f"  {us / busy:6.1%}  {name}" for name, us in by_function.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=96, help="timed episodes per setting")
    ap.add_argument("--arenas", default=",".join(map(str, ARENAS)), help="arena counts, comma-separated")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray rows")
    ap.add_argument("--profile", default=None, metavar="DIR",
                    help="profile the sidecar of the first --arenas setting (node --cpu-prof into DIR) and summarize it")
    ap.add_argument("--json", default=None)
    ap.add_argument("--compare", default=None, metavar="DIR",
                    help="also play each setting with the sidecar sources in DIR (a mineflayer_server/ folder), alternating")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # "ARENAS,WORKERS": run one setting, print JSON
    args = ap.parse_args()
    if args.one:
        arenas, workers = map(int, args.one.split(","))
        print("RESULT " + json.dumps(one(arenas, workers, args.episodes)), flush=True)
        return
    arena_counts = [int(k) for k in args.arenas.split(",")]
    settings = [(k, 0) for k in arena_counts] + ([] if args.no_ray or args.profile else [(k, w) for w, k in RAY])
    env = dict(os.environ)
    if args.profile:
        settings = settings[:1]
        out = Path(args.profile).resolve()
        out.mkdir(parents=True, exist_ok=True)
        before = set(out.glob("*.cpuprofile"))
        env["NODE_OPTIONS"] = f"{env.get('NODE_OPTIONS', '')} --cpu-prof --cpu-prof-dir={out}".strip()
    load = os.getloadavg()
    rows = []
    sources = [("before", {**env, "GENCOORD_SIDECAR_DIR": str(Path(args.compare).resolve())}), ("after", env)] \
        if args.compare else [("", env)]
    for arenas, workers in settings:
        for label, run_env in sources:
            proc = subprocess.run([sys.executable, __file__, "--one", f"{arenas},{workers}",
                                   "--episodes", str(args.episodes)],
                                  capture_output=True, text=True, timeout=3600, env=run_env)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                print(f"arenas={arenas} workers={workers} {label} failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
                continue
            rows.append({**json.loads(line[len("RESULT "):]), "sources": label})
            r = rows[-1]
            print(f"done: {arenas} arenas, {workers} workers {label}: {r['episodes_per_s']:.2f} episodes/s", file=sys.stderr,
                  flush=True)
    base = next((r for r in rows if r["arenas"] == 1 and not r["workers"] and r["sources"] != "before"), None)
    print(f"minecraft_scaling: heldout, rule agents, {os.cpu_count()} cores; load average (1, 5, 15 min) "
          f"{'/'.join(f'{x:.1f}' for x in load)} before, {'/'.join(f'{x:.1f}' for x in os.getloadavg())} after")
    print(f"{'setting':22s} {'episodes':>8s} {'ep/s':>6s} {'x1':>5s} {'p50 s':>5s} {'node cpu-s/ep':>13s} "
          f"{'py cpu-s/ep':>11s} {'failed':>6s} {'sidecar MB':>10s} {'python MB':>9s} {'MB/arena+':>9s}")
    for r in rows:
        name = f"{r['arenas']} arenas" + (f" x {r['workers']} Ray workers" if r["workers"] else "") + \
            (f" {r['sources']}" if r["sources"] else "")
        first = next((b for b in rows if (b["arenas"], b["workers"], b["sources"]) == (1, 0, r["sources"])), None)
        speedup = r["episodes_per_s"] / first["episodes_per_s"] if first else float("nan")
        slots = r["arenas"] * max(r["workers"], 1)
        growth = ""
        if base and not r["workers"] and r["arenas"] > 1 and r["sources"] != "before":
            total, first = r["sidecar_rss_mb"] + r["python_rss_mb"], base["sidecar_rss_mb"] + base["python_rss_mb"]
            growth = f"{(total - first) / (slots - 1):.1f}"
        print(f"{name:22s} {r['episodes']:8d} {r['episodes_per_s']:6.2f} {speedup:5.2f} {r['episode_p50_s']:5.2f} "
              f"{r['node_cpu_s_per_episode']:13.3f} {r['python_cpu_s_per_episode']:11.3f} "
              f"{r['failed'] + r['unverified']:6d} {r['sidecar_rss_mb']:10.0f} {r['python_rss_mb']:9.0f} {growth:>9s}")
    if args.compare:
        print("after / before, side by side:")
        for r in rows:
            before = next((b for b in rows if b["sources"] == "before" and (b["arenas"], b["workers"]) == (r["arenas"], r["workers"])), None)
            if r["sources"] != "after" or before is None:
                continue
            print(f"  {r['arenas']:2d} arenas: episodes/s x{r['episodes_per_s'] / before['episodes_per_s']:.2f}, "
                  f"node cpu-s/episode x{r['node_cpu_s_per_episode'] / before['node_cpu_s_per_episode']:.2f}, "
                  f"python cpu-s/episode x{r['python_cpu_s_per_episode'] / before['python_cpu_s_per_episode']:.2f}, "
                  f"p50 x{r['episode_p50_s'] / before['episode_p50_s']:.2f}")
    if args.profile:
        made = sorted(set(out.glob("*.cpuprofile")) - before, key=lambda p: p.stat().st_size)
        if not made:
            print(f"no profile was written into {out} (the sidecar did not shut down cleanly?)", file=sys.stderr)
        else:  # the largest: the sidecar's (npm or other node processes write small ones)
            print(summarize_profile(made[-1]))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
