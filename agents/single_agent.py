"""The single-agent Gymnasium view: a learner plays one role, a partner policy plays the other.

    >>> import gencoord_env
    >>> env = gencoord_env.gym_env(role="first", partner="rule", backend="sim", pool="heldout",
    ...                            actions="menu", observations="tokens")
    >>> obs, info = env.reset(seed=0)

Registered with Gymnasium as ``gencoord_env/GenCoord-v0`` (``gymnasium.make("gencoord_env/GenCoord-v0",
role=..., partner=..., **env_kwargs)`` after ``import gencoord_env``), without Gymnasium's default
wrappers (``order_enforce=False``, ``disable_env_checker=True``: the env refuses ``step`` before ``reset``
itself and passes ``check_env`` in the tests), so that ``gymnasium.make(...).action_masks()`` reaches the
env. ``role`` is ``first`` (the sender or requester: it holds the private fact in the forward suites),
``second`` (the receiver) or, for a team pool, a role index ``k`` (``0`` is ``first``, ``1`` ``second``,
``2`` .. ``n - 1`` the later roles of the template). In every episode the learner controls whichever agent
holds its role (role permutations and rotations move agent ids), sees that agent's observation and gets the
episode's reward at the end; the other agents' decisions are played by ``partner`` inside ``step``.
``partner`` is a rule agent's name (``gencoord_env.agents.POLICIES``) or any object with
``act(observation, info) -> str`` (it always answers with a record as text, whatever the learner's action
interface); it always reads the ``full`` infos (its typed context), also when the learner asks for
``infos="numbers"``. The spaces are the parallel env's; everything else is ``parallel_env``'s keyword
arguments (``render_mode`` included). Episodes are drawn from the pool by the env's seeded RNG; one that
ends before the learner's first decision (a partner mistake) is skipped and counted in
``info["skipped_episodes"]`` (with ``infos="full"``).
"""
from __future__ import annotations

from typing import Any

import gymnasium

from gencoord_env.agents.base import Policy
from gencoord_env.agents.registry import make_policy
from gencoord_env.envs.gencoord.gencoord import raw_env
from gencoord_env.envs.gencoord.routes import ROUTES, second_role_decides
from gencoord_env.errors import UsageError

ROLES: tuple[str, ...] = ("first", "second")
_ROLE_INDEX = {"first": 0, "second": 1}
#: routes on which the second role never decides (the peer answers through the bounded response policy)
FIRST_ONLY = frozenset(r for r in ROUTES if not second_role_decides(r))
MAX_SKIPS = 100


class GenCoordGym(gymnasium.Env):
    metadata = {"render_modes": list(raw_env.metadata["render_modes"])}

    def __init__(self, role: str | int = "first", partner: str | Policy = "rule", **env_kwargs: Any) -> None:
        self.infos_mode = env_kwargs.pop("infos", "full")
        if self.infos_mode not in ("full", "numbers"):
            raise UsageError(f"unknown infos {self.infos_mode!r}; expected one of ['full', 'numbers']")
        self.env = raw_env(infos="full", **env_kwargs)  # the partner reads the full infos (its context)
        n = len(self.env.possible_agents)
        index = _ROLE_INDEX.get(role) if isinstance(role, str) else role
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
            raise UsageError(f"unknown role {role!r}; expected one of {list(ROLES)}"
                             + (f" or a role index 0 .. {n - 1} of this team pool" if n > 2 else ""))
        if index > 0 and self.env.route in FIRST_ONLY:
            who = "the second role" if index == 1 else f"role {role!r}"
            raise UsageError(f"on route {self.env.route!r} {who} never decides (only the first does); play role='first'")
        self.role = role
        self.role_index = index
        self.partner: Policy = make_policy(partner) if isinstance(partner, str) else partner
        self.observation_space = self.env.observation_space(self.env.possible_agents[0])
        self.action_space = self.env.action_space(self.env.possible_agents[0])
        self.render_mode = self.env.render_mode
        self._me = ""
        self._obs: dict[str, Any] = {}
        self._infos: dict[str, dict[str, Any]] = {}
        self._text: dict[str, str] = {}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        for skipped in range(MAX_SKIPS):
            self._obs, self._infos = self.env.reset(seed=seed if skipped == 0 else None, options=options)
            episode = self.env.session.episode  # type: ignore[union-attr]
            if self.role_index >= len(episode.role_agents):
                raise RuntimeError(f"episode {episode.id} has {len(episode.role_agents)} roles; the learner plays role {self.role!r}")
            self._me = episode.role_agents[self.role_index]
            terminated, truncated, _ = self._partner_until_my_turn()
            if not (terminated or truncated):
                info = self._info()
                if self.infos_mode == "full":
                    info["skipped_episodes"] = skipped
                return self._obs[self._me], info
            if options and ("index" in options or "episode" in options):
                raise RuntimeError(f"the partner ended episode {episode.id} before the learner's first decision")
        raise RuntimeError(f"the partner ended {MAX_SKIPS} episodes in a row before the learner decided")

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, rewards, terms, truncs, infos = self.env.step({self._me: action})
        self._obs, self._infos = obs, infos
        reward = float(rewards.get(self._me, 0.0))
        if any(terms.values()) or any(truncs.values()):  # a truncation: on_fault="truncate" met an infrastructure fault
            return obs[self._me], reward, any(terms.values()), not any(terms.values()), self._info()
        terminated, truncated, partner_reward = self._partner_until_my_turn()
        return self._obs[self._me], reward + partner_reward, terminated, truncated, self._info()

    def _info(self) -> dict[str, Any]:
        """The learner's infos in the form it asked for."""
        if self.infos_mode == "numbers":
            return self.env.numeric_infos()[self._me]
        return self._infos[self._me]

    def _partner_until_my_turn(self) -> tuple[bool, bool, float]:
        """Let the partner play until the learner decides or the episode ends; (terminated, truncated, reward
        meanwhile)."""
        reward = 0.0
        while True:
            turn = next((a for a, i in self._infos.items() if i.get("deciding")), None)
            if turn is None:
                return True, False, reward
            if turn == self._me:
                return False, False, reward
            action = self.partner.act(self.env.observation_text(turn), self._infos[turn])
            self._obs, rewards, terms, truncs, self._infos = self.env.step({turn: action})
            reward += float(rewards.get(self._me, 0.0))
            if any(terms.values()):
                return True, False, reward
            if any(truncs.values()):
                return False, True, reward

    def action_masks(self) -> Any:
        """The current decision's valid menu slots as booleans (``actions="menu"`` only): the method
        sb3-contrib's ``MaskablePPO`` calls, equal to the observation's ``action_mask``."""
        if self.env.interface.actions != "menu":
            raise UsageError("action_masks() needs actions='menu' (a menu of records); this env has "
                             f"actions={self.env.interface.actions!r}")
        return self._obs[self._me]["action_mask"].astype(bool)

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


def gym_env(role: str | int = "first", partner: str | Policy = "rule", **env_kwargs: Any) -> GenCoordGym:
    """The single-agent view (see the module docstring)."""
    return GenCoordGym(role=role, partner=partner, **env_kwargs)


__all__ = ["GenCoordGym", "ROLES", "gym_env"]
