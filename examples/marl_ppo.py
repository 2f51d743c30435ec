"""Independent PPO and MAPPO on the parallel menu env: both agents learn, each with its own actor.

``--algo ippo``: each agent's critic reads its own observation. ``--algo mappo``: one centralized critic
reads ``env.state()`` (the centralized view, in the same bag-of-words mode) while the actors stay
decentralized. ``--menu default`` keeps the receiver's copy slot; ``--menu branches`` makes the receiver
map the request's content to its branch. Trained on the train pool (menu + bag), judged greedily on every
held-out and horizon episode and on the request pool with the request removed (``RequestRemoval``: the
50% ceiling of private information). Training success per update goes to a CSV (``RunLog``) from the
parallel env's ``EpisodeStatistics``.

    python examples/marl_ppo.py --algo mappo --menu branches [--budget small] [--seed N] [--log run.csv]

PPO here: an episode's reward (0 or 1, at its end) is every one of its decisions' return (episodes have
one or two decisions; no discount); advantage = return - critic value, normalized per batch; clipped
objective, value loss and an entropy bonus; masked logits (a masked slot is never sampled).
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

import gencoord_env
from gencoord_env.commands.run_log import RunLog
from gencoord_env.wrappers import EpisodeStatistics, RequestRemoval

BUDGETS = {"tiny": 3, "small": 30, "full": 60}  # PPO updates of EPISODES training episodes each
EPISODES, EPOCHS, MINIBATCH, LR, CLIP, ENTROPY, WIDTH = 256, 4, 128, 2e-3, 0.2, 0.01, 64
AGENTS = ("agent_a", "agent_b")
EVAL_POOLS = ("heldout", "horizon", "request_removed")


def make_env(pool: str, menu: str, seed: int = 0) -> Any:
    return gencoord_env.parallel_env(backend="sim", pool=pool, actions="menu", observations="bag", menu=menu, seed=seed)


def features(bag: np.ndarray) -> torch.Tensor:
    return torch.log1p(torch.as_tensor(bag, dtype=torch.float32))


def mlp(inputs: int, outputs: int) -> nn.Module:
    return nn.Sequential(nn.Linear(inputs, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, outputs))


def distribution(actor: nn.Module, x: torch.Tensor, mask: torch.Tensor) -> torch.distributions.Categorical:
    return torch.distributions.Categorical(logits=actor(x).masked_fill(~mask, -1e9))


class Learners(nn.Module):
    """One actor per agent; critics: one per agent over its observation (ippo) or one over the state (mappo)."""

    def __init__(self, inputs: int, slots: int, algo: str) -> None:
        super().__init__()
        self.algo = algo
        self.actors = nn.ModuleDict({a: mlp(inputs, slots) for a in AGENTS})
        self.critics = nn.ModuleDict({"state": mlp(inputs, 1)} if algo == "mappo" else {a: mlp(inputs, 1) for a in AGENTS})

    def critic(self, agent: str) -> nn.Module:
        return self.critics["state" if self.algo == "mappo" else agent]

    def act(self, agent: str, obs: dict[str, np.ndarray], greedy: bool = False) -> tuple[int, float]:
        with torch.no_grad():
            dist = distribution(self.actors[agent], features(obs["observation"]), torch.as_tensor(obs["action_mask"] == 1))
            action = dist.probs.argmax() if greedy else dist.sample()
            return int(action), float(dist.log_prob(action))


def collect(env: Any, learners: Learners, episodes: int) -> dict[str, dict[str, list[Any]]]:
    """Play ``episodes`` episodes; per agent its decisions' inputs, actions, log-probs and returns."""
    batch: dict[str, dict[str, list[Any]]] = {a: {k: [] for k in ("x", "mask", "action", "logp", "critic_x", "ret")} for a in AGENTS}
    for _ in range(episodes):
        obs, infos = env.reset()
        decided: list[str] = []
        while env.agents:
            turn = next(a for a in env.agents if infos[a]["deciding"])
            action, logp = learners.act(turn, obs[turn])
            b = batch[turn]
            b["x"].append(features(obs[turn]["observation"]))
            b["mask"].append(torch.as_tensor(obs[turn]["action_mask"] == 1))
            b["action"].append(action)
            b["logp"].append(logp)
            b["critic_x"].append(features(env.unwrapped.state()) if learners.algo == "mappo" else b["x"][-1])
            decided.append(turn)
            obs, rewards, _, _, infos = env.step({turn: action})
        for agent in decided:
            batch[agent]["ret"].append(float(rewards[agent]))
    return batch


def update(learners: Learners, optim: torch.optim.Optimizer, batch: dict[str, dict[str, list[Any]]]) -> None:
    for agent in AGENTS:
        b = batch[agent]
        if not b["action"]:
            continue
        x, mask, critic_x = torch.stack(b["x"]), torch.stack(b["mask"]), torch.stack(b["critic_x"])
        action, old = torch.tensor(b["action"]), torch.tensor(b["logp"])
        ret = torch.tensor(b["ret"])
        actor, critic = learners.actors[agent], learners.critic(agent)
        for _ in range(EPOCHS):
            for idx in torch.randperm(len(action)).split(MINIBATCH):
                value = critic(critic_x[idx]).squeeze(-1)
                adv = ret[idx] - value.detach()
                adv = (adv - adv.mean()) / (adv.std() + 1e-8) if len(idx) > 1 else adv
                dist = distribution(actor, x[idx], mask[idx])
                ratio = (dist.log_prob(action[idx]) - old[idx]).exp()
                policy = -torch.min(ratio * adv, ratio.clamp(1 - CLIP, 1 + CLIP) * adv).mean()
                loss = policy + 0.5 * ((value - ret[idx]) ** 2).mean() - ENTROPY * dist.entropy().mean()
                optim.zero_grad()
                loss.backward()
                optim.step()


def success(learners: Learners, pool: str, menu: str) -> float:
    """Greedy success over every episode of ``pool`` (``request_removed``: the request pool, REQ removed)."""
    env = RequestRemoval(make_env("request", menu)) if pool == "request_removed" else make_env(pool, menu)
    count = len(env.unwrapped.episodes)
    wins = 0.0
    for k in range(count):
        obs, infos = env.reset(options={"index": k})
        while env.agents:
            turn = next(a for a in env.agents if infos[a]["deciding"])
            obs, rewards, _, _, infos = env.step({turn: learners.act(turn, obs[turn], greedy=True)[0]})
        wins += rewards[turn]
    return wins / count


def train(algo: str, menu: str, updates: int, seed: int = 0,
          log: Callable[..., None] | None = None) -> tuple[Learners, list[float]]:
    """Train for ``updates`` PPO updates; the training success of each update (also passed to ``log``)."""
    torch.manual_seed(seed)
    torch.set_num_threads(1)  # one thread: the thread count changes the order of reductions and so the run
    env = EpisodeStatistics(make_env("train", menu, seed), window=EPISODES)
    space = env.observation_space(AGENTS[0])
    learners = Learners(space["observation"].shape[0], space["action_mask"].shape[0], algo)
    optim = torch.optim.Adam(learners.parameters(), lr=LR)
    curve = []
    for k in range(updates):
        update(learners, optim, collect(env, learners, EPISODES))
        curve.append(float(np.mean(env.successes)))
        if log is not None:
            log((k + 1) * EPISODES, train_success=curve[-1])
    return learners, curve


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=("ippo", "mappo"), default="mappo")
    parser.add_argument("--menu", choices=("default", "branches"), default="default")
    parser.add_argument("--budget", choices=BUDGETS, default="full")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", default=None, help="CSV file for the training curve (RunLog)")
    args = parser.parse_args(argv)
    run_log = RunLog(args.log) if args.log else None
    start = time.perf_counter()
    learners, curve = train(args.algo, args.menu, BUDGETS[args.budget], args.seed, run_log.write if run_log else None)
    seconds = time.perf_counter() - start
    result: dict[str, Any] = {pool: success(learners, pool, args.menu) for pool in EVAL_POOLS}
    result.update(curve=curve, seconds=seconds, episodes=len(curve) * EPISODES)
    print(f"{args.algo} menu={args.menu} seed={args.seed}: " + ", ".join(f"{p} {result[p]:.3f}" for p in EVAL_POOLS)
          + f" after {result['episodes']} training episodes ({seconds:.0f} s)")
    return result


if __name__ == "__main__":
    main()
