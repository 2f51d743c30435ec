"""Completions scored per second by the env-replay reward (``gencoord_env.train.decisions.Replay``), one process.

Each score resets the episode, replays the prefix, plays the completion as the decider's action and lets
the rule partner finish the episode on the sim. Three mixes of completions over the ``train`` pool's
forward decisions (half sender, half receiver):

- ``reference``: every completion is the reference action (every episode runs to SUCCESS: the most work);
- ``mixed``: a quarter each of reference, wrong branch (RESOLUTION_CONFLICT or a failed terminal check),
  contract reject and parse failure: roughly what a half-trained policy writes;
- ``grpo``: groups of 8 completions per decision (each ``mixed`` variant twice) through ``EnvReward`` in
  batches of 64, as TRL calls it; identical completions of one decision in a batch are replayed once, so
  half of these completions cost no replay (sampled groups repeat completions too).

Each mix is timed twice: a first pass with every package memo cleared (``gencoord_env.caches.clear``:
episode worlds, parsed records), which is what novel completions on rarely seen episodes cost, and
repeated passes over the same completions (warm memos), the best case.

    python benchmarks/grpo_scorer.py [--completions 4000] [--rounds 3]
"""
from __future__ import annotations

import argparse
import re
import time

from gencoord_env import caches
from gencoord_env.train.decisions import DecisionPoint, Replay, decision_points


def variants(point: DecisionPoint) -> list[str]:
    other = {"SITE_A": "SITE_B", "SITE_B": "SITE_A", "site_a": "site_b", "site_b": "site_a"}
    wrong = re.sub(r"SITE_[AB]|site_[ab]", lambda m: other[m.group(0)], point.reference)
    reject = point.reference.replace("REQ -", f"REQ {point.agent} control.wait()") if "REQ -" in point.reference \
        else point.reference.replace("REQ agent_", "REQ agent_x")
    return [point.reference, wrong, reject, point.reference[: len(point.reference) // 2]]


def rate(replay: Replay, work: list[tuple[DecisionPoint, str]]) -> float:
    t0 = time.perf_counter()
    for point, completion in work:
        replay.score_point(point, completion)
    return len(work) / (time.perf_counter() - t0)


def grpo_rate(replay: Replay, points: list[DecisionPoint], n: int, group: int = 8) -> float:
    from gencoord_env.train.grpo import EnvReward

    reward = EnvReward(points, replay)
    ids, completions = [], []
    for k in range(n // group):
        point = points[k % len(points)]
        ids += [point.id] * group
        completions += [variants(point)[i % 4] for i in range(group)]
    t0 = time.perf_counter()
    for start in range(0, len(ids), 64):  # one TRL generation batch: 8 prompts x 8 completions
        reward(prompts=[""] * 64, completions=completions[start : start + 64], decision_id=ids[start : start + 64])
    return len(ids) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--completions", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    points = decision_points("train", "forward")
    replay = Replay("train", "forward", partial_credit=True)
    reference = [(points[k % len(points)], points[k % len(points)].reference) for k in range(args.completions)]
    mixed = [(points[k % len(points)], variants(points[k % len(points)])[(k // len(points)) % 4]) for k in range(args.completions)]
    print(f"grpo_scorer: train/forward, {len(points)} decision points, {args.completions} completions x {args.rounds} rounds")
    for name, measure in (("reference", lambda: rate(replay, reference)), ("mixed", lambda: rate(replay, mixed)),
                          ("grpo", lambda: grpo_rate(replay, points, args.completions))):
        caches.clear()
        first = measure()
        rates = [measure() for _ in range(args.rounds)]
        print(f"{name:9s} completions/s: first pass {first:,.0f}; repeated: best {max(rates):,.0f}  "
              f"median {sorted(rates)[len(rates) // 2]:,.0f}")


if __name__ == "__main__":
    main()
