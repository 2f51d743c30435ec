"""TraceRecorder: one JSONL record per finished episode, with every stage of its trace.

A record holds what is needed to re-run the episode (the cluster and role permutation, the env's
arguments, the intervention stack and the deciding agents' actions in order) and what it produced (the
outcome, reason, metrics and the full stage trace). ``gencoord_env.commands.replay`` re-runs a record and checks
that it reproduces the same outcome and trace.

Record layout (keys sorted in the file, so records of equal episodes are byte-identical)::

    {"version": 1, "episode_id": str, "episode": {"cluster": {...}, "perm": 0|1},
     "env": {"pool", "backend", "route", "view", "surface", "private_fact", "actions", "reward"},
     "interventions": [{"name": str, "args": {...}}, ...],   # innermost wrapper first
     "actions": [{"agent": str, "action": str}, ...],
     "outcome": str, "reason": str, "metrics": {...}, "trace": [stage records]}

An episode truncated by an infrastructure fault (``on_fault="truncate"``) is recorded too, with
``"outcome": null`` and ``"fault": {"type", "message"}``. The recorder takes any action the env takes:
a str or a machine-sized number is recorded as it is (a numpy scalar as the Python number), a str over the
action space's ``max_length`` as ``{"prefix", "characters", "sha256"}`` (replayed as its prefix padded to its
length: refused for its length again), anything else (``None``, bytes, objects) as its short ``repr``
(``envs.gencoord.session.traced``), which replays as a parse failure too, though with the reason of a str.

The trace's typed records and every value in them are written by ``gencoord_env.trace`` (``jsonable``,
``dumps``), the one place trace values become JSON; the layout is that of version 1.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import IO, Any

from pettingzoo.utils.wrappers import BaseParallelWrapper

import numpy as np

from gencoord_env.envs.gencoord.session import traced
from gencoord_env.trace import dumps, jsonable
from gencoord_env.wrappers.base import interventions

RECORD_VERSION = 1


def episode_record(env: Any, actions: list[dict[str, Any]], info: Mapping[str, Any]) -> dict[str, Any]:
    """The JSONL record of the episode that just ended in ``env`` (``info``: a final ``infos`` entry)."""
    base = env.unwrapped
    session = base.session
    episode = session.episode
    return {
        "version": RECORD_VERSION,
        "episode_id": episode.id,
        "episode": {"cluster": dataclasses.asdict(episode.cluster), "perm": episode.perm},
        "env": {"pool": base.pool_name, "backend": base.backend, "route": base.route, "view": base.view,
                "surface": base.surface.name, "private_fact": base.private_fact,
                "actions": base.interface.actions, "reward": base.reward_name},
        "interventions": interventions(env),
        "actions": actions,
        "outcome": info["outcome"],
        "reason": info["reason"],
        "metrics": info["metrics"],
        **({"timings": info["timings"]} if "timings" in info else {}),
        **({"fault": info["fault"]} if "fault" in info else {}),
        "trace": info["trace"],
    }


class TraceRecorder(BaseParallelWrapper):
    """Append one JSONL record to ``path`` (or a text stream) each time an episode ends.

    Wrap it outermost so that it sees every intervention below it:

    >>> import gencoord_env, io
    >>> from gencoord_env.wrappers import RequestRemoval
    >>> env = TraceRecorder(RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="request")), io.StringIO())
    """

    def __init__(self, env: Any, path: str | os.PathLike[str] | IO[str]) -> None:
        super().__init__(env)
        self.path = path
        self.records_written = 0
        self._actions: list[dict[str, Any]] = []
        self._turn: str | None = None

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        obs, infos = self.env.reset(seed=seed, options=options)
        self._actions = []
        self._turn = _deciding(self.env.unwrapped.full_infos())
        return obs, infos

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        if self._turn is not None:
            action = actions.get(self._turn, "")
            self._actions.append({"agent": self._turn, "action": traced(action.item() if isinstance(action, np.generic) else action)})
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        full = self.env.unwrapped.full_infos()  # the record's fields whatever the env's ``infos`` form
        self._turn = _deciding(full)
        first: dict[str, Any] = next(iter(full.values()), {})
        if first.get("stage") == "done":
            self.write(dumps(episode_record(self, self._actions, first)))
        return obs, rewards, terms, truncs, infos

    def write(self, line: str) -> None:
        if hasattr(self.path, "write"):
            self.path.write(line + "\n")
        else:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        self.records_written += 1


def _deciding(infos: Mapping[str, Mapping[str, Any]]) -> str | None:
    return next((a for a, i in infos.items() if i.get("deciding")), None)


__all__ = ["RECORD_VERSION", "TraceRecorder", "dumps", "episode_record", "jsonable"]
