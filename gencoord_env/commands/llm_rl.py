"""Language-model agents that play whole episodes through a tool: TRL's ``environment_factory``.

:class:`GencoordToolEnv` is an environment for ``trl.GRPOTrainer(environment_factory=...)`` (TRL 1.16,
experimental): a constructor that needs no argument, ``reset(**row)`` returning the first observation
text, and one public method, ``commit(record)``, that the model calls as a tool. Each call plays the
deciding agent's Short DSL record in the env (:class:`gencoord_env.turns.TurnEnv`) and answers with the
next decision's observation, or with the outcome when the episode ended. ``plays="both"`` is self-play:
the same model decides every turn of both agents, each turn seeing that agent's own local context;
``plays="sender"`` (any role name) lets the model play that role and ``partner`` (the rule agent by
default) the other decisions. The reward functions :func:`success_reward` (the paper's 0/1) and
:func:`staged_reward` (partial credit, ``gencoord_env.outcomes.STAGED_REWARD``) read the finished
environments; an episode the model left unfinished (it never committed) scores 0.

Prompt layout: the prompts of :func:`episode_dataset` carry the shared prior as the system turn and
leave the user turn to ``reset``, which fills it with the rest of the first observation, so the first
decision reads exactly as :func:`gencoord_env.agents.lm.prompt.prompt_text` lays it out for SFT and the
learned policies. Tool results carry the next observation without its prior (already in the system
turn). Without such a prompt (TRL's placeholder), ``reset`` returns the whole observation.

Chat template: the package's offline tokenizer (``gencoord_env.agents.lm.loading.train_tokenizer``) has a
plain chat template; :func:`tool_tokenizer` gives it :data:`TOOL_CHAT_TEMPLATE` (Qwen-style
``<tool_call>{json}</tool_call>`` calls, ``<|im_end|>`` as end of turn) and the response parser TRL needs.
A tool's answer (the next observation) is a user turn, as the first observation is, so every decision
reads as a user turn followed by the assistant's call. A conversation without tools renders exactly as before. The template
does not print tool definitions: a model trained here learns its one tool in SFT
(:func:`tool_call_text` gives the assistant text of a commit), and the definitions would add a constant
block to every prompt. A checkpoint with a chat template of its own (a Qwen3 or Qwen3.5 folder) keeps it:
:func:`tool_tokenizer` checks that it writes a commit call that :func:`commit_record` reads back (Qwen3's
``<tool_call>{json}</tool_call>``, Qwen3.5's ``<tool_call><function=commit><parameter=record>``) and gives it
TRL's response parser for that template.

Example::

    tokenizer = tool_tokenizer(tokenizer)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[staged_reward],
                          train_dataset=episode_dataset("train", range(64)),
                          environment_factory=GencoordToolEnv.factory(pool="train", plays="both"),
                          args=GRPOConfig(..., max_tool_calling_iterations=4))

:class:`GencoordServerEnv` is the same over a running ``gencoord serve`` (one session per rollout), with the
env's own reward (``get_reward``, which TRL reads without a reward function).

:mod:`gencoord_env.commands.verifiers_env` plays the same episodes (this class's episode logic) as a ``verifiers`` 0.4
environment (extra ``verifiers``).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gencoord_env.agents.formats import commit_record
from gencoord_env.errors import UsageError
from gencoord_env.outcomes import REWARDS, FailureCode
from gencoord_env.turns import Turn, TurnEnv

__all__ = [
    "RESPONSE_TEMPLATE",
    "TOOL_CHAT_TEMPLATE",
    "GencoordServerEnv",
    "GencoordToolEnv",
    "commit_record",
    "episode_dataset",
    "episode_prompt",
    "staged_reward",
    "success_reward",
    "tool_call_text",
    "tool_rows",
    "tool_tokenizer",
]

#: The offline tokenizer's chat template with tool calls and tool results; without them it renders as
#: ``gencoord_env.agents.lm.loading.CHAT_TEMPLATE`` does (tests hold the two equal).
TOOL_CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'tool' %}<|im_start|>user\n{{ m['content'] }}<|im_end|>\n"
    "{% elif m['role'] == 'assistant' and m.get('tool_calls') %}<|im_start|>assistant\n{{ m['content'] or '' }}"
    "{% for call in m['tool_calls'] %}{% set f = call['function'] if call.get('function') else call %}"
    "<tool_call>\n{\"name\": {{ f['name'] | tojson }}, \"arguments\": {{ f['arguments'] | tojson }}}\n</tool_call>"
    "{% endfor %}<|im_end|>\n"
    "{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: How ``tokenizer.parse_response`` reads an assistant turn of :data:`TOOL_CHAT_TEMPLATE` (transformers >= 5.13).
RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}

#: what a tool result says when the episode ended; the model should then stop calling tools
END = "END outcome={outcome}"


def tool_tokenizer(tokenizer: Any) -> Any:
    """A tokenizer ready for tool calls, changed in place and returned.

    The offline tokenizer gets :data:`TOOL_CHAT_TEMPLATE`, its response parser and ``<|im_end|>`` as EOS (a
    turn ends there, so generation stops where the template closes the assistant's turn). A tokenizer with a
    chat template of its own (a Qwen3 or Qwen3.5 checkpoint) keeps it: it must write a commit call that
    :func:`commit_record` reads back, and gets TRL's response parser for that template where TRL knows it
    (``trl.chat_template_utils.add_response_schema``) and ``<|im_end|>`` as EOS. Raises ``ValueError`` for a
    template that cannot write such a call."""
    from gencoord_env.agents.lm.loading import CHAT_TEMPLATE

    template = getattr(tokenizer, "chat_template", None)
    if template in (CHAT_TEMPLATE, TOOL_CHAT_TEMPLATE):
        tokenizer.chat_template = TOOL_CHAT_TEMPLATE
        tokenizer.response_template = RESPONSE_TEMPLATE
        tokenizer.eos_token = "<|im_end|>"
        return tokenizer
    if not template or "<|im_end|>" not in tokenizer.get_vocab():
        raise UsageError("tool_tokenizer() needs the offline tokenizer (train_tokenizer) or a Qwen-style chat template "
                         "that ends turns with <|im_end|>; this tokenizer has " + ("no chat template" if not template else
                         "no <|im_end|> token"))
    probe = "SELF resource.obtain(q=1,item=x)\nREQ agent_b control.wait()"
    try:
        written = tool_call_text(tokenizer, probe)
    except Exception as exc:  # a template error of any kind: say which template failed and how
        raise UsageError(f"this tokenizer's chat template cannot write a commit tool call ({type(exc).__name__}: {exc}); "
                         "use a Qwen3 or Qwen3.5 checkpoint's template or the offline tokenizer") from None
    if commit_record(written) != probe:
        raise UsageError(f"this tokenizer's chat template writes a commit call as {written!r}, which commit_record() does not "
                         "read: it reads Qwen3's <tool_call>{json}</tool_call> and Qwen3.5's <tool_call><function=...> calls")
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        try:
            from trl.chat_template_utils import add_response_schema

            add_response_schema(tokenizer)
        except (ImportError, ValueError):  # no TRL, or a template TRL does not know: our own reading still works
            pass
    tokenizer.eos_token = "<|im_end|>"
    return tokenizer


def tool_call_text(tokenizer: Any, record: str, tool: str = "commit") -> str:
    """The assistant's turn that commits ``record`` as the chat template renders it (without the end of turn):
    the SFT target that teaches a model the tool."""
    user = [{"role": "user", "content": "."}]
    head = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    call = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": tool, "arguments": {"record": record}}}]}
    full = tokenizer.apply_chat_template([*user, call], tokenize=False)
    end = full.rindex("<|im_end|>")
    if not full.startswith(head):
        raise UsageError("the chat template does not render an assistant turn after its generation prompt")
    return str(full[len(head):end])


def tool_rows(rows: Iterable[Any], tokenizer: Any) -> list[Any]:
    """SFT rows (``gencoord_env.train.data.Row``) whose target record becomes the assistant's commit call
    (:func:`tool_call_text`): the warm start that teaches a model the tool before GRPO."""
    import dataclasses

    return [dataclasses.replace(r, target=tool_call_text(tokenizer, r.target)) for r in rows]


def _split(text: str) -> tuple[str, str]:
    """(prior block, the rest) of an observation; ("", text) when it has no prior block."""
    from gencoord_env.tasks.contexts import split_prior

    parts = split_prior(text)
    return parts if parts is not None else ("", text)


class GencoordToolEnv:
    """One episode at a time, decided by a language model through :meth:`commit`; see the module docstring.

    Arguments are those of ``gencoord_env.parallel_env`` (``pool``, ``route``, ``backend``, ``surface``,
    ``private_fact``, ``pool_seed``, ...), plus ``plays`` (``"both"`` or a role name) and ``partner`` (a rule
    agent's name, or a policy with ``act(observation, info)``, for the decisions the model does not make).
    With ``base_url`` the episodes are played on a running ``gencoord serve`` instead (one session,
    :class:`gencoord_env.commands.client.RemoteTurnEnv`), whose arguments choose the pool and the rest; a
    ``partner`` here decides from the typed context the server sends.
    """

    def __init__(self, pool: str = "train", route: str = "forward", backend: str = "sim", plays: str = "both",
                 partner: Any = "rule", base_url: str | None = None, **env_kwargs: Any) -> None:
        import gencoord_env

        if isinstance(partner, str):
            from gencoord_env.agents import make_policy

            partner = make_policy(partner)
        self._plays = plays
        self._partner = partner
        if base_url is not None:
            from gencoord_env.commands.client import RemoteTurnEnv

            self._game: Any = RemoteTurnEnv(base_url, context=plays != "both")
        else:
            self._game = TurnEnv(gencoord_env.parallel_env(pool=pool, route=route, backend=backend, **env_kwargs))
        self._prior = ""
        #: the model's records in this episode, in order
        self.records: list[str] = []

    @classmethod
    def factory(cls, **kwargs: Any) -> Callable[[], GencoordToolEnv]:
        """A no-argument factory for ``environment_factory=`` with these arguments."""
        return functools.partial(cls, **kwargs)

    # --- TRL's contract: reset and the tools (every other public name would become a tool) ---------

    def reset(self, index: int | None = None, seed: int | None = None, prompt: Any = None, **_: Any) -> str:
        """Start episode ``index`` of the pool (or one the env's RNG draws, seeded by ``seed``); the model's first
        observation: without its prior when ``prompt``'s system turn already carries it, else whole."""
        turn = self._start(index, seed)
        prior, rest = _split(turn.text)
        given = prompt[0].get("content") if isinstance(prompt, list) and prompt and prompt[0].get("role") == "system" else None
        self._prior = prior if given == prior else ""
        return rest if self._prior else turn.text

    def commit(self, record: str) -> str:
        """Commit a Short DSL record for the agent that decides now.

        Args:
            record: the two-line record, "SELF <path>" then "REQ <agent> <path>", as the observation's stage asks.

        Returns:
            The observation of the next decision, or "END outcome=<code>" when the episode has ended.
        """
        self.records.append(record)
        turn = self._advance(self._game.act(record))
        if turn.done:
            return END.format(outcome=turn.outcome)
        prior, rest = _split(turn.text)
        return rest if self._prior and prior == self._prior else turn.text

    # --- what the reward functions read (properties: TRL makes every public method a tool) ----------

    @property
    def game(self) -> Any:
        """The turn-by-turn env the episodes are played in: a ``TurnEnv`` (its ``env`` is the ParallelEnv), or with
        ``base_url`` a ``RemoteTurnEnv``."""
        return self._game

    @property
    def turn(self) -> Turn | None:
        """The current turn (None before the first reset)."""
        turn: Turn | None = self._game.turn
        return turn

    @property
    def outcome(self) -> str | None:
        """The episode's outcome code once it ended, else None (the model has not finished it)."""
        turn = self._game.turn
        return turn.outcome if turn is not None and turn.done else None

    def _start(self, index: int | None, seed: int | None) -> Turn:
        self.records = []
        return self._advance(self._game.reset(seed=seed, index=index))

    def _advance(self, turn: Turn) -> Turn:
        """Let the partner play every decision that is not the model's."""
        while not turn.done and self._plays != "both" and turn.role != self._plays:
            if self._plays not in self._roles():
                raise UsageError(f"plays={self._plays!r} is no role of episode {turn.episode_id} "
                                 f"(its roles: {sorted(self._roles())}); use 'both' or one of them")
            turn = self._game.act(self._partner.act(turn.text, self._game.info))
        return turn

    def _roles(self) -> set[str]:
        return set(self._game.info["context"].prior.roles)


class GencoordServerEnv(GencoordToolEnv):
    """TRL's environment class over a running ``gencoord serve``, with a reward the env owns.

    Each instance holds one session of the server at ``base_url`` (TRL makes one per rollout and keeps them
    between steps; a session the server closed while idle is opened again at the next reset), so the server
    needs ``--max-sessions`` at least the generation batch. The server's arguments choose the pool, route,
    backend (sim or minecraft) and reward; a server started with ``--plays ROLE`` plays the other roles with
    its partner. ``get_reward()`` is the reward the env paid at the episode's end (the server's ``--reward``),
    0.0 for an episode the model left unfinished: TRL adds it as a reward of its own (logged under this
    class's name), so ``reward_funcs`` may be left out. Tools, prompts and ``plays``/``partner`` are
    :class:`GencoordToolEnv`'s.

        trainer = GRPOTrainer(model="Qwen/Qwen3-0.6B", train_dataset=GencoordServerEnv.dataset(url, range(64)),
                              environment_factory=GencoordServerEnv.factory(base_url=url), args=GRPOConfig(...))
    """

    def __init__(self, base_url: str, plays: str = "both", partner: Any = "rule") -> None:
        super().__init__(plays=plays, partner=partner, base_url=base_url)

    def get_reward(self) -> float:
        """The env's reward for the finished episode; 0.0 when the model left it unfinished."""
        turn = self.turn
        return float(turn.reward) if turn is not None and turn.done else 0.0

    @classmethod
    def dataset(cls, base_url: str, indices: Iterable[int], **kwargs: Any) -> Any:
        """:func:`episode_dataset` of the server's pool: one row per episode index, the prior (as the server sends it)
        as the system turn."""
        env = cls(base_url, **kwargs)
        try:
            return _dataset(env, indices)
        finally:
            env.game.close()


def _rewards(kind: str, environments: Sequence[GencoordToolEnv]) -> list[float]:
    table = REWARDS[kind]
    return [table[FailureCode(env.outcome)] if env.outcome is not None else 0.0 for env in environments]


def success_reward(environments: Sequence[GencoordToolEnv], **_: Any) -> list[float]:
    """TRL reward function: 1.0 for an episode that ended in SUCCESS, else 0.0 (unfinished episodes too)."""
    return _rewards("binary", environments)


def staged_reward(environments: Sequence[GencoordToolEnv], **_: Any) -> list[float]:
    """TRL reward function: the env's staged partial credit of the outcome; 0.0 for an unfinished episode."""
    return _rewards("staged", environments)


def episode_dataset(pool: str, indices: Iterable[int], **env_kwargs: Any) -> Any:
    """A ``datasets.Dataset`` of one row per episode: ``prompt`` (the shared prior as the system turn, an empty
    user turn that ``reset`` fills) and ``index``. ``env_kwargs`` as for :class:`GencoordToolEnv` (``plays``
    decides whose first observation's prior is shown; both agents of an episode see the same prior)."""
    return _dataset(GencoordToolEnv(pool=pool, **env_kwargs), indices)


def _dataset(env: GencoordToolEnv, indices: Iterable[int]) -> Any:
    from datasets import Dataset

    return Dataset.from_list([{"prompt": episode_prompt(env, int(k)), "index": int(k)} for k in indices])


def episode_prompt(env: GencoordToolEnv, index: int) -> list[dict[str, str]]:
    """The prompt of episode ``index`` of ``env``'s pool: the shared prior as the system turn (none when the
    observation has no prior block) and an empty user turn that ``reset`` fills. Starts that episode."""
    prior, _ = _split(env._start(index, None).text)
    return ([{"role": "system", "content": prior}] if prior else []) + [{"role": "user", "content": ""}]
