"""Copying and pickling of live envs: the read-only mappings the package builds its values from.

The package keeps its tables (the catalog, recipes, skill ops, an episode's derived maps) in
``types.MappingProxyType`` views so that nothing can change them. Python cannot pickle or deep-copy such a
view, so a live env (its episodes, session and sim world) could not be copied for a search, a snapshot or a
vector env's worker. ``install()`` registers one reduction with ``copyreg``: a view is rebuilt as a read-only
view of a copy of its contents. It is idempotent and changes nothing else.

>>> import copy, types
>>> install()
>>> view = copy.deepcopy(types.MappingProxyType({"a": 1}))
>>> type(view).__name__, dict(view)
('mappingproxy', {'a': 1})
"""
from __future__ import annotations

import copyreg
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


def _proxy(contents: dict[Any, Any]) -> Mapping[Any, Any]:
    return MappingProxyType(contents)


def _reduce_proxy(view: Mapping[Any, Any]) -> tuple[Any, tuple[dict[Any, Any]]]:
    return _proxy, (dict(view),)


def install() -> None:
    """Let ``pickle`` and ``copy.deepcopy`` handle ``MappingProxyType`` (see the module docstring)."""
    copyreg.pickle(MappingProxyType, _reduce_proxy)


__all__ = ["install"]
