"""The model input of a learned agent: the shared prior first, then the agent's local context.

An observation (``gencoord_env.tasks.contexts.render``) lists the agent's local facts and then the
shared prior K. The prior is the long part (skills, nodes) and the same at every decision of a
template: both agents of an episode and every episode of that template and quantity see the same
block. Put first, it is a prefix that many prompts share, so a decoder can compute its state once and
start each call from it (:mod:`gencoord_env.agents.lm.prefix`).

With a chat template the prior is the system turn and the rest of the observation the user turn::

    <|im_start|>system\\nPRIOR view=full ...\\nNODE ...<|im_end|>\\n<|im_start|>user\\nAGENT agent_a\\n...<|im_end|>\\n<|im_start|>assistant\\n

Without one it is the prior, a line break, then the rest. An observation without a prior block (a
plain string) is the user turn alone, as before. Training (SFT, GRPO) and decoding both build their
prompts here, so a model always sees the layout it was trained on.

Example::

    parts = prompt_parts(tokenizer, observation)
    parts.text.startswith(parts.shared)  # True; parts.shared is the reusable prefix
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from gencoord_env.tasks.contexts import split_prior

__all__ = ["PromptParts", "prompt_parts", "prompt_text", "split_prior"]

# Stands in for the user turn while finding where the template's shared head ends.
_SENTINEL = "\x00user turn\x00"


@dataclass(frozen=True)
class PromptParts:
    """A prompt and its shared head: ``text`` starts with ``shared``, the part identical across prompts
    that carry the same prior (the whole template head up to the user turn's content)."""

    shared: str
    text: str


def prompt_parts(tokenizer: PreTrainedTokenizerBase, context: str, use_chat_template: bool = True) -> PromptParts:
    """The model input for one observation, with the prior first, and the shared head of that input."""
    split = split_prior(context)
    prior, local = split if split is not None else ("", context)
    if not (use_chat_template and getattr(tokenizer, "chat_template", None)):
        return PromptParts(prior + "\n", prior + "\n" + local) if split is not None else PromptParts("", context)

    def render(user: str) -> str:
        turns = ([{"role": "system", "content": prior}] if split is not None else []) + [{"role": "user", "content": user}]
        return str(tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True))

    text = render(local)
    marked = render(_SENTINEL)
    shared = marked[: marked.find(_SENTINEL)] if _SENTINEL in marked else ""
    return PromptParts(shared if text.startswith(shared) else "", text)


def prompt_text(tokenizer: PreTrainedTokenizerBase, context: str, use_chat_template: bool = True) -> str:
    """The model input for one observation, as training and :class:`~gencoord_env.agents.lm.generate.Generator` build it."""
    return prompt_parts(tokenizer, context, use_chat_template).text
