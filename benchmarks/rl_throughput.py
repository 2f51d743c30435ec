"""Throughput of the learning interfaces, one process, ``backend="sim"``, measured side by side:

- menu steps/s: the parallel env with ``actions="menu"`` stepped with uniformly random *valid* slots
  (``action_mask``), every observation view the learner would use (``text``, ``tokens``, ``bag``);
- rule-agent episodes/s on the text route (the reference the menu figure is compared with).

Targets: >= 10,000 menu steps/s on one core, and menu steps/s >= 5x the text route's rule-agent
episodes/s in the same run.

    python benchmarks/rl_throughput.py [--seconds 3] [--profile VIEW]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import numpy as np

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.agents.rollout import run_episode


def menu_steps(observations: str, seconds: float, seed: int = 0) -> tuple[float, float]:
    """(steps/s, episodes/s) of random valid menu play."""
    env = gencoord_env.parallel_env(backend="sim", pool="heldout", actions="menu", observations=observations)
    rng = np.random.default_rng(seed)
    steps = episodes = 0
    obs, infos = env.reset(seed=seed)
    t0 = time.perf_counter()
    while True:
        turn = next(a for a, i in infos.items() if i["deciding"])
        valid = np.flatnonzero(obs[turn]["action_mask"])
        # valid[integers] draws the same uniform slot as rng.choice(valid) at a fraction of its cost
        obs, _, terms, _, infos = env.step({turn: int(valid[rng.integers(valid.size)])})
        steps += 1
        if not env.agents:
            episodes += 1
            if time.perf_counter() - t0 >= seconds:
                break
            obs, infos = env.reset()
    dt = time.perf_counter() - t0
    return steps / dt, episodes / dt


def rule_episodes(seconds: float) -> float:
    env = gencoord_env.parallel_env(backend="sim", pool="heldout")
    policy = make_policy("rule")
    n, size = 0, len(env.episodes)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        run_episode(env, policy, index=n % size)
        n += 1
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds per measurement (best of 3 rounds)")
    ap.add_argument("--profile", choices=["text", "tokens", "bag"], help="profile menu play with this view")
    args = ap.parse_args()
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        menu_steps(args.profile, args.seconds)
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(20)
        print(out.getvalue())
        return
    print(f"rl_throughput: heldout, backend sim, one process; best of 3 rounds of {args.seconds:.0f} s")
    reference = max(rule_episodes(args.seconds) for _ in range(3))
    print(f"text route, rule agents        {reference:10,.0f} episodes/s")
    for view in ("text", "tokens", "bag"):
        best = max((menu_steps(view, args.seconds, seed) for seed in range(3)), key=lambda r: r[0])
        print(f"menu, {view:6s} observations    {best[0]:10,.0f} steps/s ({best[1]:,.0f} episodes/s)  "
              f"{best[0] / reference:4.1f}x the rule-agent episodes/s")
    print("targets: >= 10,000 menu steps/s; >= 5x the text route's rule-agent episodes/s")


if __name__ == "__main__":
    main()
