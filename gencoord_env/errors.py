"""The errors the package raises on purpose: one small hierarchy.

An agent's mistake (a record that does not parse, a contract violation, a failed handoff) is never an
exception: it is a failure code in ``infos``. Everything else that goes wrong on purpose is one of these, and
its message says what was wrong and what was expected; a name that is not one of a set also names the
closest one (:class:`UnknownName`, built on ``gencoord_env.suggest``).

============================ =================================================================================
class                        raised when
============================ =================================================================================
``GencoordError``            base: ``except GencoordError`` catches every error below
``UsageError``               a caller's argument, option or call is not one the package accepts (a ``ValueError``)
``UnknownName``              ... a name that is not one of a set: lists the set, suggests the closest (also a
                             ``KeyError``, as a lookup by name is)
``DataError``                a rules table, data set, record or checkpoint is not what the package expects; the
                             message names the file or entry to fix (a ``ValueError``)
``Fault``                    infrastructure broke: a sidecar, server, worker or device; the message says what to
                             do (a ``RuntimeError``)
============================ =================================================================================

Each keeps its builtin base, so ``except ValueError`` (or ``KeyError``, ``RuntimeError``) still catches what
it caught before. The package's own kinds subclass these: ``DSLSyntaxError`` and ``WorldSpecError`` are usage
errors; ``CatalogError``, ``RecipeTableError``, ``OpTableError``, ``LimitsError`` and ``ReplayError`` data
errors; ``MinecraftBackendError`` (and each of its kinds) and ``EpisodeLost`` faults.

>>> raise UnknownName("pool", "heldot", ["train", "heldout"])
Traceback (most recent call last):
gencoord_env.errors.UnknownName: unknown pool 'heldot'; expected one of train, heldout (did you mean 'heldout'?)
"""
from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any


class GencoordError(Exception):
    """Base class of every error the package raises on purpose."""


class UsageError(GencoordError, ValueError):
    """A caller's argument, option or call is not one the package accepts."""


class UnknownName(UsageError, KeyError):
    """A name that is not one of ``names``: the message lists them and suggests the closest.

    ``what``, ``value``, ``names`` and ``suggestion`` (the closest name, or None) are kept for callers that
    want them. A ``KeyError`` too, so lookups by name keep their usual ``except``; unlike ``KeyError``, its
    text is the message itself, not its quoted repr.
    """

    def __init__(self, what: str, value: object, names: Iterable[str], detail: str = "", *,
                 message: str | None = None) -> None:
        # late: this module is the package's leaf, importable by every other (caches, which suggest uses, too)
        from gencoord_env.suggest import close_match, unknown

        self.what, self.value, self.names, self.detail = what, value, tuple(str(n) for n in names), detail
        self.suggestion = close_match(str(value), self.names)
        # ``message`` replaces the listing where a set is too large to list (the Minecraft item names)
        self.message = message
        super().__init__(unknown(what, value, self.names) + detail if message is None else message)

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> Any:  # pickles (a Ray worker's error reaches the driver)
        return functools.partial(type(self), message=self.message), (self.what, self.value, self.names, self.detail)


class DataError(GencoordError, ValueError):
    """A rules table, data set, record or checkpoint is not what the package expects; the message names the file
    or entry to fix."""


class Fault(GencoordError, RuntimeError):
    """Infrastructure broke (a sidecar, server, worker or device); the message says what to do."""


__all__ = ["DataError", "Fault", "GencoordError", "UnknownName", "UsageError"]
