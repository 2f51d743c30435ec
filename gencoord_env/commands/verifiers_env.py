"""The env as a ``verifiers`` 0.4 environment: a taskset of the pool's episodes and an env that plays them.

``pip install -e '.[verifiers]'`` (verifiers 0.4.0, Python >= 3.11). verifiers 0.4 finds an environment by its
taskset id, the name of an installed top-level module exporting a ``Taskset`` subclass (and here an ``Env``
subclass) through ``__all__``; a dotted name does not resolve. :data:`TASKSET_ID` is ``gencoord_verifiers``,
a module that re-exports this one. :func:`load_environment` builds the env from keyword arguments; the
verifiers CLI builds the same env from the id::

    from gencoord_env.commands.verifiers_env import load_environment
    env = load_environment(pool="heldout", route="forward", plays="both", episodes=32)

    vf-eval gencoord_verifiers --env.taskset.pool heldout --env.taskset.episodes 32 \
        --model MODEL --client.base-url URL --no-push

Tasks: one per episode of ``pool`` (its first ``episodes``, all by default), named ``<pool>#<index>``, whose
system prompt is the shared prior (as in the SFT prompts and :func:`gencoord_env.commands.llm_rl.episode_dataset`).
The task has no user prompt: the env opens the exchange with the first decision's observation.

Seats: one per role, ``sender`` and ``receiver`` (verifiers' multi-agent ``Env.run(task, agents)``), each
its own agent with its own conversation and trace. The model plays the decisions of ``plays`` (``"both"``:
every decision, each in its role's seat; a role name: that role's seat, with ``partner``, the rule agent by
default, playing the rest inside the env). Each model reply is the deciding agent's Short DSL record,
committed as it is (a malformed one is the env's failure code, as in the env); the seat's next user turn is
its next decision's observation, and the exchanges end when the episode does. A seat whose role never
decides in an episode (the sender's parse failure ends it first) has no trace in that episode. The episode
is played by :class:`gencoord_env.commands.llm_rl.GencoordToolEnv` (through
:class:`gencoord_env.turns.TurnEnv`), the TRL adapter's episode logic, so both adapters play the env's own
episodes.

A frozen partner: ``frozen=("receiver",)`` marks that seat untrainable
(verifiers' ``trainable=False``: its tokens are never training data, as prime-rl trains one agent beside a
frozen one); pin the frozen seat to a fixed model with ``receiver={"model": ..., "client": {...}}``
(``--env.receiver.model``), or leave it on the run's model (self-play that trains one role only).

Rewards on each seat's trace: ``success`` (the paper's 0/1) or, with ``reward="staged"``, ``staged`` (the
env's partial credit), the episode's (the game is cooperative: both seats earn it); the other is a metric; an
episode the model left unfinished (a turn limit, an empty exchange) scores 0. ``trace.info["outcome"]`` is
the outcome code, ``trace.info["role"]`` the seat's role.

verifiers' built-in OpenEnv taskset drives ``gencoord serve`` as well (the action schema's one required
field, ``text``, takes a plain-text reply): ``vf-eval openenv --env.taskset.base-url http://HOST:PORT
--env.taskset.resets '[{"index": 0}, {"index": 1}]'``; each user turn is then the observation as JSON, and
the reward ``openenv_reward`` the sum of the server's.

A seat's default harness is verifiers' ``null`` chat loop (no tools, no code) on the ``subprocess``
runtime: a program on this machine, relaunched on the conversation for every decision, that reaches the
model (any OpenAI-compatible endpoint) through verifiers' interception server. verifiers installs that
program's packages with ``uv`` at its first start (from the package index, later from uv's cache): the
extra installs ``uv`` into the virtualenv, which must be on ``PATH`` (an activated virtualenv is), or
verifiers installs one of its own into ``~/.local/bin``.

Episodes are played in envs of this process, one per episode in flight (kept for the next episode and closed
when verifiers stops serving); tested on the sim backend.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.harnesses.null import NullHarnessConfig
from verifiers.v1.runtimes import SubprocessConfig

from gencoord_env.commands.llm_rl import GencoordToolEnv, episode_prompt, staged_reward, success_reward
from gencoord_env.errors import UsageError

__all__ = [
    "TASKSET_ID",
    "GencoordData",
    "GencoordEnv",
    "GencoordEnvConfig",
    "GencoordTask",
    "GencoordTaskset",
    "GencoordTasksetConfig",
    "ROLES",
    "load_environment",
]

#: the verifiers id of this environment: the top-level module that exports its Taskset and Env
TASKSET_ID = "gencoord_verifiers"

_REWARDS = {"binary": ("success", success_reward), "staged": ("staged", staged_reward)}


class GencoordTasksetConfig(vf.TasksetConfig):
    """What episodes are played and how (the arguments of :class:`gencoord_env.commands.llm_rl.GencoordToolEnv`)."""

    pool: str = "train"
    route: str = "forward"
    backend: str = "sim"
    plays: str = "both"
    """``"both"`` (self-play) or a role name."""
    partner: str = "rule"
    """The agent (``gencoord_env.agents.make_policy`` name) of the decisions the model does not make."""
    episodes: int | None = Field(None, ge=1)
    """The pool's first ``episodes`` episodes (None: all of them)."""
    reward: Literal["binary", "staged"] = "binary"
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Further arguments of ``gencoord_env.parallel_env`` (``surface``, ``private_fact``, ``pool_seed``, ...)."""

    def tool_env(self) -> GencoordToolEnv:
        return GencoordToolEnv(pool=self.pool, route=self.route, backend=self.backend, plays=self.plays,
                               partner=self.partner, **self.env_kwargs)


class GencoordData(vf.TaskData):
    index: int
    """The episode's index in the pool (``reset(options={"index": index})``)."""


class GencoordTask(vf.Task[GencoordData, vf.State, vf.TaskConfig]):
    pass


class GencoordTaskset(vf.Taskset[GencoordTask, GencoordTasksetConfig]):
    """One task per episode of the pool; see the module docstring."""

    def load(self) -> Iterator[GencoordTask]:
        config = self.config
        player = config.tool_env()
        try:
            size = len(player.game.env.episodes)
            for index in range(size if config.episodes is None else min(config.episodes, size)):
                system = next((m["content"] for m in episode_prompt(player, index) if m["role"] == "system"), None)
                yield GencoordTask(GencoordData(name=f"{config.pool}#{index}", index=index, system_prompt=system),
                                   config.task)
        finally:
            player.game.close()


#: the roles of the env's episodes, one seat each
ROLES = ("sender", "receiver")

_SEAT = vf.AgentConfig(harness=NullHarnessConfig(id="null"), runtime=SubprocessConfig())


class GencoordEnvConfig(vf.EnvConfig):
    sender: vf.AgentConfig = _SEAT
    """The seat of the sender's decisions."""
    receiver: vf.AgentConfig = _SEAT
    """The seat of the receiver's decisions."""
    frozen: tuple[Literal["sender", "receiver"], ...] = ()
    """Seats whose tokens are never training data (a frozen partner)."""


class GencoordEnv(vf.Env[GencoordEnvConfig]):
    """Plays a task's episode through :class:`gencoord_env.commands.llm_rl.GencoordToolEnv`, each decision in its
    role's seat; see the module docstring."""

    def __init__(self, config: GencoordEnvConfig) -> None:
        super().__init__(config)
        #: idle episode players; an episode takes one (concurrent episodes never share one) and gives it back
        self._idle: list[GencoordToolEnv] = []

    async def setup(self, agents: vf.Agents) -> None:
        for role in self.config.frozen:
            getattr(agents, role).trainable = False

    async def run(self, task: GencoordTask, agents: vf.Agents) -> None:
        config: GencoordTasksetConfig = self.taskset.config
        episode = self._idle.pop() if self._idle else config.tool_env()
        try:
            system = [{"role": "system", "content": task.data.system_prompt}] if task.data.system_prompt else None
            text = episode.reset(index=task.data.index, prompt=system)
            async with contextlib.AsyncExitStack() as stack:
                seats: dict[str, Any] = {}  # role -> its open interaction, opened at the role's first decision
                while True:
                    turn = episode.turn
                    assert turn is not None and turn.role is not None  # a deciding turn: the loop leaves at the end
                    role = turn.role
                    if role not in seats:
                        seats[role] = await stack.enter_async_context(getattr(agents, role).interaction(task))
                    segment = await seats[role].turn(text)
                    if segment.terminated:  # a seat's turn limit (or an empty exchange): the episode is left unfinished
                        break
                    text = episode.commit(segment.last_reply)
                    if episode.outcome is not None:
                        break
                # recorded before the exchanges close, so each rollout's own record of its end carries them
                for role, interaction in seats.items():
                    trace = interaction.trace
                    for kind, (name, reward) in _REWARDS.items():
                        value = reward([episode])[0]
                        if kind == config.reward:
                            trace.record_reward(name, value)
                        else:
                            trace.record_metric(name, value)
                    trace.info["outcome"] = episode.outcome
                    trace.info["role"] = role
        finally:
            self._idle.append(episode)

    async def stop(self) -> None:
        idle, self._idle = self._idle, []
        for episode in idle:
            episode.game.close()


def load_environment(pool: str = "train", route: str = "forward", backend: str = "sim", plays: str = "both",
                     partner: str = "rule", episodes: int | None = None, reward: str = "binary",
                     sender: dict[str, Any] | None = None, receiver: dict[str, Any] | None = None,
                     frozen: Sequence[str] = (), **env_kwargs: Any) -> GencoordEnv:
    """The verifiers environment of ``pool``'s episodes; ``env_kwargs`` go to ``gencoord_env.parallel_env``.
    ``sender`` and ``receiver`` override fields of that seat's ``AgentConfig`` (``{"max_turns": 8}``, a model, a
    client, a harness, a runtime); ``frozen`` names the seats that are not trained."""
    unknown = sorted(set(frozen) - set(ROLES))
    if unknown:
        raise UsageError(f"frozen={list(frozen)}: {unknown} name no seat; the seats are {list(ROLES)}")
    seats = {role: seat for role, seat in (("sender", sender), ("receiver", receiver)) if seat}
    config = vf.resolve_env_config({
        "taskset": {"id": TASKSET_ID, "pool": pool, "route": route, "backend": backend, "plays": plays,
                    "partner": partner, "episodes": episodes, "reward": reward, "env_kwargs": env_kwargs},
        "frozen": tuple(frozen), **seats,
    })
    env = vf.load_environment(config)
    assert isinstance(env, GencoordEnv)
    return env
