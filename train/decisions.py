"""Decision points of a pool and the env-replay reward that scores one completion at one of them.

An LLM policy in this env answers one local context at a time. For reinforcement learning every such
answer is a *decision point*: the episode (its index in the pool), the actions already taken in it
(by both agents), the deciding agent and stage, and the observation text the env shows at that moment.
:func:`decision_points` finds them by playing each episode of a pool with a reference policy (the rule
agent by default) and recording, at every decision, the prefix of actions so far and the observation.
No torch is needed here; the TRL adapter is :mod:`gencoord_env.train.grpo`.

:class:`Replay` scores a completion at a decision point by replaying the episode on the sim, which is
deterministic given the episode and the actions: it resets episode ``index``, plays the prefix actions,
plays the completion as the deciding agent's action, then lets ``partner`` play every remaining decision
(the peer's, and any later decision of the deciding agent itself, e.g. ``sender_after_obtain`` on the
single-step route), and returns the reward the env pays at the end of that episode:

- ``partial_credit=False`` (default): ``reward="binary"``, 1.0 for ``SUCCESS`` else 0.0 (the paper's);
- ``partial_credit=True``: ``reward="staged"``, credit for the furthest pipeline stage the episode
  passed (``gencoord_env.outcomes.STAGED_REWARD``): parsed 0.2, contract-valid 0.4, resolved 0.6,
  handoff verified 0.8, success 1.0; a parse failure scores 0.0.

A completion is the agent's action text as the model wrote it (surrounding whitespace stripped), so a
record followed by anything else is a parse failure, exactly as in closed-loop evaluation.

Example::

    points = decision_points("train", "forward")              # 960 episodes x 2 decisions
    replay = Replay("train", "forward", partial_credit=True)
    p = points[0]
    replay.score(p.index, p.prefix, "SELF ...\\nREQ ...", partner="rule")   # -> 0.0 .. 1.0
    replay.score_point(p, p.reference)                         # the reference's own action: 1.0
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.agents.base import Policy
from gencoord_env.envs.gencoord.routes import ROUTES
from gencoord_env.errors import DataError, UsageError
from gencoord_env.outcomes import FailureCode

__all__ = ["DecisionPoint", "Replay", "Replayed", "decision_points", "load_points", "write_points"]


@dataclass(frozen=True)
class DecisionPoint:
    """One decision an LLM policy makes: where it is in which episode, and what it sees.

    ``prefix`` holds every action taken in the episode before this decision, in order, by both agents
    (played by the reference policy); ``prompt`` is the observation text the env shows ``agent`` here;
    ``reference`` is the action the reference policy took here (the prefix of the next decision point
    of the same episode is ``prefix + (reference,)``).
    """

    id: str
    pool: str
    route: str
    index: int
    episode: str
    agent: str
    stage: str
    prefix: tuple[str, ...]
    prompt: str
    reference: str

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False, sort_keys=True)


def _policy(partner: Policy | str) -> Policy:
    if isinstance(partner, str):
        policy: Policy = make_policy(partner)
        return policy
    if not callable(getattr(partner, "act", None)):
        raise TypeError(f"partner must be a policy name or have act(observation, info) -> str, got {type(partner).__name__}")
    return partner


def _deciding(infos: Mapping[str, Mapping[str, Any]]) -> str:
    return next(a for a, i in infos.items() if i["deciding"])


def decision_points(
    pool: str = "train",
    route: str = "forward",
    reference: Policy | str = "rule",
    *,
    view: str = "full",
    surface: str = "dsl",
    pool_seed: int = 0,
    stages: Iterable[str] | None = None,
    episodes: int | None = None,
) -> list[DecisionPoint]:
    """Every decision of episodes ``0 .. episodes-1`` of ``pool`` (default: all), played by ``reference``.

    ``stages`` keeps only decisions at those stages (e.g. ``{"sender_initial"}``); the prefixes still hold
    every earlier action. Decisions after the reference itself ended an episode do not exist, so a
    reference that fails early yields fewer points for that episode.
    """
    policy = _policy(reference)
    env = gencoord_env.parallel_env(pool=pool, backend="sim", route=route, view=view, surface=surface, pool_seed=pool_seed)
    keep = None if stages is None else frozenset(stages)
    if keep is not None and surface != "freeform":  # dialogue turns all share the stage "dialogue"
        known = [d.stage for d in ROUTES[route]]
        unknown = sorted(keep - set(known))
        if unknown:
            env.close()
            raise UsageError(f"route {route!r} has no decision stage {', '.join(map(repr, unknown))}; "
                             f"its stages are {', '.join(known)}")
    total = len(env.episodes) if episodes is None else min(episodes, len(env.episodes))
    points: list[DecisionPoint] = []
    try:
        for k in range(total):
            obs, infos = env.reset(options={"index": k})
            prefix: tuple[str, ...] = ()
            while env.agents:
                turn = _deciding(infos)
                info = infos[turn]
                action = policy.act(obs[turn], info)
                if keep is None or info["stage"] in keep:
                    points.append(DecisionPoint(
                        id=f"{pool}/{route}/{info['episode_id']}/{len(prefix)}-{info['stage']}", pool=pool, route=route,
                        index=k, episode=info["episode_id"], agent=turn, stage=info["stage"], prefix=prefix,
                        prompt=obs[turn], reference=action,
                    ))
                obs, _, _, _, infos = env.step({turn: action})
                prefix += (action,)
    finally:
        env.close()
    return points


def write_points(points: Iterable[DecisionPoint], path: str | os.PathLike[str]) -> None:
    """One JSON object per line."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for p in points:
            f.write(p.to_json() + "\n")


def load_points(path: str | os.PathLike[str]) -> list[DecisionPoint]:
    """Decision points written by :func:`write_points`."""
    names = {f.name for f in dataclasses.fields(DecisionPoint)}
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            raw = json.loads(line)
            missing = names - set(raw)
            if missing:
                raise DataError(f"{path}:{n}: decision point lacks fields {sorted(missing)}; rewrite it with write_points")
            fields: dict[str, Any] = {k: (tuple(raw[k]) if k == "prefix" else raw[k]) for k in names}
            out.append(DecisionPoint(**fields))
    return out


@dataclass(frozen=True)
class Replayed:
    """A replayed episode's end: its reward, outcome and metrics, and every action taken in it."""

    reward: float
    outcome: FailureCode
    reason: str
    metrics: dict[str, Any]
    actions: tuple[str, ...]


class Replay:
    """Scores completions at decision points by replaying episodes on the sim (see the module docstring).

    Holds one env; not safe to share between threads. ``partner`` given here is the default for
    :meth:`score` (a policy, or a rule agent's name).
    """

    def __init__(
        self,
        pool: str = "train",
        route: str = "forward",
        *,
        view: str = "full",
        surface: str = "dsl",
        pool_seed: int = 0,
        partial_credit: bool = False,
        partner: Policy | str = "rule",
    ) -> None:
        self.pool, self.route, self.partial_credit = pool, route, partial_credit
        self.env = gencoord_env.parallel_env(pool=pool, backend="sim", route=route, view=view, surface=surface,
                                             pool_seed=pool_seed, reward="staged" if partial_credit else "binary")
        self.partner = _policy(partner)

    def __len__(self) -> int:
        """Episodes in the pool (valid indices are ``0 .. len - 1``)."""
        return len(self.env.episodes)

    def play(self, index: int, prefix: Sequence[str], completion: str, partner: Policy | str | None = None,
             expect_prompt: str | None = None) -> Replayed:
        """Replay episode ``index``: ``prefix``, then ``completion`` at the next decision, then ``partner`` to the end.

        Raises ValueError when ``index`` is outside the pool, when the prefix ends the episode before
        the decision it leads to, or when ``expect_prompt`` is given and the env shows the decider a
        different observation (the decision point came from another pool, route or pool seed).
        """
        if not 0 <= index < len(self.env.episodes):
            raise UsageError(f"episode index {index} is outside pool {self.pool!r} (0..{len(self.env.episodes) - 1})")
        other = self.partner if partner is None else _policy(partner)
        env = self.env
        obs, infos = env.reset(options={"index": index})
        actions = list(prefix)
        for action in prefix:
            if not env.agents:
                break
            obs, _, _, _, infos = env.step({_deciding(infos): action})
        if not env.agents:
            raise UsageError(f"the {len(prefix)} prefix actions end episode {index} of {self.pool!r} "
                             f"({infos[env.possible_agents[0]]['outcome']}) before the decision they lead to")
        turn = _deciding(infos)
        if expect_prompt is not None and obs[turn] != expect_prompt:
            raise UsageError(f"episode {index} of {self.pool!r}/{self.route!r} after {len(prefix)} actions shows "
                             f"{turn} another observation than the decision point's prompt; was it built with "
                             "the same pool, route, view, surface and pool_seed?")
        text = completion.strip()
        actions.append(text)
        obs, rewards, _, _, infos = env.step({turn: text})
        while env.agents:
            turn = _deciding(infos)
            action = other.act(obs[turn], infos[turn])
            actions.append(action)
            obs, rewards, _, _, infos = env.step({turn: action})
        final = infos[turn]
        # The env pays both agents the episode's reward on its last step.
        return Replayed(float(rewards[turn]), final["outcome"], final["reason"], dict(final["metrics"]), tuple(actions))

    def score(self, index: int, prefix: Sequence[str], completion: str, partner: Policy | str | None = None) -> float:
        """The episode reward when ``completion`` is played after ``prefix`` in episode ``index``."""
        return self.play(index, prefix, completion, partner).reward

    def score_point(self, point: DecisionPoint, completion: str, partner: Policy | str | None = None) -> float:
        """:meth:`score` at ``point``, checking that the env shows the decider exactly ``point.prompt``."""
        if (point.pool, point.route) != (self.pool, self.route):
            raise UsageError(f"decision point {point.id!r} is from {point.pool!r}/{point.route!r}, "
                             f"this replay runs {self.pool!r}/{self.route!r}")
        return self.play(point.index, point.prefix, completion, partner, expect_prompt=point.prompt).reward

    def close(self) -> None:
        self.env.close()
