"""# GenCoord: two-agent embodied coordination under private information

| | |
| --- | --- |
| Import | `from gencoord_env.envs import gencoord_v0` |
| Actions | Text (a Short DSL record, JSON with ``surface="json"``, English with ``surface="freeform"``) |
| Parallel API | Yes |
| Agents | `agents = ["agent_a", "agent_b"]` |
| Action space | `Text(max_length=4096, charset=printable ASCII + LF)` |
| Observation space | `Text(max_length=32768, charset=printable ASCII + LF)` |

Two agents must fulfil a Minecraft order. The fact that decides who crafts, what is handed off and where
it goes is private to one of them. Each step exactly one agent decides (``infos[agent]["turn"]``); its
observation is its local context as text, its action a two-line Short DSL record
(``SELF <path>`` / ``REQ <agent> <path>``). The other agent's action is ignored that step. The
environment parses, contract-checks, resolves, materializes a dispatch plan, compiles it to skill calls,
executes them in the world backend and verifies the handoff and the terminal predicate from world truth.

### Arguments
``parallel_env(pool="heldout", backend="minecraft", route="forward", view="full", surface="dsl", seed=0,
pool_seed=0, private_fact="id", world=None, render_mode=None)``

- ``pool``: ``train``, ``heldout``, ``request``, ``horizon``, ``crossproduct``, ``goal_capability``,
  ``visibility`` (see ``gencoord_env.tasks.pools``), or a sequence of ``Episode`` objects.
- ``backend``: ``minecraft`` (default: two Mineflayer bots on the embedded Minecraft 1.21.4 server; run
  ``gencoord setup`` once) or ``sim`` (the pure-Python world, held equal to Minecraft by parity tests).
- ``backend_options``: for ``minecraft``, e.g. ``{"server": "external", "host": ..., "port": ...}``.
- ``route``: ``forward``, ``feedback``, ``requester_only``, ``single_step``, ``centralized``.
- ``view``: projection of the shared prior: ``full``, ``skeleton``, ``node_only``.
- ``surface``: ``dsl``, ``json`` or ``freeform`` (controlled natural-language dialogue, forward route only:
  the agents alternate utterances, stage ``dialogue``, until the shared extractor of
  ``gencoord_env.freeform`` recovers the commitment; wire bytes are the whole dialogue).
- ``private_fact``: ``id`` (binding id) or a naturalized form (``train``, ``C1``, ``C2``, ``C3``).

``reset(seed, options)``: ``options={"index": k}`` selects cluster ``k // 2`` under role permutation
``k % 2``; ``options={"episode": Episode}`` runs that episode; otherwise the seeded RNG draws one.

### Rewards
At the end both agents get 1.0 when the outcome is ``SUCCESS``, else 0.0.

### Infos
Every step: ``turn``, ``stage``, ``deciding``, ``episode_id``, ``role``; the deciding agent also gets
``context``, the structured (dict) form of its observation text. At the end also ``outcome``
(a ``FailureCode`` value), ``reason``, ``trace`` (every stage's record) and ``metrics`` (decisions, raw
validity, commitment validity, handoff verified, wire bytes, time to commitment, episode time).

### Version history
- v0: initial release.
"""
from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
from pettingzoo import ParallelEnv
from pettingzoo.utils import parallel_to_aec

from gencoord_env.envs.gencoord.routes import ROUTES
from gencoord_env.envs.gencoord.dialogue import DialogueSession
from gencoord_env.envs.gencoord.session import EpisodeSession, Setup
from gencoord_env.envs.gencoord.stages import Intervention, Stages
from gencoord_env.envs.gencoord.surfaces import SURFACES
from gencoord_env.outcomes import FailureCode
from gencoord_env.tasks import AGENTS, Episode, pool as load_pool
from gencoord_env.tasks.compose import VIEWS
from gencoord_env.tasks.contexts import PRIVATE_FACT_FORMS, render
from gencoord_env.world.types import World

CHARSET = frozenset(string.printable) - frozenset("\r\x0b\x0c")
MAX_OBSERVATION = 32768
MAX_ACTION = 4096
BACKENDS = ("sim", "minecraft")


def make_world(backend: str, **options: Any) -> World:
    """A world backend by name (``sim`` or ``minecraft``)."""
    if backend == "sim":
        from gencoord_env.world.sim import SimWorld

        return SimWorld()
    if backend == "minecraft":
        from gencoord_env.world.minecraft import MinecraftWorld

        return MinecraftWorld(**options)
    raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")


def _choice(name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        import difflib

        hint = difflib.get_close_matches(value, allowed, n=1)
        raise ValueError(f"unknown {name} {value!r}; expected one of {list(allowed)}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    return value


class raw_env(ParallelEnv):  # noqa: N801 - PettingZoo naming convention
    metadata = {"render_modes": ["human", "ansi"], "name": "gencoord_v0", "is_parallelizable": True}

    def __init__(
        self,
        pool: str | Sequence[Episode] = "heldout",
        backend: str = "minecraft",
        route: str = "forward",
        view: str = "full",
        surface: str = "dsl",
        seed: int | None = 0,
        pool_seed: int = 0,
        private_fact: str = "id",
        world: World | None = None,
        render_mode: str | None = None,
        backend_options: dict[str, Any] | None = None,
        stages: Stages | None = None,
    ) -> None:
        self.route = _choice("route", route, sorted(ROUTES))
        self.view = _choice("view", view, VIEWS)
        self.surface = SURFACES[_choice("surface", surface, sorted(SURFACES))]
        _choice("private_fact", private_fact, PRIVATE_FACT_FORMS)
        self.backend = _choice("backend", backend, BACKENDS)
        if self.surface.dialogue and self.route != "forward":
            raise ValueError(f"surface={surface!r} runs the forward route only; got route={route!r}")
        if render_mode is not None:
            _choice("render_mode", render_mode, self.metadata["render_modes"])
        self.render_mode = render_mode
        self.private_fact = private_fact
        if isinstance(pool, str):
            self.pool_name = pool
            clusters = load_pool(pool, pool_seed)
            self.episodes: tuple[Episode, ...] = tuple(Episode(c, perm) for c in clusters for perm in (0, 1))
        else:
            self.pool_name = "custom"
            self.episodes = tuple(pool)
            if not self.episodes or not all(isinstance(e, Episode) for e in self.episodes):
                raise TypeError("pool must be a pool name or a non-empty sequence of Episode objects")
        self._world = world
        self._backend_options = backend_options or {}
        self.stages = stages or Stages()
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        text_obs = gymnasium.spaces.Text(max_length=MAX_OBSERVATION, charset=CHARSET)
        text_act = gymnasium.spaces.Text(max_length=MAX_ACTION, charset=CHARSET)
        self._obs_spaces = {a: text_obs for a in self.possible_agents}
        self._act_spaces = {a: text_act for a in self.possible_agents}
        self._rng = np.random.default_rng(seed)
        self.session: EpisodeSession | None = None
        describe = None
        if private_fact != "id":
            from gencoord_env.tasks.naturalized import describe
        self.setup = Setup(self.route, self.view, self.surface, private_fact, describe)

    # --- spaces (built once, returned as the same objects) -----------------------------------------
    def observation_space(self, agent: str) -> gymnasium.spaces.Space:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.spaces.Space:
        return self._act_spaces[agent]

    @property
    def world(self) -> World:
        if self._world is None:
            self._world = make_world(self.backend, **self._backend_options)
        return self._world

    # --- API ---------------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        options = options or {}
        if "episode" in options:
            episode = options["episode"]
        elif "index" in options:
            episode = self.episodes[int(options["index"]) % len(self.episodes)]
        else:
            episode = self.episodes[int(self._rng.integers(len(self.episodes)))]
        interventions = tuple(options.get("interventions", ()))[::-1]  # wrappers add themselves outermost first
        for iv in interventions:
            if not isinstance(iv, Intervention):
                raise TypeError(f"options['interventions'] holds {iv!r}, which has no 'stage' and 'rewrite(value, episode, ...)'")
        self.agents = list(self.possible_agents)
        session_type = DialogueSession if self.surface.dialogue else EpisodeSession
        self.session = session_type(episode, self.setup, self.stages, self.world, interventions)
        return self._observations(), self._infos()

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        s = self.session
        if s is None or not self.agents:
            raise RuntimeError("step() called before reset() or after the episode ended; call reset() first")
        turn = s.turn
        s.act(actions.get(turn, ""), self._last_obs.get(turn, ""))
        done = s.done
        reward = 1.0 if s.outcome is FailureCode.SUCCESS else 0.0
        rewards = {a: (reward if done else 0.0) for a in self.agents}
        terminations = {a: done for a in self.agents}
        truncations = {a: False for a in self.agents}
        observations, infos = self._observations(), self._infos()
        if done:
            self.agents = []
        if self.render_mode == "human":
            self.render()
        return observations, rewards, terminations, truncations, infos

    def _observations(self) -> dict[str, str]:
        s = self.session
        assert s is not None
        self._context = None if s.done else s.context(s.turn)
        self._last_obs = {a: (render(self._context) if self._context is not None and a == s.turn else s.observation(a))
                          for a in self.possible_agents}
        if self._context is not None:
            s.observed()
        return dict(self._last_obs)

    def _infos(self) -> dict[str, dict[str, Any]]:
        s = self.session
        assert s is not None
        base: dict[str, Any] = {"episode_id": s.episode.id, "template": s.episode.template.id, "route": s.setup.route}
        if s.done:
            base.update({"turn": None, "stage": "done", "outcome": s.outcome, "reason": s.reason,
                         "trace": s.trace, "metrics": s.metrics.as_dict()})
        else:
            base.update({"turn": s.turn, "stage": s.decision.stage})
        infos = {a: {**base, "deciding": a == base["turn"], "role": s.episode.role_of[a]} for a in self.possible_agents}
        if self._context is not None:
            infos[s.turn]["context"] = self._context
        return infos

    def render(self) -> str | None:
        if self.session is None:
            return None
        s = self.session
        text = f"{s.episode.id} route={s.setup.route} stage={'done' if s.done else s.decision.stage} outcome={s.outcome}"
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        if self._world is not None:
            self._world.close()
            self._world = None


def parallel_env(**kwargs: Any) -> raw_env:
    """The ParallelEnv (see the module docstring for arguments)."""
    return raw_env(**kwargs)


def env(**kwargs: Any):  # type: ignore[no-untyped-def]
    """The AEC form, via ``parallel_to_aec``."""
    return parallel_to_aec(raw_env(**kwargs))
