"""Rows as token ids, and where in each target the decision lies.

:func:`encode` tokenizes a row the way training and the fit read it: the prompt through the chat template
(:func:`gencoord_env.agents.lm.prompt.prompt_text`), then the target and EOS; labels are -100 on the prompt.
:func:`decision_indices` finds each row's decision tokens (:mod:`gencoord_env.train.fit` says why they decide
success): every target token where the row parts from its *twin* (the row of the same public instance, role
permutation and stage under the matched pair's other binding, :func:`twin_key`), and the first token of the
binding code the target names, found by the row's output format (``OutputFormat.code_span``).

Example::

    encoded = encode(rows, tokenizer, max_length=2048)
    encoded[0].prompt_tokens, encoded[0].decisions
"""
from __future__ import annotations

import difflib
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gencoord_env.agents.lm.prompt import prompt_text
from gencoord_env.errors import UsageError
from gencoord_env.tasks.episode import parse_episode_id
from gencoord_env.train.data import Row, data_set
from gencoord_env.train.subword import BPEDropout

__all__ = ["Encoded", "decision_indices", "encode", "parting_positions", "twin_key"]


def twin_key(episode_id: str, stage: str) -> tuple[str, str, str]:
    """(public instance, role permutation, stage): equal for a row and its twin, and for no other row."""
    ref = parse_episode_id(episode_id)
    return ref.pair, str(ref.perm), stage


def parting_positions(target: Sequence[int], twin: Sequence[int] | None) -> tuple[int, ...]:
    """Every position of ``target`` that the alignment with ``twin`` (:class:`difflib.SequenceMatcher`, no
    junk heuristic) does not match: each token of a replaced or inserted stretch, and the token where the
    twin's deleted tokens stood. A token the twin lacks is always among them, whichever of several equally
    good alignments is chosen. () when equal or no twin.

    >>> parting_positions([1, 2, 9, 3, 4, 5], [1, 2, 3, 7, 4, 5])
    (2, 4)
    """
    if twin is None:
        return ()
    ops = difflib.SequenceMatcher(None, twin, target, autojunk=False).get_opcodes()
    marked = {k for tag, _, _, j1, j2 in ops if tag != "equal" for k in range(j1, max(j2, j1 + 1))}
    return tuple(sorted(k for k in marked if k < len(target)))


def _code_index(tokenizer: Any, row: Row) -> int | None:
    """The target token covering the first character of the code ``row``'s target names (its format's code span)."""
    span = data_set(row.set).output_format.code_span(row.target, row.binding)
    if span is None:
        return None
    enc = tokenizer(row.target, add_special_tokens=False, return_offsets_mapping=True)
    for k, (a, b) in enumerate(enc["offset_mapping"]):
        if a <= span[0] < b:
            return k
    return None


def decision_indices(rows: Sequence[Row], tokenizer: Any,
                     targets: Sequence[Sequence[int]] | None = None) -> list[tuple[int, ...]]:
    """The decision tokens of each row, as indices into its target tokens (see the module docstring)."""
    if targets is None:
        targets = tokenizer([r.target for r in rows], add_special_tokens=False)["input_ids"] if rows else []
    by_key: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_key[twin_key(r.episode, r.stage)].append(i)
    out: list[tuple[int, ...]] = []
    for i, r in enumerate(rows):
        twins = [j for j in by_key[twin_key(r.episode, r.stage)] if j != i and rows[j].binding != r.binding]
        parts = parting_positions(targets[i], targets[twins[0]]) if twins else ()
        code = _code_index(tokenizer, r)
        out.append(tuple(sorted({k for k in (*parts, code) if k is not None and k < len(targets[i])})))
    return out


@dataclass(frozen=True)
class Encoded:
    """One row as token ids; ``labels`` is -100 on the prompt and the ids on target + EOS."""

    input_ids: list[int]
    labels: list[int]
    row_id: str
    decisions: tuple[int, ...] = ()  # the decision tokens, as indices into the target tokens

    @property
    def prompt_tokens(self) -> int:
        return sum(1 for x in self.labels if x == -100)

    @property
    def target_tokens(self) -> int:
        return len(self.labels) - self.prompt_tokens


def encode(rows: Sequence[Row], tokenizer: Any, max_length: int = 2048,
           subword_dropout: float = 0.0, dropout_rows: float = 0.0, seed: int = 0) -> list[Encoded]:
    """Tokenize prompt (chat template) and target + EOS; raises when a row is longer than ``max_length``.

    With ``subword_dropout`` > 0, the prompts of a ``dropout_rows`` fraction of the rows (drawn with
    ``seed``) are segmented with BPE-dropout at that merge drop probability; targets stay canonical.
    """
    if tokenizer.eos_token_id is None:
        raise UsageError("the tokenizer has no EOS token; set tokenizer.eos_token before training")
    texts = [prompt_text(tokenizer, r.prompt) for r in rows]
    rng = random.Random(f"subword:{seed}")
    dropped: dict[int, list[int]] = {}
    if subword_dropout > 0.0 and dropout_rows > 0.0:
        dropout = BPEDropout(tokenizer)
        for i, text in enumerate(texts):
            if rng.random() < dropout_rows:
                dropped[i] = dropout.encode(text, rng, subword_dropout)
    # One batched call per side: the Rust tokenizer spreads a batch over the cores.
    kept = [t for i, t in enumerate(texts) if i not in dropped]
    canonical = tokenizer(kept, add_special_tokens=False)["input_ids"] if kept else []
    targets = tokenizer([r.target for r in rows], add_special_tokens=False)["input_ids"] if rows else []
    decisions = decision_indices(rows, tokenizer, targets)
    it = iter(canonical)
    out = []
    for i, r in enumerate(rows):
        prompt = dropped[i] if i in dropped else next(it)
        target = list(targets[i]) + [tokenizer.eos_token_id]
        if len(prompt) + len(target) > max_length:
            raise UsageError(
                f"row {r.id} has {len(prompt) + len(target)} tokens, over max_length={max_length}; "
                "raise max_length (truncating would cut the target)"
            )
        out.append(Encoded(list(prompt) + target, [-100] * len(prompt) + target, r.id, decisions[i]))
    return out
