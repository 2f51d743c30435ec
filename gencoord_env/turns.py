"""The env one decision at a time: what the deciding agent sees, and its answer.

Every step of the env has exactly one deciding agent, so a two-agent (or team) episode is a sequence of
turns. ``TurnEnv`` wraps a ParallelEnv and hands out one :class:`Turn` per decision: the deciding agent's
observation text, who it is, its role and stage, and at the end the outcome, reason, metrics and reward.
``act(action)`` plays the action for the deciding agent (text, or a menu slot with ``actions="menu"``)
and returns the next turn. It is the form that serves language-model agents: the OpenEnv server
(:mod:`gencoord_env.commands.serve`), the TRL ``environment_factory`` (:mod:`gencoord_env.commands.llm_rl`) and the verifiers
environment (:mod:`gencoord_env.commands.verifiers_env`) all play episodes through it, so their episodes are the env's own.

    >>> game = TurnEnv(parallel_env(backend="sim", pool="heldout"))     # doctest: +SKIP
    >>> turn = game.reset(index=0)
    >>> turn.agent, turn.stage                                           # ('agent_a', 'sender_initial')
    >>> turn = game.act("SELF ...\\nREQ agent_b ...")
    >>> turn.done, turn.outcome, turn.reward

A malformed action is the env's failure code (``PARSE_FAILURE`` ...), never an exception; ``act`` after
the end or before ``reset`` raises ``RuntimeError`` saying so.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Turn", "TurnEnv"]


@dataclass(frozen=True)
class Turn:
    """One decision (``done`` False), or the end of the episode (``done`` True).

    ``text`` is the deciding agent's observation ("" at the end); ``candidates`` the menu's records (None
    where masked) with ``actions="menu"``; ``reward`` what the env pays every agent at this step (0.0
    before the end). ``outcome`` (the ``FailureCode``'s value), ``reason`` and ``metrics`` are set at the end;
    ``fault`` when an infrastructure fault truncated the episode (``on_fault="truncate"``).
    """

    text: str
    agent: str | None
    role: str | None
    stage: str
    episode_id: str
    template: str
    done: bool = False
    reward: float = 0.0
    candidates: list[str | None] | None = None
    outcome: str | None = None
    reason: str | None = None
    metrics: dict[str, Any] | None = field(default=None, repr=False)
    fault: dict[str, Any] | None = None


class TurnEnv:
    """A ParallelEnv (``gencoord_env.parallel_env(...)``) played turn by turn; see the module docstring."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.turn: Turn | None = None
        #: the deciding agent's full info (its typed ``context`` included), for scripted agents; {} at the end
        self.info: dict[str, Any] = {}
        #: decisions taken in the current episode
        self.steps = 0

    def reset(self, seed: int | None = None, index: int | None = None) -> Turn:
        """A new episode: ``index`` picks the pool's episode ``index`` (``options={"index": index}``), else the
        env's RNG (seeded by ``seed`` when given) draws one."""
        _, infos = self.env.reset(seed=seed, options=None if index is None else {"index": index})
        self.steps = 0
        self.turn = self._turn(infos, 0.0)
        return self.turn

    def act(self, action: Any) -> Turn:
        """Play ``action`` for the deciding agent; the next turn (or the end)."""
        if self.turn is None:
            raise RuntimeError("act() before reset(): reset the env first")
        if self.turn.done:
            raise RuntimeError(f"the episode {self.turn.episode_id} has ended ({self.turn.outcome}); reset the env first")
        actions = {a: "" for a in self.env.agents}
        actions[self.turn.agent] = action
        _, rewards, _, _, infos = self.env.step(actions)
        self.steps += 1
        self.turn = self._turn(infos, float(rewards[self.turn.agent]))
        return self.turn

    def _turn(self, infos: dict[str, dict[str, Any]], reward: float) -> Turn:
        some = next(iter(infos.values()))
        episode_id, template = str(some["episode_id"]), str(some["template"])
        if some["turn"] is None:  # the end
            self.info = {}
            fault = some.get("fault")
            return Turn("", None, None, "done", episode_id, template, done=True, reward=reward,
                        outcome=_code(some["outcome"]), reason=some.get("reason"), metrics=dict(some["metrics"]),
                        fault=dict(fault) if fault else None)
        agent = str(some["turn"])
        info = self.info = infos[agent]
        return Turn(self.env.observation_text(agent), agent, str(info["role"]), str(info["stage"]), episode_id,
                    template, candidates=info.get("candidates"))

    def close(self) -> None:
        self.env.close()


def _code(outcome: Any) -> str | None:
    return None if outcome is None else str(getattr(outcome, "value", outcome))
