"""# GenCoord: embodied coordination under private information, two agents or a team

| | |
| --- | --- |
| Import | `from gencoord_env.envs import gencoord_v0` |
| Actions | Text (a Short DSL record; JSON with ``surface="json"``; English with ``surface="freeform"``), or ``Discrete(N)`` over candidate records with ``actions="menu"`` |
| Parallel API | Yes |
| AEC API | Yes (``gencoord_env.env()``: turn-based, ``agent_selection`` is always the deciding agent) |
| Agents | `agents = ["agent_a", "agent_b"]`; a team pool: `["agent_a", ..., ]`, n from its templates |
| Action space | `Text(max_length=4096, charset=printable ASCII + LF)`, or `Discrete(N)` |
| Observation space | `Text(max_length=32768, ...)`, or a `Dict` with `observation` (text or int64 token ids), `observation_mask` (tokens), `action_mask` and `menu_labels` (menu) |

Two agents must fulfil a Minecraft order. The fact that decides who crafts, what is handed off and where
it goes is private to one of them. Each step exactly one agent decides (``infos[agent]["turn"]``); its
observation is its local context, its action a two-line Short DSL record (``SELF <path>`` /
``REQ <agent> <path>``) or a menu slot naming one. The other agent's action is ignored that step. The
environment parses, contract-checks, resolves, materializes a dispatch plan, compiles it to skill calls,
executes them in the world backend and verifies the handoff and the terminal predicate from world truth.

A team pool (``teams``, ``chain3``, ``chain4``, ``chain5``: ``gencoord_env.tasks.pools.TEAM_POOLS``) plays
templates of n agents in which a fact at one agent decides work one or two edges away: its agents are the
first n of ``agent_a`` .. ``agent_e``, each cluster runs under the n rotations of its roles, a record
addresses one ``REQ`` line to each peer on its channels, every edge is delivered, resolved and verified
on its own (a failure's ``trace`` resolution or verdict names its edge) and ``metrics["edges"]`` counts
the bytes of each. Team pools run the ``forward``, ``centralized``, ``requester_only`` and (for a template
with a feedback form) ``feedback`` routes on the ``dsl`` and ``json`` surfaces.

### Arguments
``parallel_env(pool="heldout", backend="minecraft", route="forward", view="full", surface="dsl", seed=0,
pool_seed=0, private_fact="id", actions="text", observations="text", tokenizer=None, max_tokens=1024,
reward="binary", infos="full", timings=False, on_fault="raise", world=None, stages=None, render_mode=None,
backend_options=None, max_cycles=None, menu="default")`` (``help(gencoord_env.parallel_env)`` shows them typed,
with this section)

- ``pool``: ``train``, ``heldout``, ``request``, ``horizon``, ``crossproduct``, ``goal_capability``,
  ``visibility`` (see ``gencoord_env.tasks.pools``), a team pool (above), ``procedural`` (endless matched pairs of templates
  generated from the shared prior with ``pool_seed``, never the held-out ones: see
  ``gencoord_env.tasks.procedural``), or a sequence of ``Episode`` objects.
- ``pool_seed``: draws the pool's episodes (its clusters and their quantities; ``procedural``: the generator's seed).
- ``seed``: seeds the draw of an episode at each ``reset()`` given no ``options`` (``reset(seed=S)`` reseeds it).
- ``backend``: ``minecraft`` (default: two Mineflayer bots on the embedded Minecraft 1.21.4 server; run
  ``gencoord setup`` once) or ``sim`` (the pure-Python world, held equal to Minecraft by parity tests).
- ``backend_options``: for ``minecraft``, e.g. ``{"server": "external", "host": ..., "port": ...}``.
- ``route``: ``forward``, ``feedback``, ``requester_only``, ``single_step``, ``centralized``. A pool that no
  record can solve on the route is refused here, naming the routes that can (``team_feedback`` on
  ``forward``: its facts sit with the peers the requester must send to; ``routes.unsolvable``).
- ``view``: projection of the shared prior: ``full``, ``skeleton``, ``node_only``.
- ``surface``: ``dsl``, ``json`` or ``freeform`` (controlled natural-language dialogue, forward route only:
  the agents alternate utterances, stage ``dialogue``, until the shared extractor of
  ``gencoord_env.freeform`` recovers the commitment; wire bytes are the whole dialogue).
- ``private_fact``: ``id`` (binding id) or a naturalized form (``train``, ``C1``, ``C2``, ``C3``).
- ``actions``: ``text`` or ``menu`` (``Discrete(N)`` over the candidate records of the decision, built
  only from what the deciding agent may see: see ``gencoord_env.envs.gencoord.menu``; masked slots end the
  episode with ``PARSE_FAILURE``, never an exception).
- ``menu`` (with ``actions="menu"``): which candidates fill the slots, and the shortcut each leaves a
  learner. ``default``: the receiver's slot 1 copies the delivered request, so "always slot 1" solves
  every forward episode without reading the request's content (the paper's receiver does exactly that);
  the sender's slots follow the codebook's order. ``branches``: no copy slot; the template's branches (a
  team agent: the combinations of the facts it acts on) in an order hashed from the public prior, the same
  for both bindings of a pair and unlike the codebook's, so the receiver must map the request's content to
  its branch: a fixed slot succeeds in 1 / (number of branches) of the episodes. In neither menu does a
  slot index predict the binding before the request arrives (the menu is built from the agent's own
  view). The sender's shortcut, in both, is the fact itself: it holds it (see ``menu.py``). The deciding
  agent's observation names each usable slot's branch (``MENU 2 branch=SITE_B self=1`` lines in its text
  and token views, ``menu_labels`` token ids beside a bag), so the slots can be read without
  ``infos["candidates"]``; a label is built from the public view only.
- ``observations``: ``text``, ``tokens`` (fixed-length int64 ids of the text, ``max_tokens`` long, from
  ``tokenizer``: the package's offline word tokenizer by default, or any Hugging Face tokenizer object) or
  ``bag`` (float32 counts of each vocabulary word: a bag of words, for MLP learners).
- ``reward``: ``binary`` (the paper's) or ``staged`` (see Rewards).
- ``infos``: ``full`` or ``numbers`` (only numeric values, for libraries that turn infos into tensors;
  ``truncated`` is 1 when the episode ended in an infrastructure fault under ``on_fault="truncate"`` or ran
  out of ``max_cycles``). ``full_infos()`` and ``numeric_infos()`` give either form of the current step
  whatever this is: scripted partners and ``TraceRecorder`` read the full form while a learner gets numbers.
- ``max_cycles``: the most decisions (steps) an episode may take; one that reaches it without an outcome
  ends as a truncation (``truncations`` True, reward 0.0, ``outcome`` None, ``infos["max_cycles"]`` and a
  ``{"stage": "max_cycles"}`` trace record). ``None`` (default): only the route bounds an episode (at most
  three decisions on the structured surfaces, ``MAX_TURNS`` utterances in a dialogue).
- ``timings``: add wall-clock measurements to the final infos (``timings``); off by default, so that
  infos of equal seeds are equal. An episode's seconds run from its reset (the world's included) to its
  end; starting the backend (``World.start``: the Minecraft sidecar) is done before and counted in none.
- ``on_fault``: what an infrastructure fault of the world backend (a
  ``gencoord_env.world.minecraft.MinecraftBackendError``: the sidecar died or timed out, a bot dropped,
  ...) does. ``raise`` (default): it raises out of ``step`` / ``reset``, typed, with a message that says
  what to do. ``truncate``: a fault during ``step`` ends the episode for every agent as a truncation
  (``truncations`` True, ``terminations`` False, reward 0.0), with ``infos[agent]["fault"] = {"type":
  "SidecarDied", "message": ...}``, ``outcome`` None and a ``{"stage": "fault"}`` trace record; the next
  ``reset()`` recovers (a fresh sidecar, a rebuilt arena). A fault during ``reset`` is retried once (that
  reset's infos then carry ``reset_fault``); a second fault raises. Agent mistakes are never faults: they
  are failure codes either way.
- ``render_mode``: ``ansi`` (``render()`` returns the episode so far as text: decisions, deliveries, skill
  events, the handoff, what each agent holds, the outcome), ``rgb_array`` (a uint8 top-down picture of the
  arena from world truth on either backend: stations and their contents, agents and what each holds, sites
  built, the handoff's items in flight; around it the story: roles, the private fact marked for the viewer,
  each plan and message, the handoff and an outcome banner: ``gencoord_env.envs.gencoord.picture``) or
  ``human`` (the text, printed at each step).
- ``world``: a ``World`` to play in instead of one built from ``backend`` and ``backend_options`` (an arena of a
  shared sidecar: ``gencoord_env.commands.arenas``).
- ``stages``: a ``Stages`` value with stage functions swapped (fault injection; interventions are wrappers).

``reset(seed, options)``: ``options={"index": k}`` selects episode ``k`` of ``env.episodes`` (cluster ``k // 2``
under role permutation ``k % 2``; in a team pool of n agents cluster ``k // n`` under rotation ``k % n``), for
``0 <= k < len(env.episodes)`` (another ``k`` raises ``ValueError`` naming the range); ``options={"episode": Episode}`` runs that episode; otherwise the seeded RNG draws one.
``options={"interventions": (...)}`` is how wrappers in ``gencoord_env.wrappers`` reach an episode; one on a
stage that no episode of the env runs (``env.stages_running``, from its route, pool and surface) is refused
when the wrapper is built, naming where the stage runs (``check_reachable``).

### Limits
Every observation lies in ``observation_space(agent)``: printable ASCII, at most 32,768 characters. Agent
text that reaches a peer's observation (a free-form utterance) is escaped and cut to its share
(``gencoord_env.envs.gencoord.dialogue.shown``); the task facts are never cut. An action that is not a
``str`` (text actions) or is longer than the action space's ``max_length`` (4,096 characters) ends the
episode with ``PARSE_FAILURE`` before it is parsed; the reason says which. No action, whatever its type,
length or characters (lone surrogates included), makes ``step`` raise.

### State
``state()`` is the centralized view, what the ``centralized`` route's planner (the first role) would see: its
own local view and every peer's local view as uploaded (for a team, each one), the shared prior, the
history of the first role and every message delivered so far (each agent's inbox, in role order), encoded
in the env's ``observations`` mode (text; tokens as ``observation`` and ``observation_mask``; a bag of
words, the prior counted apart) without an action mask; ``state_space`` is its space. It holds nothing
the agents' own views and the messages between them do not: no hidden binding beyond the private field
its holder sees, no world truth, no outcome. It is for centralized critics (MAPPO's value function), not
for actors: ``examples/marl_ppo.py --algo mappo`` uses it so.

### Rewards
Both agents get the reward at the end of the episode, 0.0 before. ``binary``: 1.0 when the outcome is
``SUCCESS``, else 0.0. ``staged``: partial credit by how far the pipeline got
(``gencoord_env.outcomes.STAGED_REWARD``): parse failure 0.0, contract reject 0.2, no commitment or
resolution conflict 0.4, materialization / execution / handoff failure 0.6, terminal failure (the
handoff was verified) 0.8, success 1.0.

### Infos
Every step: ``turn``, ``stage``, ``deciding``, ``episode_id`` (names the public instance, never the
hidden fact), ``template``, ``route``, ``role``; the deciding agent also gets ``context`` (the typed
``Context`` its observation renders; ``.to_dict()`` for plain values) and, with ``actions="menu"``,
``candidates`` (the records of the menu's slots, ``None`` where masked). At the end also ``outcome``
(a ``FailureCode``), ``reason``, ``trace`` (every stage's record) and ``metrics`` (decisions, raw
validity, commitment validity, handoff verified, wire / request / response / upload bytes), plus
``timings`` (episode seconds, time to commitment) with ``timings=True``. With ``infos="numbers"`` every
value is a number: ``deciding``, ``stage_index``, ``done``, ``success``, ``reward`` and the numeric
metrics.

### Version history
- v0: initial release; team pools (n agents, several REQ lines per record, per-edge resolution and accounting).
- v0 (menu labels): a deciding agent's menu observation names the branch of each usable slot (``MENU`` lines,
  ``menu_labels``); the text of a menu env's observation and trace records gains those lines.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import gymnasium
import numpy as np
from pettingzoo import ParallelEnv

from gencoord_env.envs.gencoord.dialogue import DialogueSession
from gencoord_env.envs.gencoord.interface import ACTIONS, OBSERVATION_FORMS, WAITING, Interface, Menu, brief, with_menu
from gencoord_env.envs.gencoord.menu import MENUS
from gencoord_env.envs.gencoord.routes import ROUTES, pools_running, routes_running, stages_running
from gencoord_env.envs.gencoord.session import EpisodeSession, Setup
from gencoord_env.envs.gencoord.stages import Intervention, Stages, rewritable
from gencoord_env.envs.gencoord.surfaces import SURFACES
from gencoord_env.errors import UnknownName, UsageError
from gencoord_env.lifecycle import PipelineStage
from gencoord_env.outcomes import REWARDS
from gencoord_env.tasks import Episode
from gencoord_env.tasks.compose import VIEWS
from gencoord_env.tasks.contexts import PRIVATE_FACT_FORMS, Context, build_context, render_parts
from gencoord_env.tasks.pool_value import Pool, make_pool
from gencoord_env.tokens import as_tokenizer
from gencoord_env.world.types import World

BACKENDS = ("sim", "minecraft")
INFOS = ("full", "numbers")
ON_FAULT = ("raise", "truncate")
#: wall-clock metrics: in ``infos["timings"]`` only with ``timings=True``
TIMINGS = ("episode_seconds", "time_to_commitment")


def make_world(backend: str, **options: Any) -> World:
    """A world backend by name (``sim`` or ``minecraft``)."""
    if backend == "sim":
        from gencoord_env.world.sim import SimWorld

        return SimWorld()
    if backend == "minecraft":
        from gencoord_env.world.minecraft import MinecraftWorld

        return MinecraftWorld(**options)
    raise UnknownName("backend", backend, BACKENDS)


def _choice(name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise UnknownName(name, value, allowed)
    return value


class raw_env(ParallelEnv):  # noqa: N801 - PettingZoo naming convention
    metadata: dict[str, Any] = {"render_modes": ["human", "ansi", "rgb_array"], "name": "gencoord_v0", "is_parallelizable": True,
                "render_fps": 2}

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
        actions: str = "text",
        observations: str = "text",
        tokenizer: Any = None,
        max_tokens: int = 1024,
        reward: str = "binary",
        infos: str = "full",
        timings: bool = False,
        on_fault: str = "raise",
        world: World | None = None,
        stages: Stages | None = None,
        render_mode: str | None = None,
        backend_options: dict[str, Any] | None = None,
        max_cycles: int | None = None,
        menu: str = "default",
    ) -> None:
        self.route = _choice("route", route, sorted(ROUTES))
        self.view = _choice("view", view, VIEWS)
        self.surface = SURFACES[_choice("surface", surface, sorted(SURFACES))]
        self.backend = _choice("backend", backend, BACKENDS)
        _choice("private_fact", private_fact, PRIVATE_FACT_FORMS)
        self.rewards = REWARDS[_choice("reward", reward, sorted(REWARDS))]
        self.reward_name = reward
        self.infos_mode = _choice("infos", infos, INFOS)
        self.timings = bool(timings)
        self.on_fault = _choice("on_fault", on_fault, ON_FAULT)
        #: the exceptions that truncate an episode instead of raising (none with on_fault="raise")
        self._faults: tuple[type[BaseException], ...] = ()
        if self.on_fault == "truncate":
            from gencoord_env.world.minecraft.errors import MinecraftBackendError

            self._faults = (MinecraftBackendError,)
        if self.surface.dialogue and self.route != "forward":
            raise UsageError(f"surface={surface!r} runs the forward route only; got route={route!r}")
        if render_mode is not None:
            _choice("render_mode", render_mode, self.metadata["render_modes"])
        self.render_mode = render_mode
        if max_cycles is not None and (isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1):
            raise UsageError(f"max_cycles must be a positive int or None, got {max_cycles!r}")
        self.max_cycles = max_cycles
        self.private_fact = private_fact
        self.pool: Pool = make_pool(pool, pool_seed)
        self.pool_name = self.pool.name
        self.episodes: Sequence[Episode] = self.pool.episodes
        self.interface = Interface(
            _choice("actions", actions, ACTIONS), _choice("observations", observations, tuple(OBSERVATION_FORMS)), self.surface,
            as_tokenizer(tokenizer) if OBSERVATION_FORMS[observations].needs_tokenizer else None, int(max_tokens),
            menu_kind=_choice("menu", menu, MENUS),
        )
        self._world = world
        self._backend_options = backend_options or {}
        self.stages = stages or Stages()
        self.possible_agents = list(self.pool.agents)
        if self.pool.team:
            self._check_team_options()
        self._check_solvable()
        #: the pipeline stages some episode of this env runs: an intervention on any other would never fire
        self.stages_running: frozenset[PipelineStage] = stages_running(
            self.route, self.pool.templates() if self.pool.team else None, self.surface.dialogue)
        self.agents: list[str] = []
        obs_space, act_space = self.interface.observation_space(), self.interface.action_space()
        self.state_space = self.interface.state_space()
        self._obs_spaces = {a: obs_space for a in self.possible_agents}
        self._act_spaces = {a: act_space for a in self.possible_agents}
        self._rng = np.random.default_rng(seed)
        self.session: EpisodeSession | None = None
        self._context: Context | None = None
        self._menu: Menu = WAITING
        self._last_text: dict[str, str] = {}
        describe: Callable[[str, str, Episode], str] | None = None
        if private_fact != "id":
            from gencoord_env.tasks.naturalized import describe

            self._check_naturalized(private_fact)
        self.setup = Setup(self.route, self.view, self.surface, private_fact, describe)

    def _check_naturalized(self, form: str) -> None:
        """A naturalized private fact needs a description of every binding the pool can draw."""
        from gencoord_env.tasks.naturalized import undescribed

        if not self.pool.described:
            raise UsageError(f"private_fact={form!r} needs a written description of each binding; pool="
                             f"{self.pool_name!r} generates its bindings and has none: use private_fact='id'")
        missing = undescribed(b for t in {e.template.id: e.template for e in self.episodes}.values() for b in t.bindings)
        if missing:
            raise UsageError(f"private_fact={form!r} needs a description of every binding; pool {self.pool_name!r} has "
                             f"bindings without one: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''} "
                             "(gencoord_env/data/naturalized.json lists them; or use private_fact='id')")

    def _check_team_options(self) -> None:
        from gencoord_env.envs.gencoord.routes import TEAM_ROUTES

        if self.route not in TEAM_ROUTES:
            raise UsageError(f"route {self.route!r} has no team form; a team pool runs the routes {list(TEAM_ROUTES)}")
        if self.surface.dialogue:
            raise UsageError(f"surface={self.surface.name!r} is a two-agent dialogue; a team pool runs 'dsl' or 'json'")

    def _check_solvable(self) -> None:
        """Refuse a pool that no record can solve on this route, naming the routes that can."""
        from gencoord_env.envs.gencoord.routes import TEAM_ROUTES, unsolvable

        templates = {e.template.id: e.template for e in self.episodes[:4096]} if self.pool_name != "procedural" else {}
        for template in templates.values():
            why = unsolvable(self.route, template)
            if why is not None:
                usable = [r for r in (TEAM_ROUTES if len(template.roles) > 2 else sorted(ROUTES))
                          if all(unsolvable(r, t) is None for t in templates.values())]
                raise UsageError(f"pool {self.pool_name!r} cannot be solved on route {self.route!r}: {why}; use "
                                 + " or ".join(f"route={r!r}" for r in usable))

    def check_reachable(self, stage: PipelineStage, who: str) -> None:
        """Refuse an intervention on ``stage`` that no episode of this env runs (it would silently do nothing),
        naming the routes, or the pools on this route, where the stage runs."""
        if stage in self.stages_running:
            return
        if self.route not in routes_running(stage):
            raise UsageError(f"{who} rewrites the {stage.value!r} stage, which only runs in the routes "
                             f"{list(routes_running(stage))}; this env uses route={self.route!r}")
        where = f"pool {self.pool_name!r} on route {self.route!r}"
        if self.surface.dialogue:
            where += f" with surface={self.surface.name!r}"
        runs = ", ".join(s.value for s in PipelineStage if s in self.stages_running)
        if self.surface.dialogue:
            hint = f"the free-form dialogue has no {stage.value!r} stage; surface='dsl' or 'json' runs it"
        else:
            hint = f"on route {self.route!r} it runs in the pools {list(pools_running(stage, self.route))}"
        raise UsageError(f"{who} rewrites the {stage.value!r} stage, which {where} never runs (its episodes run "
                         f"{runs}); {hint}")

    # --- spaces (built once, returned as the same objects) -----------------------------------------
    def observation_space(self, agent: str) -> gymnasium.spaces.Space[Any]:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.spaces.Space[Any]:
        return self._act_spaces[agent]

    @property
    def world(self) -> World:
        if self._world is None:
            self._world = make_world(self.backend, **self._backend_options)
        return self._world

    def _episode_index(self, index: Any) -> int:
        """``options["index"]`` checked: an episode number of this pool (a silent wrap would play another episode)."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"options['index'] takes an episode number (int), got {index!r}")
        n = len(self.episodes)
        if not 0 <= index < n:
            raise UsageError(f"options['index']={int(index)} is out of range: pool {self.pool_name!r} has {n} episodes "
                             f"(0 to {n - 1})")
        return int(index)

    # --- API ---------------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        options = options or {}
        if "episode" in options:
            episode = options["episode"]
        elif "index" in options:
            episode = self.episodes[self._episode_index(options["index"])]
        else:
            episode = self.episodes[int(self._rng.integers(len(self.episodes)))]
        interventions = tuple(options.get("interventions", ()))[::-1]  # wrappers add themselves outermost first
        for iv in interventions:
            if not isinstance(iv, Intervention):
                raise TypeError(f"options['interventions'] holds {iv!r}, which has no 'stage' and 'rewrite(value, episode, ...)'")
            self.check_reachable(rewritable(iv.stage, type(iv).__name__), type(iv).__name__)  # or it would do nothing
        self.agents = list(episode.agents)
        session_type = DialogueSession if self.surface.dialogue else EpisodeSession
        try:
            self._start_world()
            self.session = session_type(episode, self.setup, self.stages, self.world, interventions)
            reset_fault = None
        except self._faults as e:  # on_fault="truncate": the world's own reset recovers; once
            reset_fault = {"type": type(e).__name__, "message": str(e)}
            self.session = session_type(episode, self.setup, self.stages, self.world, interventions)
        observations, infos = self._observations(), self._infos()
        if reset_fault is not None and self.infos_mode == "full":
            for info in infos.values():
                info["reset_fault"] = reset_fault
        return observations, infos

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        s = self.session
        if s is None or not self.agents:
            raise RuntimeError("step() called before reset() or after the episode ended; call reset() first")
        turn = s.turn
        if not isinstance(actions, Mapping):  # the dict itself is the caller's; what is in it is the agent's
            raise TypeError(f"step() expects a dict agent -> action (e.g. {{{turn!r}: action}}, the deciding agent's "
                            f"action under its name), got {type(actions).__name__}")
        action = actions.get(turn, "")
        text, why = self.interface.action_text(action, self._menu)
        try:
            if text is None:
                s.refuse(int(action) if isinstance(action, (int, np.integer)) else brief(action), why, self._last_text.get(turn, ""))
            else:
                s.act(text, self._last_text.get(turn, ""))
        except self._faults as e:  # on_fault="truncate": the world broke mid-episode
            s.truncate(e)
        if not s.done and self.max_cycles is not None and s.metrics.values["decisions"] >= self.max_cycles:
            s.stop(f"max_cycles: {self.max_cycles} decisions without an outcome")
        done = s.done
        reward = self.rewards[s.outcome] if done and s.outcome is not None else 0.0
        rewards = {a: reward for a in self.agents}
        terminations = {a: done and not s.truncated for a in self.agents}
        truncations = {a: s.truncated for a in self.agents}
        observations, infos = self._observations(), self._infos()
        if done:
            self.agents = []
        if self.render_mode == "human":
            self.render()
        return observations, rewards, terminations, truncations, infos

    def _observations(self) -> dict[str, Any]:
        s = self.session
        assert s is not None
        self._context = None if s.done else s.context(s.turn)
        interface = self.interface
        self._menu = interface.menu(self._context) if interface.actions == "menu" else WAITING
        parts = render_parts(self._context) if self._context is not None else None  # render(), in blocks
        shown = with_menu(parts, self._menu) if parts is not None and interface.actions == "menu" else parts
        deciding_text = "\n".join(shown) if shown is not None else None
        self._last_text = {a: deciding_text if deciding_text is not None and a == s.turn else s.observation(a)
                           for a in s.episode.agents}
        if self._context is not None:
            s.observed()
        if not interface.structured:
            return dict(self._last_text)
        deciding = None if self._context is None else s.turn
        return {a: interface.observe(text, self._menu, self._context, parts) if a == deciding
                else interface.observe(text, None)
                for a, text in self._last_text.items()}

    def state(self) -> Any:
        """The centralized state (see State in the module docstring), in ``state_space``."""
        s = self.session
        if s is None:
            raise RuntimeError("state() called before reset(); call reset() first")
        episode, p = s.episode, s.progress
        planner = episode.role_agents[0]
        messages = tuple(m for a in episode.role_agents for m in p.inbox.get(a, ()))
        context = build_context(episode, planner, "centralized", route="centralized", view=self.view,
                                history=p.history.get(planner, ()), messages=messages,
                                private_fact=self.private_fact, describe=self.setup.describe)
        return self.interface.state(render_parts(context))

    def observation_text(self, agent: str) -> str:
        """What ``agent`` sees now as text, whatever the observation interface (scripted partners read it)."""
        return self._last_text[agent]

    def _infos(self) -> dict[str, dict[str, Any]]:
        return self.numeric_infos() if self.infos_mode == "numbers" else self.full_infos()

    def full_infos(self) -> dict[str, dict[str, Any]]:
        """This step's infos in the ``full`` form, whatever ``infos`` is (what scripted partners and the trace
        recorder read when a learner gets ``infos="numbers"``)."""
        s = self.session
        if s is None:
            raise RuntimeError("full_infos() called before reset(); call reset() first")
        base: dict[str, Any] = {"episode_id": s.episode.id, "template": s.episode.template.id, "route": s.setup.route}
        if s.done:
            metrics = s.metrics.as_dict()
            base.update({"turn": None, "stage": "done", "outcome": s.outcome, "reason": s.reason, "trace": s.trace,
                         "metrics": {k: v for k, v in metrics.items() if k not in TIMINGS}})
            if s.fault is not None:
                base["fault"] = dict(s.fault)
            if s.stopped is not None:
                base["max_cycles"] = self.max_cycles
            if self.timings:
                base["timings"] = {k: metrics[k] for k in TIMINGS}
        else:
            base.update({"turn": s.turn, "stage": s.decision.stage})
        infos = {a: {**base, "deciding": a == base["turn"], "role": s.episode.role_of[a]} for a in s.episode.agents}
        if self._context is not None:
            infos[s.turn]["context"] = self._context
            if self.interface.actions == "menu":
                texts = self._menu.texts[: self.interface.n]
                infos[s.turn]["candidates"] = [*texts, *[None] * (self.interface.n - len(texts))]
        return infos

    def numeric_infos(self) -> dict[str, dict[str, Any]]:
        """This step's infos in the ``numbers`` form, whatever ``infos`` is."""
        s = self.session
        if s is None:
            raise RuntimeError("numeric_infos() called before reset(); call reset() first")
        m = s.metrics.values
        base = {
            "stage_index": -1 if s.done else int(s.progress.index),
            "done": int(s.done),
            "success": int(s.done and s.outcome is not None and s.outcome.value == "SUCCESS"),
            "reward": float(self.rewards[s.outcome]) if s.done and s.outcome is not None else 0.0,
            "decisions": int(m["decisions"]),
            "wire_bytes": int(m["wire_bytes"]),
            "handoff_verified": int(bool(m["handoff_verified"])),
            "commitment_validity": int(bool(m["commitment_validity"])),
            "truncated": int(s.truncated),
        }
        turn = None if s.done else s.turn
        return {a: {**base, "deciding": int(a == turn)} for a in s.episode.agents}

    def render(self) -> str | np.ndarray | None:
        """The episode so far, from world truth (``gencoord_env.envs.gencoord.picture``): ``ansi`` as text,
        ``rgb_array`` as a picture of the arena and the story so far, ``human`` printed as text; None before ``reset``."""
        if self.session is None or self.render_mode is None:
            return None
        from gencoord_env.envs.gencoord import picture

        s = self.session
        truth = self.world.observe()
        if self.render_mode == "rgb_array":
            handoffs = [e.data for e in s.events if e.kind == "handoff" and e.ok]
            return picture.compose(s.episode.world, truth, picture.story(s, truth), handoffs)
        text = picture.text(s, truth)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def _start_world(self) -> None:
        """The backend made ready before the episode's clock starts (a sidecar's start is no episode's time)."""
        start = getattr(self.world, "start", None)  # a world written before World.start starts in its reset
        if start is not None:
            start()

    def close(self) -> None:
        if self._world is not None:
            self._world.close()
            self._world = None


P = ParamSpec("P")
R = TypeVar("R")


def arguments_section() -> str:
    """The module docstring's ``### Arguments`` section: what ``help()`` shows for each constructor."""
    doc = __doc__ or ""  # None under python -OO
    start = doc.find("### Arguments")
    return "" if start < 0 else doc[start:doc.find("\n### ", start + 1)].strip() + "\n"


def with_arguments_of(cls: Callable[P, Any]) -> Callable[[Callable[..., R]], Callable[P, R]]:
    """Give a constructor function ``cls``'s own arguments: type checkers read them through the ``ParamSpec``,
    ``help()`` and ``inspect.signature`` through ``__signature__``, so they are written once, in ``raw_env``."""

    def decorate(f: Callable[..., R]) -> Callable[P, R]:
        own = inspect.signature(f)
        f.__signature__ = inspect.signature(cls).replace(return_annotation=own.return_annotation)  # type: ignore[attr-defined]
        f.__doc__ = f"{inspect.cleandoc(f.__doc__ or '')}\n\n{arguments_section()}"
        return f

    return decorate


@with_arguments_of(raw_env)
def parallel_env(*args: Any, **kwargs: Any) -> raw_env:
    """The ParallelEnv ``gencoord_v0``.

    >>> env = parallel_env(backend="sim", pool="heldout")
    """
    return raw_env(*args, **kwargs)

