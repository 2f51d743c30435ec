"""Soak: consecutive Minecraft episodes with item conservation checked and memory of both processes.

After every episode the server's ground truth must equal the pure-Python world's final ground truth for
the same episode (same inventories, chest contents and site blocks): items are neither created nor lost
beyond what the recipes do. Resident memory (RSS) of this Python process and of the Node sidecar is
printed at the start and the end, and the sidecar's with every progress line (a leak shows as growth that
goes on after the first rounds). With ``--arenas K`` the episodes run K at a time on K arenas of one
sidecar (``gencoord_env.commands.arenas.ArenaRunner``); each is still compared with its own sim run.

    python benchmarks/minecraft_soak.py [--episodes 200] [--arenas 8]
"""
from __future__ import annotations

import argparse
import time

import gencoord_env
from gencoord_env.agents.rollout import run_episode
from gencoord_env.agents import make_policy
from gencoord_env.world.minecraft import MinecraftWorld


def rss_mb(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def truth(info: dict) -> dict:
    t = next(t for t in info["trace"] if t["stage"] == "verify")["ground_truth"].to_dict()
    return {k: t[k] for k in ("inventories", "containers", "sites")}


def soak_arenas(args: argparse.Namespace) -> None:
    """The soak on ``args.arenas`` arenas, in rounds of 25 episodes per arena."""
    from functools import partial

    from gencoord_env.commands.arenas import ArenaRunner, RolloutSpec, play_rollout, rollout_slot

    sim = gencoord_env.parallel_env(pool=args.pool, backend="sim")
    policy = make_policy("rule")
    spec = RolloutSpec({"pool": args.pool, "backend": "minecraft"}, policy="rule")
    build = partial(rollout_slot, spec)
    with ArenaRunner("minecraft", args.arenas) as runner:
        runner.run(range(args.arenas), build, play_rollout)
        sidecar_pid = runner.pool.sidecar.process.pid
        start = (rss_mb(), rss_mb(sidecar_pid))
        print(f"start: python {start[0]:.0f} MB, sidecar {start[1]:.0f} MB ({args.arenas} arenas)")
        t0 = time.perf_counter()
        bad = failed = retried = done = 0
        while done < args.episodes:
            batch = [(done + i) % len(sim.episodes) for i in range(min(25 * args.arenas, args.episodes - done))]
            played = runner.run(batch, build, play_rollout)
            retried += len(played.retries)
            for r in played.retries:
                print(f"retry: {r.describe()}")
            for k, result in zip(batch, played.results):
                a, b = result["info"], run_episode(sim, policy, index=k)
                failed += str(a["outcome"]) != "SUCCESS"
                if truth(a) != truth(b):
                    bad += 1
                    print(f"episode {k} ({a['episode_id']}): ground truth differs from the item-conserving reference")
            done += len(batch)
            print(f"{done} episodes, {failed} failed, {bad} conservation mismatches, {retried} retried, "
                  f"{time.perf_counter() - t0:.0f} s, sidecar {rss_mb(sidecar_pid):.0f} MB", flush=True)
        wall = time.perf_counter() - t0
        end = (rss_mb(), rss_mb(sidecar_pid))
    print(f"end:   python {end[0]:.0f} MB, sidecar {end[1]:.0f} MB")
    print(f"soak: {args.episodes} episodes on {args.arenas} arenas, {failed} failed, {bad} conservation mismatches, "
          f"{retried} retried, {args.episodes / wall:.2f} episodes/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--pool", default="request")
    ap.add_argument("--arenas", type=int, default=1, help="episodes at once, on arenas of one sidecar")
    args = ap.parse_args()
    if args.arenas > 1:
        soak_arenas(args)
        return
    world = MinecraftWorld()
    mc = gencoord_env.parallel_env(pool=args.pool, backend="minecraft", world=world)
    sim = gencoord_env.parallel_env(pool=args.pool, backend="sim")
    policy = make_policy("rule")
    run_episode(mc, policy, index=0)
    sidecar_pid = world.sidecar.process.pid  # type: ignore[union-attr]
    start = (rss_mb(), rss_mb(sidecar_pid))
    print(f"start: python {start[0]:.0f} MB, sidecar {start[1]:.0f} MB")
    t0 = time.perf_counter()
    bad, failed = 0, 0
    for k in range(args.episodes):
        i = k % len(mc.episodes)
        a, b = run_episode(mc, policy, index=i), run_episode(sim, policy, index=i)
        failed += str(a["outcome"]) != "SUCCESS"
        if truth(a) != truth(b):
            bad += 1
            print(f"episode {k} ({a['episode_id']}): ground truth differs from the item-conserving reference")
        if (k + 1) % 25 == 0:
            print(f"{k + 1} episodes, {failed} failed, {bad} conservation mismatches, {time.perf_counter() - t0:.0f} s, "
                  f"sidecar {rss_mb(sidecar_pid):.0f} MB", flush=True)
    end = (rss_mb(), rss_mb(sidecar_pid))
    mc.close()
    print(f"end:   python {end[0]:.0f} MB, sidecar {end[1]:.0f} MB")
    print(f"soak: {args.episodes} episodes, {failed} failed, {bad} conservation mismatches, "
          f"{(time.perf_counter() - t0) / args.episodes:.2f} s/episode")


if __name__ == "__main__":
    main()
