"""The skill catalog K: which skills exist, which argument keys each takes, and their types.

The rules live in ``data/catalog.json`` (one declarative table, like crafter's ``data.yaml``); this module
only loads and validates them, so that a typo in the table fails at import with a message that says what
to fix instead of surfacing later as a puzzling contract rejection. The Short DSL codec reads the skill
names, key order and key aliases from here; the contract checker reads the key types.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "data"
CATALOG_PATH = DATA_DIR / "catalog.json"
MINECRAFT_ITEMS_PATH = DATA_DIR / "minecraft_items.json"

#: The argument types the contract checker knows how to check (see ``about`` in catalog.json).
ARG_TYPES = frozenset({"positive_int", "agent", "peer", "reference", "binding", "item", "atom"})

_KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


class CatalogError(ValueError):
    """The catalog file is malformed; the message names the entry to fix."""


@dataclass(frozen=True)
class SkillSpec:
    """One skill path and its argument keys, each mapped to its type name.

    ``exactly_one_of`` holds keys of which exactly one must be given (``resource.deliver`` goes either
    ``to`` a peer or to a ``dst`` reference).
    """

    name: str
    required: Mapping[str, str]
    optional: Mapping[str, str]
    exactly_one_of: Mapping[str, str]

    def key_type(self, key: str) -> str | None:
        """The type name of ``key`` for this skill, or ``None`` if the skill does not take it."""
        for table in (self.required, self.optional, self.exactly_one_of):
            if key in table:
                return table[key]
        return None

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(self.required) | frozenset(self.optional) | frozenset(self.exactly_one_of)


@dataclass(frozen=True)
class Catalog:
    """The whole catalog: skills in file order, canonical key order, and compatibility key aliases."""

    skills: Mapping[str, SkillSpec]
    key_order: tuple[str, ...]
    key_aliases: Mapping[str, str]

    @property
    def skill_names(self) -> tuple[str, ...]:
        return tuple(self.skills)


def _table(raw: Any, where: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: expected an object mapping keys to type names, got {type(raw).__name__}")
    for key, type_name in raw.items():
        if not _KEY_RE.fullmatch(key):
            raise CatalogError(f"{where}: key {key!r} is not an identifier [A-Za-z][A-Za-z0-9_]*")
        if type_name not in ARG_TYPES:
            raise CatalogError(f"{where}.{key}: unknown type {type_name!r}; expected one of {sorted(ARG_TYPES)}")
    return dict(raw)


def parse_catalog(raw: Any) -> Catalog:
    """Validate a decoded catalog document and build the frozen ``Catalog``."""
    if not isinstance(raw, dict):
        raise CatalogError(f"catalog: expected a JSON object, got {type(raw).__name__}")
    for field in ("key_order", "key_aliases", "every_skill", "skills"):
        if field not in raw:
            raise CatalogError(f"catalog: missing field {field!r}")
    key_order = tuple(raw["key_order"])
    if len(set(key_order)) != len(key_order) or not all(
        isinstance(k, str) and _KEY_RE.fullmatch(k) for k in key_order
    ):
        raise CatalogError("catalog.key_order: expected distinct identifier keys")
    aliases = raw["key_aliases"]
    if not isinstance(aliases, dict):
        raise CatalogError("catalog.key_aliases: expected an object mapping alias -> compact key")
    for alias, key in aliases.items():
        if not _KEY_RE.fullmatch(alias):
            raise CatalogError(f"catalog.key_aliases: alias {alias!r} is not an identifier")
        if key not in key_order:
            raise CatalogError(f"catalog.key_aliases.{alias}: {key!r} is not a compact key of key_order")
        if alias in key_order:
            raise CatalogError(f"catalog.key_aliases: {alias!r} is both an alias and a compact key")
    common = _table(raw["every_skill"].get("optional", {}), "catalog.every_skill.optional")
    skills_raw = raw["skills"]
    if not isinstance(skills_raw, dict) or not skills_raw:
        raise CatalogError("catalog.skills: expected a non-empty object of skill paths")
    skills: dict[str, SkillSpec] = {}
    for name, entry in skills_raw.items():
        where = f"catalog.skills.{name}"
        if not isinstance(entry, dict):
            raise CatalogError(f"{where}: expected an object")
        unknown = set(entry) - {"required", "optional", "exactly_one_of"}
        if unknown:
            raise CatalogError(f"{where}: unknown fields {sorted(unknown)}")
        required = _table(entry.get("required", {}), f"{where}.required")
        optional = {**common, **_table(entry.get("optional", {}), f"{where}.optional")}
        one_of = _table(entry.get("exactly_one_of", {}), f"{where}.exactly_one_of")
        if one_of and len(one_of) < 2:
            raise CatalogError(f"{where}.exactly_one_of: needs at least two keys")
        tables = (required, optional, one_of)
        for i, first in enumerate(tables):
            for second in tables[i + 1 :]:
                overlap = set(first) & set(second)
                if overlap:
                    raise CatalogError(f"{where}: keys {sorted(overlap)} are listed twice")
        for key in (*required, *optional, *one_of):
            if key in aliases:
                raise CatalogError(f"{where}: {key!r} is an alias; use the compact key {aliases[key]!r}")
        skills[name] = SkillSpec(
            name=name,
            required=MappingProxyType(required),
            optional=MappingProxyType(optional),
            exactly_one_of=MappingProxyType(one_of),
        )
    return Catalog(
        skills=MappingProxyType(skills),
        key_order=key_order,
        key_aliases=MappingProxyType(dict(aliases)),
    )


def load_catalog(path: Path = CATALOG_PATH) -> Catalog:
    """Read and validate a catalog file (the packaged one by default)."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(f"catalog file {path} is missing; reinstall gencoord_env") from None
    except json.JSONDecodeError as err:
        raise CatalogError(f"catalog file {path} is not valid JSON: {err}") from None
    return parse_catalog(raw)


@lru_cache(maxsize=1)
def minecraft_items() -> frozenset[str]:
    """The item names of Minecraft Java 1.21.4 (regenerate with scripts/extract_minecraft_items.js)."""
    try:
        raw = json.loads(MINECRAFT_ITEMS_PATH.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(
            f"{MINECRAFT_ITEMS_PATH} is missing; regenerate it with scripts/extract_minecraft_items.js"
        ) from None
    items = raw.get("items") if isinstance(raw, dict) else None
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        raise CatalogError(f"{MINECRAFT_ITEMS_PATH}: expected an object with a non-empty list 'items' of names")
    return frozenset(items)


CATALOG: Catalog = load_catalog()
SKILL_NAMES: tuple[str, ...] = CATALOG.skill_names
