"""The turn-based AEC form: ``agent_selection`` is only ever the agent that decides.

PettingZoo's generic ``parallel_to_aec`` cycles through every agent, so the idle agent would have to
send dummy actions. Here each ``step(action)`` is the deciding agent's action; the next selected agent
is whoever decides next (the same agent twice in a row on routes where it decides again, e.g. the
requester's revision). When the episode ends every agent is terminated with the final reward (or, after an
infrastructure fault under ``on_fault="truncate"``, truncated with reward 0), and the usual dead-agent
steps (``step(None)``) remove them.

``env()`` returns this form inside PettingZoo's ``OrderEnforcingWrapper`` (reset before anything else, as
every PettingZoo env). It is a ``parallel_to_aec_wrapper`` of the parallel env - one conversion of it, with
its own turn order - so ``pettingzoo.utils.aec_to_parallel(env())`` gives back that parallel env (the
generic ``aec_to_parallel_wrapper`` would expect every agent to act in each cycle). PettingZoo's
``max_cycles_test`` counts a cycle as one action of every agent: it runs on the generic
``parallel_to_aec(parallel_env(...))``, in which the idle agent's action is ignored.

>>> import gencoord_env
>>> env = gencoord_env.env(backend="sim", pool="heldout")
>>> env.reset(seed=0)
>>> env.agent_selection == env.infos[env.agent_selection]["turn"]
True
"""
from __future__ import annotations

from typing import Any

import gymnasium
from pettingzoo.utils.conversions import parallel_to_aec_wrapper
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from gencoord_env.envs.gencoord.gencoord import raw_env, with_arguments_of


class TurnBasedAEC(parallel_to_aec_wrapper):
    def __init__(self, env: raw_env) -> None:
        super().__init__(env)
        self.env = env
        self.metadata = env.metadata
        self.possible_agents = list(env.possible_agents)
        self.render_mode = env.render_mode
        self.agents: list[str] = []
        self._observations: dict[str, Any] = {}

    @property
    def unwrapped(self) -> raw_env:
        return self.env

    def observation_space(self, agent: str) -> gymnasium.spaces.Space[Any]:
        return self.env.observation_space(agent)

    def action_space(self, agent: str) -> gymnasium.spaces.Space[Any]:
        return self.env.action_space(agent)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._observations, self.infos = self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)  # the episode's agents (a team pool: its n)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.agent_selection = self._deciding()

    def _deciding(self) -> str:
        return next(a for a in self.agents if self.infos[a].get("deciding"))

    def observe(self, agent: str) -> Any:
        return self._observations[agent]

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        observations, rewards, terminations, truncations, infos = self.env.step({agent: action})
        self._observations, self.infos = observations, infos
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {a: float(rewards.get(a, 0.0)) for a in self.agents}
        self.terminations = {a: bool(terminations.get(a, False)) for a in self.agents}
        self.truncations = {a: bool(truncations.get(a, False)) for a in self.agents}
        self._accumulate_rewards()
        if any(self.terminations.values()) or any(self.truncations.values()):
            self._deads_step_first()
        else:
            self.agent_selection = self._deciding()

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


@with_arguments_of(raw_env)
def env(*args: Any, **kwargs: Any) -> OrderEnforcingWrapper:
    """The turn-based AEC form of ``raw_env(...)``, order-enforced: ``raw_env``'s arguments, below."""
    return OrderEnforcingWrapper(TurnBasedAEC(raw_env(*args, **kwargs)))


__all__ = ["TurnBasedAEC", "env"]
