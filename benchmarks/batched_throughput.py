"""Decision steps/s of the batched engine beside the full pipeline and the vector entry point, in one run.

Every figure is uniformly random valid menu play on the same pool, route, menu and observation form (one
decision step: one agent's choice in one episode):

- ``pipeline``: ``parallel_env(backend="sim", actions="menu")`` stepped one episode at a time;
- ``vector entry point``: ``gymnasium.make_vec("gencoord_env/GenCoord-v0", num_envs=8,
  vectorization_mode="vector_entry_point")``, the single-agent view (the rule agent plays the other role
  inside its step; only the learner's decisions are counted);
- ``batched engine``: ``BatchedEngine`` at ``--batch`` episodes on a warm ``GameTree`` (every node reachable
  through valid slots computed first; that build is timed and printed apart), observations as the
  tables' row indices; ``+ observations gathered``: the two-agent ``ParallelVectorEnv``, whose step also
  gathers every agent's observation arrays and masks; ``torch``: the engine on torch CPU tensors.

Targets: >= 1,000,000 decision steps/s on one core at batch 4,096, >= 100x the pipeline in the same run.
Pin one core with ``taskset``; the load average at the start and the end is printed with the machine.

    taskset -c 1 python benchmarks/batched_throughput.py [--seconds 3] [--batch 4096] [--pool heldout]
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable

import numpy as np

import gencoord_env
from gencoord_env.batched import BatchedEngine, GameTree, ParallelVectorEnv


def best(measure: Callable[[float], float], seconds: float, rounds: int = 3) -> float:
    return max(measure(seconds) for _ in range(rounds))


def pipeline(kwargs: dict, seconds: float) -> float:
    env = gencoord_env.parallel_env(**kwargs)
    rng = np.random.default_rng(0)
    obs, infos = env.reset(seed=0)
    steps, t0 = 0, time.perf_counter()
    while True:
        turn = next(a for a, i in infos.items() if i["deciding"])
        valid = np.flatnonzero(obs[turn]["action_mask"])
        obs, _, _, _, infos = env.step({turn: int(valid[rng.integers(valid.size)])})
        steps += 1
        if not env.agents:
            if time.perf_counter() - t0 >= seconds:
                return steps / (time.perf_counter() - t0)
            obs, infos = env.reset()


def vector_entry_point(kwargs: dict, seconds: float, n: int = 8) -> float:
    import gymnasium

    view = {k: v for k, v in kwargs.items() if k != "infos"}
    vec = gymnasium.make_vec("gencoord_env/GenCoord-v0", num_envs=n, vectorization_mode="vector_entry_point", **view)
    rng = np.random.default_rng(0)
    vec.reset(seed=0)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        masks = vec.action_masks()
        vec.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
        steps += n
    return steps / (time.perf_counter() - t0)


def engine_steps(engine: BatchedEngine, seconds: float, uniform: Callable[[int], object]) -> float:
    engine.reset(seed=0)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(20):
            engine.step(engine.sample(uniform(engine.num_envs)))
        steps += 20 * engine.num_envs
    return steps / (time.perf_counter() - t0)


def vector_steps(vec: ParallelVectorEnv, seconds: float) -> float:
    rng = np.random.default_rng(0)
    vec.reset(seed=0)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        slots = vec.engine.sample(rng.random(vec.num_envs))
        vec.step({a: slots for a in vec.agents})
        steps += vec.num_envs
    return steps / (time.perf_counter() - t0)


def machine() -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores ({cores} usable by this process), "
            f"Python {platform.python_version()}, numpy {np.__version__}")


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds per measurement (best of 3 rounds)")
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--pool", default="heldout")
    ap.add_argument("--route", default="forward")
    ap.add_argument("--menu", default="default")
    ap.add_argument("--observations", default="tokens")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch measurement")
    args = ap.parse_args(argv)
    kwargs = dict(backend="sim", pool=args.pool, route=args.route, menu=args.menu, actions="menu",
                  observations=args.observations, infos="numbers")
    print(f"batched_throughput: {args.pool}, route {args.route}, menu {args.menu}, {args.observations} observations; "
          f"random valid menu play; best of 3 rounds of {args.seconds:g} s")
    print(f"machine: {machine()}; load average at start {os.getloadavg()[0]:.2f}")
    out: dict[str, float] = {}
    out["pipeline"] = best(lambda s: pipeline(kwargs, s), args.seconds)
    out["vector entry point"] = best(lambda s: vector_entry_point(kwargs, s), args.seconds)
    tree = GameTree(gencoord_env.parallel_env(**kwargs))
    t0 = time.perf_counter()
    nodes = tree.expand_all()
    build = time.perf_counter() - t0
    print(f"game tree: {nodes:,} nodes ({len(tree.observations):,} distinct observations) computed by the pipeline "
          f"in {build:.1f} s ({nodes / build:,.0f} nodes/s), once per pool, route, menu and observation form")
    rng = np.random.default_rng(0)
    engine = BatchedEngine(tree, args.batch, seed=0)
    out[f"batched engine, batch {args.batch}"] = best(lambda s: engine_steps(engine, s, rng.random), args.seconds)
    vec = ParallelVectorEnv(num_envs=args.batch, tree=tree, seed=0)
    out[f"  + observations gathered (ParallelVectorEnv), batch {args.batch}"] = best(lambda s: vector_steps(vec, s), args.seconds)
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            print("torch is not installed: no torch measurement")
        else:
            torch.set_num_threads(1)
            gen = torch.Generator().manual_seed(0)
            on_torch = BatchedEngine(tree, args.batch, seed=0, device="cpu")
            out[f"batched engine on torch (cpu tensors), batch {args.batch}"] = best(
                lambda s: engine_steps(on_torch, s, lambda n: torch.rand(n, generator=gen)), args.seconds)
    reference = out["pipeline"]
    for name, value in out.items():
        print(f"{name:64s} {value:14,.0f} decision steps/s  {value / reference:9,.1f}x the pipeline")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    print("targets: >= 1,000,000 decision steps/s on one core at batch 4,096; >= 100x the pipeline in the same run")
    return out


if __name__ == "__main__":
    main()
