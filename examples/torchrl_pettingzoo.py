"""TorchRL on the parallel env: ``PettingZooWrapper`` over menu actions and token observations.

Random actions (TorchRL's own, drawn from the masked action spec), then a tiny PPO loop (clipped
objective; advantage: the episode's reward minus the batch mean): one policy shared by both agents,
trained on the train pool and judged greedily on every held-out episode.

    python examples/torchrl_pettingzoo.py [--budget small]

``--budget tiny`` (one update of 1,000 steps: what the test suite runs) only shows the loop works; ``small``
already learns (README's RL table).

TorchRL moves ``action_mask`` out of each agent's observation to ``(agent, "action_mask")`` and masks
the action spec with it; ``use_mask=True`` adds ``(agent, "mask")``, false once the episode is over. Each
agent is a group of its own (``agent_a`` and ``agent_b`` do not end in a number), and ``infos="numbers"``
puts every info value under ``(agent, "info")``. The agent that is not deciding has only slot 0 open, and
its action is ignored.
"""
from __future__ import annotations

import argparse
import time

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn
from torchrl.envs.libs.pettingzoo import PettingZooWrapper
from torchrl.envs.utils import ExplorationType, exploration_type, set_exploration_type

import gencoord_env
from gencoord_env.tokens import as_tokenizer

BUDGETS = {"tiny": (1, 1000), "small": (2, 2000), "full": (8, 2000)}  # (PPO updates, env steps each)
MINIBATCH, EPOCHS, LR, CLIP = 250, 4, 1e-3, 0.2
MAX_TOKENS = 768  # the longest context is about 650 tokens
AGENTS = ("agent_a", "agent_b")
PRIOR = as_tokenizer(None).encode("PRIOR")[0]  # the shared prior starts here; the agent's own view before


def make_env(pool: str, seed: int = 0) -> PettingZooWrapper:
    env = gencoord_env.parallel_env(backend="sim", pool=pool, actions="menu", observations="tokens",
                                    max_tokens=MAX_TOKENS, infos="numbers", seed=seed)
    return PettingZooWrapper(env=env, use_mask=True, seed=seed)


class Policy(TensorDictModuleBase):
    """Shared by both agents: a sum of token embeddings -> MLP -> masked logits. A token has one embedding
    in the agent's own view and another in the shared prior, which names every binding: summed together,
    the one private mention of the binding would drown. Samples an action, or takes the most likely one
    under ``set_exploration_type(ExplorationType.DETERMINISTIC)``."""

    def __init__(self, vocab: int, slots: int, width: int = 64) -> None:
        super().__init__()
        self.in_keys = [(a, *k) for a in AGENTS for k in (("observation", "observation"),
                                                           ("observation", "observation_mask"), ("action_mask",))]
        self.out_keys = [(a, "action") for a in AGENTS]
        self.vocab = vocab
        self.embed = nn.EmbeddingBag(2 * vocab, width, mode="sum")
        nn.init.normal_(self.embed.weight, std=0.02)
        self.head = nn.Sequential(nn.Tanh(), nn.Linear(width, width), nn.Tanh(), nn.Linear(width, slots))

    def distribution(self, td: TensorDictBase, agent: str) -> torch.distributions.Categorical:
        tokens = td[agent, "observation", "observation"]
        in_prior = (tokens == PRIOR).cumsum(-1).clamp(max=1)
        weights = td[agent, "observation", "observation_mask"].float()
        summed = self.embed((tokens + self.vocab * in_prior).flatten(0, -2), per_sample_weights=weights.flatten(0, -2))
        logits = self.head(summed).view(*tokens.shape[:-1], -1)
        return torch.distributions.Categorical(logits=logits.masked_fill(~td[agent, "action_mask"], -1e9))

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        greedy = exploration_type() == ExplorationType.DETERMINISTIC
        with torch.no_grad():
            for agent in AGENTS:
                dist = self.distribution(tensordict, agent)
                tensordict[agent, "action"] = dist.probs.argmax(-1) if greedy else dist.sample()
        return tensordict


def episodes(data: TensorDictBase) -> tuple[int, float]:
    """(episodes ended, their success rate) in a rollout."""
    done = data["next", "done"].squeeze(-1)
    success = data["next", "agent_a", "info", "success"].squeeze(-1)[done]
    return int(done.sum()), float(success.mean()) if len(success) else 0.0


def advantages(data: TensorDictBase) -> torch.Tensor:
    """Each step's episode reward (it comes at the end; carried back to every decision) minus the mean."""
    reward = data["next", "agent_a", "reward"].flatten()  # both agents get the episode's reward
    done = data["next", "done"].flatten()
    returns = torch.zeros_like(reward)
    running = torch.zeros(())
    for t in reversed(range(len(reward))):
        running = reward[t] + running * ~done[t]
        returns[t] = running
    return returns - returns.mean()


def ppo(env: PettingZooWrapper, policy: Policy, updates: int, steps: int) -> None:
    optim = torch.optim.Adam(policy.parameters(), lr=LR)
    for k in range(updates):
        data = env.rollout(steps, policy=policy, break_when_any_done=False)
        advantage = advantages(data)
        with torch.no_grad():
            old = {a: policy.distribution(data, a).log_prob(data[a, "action"]).flatten() for a in AGENTS}
        for _ in range(EPOCHS):
            for batch in torch.randperm(steps).split(MINIBATCH):
                loss = torch.zeros(())
                for agent in AGENTS:  # only the deciding agent's step counts
                    deciding = data[agent, "info", "deciding"][batch].flatten()
                    logp = policy.distribution(data[batch], agent).log_prob(data[agent, "action"][batch]).flatten()
                    ratio = (logp - old[agent][batch]).exp()
                    a = advantage[batch]
                    loss = loss - (torch.min(ratio * a, ratio.clamp(1 - CLIP, 1 + CLIP) * a) * deciding).mean()
                optim.zero_grad()
                loss.backward()
                optim.step()
        n, success = episodes(data)
        print(f"update {k + 1}: {n} episodes, training success {success:.3f}")


def heldout_success(policy: Policy) -> tuple[int, float]:
    """(episodes, greedy success) over every held-out episode (both role permutations of each cluster)."""
    env = make_env("heldout")
    count = len(gencoord_env.parallel_env(backend="sim", pool="heldout").episodes)
    wins = 0.0
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        for k in range(count):
            td = env.reset(options={"index": k})
            while True:
                td = env.step(policy(td))
                if td["next", "done"].item():
                    wins += float(td["next", "agent_a", "info", "success"].item())
                    break
                td = td["next"]
    return count, wins / count


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", choices=BUDGETS, default="full")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    env = make_env("train", args.seed)
    start = time.perf_counter()
    updates, steps = BUDGETS[args.budget]
    n, random_success = episodes(env.rollout(steps, break_when_any_done=False))  # no policy: env.rand_action
    rate = steps / (time.perf_counter() - start)
    print(f"random policy: {n} episodes in {steps} steps ({rate:.0f} steps/s), success {random_success:.3f}")
    tokens = env.observation_spec["agent_a", "observation", "observation"]
    policy = Policy(int(tokens.space.high.max()) + 1, int(env.full_action_spec["agent_a", "action"].space.n))
    start = time.perf_counter()
    ppo(env, policy, updates, steps)
    seconds = time.perf_counter() - start
    count, success = heldout_success(policy)
    print(f"held-out success {success:.3f} over {count} episodes after {updates} updates of {steps} steps "
          f"({seconds:.0f} s of training)")
    return {"random_success": random_success, "heldout_success": success, "heldout_episodes": count, "seconds": seconds}


if __name__ == "__main__":
    main()
