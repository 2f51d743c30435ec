"""SuperSuit vector env over the parallel env: each agent becomes one row of a Gymnasium vector env
(``pettingzoo_env_to_vec_env_v1``), and copies of the env are concatenated (``concat_vec_envs_v1``).
Steps with random actions that respect the action mask and reports throughput and success.

    python examples/supersuit_vector.py [--budget small]

The agent that is not deciding has only slot 0 open, and its action is ignored.
Numeric views only (``observations="bag"`` or ``"tokens"``): SuperSuit refuses ``Text`` spaces.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import supersuit as ss

import gencoord_env

BUDGETS = {"small": 200, "full": 5_000}  # vector steps
COPIES = 8


def make_vec_env(copies: int = COPIES, seed: int = 0):  # type: ignore[no-untyped-def]
    env = gencoord_env.parallel_env(backend="sim", pool="heldout", actions="menu", observations="bag",
                                    infos="numbers", seed=seed)
    return ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(env), copies, num_cpus=0, base_class="gymnasium")


def masked_random(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One allowed slot per row, uniformly: the largest random score among the allowed slots."""
    scores = rng.random(mask.shape) * mask
    return scores.argmax(axis=1)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", choices=BUDGETS, default="full")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    vec = make_vec_env(seed=args.seed)
    rng = np.random.default_rng(args.seed)
    obs, _ = vec.reset(seed=args.seed)
    episodes = successes = 0
    start = time.perf_counter()
    for _ in range(BUDGETS[args.budget]):
        obs, rewards, terminations, _, _ = vec.step(masked_random(obs["action_mask"], rng))
        # Rows 2k and 2k+1 are the two agents of copy k; they end together with the same reward. (The final
        # infos are not usable here: the vector env merges the next episode's reset infos over them.)
        done = terminations.reshape(COPIES, 2).all(axis=1)
        episodes += int(done.sum())
        successes += float(rewards.reshape(COPIES, 2)[done, 0].sum())
    seconds = time.perf_counter() - start
    steps = BUDGETS[args.budget] * COPIES
    vec.close()
    print(f"{COPIES} envs x 2 agents = {vec.num_envs} rows; {steps} env steps in {seconds:.1f} s "
          f"({steps / seconds:.0f} env steps/s, {episodes / seconds:.0f} episodes/s); "
          f"{episodes} episodes, random success {successes / max(episodes, 1):.3f}")
    return {"env_steps_per_s": steps / seconds, "episodes": episodes, "success": successes / max(episodes, 1)}


if __name__ == "__main__":
    main()
