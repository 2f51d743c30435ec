"""Throughput of the learning interfaces, one process, ``backend="sim"``, measured side by side:

- menu steps/s: the parallel env with ``actions="menu"`` stepped with uniformly random *valid* slots
  (``action_mask``), every observation view the learner would use (``text``, ``tokens``, ``bag``);
- rule-agent episodes/s on the text route (the reference the menu figure is compared with).

Targets: >= 10,000 menu steps/s on one core, and menu steps/s >= 5x the text route's rule-agent
episodes/s in the same run.

``--breakdown`` plays both again with every pipeline stage (``Stages``) and the world's calls timed, and
prints where the microseconds of a menu step and of a rule-agent episode go; what is left of ``step`` /
``reset`` after the timed parts is the env's own work (contexts, observations, menus, infos, parse,
contract check, trace). The wrappers add a little time of their own, so its totals run slightly slower.

    python benchmarks/rl_throughput.py [--seconds 3] [--profile VIEW] [--breakdown]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.agents.rollout import run_episode
from gencoord_env.envs.gencoord.stages import Stages
from gencoord_env.world.sim import SimWorld

#: the stages a breakdown times, as the session calls them
TIMED_STAGES = ("deliver", "respond", "resolve_forward", "resolve_feedback", "resolve_joint", "resolve_edges",
                "materialize", "compile", "verify")


class Clock:
    """Seconds spent in named parts (``--breakdown``)."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - t
        return timed

    def env(self, **kwargs: Any) -> Any:
        """A sim env whose stages and world calls are timed."""
        world = SimWorld()
        for call in ("reset", "run", "observe"):
            setattr(world, call, self.wrap(f"world.{call}", getattr(world, call)))
        stages = Stages()
        stages = stages.replace(**{name: self.wrap(name, getattr(stages, name)) for name in TIMED_STAGES})
        return gencoord_env.parallel_env(backend="sim", pool="heldout", world=world, stages=stages, **kwargs)


def menu_steps(observations: str, seconds: float, seed: int = 0, clock: Clock | None = None) -> tuple[float, float]:
    """(steps/s, episodes/s) of random valid menu play."""
    kwargs = dict(actions="menu", observations=observations)
    env = clock.env(**kwargs) if clock else gencoord_env.parallel_env(backend="sim", pool="heldout", **kwargs)
    rng = np.random.default_rng(seed)
    steps = episodes = 0
    obs, infos = env.reset(seed=seed)
    if clock:
        clock.seconds.clear()
        env.step, env.reset = clock.wrap("env.step", env.step), clock.wrap("env.reset", env.reset)
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
    if clock:
        clock.seconds["total"], clock.seconds["count"] = dt, steps
    return steps / dt, episodes / dt


def rule_episodes(seconds: float, clock: Clock | None = None) -> float:
    env = clock.env() if clock else gencoord_env.parallel_env(backend="sim", pool="heldout")
    policy = make_policy("rule")
    if clock:
        run_episode(env, policy, index=0)
        clock.seconds.clear()
        env.step, env.reset = clock.wrap("env.step", env.step), clock.wrap("env.reset", env.reset)
        policy.act = clock.wrap("policy.act", policy.act)  # type: ignore[method-assign]
    n, size = 0, len(env.episodes)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        run_episode(env, policy, index=n % size)
        n += 1
    dt = time.perf_counter() - t0
    if clock:
        clock.seconds["total"], clock.seconds["count"] = dt, n
    return n / dt


def breakdown(clock: Clock, unit: str) -> str:
    """Microseconds per ``unit`` (a menu step, a rule-agent episode) in each timed part."""
    s, n = clock.seconds, clock.seconds["count"]

    def us(*names: str) -> float:
        return sum(s[k] for k in names) / n * 1e6

    world = ("world.reset", "world.run", "world.observe")
    stages = [k for k in TIMED_STAGES if s[k]]
    rows = [("total", us("total")), ("  outside the env (learner / policy, loop)", us("total") - us("env.step", "env.reset")),
            ("  env.reset", us("env.reset")), ("    world.reset", us("world.reset")),
            ("    env's own work", us("env.reset") - us("world.reset")), ("  env.step", us("env.step"))]
    rows += [(f"    {k}", us(k)) for k in stages] + [(f"    {k}", us(k)) for k in world[1:]]
    rows += [("    env's own work", us("env.step") - us(*stages, *world[1:]))]
    if s["policy.act"]:
        rows.insert(2, ("    of which policy.act", us("policy.act")))
    return "\n".join(f"{name:48s} {value:8.1f} us/{unit}" for name, value in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds per measurement (best of 3 rounds)")
    ap.add_argument("--profile", choices=["text", "tokens", "bag"], help="profile menu play with this view")
    ap.add_argument("--breakdown", action="store_true", help="also time each stage and the world's calls")
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
    if args.breakdown:
        clock = Clock()
        rule_episodes(args.seconds, clock)
        print(f"\nwhere the time goes (stages and world calls timed), rule agents on the text route:\n"
              f"{breakdown(clock, 'episode')}")
        for view in ("text", "tokens", "bag"):
            menu_steps(view, args.seconds, clock=clock)
            print(f"\nmenu, {view} observations:\n{breakdown(clock, 'step')}")


if __name__ == "__main__":
    main()
