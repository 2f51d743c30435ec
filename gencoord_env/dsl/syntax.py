"""Lexical rules shared by the parser, the serializer and the JSON surface.

Character classes and token patterns of the supplement's BNF, plus the catalog facts the codec needs
(skill names, key aliases, canonical key order). Everything here is computed once at import.
"""
from __future__ import annotations

import re

from gencoord_env.catalog import CATALOG
from gencoord_env.suggest import close_matches

#: ``atom ::= [A-Za-z0-9_.:/+-]+`` (ASCII only; ``re.ASCII`` keeps ``[0-9]`` from matching other digits).
ATOM_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:/+-")
ATOM_RE = re.compile(r"[A-Za-z0-9_.:/+\-]+", re.ASCII)
#: ``ident ::= [A-Za-z][A-Za-z0-9_]*``
KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*", re.ASCII)
#: JSON's number grammar (RFC 8259 section 6); group 1 or 2 set means the literal is not an integer.
NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?", re.ASCII)
NUMBER_START = frozenset("-0123456789")
LITERALS: dict[str, bool | None] = {"true": True, "false": False, "null": None}

#: The path separator ``" > "``; whitespace around ``>`` is tolerated on input.
SEPARATOR_RE = re.compile(r" *> *")
#: An unquoted value token runs up to the next ``,`` or ``)`` (or the end of the line) and is classified whole.
TOKEN_RE = re.compile(r"[^,)\n]*")
SPACES_RE = re.compile(r" *")

#: Tasks of one path (``data/limits.json``, ``args.path_tasks``), the bound the contract checks too.
MAX_PATH_TASKS: int = CATALOG.limits["path_tasks"].max
SKILLS: frozenset[str] = frozenset(CATALOG.skill_names)
SKILL_ORDER: tuple[str, ...] = CATALOG.skill_names
#: alias -> compact key; compact keys are not listed (``KEY_ALIASES.get(k, k)`` canonicalizes).
KEY_ALIASES: dict[str, str] = dict(CATALOG.key_aliases)
#: Sort key of the serializer: the fixed compact-key order, then any other key alphabetically.
KEY_RANK: dict[str, tuple[int, str]] = {key: (i, "") for i, key in enumerate(CATALOG.key_order)}
OTHER_KEY_RANK = len(CATALOG.key_order)


def key_rank(key: str) -> tuple[int, str]:
    return KEY_RANK.get(key) or (OTHER_KEY_RANK, key)


def is_bare_string(value: str) -> bool:
    """True when ``value`` can be written unquoted and still reads back as the same string."""
    return (
        ATOM_RE.fullmatch(value) is not None
        and NUMBER_RE.fullmatch(value) is None
        and value not in LITERALS
    )


def unknown_skill_message(skill: str) -> str:
    """'unknown skill' with a suggestion, the way gymnasium answers an unknown environment id."""
    close = close_matches(skill, SKILL_ORDER, n=1, cutoff=0.6)
    if close:
        return f"unknown skill {skill!r}; did you mean {close[0]!r}?"
    return f"unknown skill {skill!r}; expected one of {', '.join(SKILL_ORDER)}"


def shorten(text: str, limit: int = 40) -> str:
    """``repr`` of ``text``, cut to ``limit`` characters so that error messages stay one line."""
    if len(text) > limit:
        return repr(text[:limit]) + "..."
    return repr(text)
