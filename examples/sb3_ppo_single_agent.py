"""Stable-Baselines3 learns the sender's decision: sb3-contrib's MaskablePPO on the single-agent menu view
(the learner plays the first role, the rule agent the receiver), bag-of-words observations, trained on the
train pool and judged greedily on every held-out episode.

The policy samples only the menu slots the env marks valid (``env.action_masks()``, the observation's
``action_mask``). Plain PPO, which can pick any of the menu's slots, settles on one slot for both bindings
of some templates in some runs (50% on those templates): seeds 0-5 of this budget gave 0.80-1.0 held-out
success with it, and 0.94-1.0 masked (seeds 0-8).

    python examples/sb3_ppo_single_agent.py [--budget small] [--seed N]
"""
from __future__ import annotations

import argparse
import time

import torch
from sb3_contrib import MaskablePPO

import gencoord_env

BUDGETS = {"small": 10_240, "full": 20_480}  # environment steps (one sender decision each): 20 or 40 rollouts
VIEW = dict(role="first", partner="rule", backend="sim", actions="menu", observations="bag")


def train(timesteps: int, seed: int = 0) -> MaskablePPO:
    # One torch thread: the thread count changes the order of floating-point reductions and so the run.
    torch.set_num_threads(1)
    env = gencoord_env.gym_env(pool="train", seed=seed, **VIEW)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=512, batch_size=128, learning_rate=1e-3, seed=seed, verbose=0)
    return model.learn(total_timesteps=timesteps)


def heldout_success(model: MaskablePPO) -> float:
    """Greedy success over every held-out episode (both role permutations of each cluster)."""
    env = gencoord_env.gym_env(pool="heldout", **VIEW)
    episodes = len(env.unwrapped.env.episodes)
    wins = 0.0
    for k in range(episodes):
        obs, _ = env.reset(options={"index": k})
        action, _ = model.predict(obs, deterministic=True, action_masks=env.action_masks())
        _, reward, terminated, _, _ = env.step(int(action))
        assert terminated, "the sender decides once; the rule receiver finishes the episode"
        wins += reward
    return wins / episodes


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", choices=BUDGETS, default="full")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    model = train(BUDGETS[args.budget], args.seed)
    seconds = time.perf_counter() - start
    success = heldout_success(model)
    print(f"held-out success {success:.3f} after {BUDGETS[args.budget]} steps ({seconds:.0f} s of training)")
    return {"heldout_success": success, "seconds": seconds}


if __name__ == "__main__":
    main()
