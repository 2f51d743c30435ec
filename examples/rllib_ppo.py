"""RLlib PPO on the parallel env: menu actions, bag-of-words observations, one policy shared by both
agents, RLlib's action-masking PPO module; trained on the train pool, judged on every held-out episode.

RLlib pins gymnasium 1.2.x, so it lives in a virtual environment of its own:

    python3 -m venv rllib-venv && rllib-venv/bin/pip install 'ray[rllib]==2.60.0' torch==2.13.0 && rllib-venv/bin/pip install -e .
    rllib-venv/bin/python examples/rllib_ppo.py --budget small

Two adaptations, both in ``TurnBased`` below: RLlib's masking module reads the keys ``observations`` and
``action_mask`` (float), and only the deciding agent gets an observation, so RLlib asks only it for an
action (an RLlib multi-agent env names in its observations the agents that act next).
"""
from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium
import numpy as np
from pettingzoo import ParallelEnv

import gencoord_env

BUDGETS = {"small": 5, "full": 10}  # PPO iterations of 2,000 env steps
ENV = dict(backend="sim", actions="menu", observations="bag", infos="numbers")


class TurnBased(ParallelEnv):
    """The parallel env as RLlib wants it: the deciding agent's observation only, until the end."""

    def __init__(self, **kwargs: Any) -> None:
        self.env = gencoord_env.parallel_env(**ENV, **kwargs)
        self.metadata = self.env.metadata
        self.possible_agents = list(self.env.possible_agents)
        inner = self.env.observation_space(self.possible_agents[0])
        n = int(self.env.action_space(self.possible_agents[0]).n)
        space = gymnasium.spaces.Dict({"observations": inner["observation"],
                                       "action_mask": gymnasium.spaces.Box(0.0, 1.0, (n,), np.float32)})
        self._obs_space, self._act_space = space, self.env.action_space(self.possible_agents[0])

    def observation_space(self, agent: str) -> gymnasium.spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> gymnasium.spaces.Space:
        return self._act_space

    @property
    def agents(self) -> list[str]:  # type: ignore[override]
        return self.env.agents

    def _convert(self, obs: dict, infos: dict, done: bool) -> dict:
        return {a: {"observations": o["observation"], "action_mask": o["action_mask"].astype(np.float32)}
                for a, o in obs.items() if done or infos[a]["deciding"]}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, infos = self.env.reset(seed=seed, options=options)
        obs = self._convert(obs, infos, False)
        return obs, {a: infos[a] for a in obs}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        done = all(terms.values())
        obs = self._convert(obs, infos, done)
        keep = lambda d: {a: d[a] for a in obs}  # noqa: E731
        return obs, keep(rewards), keep(terms), keep(truncs), keep(infos)


def build(seed: int = 0):  # type: ignore[no-untyped-def]
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule
    from ray.tune.registry import register_env

    register_env("gencoord", lambda cfg: ParallelPettingZooEnv(TurnBased(pool=cfg["pool"], seed=cfg["seed"])))
    module = RLModuleSpec(module_class=ActionMaskingTorchRLModule, model_config={"fcnet_hiddens": [64, 64]})
    config = (
        PPOConfig()
        .environment("gencoord", env_config={"pool": "train", "seed": seed})
        .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent, *args, **kwargs: "shared")
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={"shared": module}))
        # short fragments: RLlib revisits every finished episode of a fragment at each step, and ours last 1-2 steps
        .env_runners(num_env_runners=0, rollout_fragment_length=100)
        .training(train_batch_size_per_learner=2000, minibatch_size=250, num_epochs=4, lr=1e-3)
        .debugging(seed=seed)
    )
    return config.build_algo()


def heldout_success(algo) -> float:  # type: ignore[no-untyped-def]
    """Greedy success of the shared module on every held-out episode, both agents played by it."""
    import torch

    module = algo.get_module("shared")
    env = TurnBased(pool="heldout")
    wins = 0
    for k in range(len(env.env.episodes)):
        obs, _ = env.reset(options={"index": k})
        rewards: dict = {}
        while env.agents:
            [(agent, o)] = obs.items()
            batch = {"obs": {key: torch.as_tensor(v)[None] for key, v in o.items()}}
            logits = module.forward_inference(batch)["action_dist_inputs"][0]
            obs, rewards, _, _, _ = env.step({agent: int(logits.argmax())})
        wins += max(rewards.values()) == 1.0
    return wins / len(env.env.episodes)


def main(argv: list[str] | None = None) -> dict[str, float]:
    import ray

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", choices=BUDGETS, default="full")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    ray.init(include_dashboard=False, log_to_driver=False)
    start = time.perf_counter()
    algo = build(args.seed)
    episodes = 0
    for i in range(BUDGETS[args.budget]):
        result = algo.train()
        runners = result["env_runners"]
        episodes += runners["num_episodes"]
        success = np.mean(list(runners["agent_episode_returns_mean"].values()))  # binary reward: 1 on success
        print(f"iteration {i + 1}: {episodes} episodes, training success {success:.3f}")
    seconds = time.perf_counter() - start
    success = heldout_success(algo)
    print(f"held-out success {success:.3f} after {BUDGETS[args.budget]} iterations, {episodes} episodes, {seconds:.0f} s")
    algo.stop()
    ray.shutdown()
    return {"heldout_success": success, "episodes": episodes, "seconds": seconds}


if __name__ == "__main__":
    main()
