"""Learned policies behind the rule agents' interface: ``act(observation, info) -> str``.

An :class:`LMPolicy` is a model with a generator and an output format
(:class:`gencoord_env.agents.formats.OutputFormat`): the prompt is the agent's local context (the observation
text) laid out by :func:`prompt_text` (the shared prior as the system turn, the rest as the user turn of the
tokenizer's chat template; training builds the same); greedy decoding with the 256-token cap; the completion
goes through the format's decoder. Direct Short DSL passes it on as the action, parsed by the env like any
other agent's; Factor-Code + Rule reads the stage's binding code and lets the public composer
(:func:`gencoord_env.tasks.context_view.compose`) write the same peer-facing Short DSL. A completion the decoder
cannot read is passed on as it is, so the env records the mistake as a parse failure.

:func:`load_policy` plays a checkpoint in the format it records (``training_record.json``); asking for
another raises :class:`gencoord_env.agents.formats.FormatMismatchError` naming both.

Every model call is kept as a :class:`CallRecord` (episode, stage, agent, input and output tokens,
latency). ``act_batch`` answers many envs in one batched generation; ``last_records`` holds the
records of the latest batch in input order, which is how the closed-loop evaluation attributes calls
and tokens to episodes.

Example::

    policy = load_policy("runs/sft/final")          # the checkpoint's own format
    action = policy.act(observation, info)
    policy.format.name, policy.records[-1].output_tokens
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from gencoord_env.agents import formats
from gencoord_env.agents.formats import CODE_FIELDS, OutputFormat, expand_code
from gencoord_env.agents.lm.generate import GenerationConfig, GenerationRecord, Generator
from gencoord_env.agents.lm.loading import load_model
from gencoord_env.agents.lm.prompt import prompt_text
from gencoord_env.errors import UsageError

__all__ = [
    "CODE_FIELDS",
    "CallRecord",
    "DirectDSLPolicy",
    "FactorCodePolicy",
    "LMPolicy",
    "expand_code",
    "load_policy",
    "make_policy",
    "prompt_text",
]


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
    """A model that answers in one output format: batched greedy generation, the format's decoder, call records."""

    def __init__(self, generator: Generator, output_format: str | OutputFormat = "direct") -> None:
        self.generator = generator
        self.format = formats.output_format(output_format)
        self.records: list[CallRecord] = []
        self.last_records: list[CallRecord] = []

    @property
    def name(self) -> str:
        return self.format.name

    @property
    def model_calls(self) -> int:
        return len(self.records)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return self.act_batch([observation], [info])[0]

    def act_batch(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        if len(observations) != len(infos):
            raise UsageError(f"got {len(observations)} observations but {len(infos)} infos")
        if not observations:
            self.last_records = []
            return []
        generated = self.generator.generate(list(observations))
        actions, batch = [], []
        for record, info in zip(generated, infos):
            actions.append(self.to_action(record.text, info))
            batch.append(self._record(record, info))
        self.last_records = batch
        self.records += batch
        return actions

    def to_action(self, completion: str, info: Mapping[str, Any]) -> str:
        return self.format.decode(completion, info)

    @staticmethod
    def _record(record: GenerationRecord, info: Mapping[str, Any]) -> CallRecord:
        return CallRecord(
            episode=str(info.get("episode_id", "")), stage=str(info.get("stage", "")),
            agent=str(getattr(info.get("context"), "agent", "")), input_tokens=record.input_tokens,
            output_tokens=record.output_tokens, latency_s=record.latency_s, batch_size=record.batch_size,
            text=record.text,
        )


class DirectDSLPolicy(LMPolicy):
    """``LMPolicy(generator, "direct")``: the completion is the action."""

    def __init__(self, generator: Generator) -> None:
        super().__init__(generator, "direct")


class FactorCodePolicy(LMPolicy):
    """``LMPolicy(generator, "factor_code")``: the model picks the binding code, the public composer writes the DSL."""

    def __init__(self, generator: Generator) -> None:
        super().__init__(generator, "factor_code")


def make_policy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    output_format: str | OutputFormat = "direct",
    config: GenerationConfig | None = None,
) -> LMPolicy:
    """A learned policy around an already loaded model, answering in ``output_format`` (a ``gencoord_env.agents.formats.FORMATS`` name)."""
    return LMPolicy(Generator(model, tokenizer, config or GenerationConfig()), output_format)


def load_policy(
    source: str | os.PathLike[str],
    output_format: str | OutputFormat | None = None,
    *,
    device: str | torch.device | None = None,
    config: GenerationConfig | None = None,
) -> LMPolicy:
    """Load a checkpoint directory or hub id (see :func:`gencoord_env.agents.lm.loading.load_model`) as a policy
    in the format the checkpoint records; ``output_format`` checks it (a mismatch raises, naming both) or, for a
    checkpoint that records none, chooses it (default: Direct Short DSL)."""
    chosen = formats.resolve_format(source, output_format)
    lm = load_model(source, device=device)
    return make_policy(lm.model, lm.tokenizer, chosen, config or GenerationConfig(stop_at_record_end=chosen.stops_at_record_end))
