"""Naturalized private facts: the active binding described in words instead of its id.

With ``private_fact`` other than ``"id"`` the sender's private field ``active_binding_id=SITE_A`` becomes
``active_fact=<description>`` (paper, supplement "Naturalized private facts without binding IDs"). The
descriptions are data (``gencoord_env/data/naturalized.json``); the forms are:

| form | what it tests | how it is written |
| --- | --- | --- |
| ``train`` | the surfaces a learned or table method was fitted on | 3 phrasings per binding |
| ``C1`` | held-out syntactic recombinations | the training vocabulary in new word orders |
| ``C2`` | lexical paraphrase | new words for the same meaning |
| ``C3`` | paraphrase plus distractor | a C2 phrasing joined with a C2 phrasing of the template's other binding |

Which phrasing an episode gets is a pure function of its cluster id (CRC-32, not Python's salted
``hash``), so both role permutations of a cluster read the same description and runs are repeatable.

>>> from gencoord_env.tasks import Episode, pool
>>> ep = Episode(pool("heldout")[0], 0)
>>> describe(ep.binding, "C2", ep) in phrasings(ep.binding, "C2")
True
"""
from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from gencoord_env.caches import cache
from gencoord_env.data_files import data_path
from typing import Any

from gencoord_env.errors import DataError, UsageError
from gencoord_env.suggest import close_matches
from gencoord_env.tasks.episode import Episode

FORMS: tuple[str, ...] = ("train", "C1", "C2", "C3")


@cache(maxsize=1)
def table() -> Mapping[str, Any]:
    """The naturalized description table (``gencoord_env/data/naturalized.json``)."""
    text = data_path("naturalized.json").read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def undescribed(bindings: Iterable[str]) -> list[str]:
    """The bindings among ``bindings`` that the table has no description of, sorted."""
    known = table()["bindings"]
    return sorted({b for b in bindings if b not in known})


def _check(binding: str, form: str) -> None:
    if form not in FORMS:
        hint = close_matches(form, FORMS, n=1)
        raise UsageError(f"unknown private-fact form {form!r}; expected one of {list(FORMS)}"
                         + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    if binding not in table()["bindings"]:
        raise DataError(f"binding {binding!r} has no naturalized description; add it to gencoord_env/data/naturalized.json")


def phrasings(binding: str, form: str) -> tuple[str, ...]:
    """Every phrasing of ``binding`` listed for ``form`` (``C3`` is built per episode; see ``describe``)."""
    _check(binding, form)
    if form == "C3":
        raise UsageError("C3 descriptions depend on the episode's other binding; use describe(binding, 'C3', episode)")
    return tuple(table()["bindings"][binding][form])


def _pick(options: tuple[str, ...] | list[str], key: str) -> str:
    return options[zlib.crc32(key.encode("utf-8")) % len(options)]


def describe(binding: str, form: str, episode: Episode) -> str:
    """The naturalized private fact of ``binding`` in ``form`` for ``episode``."""
    _check(binding, form)
    key = episode.cluster.id
    if form != "C3":
        return _pick(phrasings(binding, form), key)
    others = [b for b in episode.template.bindings if b != binding]
    if not others:
        raise UsageError(f"C3 needs a template with another binding; {episode.template.id!r} has only {binding!r}")
    own = _pick(phrasings(binding, "C2"), key)
    other = _pick(phrasings(_pick(others, key + ":other"), "C2"), key + ":other-phrase")
    return _pick(table()["C3_templates"], key + ":template").format(own=own, other=other)


__all__ = ["FORMS", "describe", "phrasings", "table", "undescribed"]
