"""OrderSequence: several orders in one episode, paid at its end, so that a learner must assign credit over
many decisions.

An episode of ``OrderSequence(env, orders=K)`` is K episodes of ``env`` (K orders of the pool, each with its
own template, binding and role order) played one after another: when an order ends, the next one starts in
the same step (its first observations are returned, nobody's termination is set) and only the last order's
end ends the episode. Every step pays 0.0 but the last, which pays every agent

- ``reward="all"`` (default): 1.0 when every order succeeded, else 0.0;
- ``reward="mean"``: the share of the orders that succeeded.

A forward-route order has two decisions, so K = 2 gives four per episode and K = 4 eight (each agent
decides in about half of them): the reward at the end says how the sequence went, never which decision
failed. Observations are the inner env's (each order is a new episode: nothing of an earlier one is in
them); infos gain ``order`` (the index of the order being played, 0 .. K - 1) and ``orders_succeeded`` (so
far); full infos also ``order_outcomes`` (each ended order's ``FailureCode``). With ``infos="numbers"`` all
of them stay numbers. ``EpisodeStatistics`` inside the wrapper counts each order as an episode; outside it,
the sequence.

``reset(options={"index": k})`` plays orders ``k, k + 1, ..., k + K - 1`` of ``env.episodes`` (wrapping
around), so ``index`` = 0, K, 2K, ... plays every episode of a pool once; other resets draw each order
with the env's seeded RNG.

>>> import gencoord_env
>>> env = OrderSequence(gencoord_env.parallel_env(backend="sim", pool="heldout"), orders=4)
"""
from __future__ import annotations

from typing import Any

from pettingzoo.utils.wrappers import BaseParallelWrapper

from gencoord_env.errors import UsageError

REWARDS: tuple[str, ...] = ("all", "mean")


class OrderSequence(BaseParallelWrapper):
    def __init__(self, env: Any, orders: int = 4, reward: str = "all") -> None:
        if isinstance(orders, bool) or not isinstance(orders, int) or orders < 1:
            raise UsageError(f"orders must be a positive int, got {orders!r}")
        if reward not in REWARDS:
            raise UsageError(f"unknown reward {reward!r} for a sequence of orders; expected one of {list(REWARDS)}")
        super().__init__(env)
        self.orders, self.reward = orders, reward
        self.order = 0
        self.outcomes: list[Any] = []
        self._next: list[int] | None = None
        self._options_rest: dict[str, Any] = {}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        options = dict(options or {})
        start = options.pop("index", None)
        n = len(self.env.unwrapped.episodes)
        self._next = None if start is None else [(int(start) + k) % n for k in range(self.orders)]
        self.order, self.outcomes = 0, []
        self._options_rest = options
        obs, infos = self.env.reset(seed=seed, options=self._options(options))
        return obs, self._decorate(infos)

    def _options(self, options: dict[str, Any]) -> dict[str, Any] | None:
        if self._next is not None:
            return {**options, "index": self._next[self.order]}
        return options or None

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        ended = bool(infos) and all(terms.get(a, False) or truncs.get(a, False) for a in infos)
        if not ended:
            return obs, rewards, terms, truncs, self._decorate(infos)
        outcome = next(iter(self.env.unwrapped.full_infos().values()))["outcome"]
        self.outcomes.append(outcome)
        truncated = any(truncs.values()) and not any(terms.values())
        if self.order + 1 < self.orders and not truncated:  # the next order starts in this step
            self.order += 1
            obs, infos = self.env.reset(options=self._options(self._options_rest))
            agents = self.env.agents
            return (obs, {a: 0.0 for a in agents}, {a: False for a in agents}, {a: False for a in agents},
                    self._decorate(infos))
        pay = self._pay() if not truncated else 0.0
        return obs, {a: pay for a in rewards}, terms, truncs, self._decorate(infos)

    def _succeeded(self) -> int:
        return sum(o is not None and getattr(o, "value", o) == "SUCCESS" for o in self.outcomes)

    def _pay(self) -> float:
        won = self._succeeded()
        return float(won == self.orders) if self.reward == "all" else won / self.orders

    def _decorate(self, infos: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        numbers = getattr(self.env.unwrapped, "infos_mode", "full") == "numbers"
        won = self._succeeded()
        for info in infos.values():
            info.update(order=self.order, orders_succeeded=won)
            if not numbers:
                info["order_outcomes"] = list(self.outcomes)
        return infos


__all__ = ["OrderSequence", "REWARDS"]
