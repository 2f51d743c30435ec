"""Ping round trip through the Minecraft backend's client (Python DEALER <-> sidecar ROUTER).

Starts the real sidecar (embedded server + two bots), resets a small arena, then times ``ping``
requests one after another. Target from the issue: p50 <= 0.5 ms.

    python benchmarks/minecraft_ping.py [--n 2000] [--transport ipc tcp]
"""
from __future__ import annotations

import argparse
import statistics
import time

from gencoord_env.world.minecraft import MinecraftWorld
from gencoord_env.world.types import Station, WorldSpec

SPEC = WorldSpec(
    agents=("agent_a", "agent_b"),
    stations=(Station("chest1", "chest", (4, 0, 2)),),
    positions={"agent_a": (0, 0, 0), "agent_b": (3, 0, 0)},
    inventories={"agent_a": {}, "agent_b": {}},
    containers={},
)


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def measure(transport: str, n: int) -> dict[str, float]:
    with MinecraftWorld(transport=transport) as world:
        t0 = time.perf_counter()
        world.reset(SPEC)
        start_s = time.perf_counter() - t0
        for _ in range(100):  # warm up sockets and JIT
            world.ping()
        rtts = sorted(world.ping() * 1e6 for _ in range(n))
    return {"start_s": start_s, "p50": percentile(rtts, 0.50), "p99": percentile(rtts, 0.99),
            "mean": statistics.fmean(rtts), "max": rtts[-1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--transport", nargs="+", default=["ipc", "tcp"], choices=["ipc", "tcp"])
    args = ap.parse_args()
    print(f"{'transport':<10}{'n':>6}{'p50 us':>10}{'p99 us':>10}{'mean us':>10}{'max us':>10}{'start+reset s':>15}")
    for transport in args.transport:
        r = measure(transport, args.n)
        print(f"{transport:<10}{args.n:>6}{r['p50']:>10.0f}{r['p99']:>10.0f}{r['mean']:>10.0f}{r['max']:>10.0f}{r['start_s']:>15.2f}")


if __name__ == "__main__":
    main()
