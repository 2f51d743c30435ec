"""The one policy interface shared by rule and learned agents."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Policy(Protocol):
    """``act(observation, info) -> action``; ``info`` is the env's ``infos[agent]`` for that step."""

    def act(self, observation: str, info: dict[str, Any]) -> str: ...

    def act_batch(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]: ...


class RulePolicy:
    """Base class for deterministic rule agents: ``act_batch`` is ``act`` mapped over the batch."""

    name = "rule"
    model_calls = 0  # rule agents make no learned calls

    def act(self, observation: str, info: dict[str, Any]) -> str:
        raise NotImplementedError

    def act_batch(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        return [self.act(o, i) for o, i in zip(observations, infos)]
