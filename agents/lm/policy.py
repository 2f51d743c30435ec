"""Learned policies behind the rule agents' interface: ``act(observation, info) -> str``.

- :class:`DirectDSLPolicy` (Direct Short DSL): the prompt is the agent's local context (the observation
  text) laid out by :func:`prompt_text` (the shared prior as the system turn, the rest as the user
  turn of the tokenizer's chat template; training builds the same); greedy decoding with the 256-token cap; the completion is
  the action, parsed by the env like any other agent's.
- :class:`FactorCodePolicy` (Factor-Code + Rule): the model emits only the stage's binding code
  (``active_binding_id=<code>`` at the sender, ``accepted_binding_id=<code>`` at the receiver); the public
  composer (:func:`gencoord_env.tasks.context_view.compose`, the same expansion as ``tasks.compose.role_paths``)
  turns it into the same peer-facing Short DSL. A code outside the context's codebook is passed on as
  the raw completion, so the env records the mistake as a parse failure instead of the policy hiding it.

Every model call is kept as a :class:`CallRecord` (episode, stage, agent, input and output tokens,
latency). ``act_batch`` answers many envs in one batched generation; ``last_records`` holds the
records of the latest batch in input order, which is how the closed-loop evaluation attributes calls
and tokens to episodes.

Example::

    policy = load_policy("runs/sft/final", kind="direct")
    action = policy.act(observation, info)
    policy.records[-1].output_tokens
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from gencoord_env.tasks.context_view import compose, roles
from gencoord_env.agents.lm.generate import GenerationConfig, GenerationRecord, Generator
from gencoord_env.agents.lm.loading import load_model
from gencoord_env.agents.lm.prompt import prompt_text
from gencoord_env import dsl
from gencoord_env.lifecycle import DecisionStage
from gencoord_env.tasks.contexts import Context
from gencoord_env.types import PeerRequest, Proposal

__all__ = [
    "CODE_FIELDS",
    "CallRecord",
    "DirectDSLPolicy",
    "FactorCodePolicy",
    "LMPolicy",
    "expand_code",
    "load_policy",
    "prompt_text",
]

#: The binding-code field the Factor-Code model emits at each learned stage.
CODE_FIELDS: dict[str, str] = {DecisionStage.SENDER_INITIAL: "active_binding_id", DecisionStage.RECEIVER_AFTER_REQUEST: "accepted_binding_id"}
_CODE = re.compile(r"^\s*(?:(active_binding_id|accepted_binding_id)\s*=\s*)?([A-Za-z0-9_]+)\s*$")


@dataclass(frozen=True)
class CallRecord:
    """One model call of one agent at one decision stage."""

    episode: str
    stage: str
    agent: str
    input_tokens: int
    output_tokens: int
    latency_s: float
    batch_size: int
    text: str


class LMPolicy:
    """Shared machinery: batched greedy generation and call records; subclasses map text to actions."""

    name = "lm"

    def __init__(self, generator: Generator) -> None:
        self.generator = generator
        self.records: list[CallRecord] = []
        self.last_records: list[CallRecord] = []

    @property
    def model_calls(self) -> int:
        return len(self.records)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return self.act_batch([observation], [info])[0]

    def act_batch(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        if len(observations) != len(infos):
            raise ValueError(f"got {len(observations)} observations but {len(infos)} infos")
        if not observations:
            self.last_records = []
            return []
        generated = self.generator.generate(list(observations))
        actions, batch = [], []
        for record, observation, info in zip(generated, observations, infos):
            actions.append(self.to_action(record.text, info))
            batch.append(self._record(record, info))
        self.last_records = batch
        self.records += batch
        return actions

    def to_action(self, completion: str, info: Mapping[str, Any]) -> str:
        raise NotImplementedError

    @staticmethod
    def _record(record: GenerationRecord, info: Mapping[str, Any]) -> CallRecord:
        return CallRecord(
            episode=str(info.get("episode_id", "")), stage=str(info.get("stage", "")),
            agent=str(getattr(info.get("context"), "agent", "")), input_tokens=record.input_tokens,
            output_tokens=record.output_tokens, latency_s=record.latency_s, batch_size=record.batch_size,
            text=record.text,
        )


class DirectDSLPolicy(LMPolicy):
    """Direct Short DSL: the completion is the action."""

    name = "direct"

    def to_action(self, completion: str, info: Mapping[str, Any]) -> str:
        return completion


def expand_code(completion: str, context: Context) -> str | None:
    """The Short DSL action a binding code stands for in ``context``; None when it names no admissible branch.

    Sender (``active_binding_id``): its own path plus the REQ with the peer's path. Receiver
    (``accepted_binding_id``): its own path of that branch and ``REQ -``.
    """
    m = _CODE.match(completion)
    if not m or m.group(2) not in context.prior.codebook:
        return None
    field, code = m.groups()
    first, second = roles(context)
    mine, theirs = compose(context, code, first, second)
    stage = context.stage
    expected = CODE_FIELDS.get(stage)
    if field is not None and expected is not None and field != expected:
        return None
    if stage == DecisionStage.RECEIVER_AFTER_REQUEST:
        return dsl.format(Proposal(theirs, ()))
    return dsl.format(Proposal(mine, (PeerRequest(context.peer, theirs),)))


class FactorCodePolicy(LMPolicy):
    """Factor-Code + Rule: the model picks the binding code, the public composer writes the DSL."""

    name = "factor_code"

    def to_action(self, completion: str, info: Mapping[str, Any]) -> str:
        context = info.get("context")
        if context is None:
            return completion
        return expand_code(completion, context) or completion


POLICY_KINDS: dict[str, type[LMPolicy]] = {"direct": DirectDSLPolicy, "factor_code": FactorCodePolicy}


def make_policy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    kind: Literal["direct", "factor_code"] = "direct",
    config: GenerationConfig | None = None,
) -> LMPolicy:
    """A learned policy around an already loaded model."""
    if kind not in POLICY_KINDS:
        raise ValueError(f"unknown learned policy kind {kind!r}; expected one of {sorted(POLICY_KINDS)}")
    return POLICY_KINDS[kind](Generator(model, tokenizer, config or GenerationConfig()))


def load_policy(
    source: str | os.PathLike[str],
    kind: Literal["direct", "factor_code"] = "direct",
    *,
    device: str | torch.device | None = None,
    config: GenerationConfig | None = None,
) -> LMPolicy:
    """Load a checkpoint directory or hub id (see :func:`gencoord_env.agents.lm.loading.load_model`) as a policy."""
    lm = load_model(source, device=device)
    return make_policy(lm.model, lm.tokenizer, kind, config)
