"""Minecraft backend timings: per-template episode wall time (p50/p95), per-skill time, reset time, sidecar ping.

Runs rule agents on ``heldout`` episodes (both role permutations) on the embedded server. The episode
time is the env's ``episode_seconds`` (reset to verified terminal read-back); a skill's time is its
call's ``ms`` as the sidecar measured it (the two bots' calls overlap where the plan allows, so the
per-episode sums add up to more than an episode); reset is the world reset alone; ping is one ``ping``
round trip through the ZeroMQ client.

    python benchmarks/minecraft_episode.py [--per-template 4] [--pings 2000]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict

import gencoord_env
from gencoord_env.agents.rollout import run_episode
from gencoord_env.agents import make_policy
from gencoord_env.world.minecraft import MinecraftWorld


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def skill_events(info: dict) -> list:
    """The skill events of the episode's execution (its trace's ``execute`` stage), each with its ``ms``."""
    return [e for t in info["trace"] if t["stage"] == "execute" for e in t["events"] if e.kind == "skill"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-template", type=int, default=4)
    ap.add_argument("--pings", type=int, default=2000)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    world = MinecraftWorld()
    env = gencoord_env.parallel_env(pool="heldout", backend="minecraft", world=world, timings=True)
    policy = make_policy("rule")
    t0 = time.perf_counter()
    run_episode(env, policy, index=0)  # starts the sidecar, server and bots
    startup = time.perf_counter() - t0
    per_template: dict[str, list[float]] = defaultdict(list)
    per_op: dict[str, list[float]] = defaultdict(list)
    resets: list[float] = []
    failures = 0
    for k, ep in enumerate(env.episodes):
        if len(per_template[ep.template.id]) >= args.per_template:
            continue
        t = time.perf_counter()
        world.reset(ep.world)
        resets.append(time.perf_counter() - t)
        info = run_episode(env, policy, index=k)
        failures += str(info["outcome"]) != "SUCCESS"
        per_template[ep.template.id].append(info["timings"]["episode_seconds"])
        for event in skill_events(info):
            per_op[event.op].append(event.data["ms"] / 1000)
    pings = []
    for _ in range(args.pings):
        pings.append(world.ping())
    env.close()
    everything = [x for v in per_template.values() for x in v]
    print(f"minecraft_episode: heldout, rule agents, {len(everything)} episodes, {failures} failed; first start {startup:.2f} s")
    print(f"{'template':24s} {'n':>3s} {'p50 s':>7s} {'p95 s':>7s}")
    for tid, v in per_template.items():
        print(f"{tid:24s} {len(v):3d} {statistics.median(v):7.2f} {pct(v, 0.95):7.2f}")
    print(f"{'all':24s} {len(everything):3d} {statistics.median(everything):7.2f} {pct(everything, 0.95):7.2f}")
    print(f"{'skill':24s} {'calls':>5s} {'p50 s':>7s} {'p95 s':>7s} {'s/episode':>9s}")
    for op, v in sorted(per_op.items(), key=lambda kv: -sum(kv[1])):
        print(f"{op:24s} {len(v):5d} {statistics.median(v):7.3f} {pct(v, 0.95):7.3f} {sum(v) / len(everything):9.3f}")
    print(f"reset: p50 {statistics.median(resets) * 1000:.1f} ms  p95 {pct(resets, 0.95) * 1000:.1f} ms")
    print(f"ping:  p50 {statistics.median(pings) * 1e6:.0f} us  p99 {pct(pings, 0.99) * 1e6:.0f} us")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"episodes": per_template, "skills": per_op, "resets": resets, "pings_p50": statistics.median(pings),
                       "failures": failures, "startup": startup}, f, indent=1)


if __name__ == "__main__":
    main()
