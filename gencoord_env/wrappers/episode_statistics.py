"""EpisodeStatistics: per-episode return, length and success of a parallel env, as Gymnasium's
``RecordEpisodeStatistics`` gives them for a single agent.

When an episode ends, every agent's final infos get ``episode = {"r": return, "l": steps, "s": success}``
(with ``infos="numbers"``: the numbers ``episode_r``, ``episode_l`` and ``episode_s``, so tensor libraries
keep them), and the wrapper keeps the last ``window`` episodes in ``returns``, ``lengths`` and
``successes`` (deques) and all of them in ``episodes``. Return is the first agent's (every agent gets the
episode's reward); success is the outcome ``SUCCESS`` (read from the env's full infos whatever its
``infos`` form). It adds keys to the infos it returns and changes nothing in the env it wraps.

>>> import gencoord_env
>>> env = EpisodeStatistics(gencoord_env.parallel_env(backend="sim", pool="heldout"))
"""
from __future__ import annotations

from collections import deque
from typing import Any

from pettingzoo.utils.wrappers import BaseParallelWrapper


class EpisodeStatistics(BaseParallelWrapper):
    def __init__(self, env: Any, window: int = 100) -> None:
        super().__init__(env)
        self.returns: deque[float] = deque(maxlen=window)
        self.lengths: deque[int] = deque(maxlen=window)
        self.successes: deque[float] = deque(maxlen=window)
        self.episodes = 0
        self._return = 0.0
        self._length = 0

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        self._return, self._length = 0.0, 0
        observations, infos = self.env.reset(seed=seed, options=options)
        return observations, infos

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        self._length += 1
        self._return += float(next(iter(rewards.values()), 0.0))
        if infos and all(terms.get(a, False) or truncs.get(a, False) for a in infos):
            outcome = next(iter(self.env.unwrapped.full_infos().values()))["outcome"]
            success = float(outcome is not None and outcome.value == "SUCCESS")
            self.returns.append(self._return)
            self.lengths.append(self._length)
            self.successes.append(success)
            self.episodes += 1
            numbers = self.env.unwrapped.infos_mode == "numbers"
            for info in infos.values():
                if numbers:
                    info.update(episode_r=self._return, episode_l=self._length, episode_s=success)
                else:
                    info["episode"] = {"r": self._return, "l": self._length, "s": success}
        return obs, rewards, terms, truncs, infos


__all__ = ["EpisodeStatistics"]
