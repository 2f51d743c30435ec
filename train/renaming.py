"""Consistent code renaming: a training row whose binding codes are replaced by other codes of the codebook.

A binding code is a label: the sender copies it from its private line into its request, the receiver
reads it out of the request and finds the branch the prior's DAG tags with it (``bind=CODE``). Renaming a
row's two codes (the ones its prior lists, ``codebook=A,B``) to two other codes of the public codebook,
in the prompt and the target alike, leaves a row that is just as right, and one that a model can only
answer by reading the code it is shown: a model that remembers "this template uses BUILD" is wrong on it.
``gencoord train sft --code-renaming P`` renames a seeded share ``P`` of the samples it draws, each with
fresh codes (the rows on disk and the rows the fit is measured on are never renamed).

>>> row_codes("PRIOR view=full roles=sender,receiver codebook=BUILD,DEPOSIT\\n...")
('BUILD', 'DEPOSIT')
>>> rename_text("PRIVATE active_binding_id=BUILD; bind=DEPOSIT; CHEST_A", {"BUILD": "ROOF", "DEPOSIT": "BUILD"})
'PRIVATE active_binding_id=ROOF; bind=BUILD; CHEST_A'
"""
from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Mapping, Sequence

from gencoord_env.agents.formats import rename_words
from gencoord_env.errors import UsageError
from gencoord_env.tasks.prior import prior
from gencoord_env.train.data import Row, data_set

__all__ = ["public_codes", "rename_row", "rename_text", "renaming_for", "row_codes"]

_CODEBOOK = re.compile(r"codebook=([A-Za-z0-9_,]+)")


def public_codes() -> tuple[str, ...]:
    """Every code of the package prior's public codebook, sorted."""
    return tuple(sorted(prior().codebook))


def row_codes(prompt: str) -> tuple[str, ...]:
    """The codes the row's prior lists (its template's bindings), in order; () when it lists none."""
    m = _CODEBOOK.search(prompt)
    return tuple(m.group(1).split(",")) if m else ()


def rename_text(text: str, names: Mapping[str, str]) -> str:
    """``text`` with every whole-word occurrence of a key of ``names`` replaced at once (swaps work)."""
    return rename_words(text, names)


def renaming_for(codes: Sequence[str], rng: random.Random, pool: Sequence[str]) -> dict[str, str]:
    """A map from ``codes`` to as many distinct codes drawn from ``pool`` (which may swap them)."""
    return dict(zip(codes, rng.sample(list(pool), len(codes))))


def rename_row(row: Row, names: Mapping[str, str]) -> Row:
    """``row`` with its codes renamed in prompt, target and binding, by its output format's renaming rule
    (a set whose prompts or targets do not name every code where renaming finds it raises)."""
    spec = data_set(row.set)
    if not spec.code_renaming:
        raise UsageError(f"rows of set {row.set!r} ({spec.output_format.title}) cannot be code-renamed: their prompts "
                         "or targets do not name every code they use as a word")
    fmt = spec.output_format
    return dataclasses.replace(row, prompt=rename_words(row.prompt, names), target=fmt.rename(row.target, names),
                               binding=rename_words(row.binding, names))
