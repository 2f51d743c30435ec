"""Independent PPO and MAPPO on the parallel menu env: both agents learn, each with its own actor.

``--algo ippo``: each agent's critic reads its own observation. ``--algo mappo``: one centralized critic
reads ``env.state()`` (the centralized view, in the same bag-of-words mode) while the actors stay
decentralized. ``--menu default`` keeps the receiver's copy slot; ``--menu branches`` makes the receiver
map the request's content to its branch. ``--policy mlp``: each actor is a multilayer perceptron over the
bag of words, one logit per slot index; ``--policy slots``: each actor scores every slot from its label
with one shared network (``gencoord_env.agents.slots.SlotNet``: a slot index or a branch name carries no
convention, so the pair must read the fact and the message). ``--learn first`` / ``second``: only the
decisions of that role learn, the rule agent plays the other (``second``: an observation-only receiver
beside the rule sender); ``--listener-first K``: the second role learns alone beside the rule sender for
the first K updates, then both roles learn (the sender from scratch). Trained on the train pool (menu +
bag), judged greedily on every held-out and horizon episode and on the request pool with the request
removed (``RequestRemoval``: the 50% ceiling of private information). Training success per update goes to
a CSV (``RunLog``) from the parallel env's ``EpisodeStatistics``; ``--save`` writes the actors as one
checkpoint (``MenuPolicy.load``; ``gencoord experiment evaluate --first slots:PATH``).

    python examples/marl_ppo.py --algo mappo --menu branches [--policy slots] [--budget small] [--seed N] [--log run.csv]

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
from gencoord_env.agents import make_policy
from gencoord_env.agents.slots import KINDS, MenuPolicy, batch, make_net, mlp
from gencoord_env.commands.run_log import RunLog
from gencoord_env.wrappers import EpisodeStatistics, RequestRemoval

BUDGETS = {"tiny": 3, "small": 30, "full": 60}  # PPO updates of EPISODES training episodes each
EPISODES, EPOCHS, MINIBATCH, LR, CLIP, ENTROPY, WIDTH = 256, 4, 128, 2e-3, 0.2, 0.01, 64
AGENTS = ("agent_a", "agent_b")
EVAL_POOLS = ("heldout", "horizon", "request_removed")
LEARN = {"both": (0, 1), "first": (0,), "second": (1,)}


def make_env(pool: str, menu: str, seed: int = 0) -> Any:
    return gencoord_env.parallel_env(backend="sim", pool=pool, actions="menu", observations="bag", menu=menu, seed=seed)


def features(bag: np.ndarray) -> torch.Tensor:
    return torch.log1p(torch.as_tensor(bag, dtype=torch.float32))


class Learners(nn.Module):
    """One actor per agent; critics: one per agent over its observation (ippo) or one over the state (mappo)."""

    def __init__(self, inputs: int, slots: int, algo: str, policy: str = "mlp") -> None:
        super().__init__()
        self.algo, self.policy = algo, policy
        self.actors = nn.ModuleDict({a: make_net(policy, inputs // 2, slots, WIDTH) for a in AGENTS})
        self.critics = nn.ModuleDict({"state": mlp(inputs, 1, WIDTH)} if algo == "mappo" else {a: mlp(inputs, 1, WIDTH) for a in AGENTS})

    def critic(self, agent: str) -> nn.Module:
        return self.critics["state" if self.algo == "mappo" else agent]

    def act(self, agent: str, obs: dict[str, np.ndarray], greedy: bool = False) -> tuple[int, float]:
        with torch.no_grad():
            dist = torch.distributions.Categorical(logits=self.actors[agent](*batch([obs])))
            action = dist.probs.argmax(-1) if greedy else dist.sample()
            return int(action), float(dist.log_prob(action))

    def policy_of(self, menu: str, about: dict[str, Any] | None = None) -> MenuPolicy:
        """The actors as one policy (``MenuPolicy``: save it, or play it in any env); ``about``: how they were trained."""
        return MenuPolicy(dict(self.actors.items()), self.policy, menu, about=about)


class Partner:
    """Plays the decisions of the roles that do not learn: the rule agent, from the full infos."""

    def __init__(self, env: Any, learned: tuple[int, ...]) -> None:
        self.env, self.learned, self.rule = env.unwrapped, learned, make_policy("rule")

    def plays(self, agent: str) -> bool:
        return self.env.session.episode.role_agents.index(agent) not in self.learned

    def act(self, agent: str) -> str:
        return self.rule.act(self.env.observation_text(agent), self.env.full_infos()[agent])


def collect(env: Any, learners: Learners, episodes: int, learned: tuple[int, ...] = (0, 1)) -> dict[str, dict[str, list[Any]]]:
    """Play ``episodes`` episodes; per agent its learned decisions' observations, actions, log-probs and returns."""
    batch_: dict[str, dict[str, list[Any]]] = {a: {k: [] for k in ("obs", "action", "logp", "critic_x", "ret")} for a in AGENTS}
    partner = Partner(env, learned)
    for _ in range(episodes):
        obs, infos = env.reset()
        decided: list[str] = []
        while env.agents:
            turn = next(a for a in env.agents if infos[a]["deciding"])
            if partner.plays(turn):
                obs, rewards, _, _, infos = env.step({turn: partner.act(turn)})
                continue
            action, logp = learners.act(turn, obs[turn])
            b = batch_[turn]
            b["obs"].append(obs[turn])
            b["action"].append(action)
            b["logp"].append(logp)
            b["critic_x"].append(features(env.unwrapped.state() if learners.algo == "mappo" else obs[turn]["observation"]))
            decided.append(turn)
            obs, rewards, _, _, infos = env.step({turn: action})
        for agent in decided:
            batch_[agent]["ret"].append(float(rewards[agent]))
    return batch_


def update(learners: Learners, optim: torch.optim.Optimizer, batch_: dict[str, dict[str, list[Any]]]) -> None:
    for agent in AGENTS:
        b = batch_[agent]
        if not b["action"]:
            continue
        bag, labels, mask = batch(b["obs"])
        critic_x = torch.stack(b["critic_x"])
        action, old = torch.tensor(b["action"]), torch.tensor(b["logp"])
        ret = torch.tensor(b["ret"])
        actor, critic = learners.actors[agent], learners.critic(agent)
        for _ in range(EPOCHS):
            for idx in torch.randperm(len(action)).split(MINIBATCH):
                value = critic(critic_x[idx]).squeeze(-1)
                adv = ret[idx] - value.detach()
                adv = (adv - adv.mean()) / (adv.std() + 1e-8) if len(idx) > 1 else adv
                dist = torch.distributions.Categorical(logits=actor(bag[idx], labels[idx], mask[idx]))
                ratio = (dist.log_prob(action[idx]) - old[idx]).exp()
                policy = -torch.min(ratio * adv, ratio.clamp(1 - CLIP, 1 + CLIP) * adv).mean()
                loss = policy + 0.5 * ((value - ret[idx]) ** 2).mean() - ENTROPY * dist.entropy().mean()
                optim.zero_grad()
                loss.backward()
                optim.step()


def success(learners: Learners, pool: str, menu: str, learned: tuple[int, ...] = (0, 1), every: int = 1) -> float:
    """Greedy success over every ``every``-th episode of ``pool`` (``request_removed``: the request pool, REQ
    removed)."""
    env = RequestRemoval(make_env("request", menu)) if pool == "request_removed" else make_env(pool, menu)
    partner = Partner(env, learned)
    indices = range(0, len(env.unwrapped.episodes), every)
    wins = 0.0
    for k in indices:
        obs, infos = env.reset(options={"index": k})
        while env.agents:
            turn = next(a for a in env.agents if infos[a]["deciding"])
            action = partner.act(turn) if partner.plays(turn) else learners.act(turn, obs[turn], greedy=True)[0]
            obs, rewards, _, _, infos = env.step({turn: action})
        wins += rewards[turn]
    return wins / len(indices)


def train(algo: str, menu: str, updates: int, seed: int = 0, log: Callable[..., None] | None = None,
          policy: str = "mlp", learn: str = "both", listener_first: int = 0,
          episodes: int = EPISODES) -> tuple[Learners, list[float]]:
    """Train for ``updates`` PPO updates of ``episodes`` episodes; the training success of each update (also
    passed to ``log``)."""
    torch.manual_seed(seed)
    torch.set_num_threads(1)  # one thread: the thread count changes the order of reductions and so the run
    env = EpisodeStatistics(make_env("train", menu, seed), window=episodes)
    space = env.observation_space(AGENTS[0])
    learners = Learners(space["observation"].shape[0], space["action_mask"].shape[0], algo, policy)
    optim = torch.optim.Adam(learners.parameters(), lr=LR)
    curve = []
    for k in range(updates):
        learned = LEARN["second"] if k < listener_first else LEARN[learn]
        update(learners, optim, collect(env, learners, episodes, learned))
        curve.append(float(np.mean(env.successes)))
        if log is not None:
            log((k + 1) * episodes, train_success=curve[-1])
    return learners, curve


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=("ippo", "mappo"), default="mappo")
    parser.add_argument("--menu", choices=("default", "branches"), default="default")
    parser.add_argument("--policy", choices=KINDS, default="mlp", help="actor: bag MLP, or the label-reading slot scorer")
    parser.add_argument("--learn", choices=sorted(LEARN), default="both", help="roles that learn; the rule agent plays the others")
    parser.add_argument("--listener-first", type=int, default=0, metavar="K",
                        help="the first K updates train the second role beside the rule sender")
    parser.add_argument("--budget", choices=BUDGETS, default="full")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", default=None, help="CSV file for the training curve (RunLog)")
    parser.add_argument("--save", default=None, help="checkpoint file for the trained actors (MenuPolicy)")
    args = parser.parse_args(argv)
    run_log = RunLog(args.log) if args.log else None
    start = time.perf_counter()
    learners, curve = train(args.algo, args.menu, BUDGETS[args.budget], args.seed, run_log.write if run_log else None,
                            args.policy, args.learn, args.listener_first)
    seconds = time.perf_counter() - start
    learned = LEARN[args.learn]
    result: dict[str, Any] = {pool: success(learners, pool, args.menu, learned) for pool in EVAL_POOLS}
    result.update(curve=curve, seconds=seconds, episodes=len(curve) * EPISODES)
    if args.save:
        about = {k: getattr(args, k) for k in ("algo", "menu", "policy", "learn", "listener_first", "budget", "seed")}
        result["checkpoint"] = str(learners.policy_of(args.menu, about).save(args.save))
    print(f"{args.algo} {args.policy} menu={args.menu} learn={args.learn} seed={args.seed}: "
          + ", ".join(f"{p} {result[p]:.3f}" for p in EVAL_POOLS)
          + f" after {result['episodes']} training episodes ({seconds:.0f} s)")
    return result


if __name__ == "__main__":
    main()
