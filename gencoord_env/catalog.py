"""The skill catalog K: which skills exist, which argument keys each takes, their types, and each skill's rules.

The rules live in ``data/catalog.json`` (one declarative table, like crafter's ``data.yaml``); this module
only loads and validates them, so that a typo in the table fails at import with a message that says what
to fix instead of surfacing later as a puzzling contract rejection. The Short DSL codec reads the skill
names, key order and key aliases from here; the contract checker reads the key types.

Each skill's rules are read by small generic interpreters, one per question:

========================= ============================================== ==============================
rule                      question                                       interpreter
========================= ============================================== ==============================
``location``              where does the task happen?                    ``Episode.location``
``lower``, ``defaults``   which skill calls (``data/skill_ops.json``)    ``pipeline.compile.lower``
                          realize it?
``transform``             does it transform items at a station?          ``pipeline.response.respond``
``consumes``, ``handoff`` what does it use up, what does it hand to a    ``pipeline.merge.handoff``
                          peer?
``produces``              what does it put into its actor's inventory?   ``tasks.procedural`` (accounting)
``stores``                what does it leave in a container or at a      ``tasks.procedural`` (accounting)
                          site?
``node_only_rank``        where does a reader of the ``node_only`` view  ``tasks.compose.SKILL_PRIORITY``
                          put it in a path?
``say``                   how is it said in English?                     ``freeform`` (say and read back)
========================= ============================================== ==============================

So a skill is one row of the table (plus, for a new kind of world action, its ops in ``skill_ops.json``
and the worlds). The loader refuses a row that some consumer could not handle: a missing or repeated
``node_only_rank``, a clause that cannot say every argument of the skill, a flow that names no key.

Limits: ``key_limits`` names, for each integer argument key, the entry of ``data/limits.json``'s ``args``
that bounds it (``q`` -> ``count``); strings and keys are bounded by ``name_chars``, a task's arguments by
``task_args``, a path by ``path_tasks``. The contract rejects what lies beyond them, and the loader checks
that every value within them fits the op arguments it lowers into (``data/skill_ops.json``), so a world's
check of a compiled call can only fail on a bug.

A value in these rules is a :class:`Slot`: ``"$key"`` is the task's argument ``key``, ``"@name"`` a value
the grounding supplies (``@source_chest`` in ``location``; ``@actor`` and ``@location`` in ``lower``),
anything else a literal.
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from gencoord_env.caches import cache
from gencoord_env.data_files import data_dir, read_json
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from gencoord_env.errors import DataError
from gencoord_env.limits import LIMITS, Limit, Limits
from gencoord_env.suggest import close_matches
from gencoord_env.world.types import OP_ARGS

DATA_DIR = data_dir()
CATALOG_PATH = DATA_DIR / "catalog.json"
MINECRAFT_ITEMS_PATH = DATA_DIR / "minecraft_items.json"

#: The argument types the contract checker knows how to check (see ``about`` in catalog.json).
ARG_TYPES = frozenset({"positive_int", "agent", "peer", "reference", "binding", "item", "atom"})

_KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


class CatalogError(DataError):
    """The catalog file is malformed; the message names the entry to fix."""


#: Grounded values a rule may name as ``@name``, by the rule that may name them.
LOCATION_GROUNDS = frozenset({"source_chest"})
LOWER_GROUNDS = frozenset({"actor", "location"})

_NO_GROUND: Mapping[str, Any] = MappingProxyType({})


class Slot(NamedTuple):
    """One value of a rule: the task's argument ``$key`` (``value`` when not given), a grounded ``@name``, or
    the literal ``value``. A tuple, so that the lowering of every dispatched task can unpack it cheaply.

    >>> Slot("arg", "ticks", 20).fill({"q": 1}, {})
    20
    """

    source: str  # "arg" | "ground" | "literal"
    name: str = ""
    value: Any = None

    def fill(self, args: Mapping[str, Any], ground: Mapping[str, Any] = _NO_GROUND) -> Any:
        """The value for a task with ``args`` and the grounded values ``ground``."""
        if self.source == "arg":
            return args.get(self.name, self.value)
        if self.source == "ground":
            return ground[self.name]
        return self.value


@dataclass(frozen=True)
class Step:
    """One skill call of a lowering: ``op`` with its arguments; ``by`` names another actor than the task's."""

    op: str
    args: tuple[tuple[str, Slot], ...]
    by: Slot | None = None


@dataclass(frozen=True)
class LoweringCase:
    """The calls that realize a task whose argument ``when`` is given (``None``: any task)."""

    when: str | None
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class ItemFlow:
    """Items a task moves: ``count`` of ``item``, or, when ``crafting`` is set, what crafting ``made`` of
    ``crafting`` uses of ``item``; ``to`` names the peer of a handoff."""

    item: Slot
    count: Slot | None = None
    crafting: Slot | None = None
    made: Slot | None = None
    to: Slot | None = None


@dataclass(frozen=True)
class Placement:
    """Items a task leaves in the world: ``count`` of ``item`` in the container or at the site (``kind``)
    that its argument ``at`` names; only when the task gives that argument."""

    kind: str  # "container" | "site"
    at: Slot
    item: Slot
    count: Slot


@dataclass(frozen=True)
class Clause:
    """A skill's English clause: ``head`` (``{key}`` for each required key), then each (key, phrase) of
    ``optional`` whose key the task gives, in this order (the skill's own, then every skill's)."""

    head: str
    optional: tuple[tuple[str, str], ...]


#: The places a ``stores`` rule may name.
PLACEMENT_KINDS = frozenset({"container", "site"})


@dataclass(frozen=True)
class SkillSpec:
    """One skill path, its argument keys (each mapped to its type name) and its rules.

    ``exactly_one_of`` holds keys of which exactly one must be given (``resource.deliver`` goes either
    ``to`` a peer or to a ``dst`` reference). The rules are described in the module docstring.
    """

    name: str
    required: Mapping[str, str]
    optional: Mapping[str, str]
    exactly_one_of: Mapping[str, str]
    location: tuple[str, ...] = ("loc",)  # argument keys, or "@source_chest", in priority order
    lowering: tuple[LoweringCase, ...] = ()
    transform: bool = False
    consumes: ItemFlow | None = None
    produces: ItemFlow | None = None
    handoff: ItemFlow | None = None
    stores: Placement | None = None
    node_only_rank: int = 0
    say: Clause | None = None

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
    key_types: Mapping[str, str]  # every argument key -> its one type
    location: tuple[str, ...]  # every_skill.location: the location rule of a skill that names none
    limits: Mapping[str, Limit]  # limits.json's args: what one agent input may hold
    key_limits: Mapping[str, Limit]  # every integer argument key -> its limit

    def limit_of(self, key: str) -> Limit | None:
        """The limit on the value of the integer argument ``key`` (``None`` for other keys)."""
        return self.key_limits.get(key)

    @property
    def skill_names(self) -> tuple[str, ...]:
        return tuple(self.skills)

    @property
    def node_only_order(self) -> tuple[str, ...]:
        """The skill names by ``node_only_rank``: the order a ``node_only`` reader puts a path's tasks in."""
        return tuple(sorted(self.skills, key=lambda name: self.skills[name].node_only_rank))


def _table(raw: Any, where: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: expected an object mapping keys to type names, got {type(raw).__name__}")
    for key, type_name in raw.items():
        if not _KEY_RE.fullmatch(key):
            raise CatalogError(f"{where}: key {key!r} is not an identifier [A-Za-z][A-Za-z0-9_]*")
        if type_name not in ARG_TYPES:
            raise CatalogError(f"{where}.{key}: unknown type {type_name!r}; expected one of {sorted(ARG_TYPES)}")
    return dict(raw)


def _slot(raw: Any, where: str, keys: frozenset[str], grounds: frozenset[str], literals: bool = True,
          optional: frozenset[str] = frozenset()) -> Slot:
    """A rule value; ``keys`` are the argument keys it may name, ``optional`` keys it may not name because
    a task may lack them."""
    if isinstance(raw, str) and raw[:1] == "$":
        if raw[1:] in optional:
            raise CatalogError(f"{where}: {raw!r} is an optional key a task may lack; read it only in a case whose "
                               f"'when' is {raw[1:]!r}, or give it a default")
        if raw[1:] not in keys:
            raise CatalogError(f"{where}: {raw!r} names no argument key of the skill; expected one of "
                               f"{sorted('$' + k for k in keys)}")
        return Slot("arg", raw[1:])
    if isinstance(raw, str) and raw[:1] == "@":
        if raw[1:] not in grounds:
            raise CatalogError(f"{where}: {raw!r} is not a grounded value here; expected one of "
                               f"{sorted('@' + g for g in grounds) or 'none'}")
        return Slot("ground", raw[1:])
    if not literals or isinstance(raw, bool) or not isinstance(raw, (str, int)):
        raise CatalogError(f"{where}: expected {'$key, @name or a string or int literal' if literals else '$key'}, "
                           f"got {raw!r}")
    return Slot("literal", value=raw)


def _object(raw: Any, where: str, allowed: set[str], required: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: expected an object, got {type(raw).__name__}")
    unknown = set(raw) - allowed
    if unknown:
        raise CatalogError(f"{where}: unknown fields {sorted(unknown)}; expected some of {sorted(allowed)}")
    missing = required - set(raw)
    if missing:
        raise CatalogError(f"{where}: missing fields {sorted(missing)}")
    return raw


def _location(raw: Any, where: str, keys: frozenset[str]) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw:
        raise CatalogError(f"{where}: expected a non-empty list of argument keys or @source_chest")
    for entry in raw:
        if isinstance(entry, str) and entry[:1] == "@":
            _slot(entry, where, keys, LOCATION_GROUNDS)
        elif entry not in keys:
            raise CatalogError(f"{where}: {entry!r} is not an argument key of the skill; expected one of {sorted(keys)}")
    return tuple(raw)


def _lowering(raw: Any, where: str, spec: SkillSpec, defaults: Mapping[str, Any]) -> tuple[LoweringCase, ...]:
    if not isinstance(raw, list) or not raw:
        raise CatalogError(f"{where}: expected a non-empty list of cases")
    keys = spec.keys
    cases = []
    for i, case_raw in enumerate(raw):
        at = f"{where}[{i}]"
        case = _object(case_raw, at, {"when", "ops"}, {"ops"})
        when = case.get("when")
        last = i == len(raw) - 1
        if last and when is not None:
            raise CatalogError(f"{at}: the last case must have no 'when', so that every task lowers")
        if not last and when is None:
            raise CatalogError(f"{at}: only the last case may lack 'when' (the cases after it could never apply)")
        if when is not None and when in spec.required:
            raise CatalogError(f"{at}.when: {when!r} is a required key, always given; name an optional key")
        if when is not None and when not in keys:
            raise CatalogError(f"{at}.when: {when!r} is not an argument key of the skill; expected one of {sorted(keys)}")
        # arguments a call may read: those every task has, those with defaults, and the case's own
        given = frozenset(spec.required) | frozenset(defaults) | ({when} if when else frozenset())
        if not isinstance(case["ops"], list) or not case["ops"]:
            raise CatalogError(f"{at}.ops: expected a non-empty list of skill calls")
        steps = []
        for j, step_raw in enumerate(case["ops"]):
            here = f"{at}.ops[{j}]"
            step = _object(step_raw, here, {"op", "args", "by"}, {"op", "args"})
            op = step["op"]
            if op not in OP_ARGS:
                close = close_matches(str(op), list(OP_ARGS), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise CatalogError(f"{here}.op: unknown op {op!r}; expected one of {sorted(OP_ARGS)} (skill_ops.json){hint}")
            if not isinstance(step["args"], dict) or set(step["args"]) != set(OP_ARGS[op]):
                got = sorted(step["args"]) if isinstance(step["args"], dict) else step["args"]
                raise CatalogError(f"{here}.args: {op} takes exactly {list(OP_ARGS[op])} (skill_ops.json), got {got}")
            args = []
            for name in OP_ARGS[op]:
                slot = _slot(step["args"][name], f"{here}.args.{name}", given, LOWER_GROUNDS, optional=keys - given)
                if slot.source == "literal" and not OP_ARGS[op][name].accepts(slot.value, minecraft_items()):
                    raise CatalogError(f"{here}.args.{name}: {slot.value!r} is not {OP_ARGS[op][name].expected()}")
                if slot.source == "arg" and slot.name in defaults:
                    slot = Slot("arg", slot.name, defaults[slot.name])
                args.append((name, slot))
            by = (_slot(step["by"], f"{here}.by", given, frozenset({"actor"}), literals=False, optional=keys - given)
                  if "by" in step else None)
            steps.append(Step(op, tuple(args), by))
        cases.append(LoweringCase(when, tuple(steps)))
    return tuple(cases)


def _flow(raw: Any, where: str, keys: frozenset[str], handoff: bool = False) -> ItemFlow:
    entry = _object(raw, where, {"item", "count", "to"} if handoff else {"item", "count"},
                    {"item", "count", "to"} if handoff else {"item", "count"})
    item = _slot(entry["item"], f"{where}.item", keys, frozenset(), literals=False)
    to = _slot(entry["to"], f"{where}.to", keys, frozenset(), literals=False) if handoff else None
    count = entry["count"]
    if isinstance(count, dict) and not handoff:
        made = _object(count, f"{where}.count", {"crafting", "made"}, {"crafting", "made"})
        return ItemFlow(item, crafting=_slot(made["crafting"], f"{where}.count.crafting", keys, frozenset(), literals=False),
                        made=_slot(made["made"], f"{where}.count.made", keys, frozenset(), literals=False))
    return ItemFlow(item, _slot(count, f"{where}.count", keys, frozenset(), literals=False), to=to)


_RULE_FIELDS = {"location", "lower", "defaults", "transform", "consumes", "produces", "handoff", "stores",
                "node_only_rank", "say"}
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _stores(raw: Any, where: str, keys: frozenset[str]) -> Placement:
    entry = _object(raw, where, {"in", "at", "item", "count"}, {"in", "at", "item", "count"})
    if entry["in"] not in PLACEMENT_KINDS:
        raise CatalogError(f"{where}.in: expected one of {sorted(PLACEMENT_KINDS)}, got {entry['in']!r}")
    return Placement(entry["in"], *(_slot(entry[k], f"{where}.{k}", keys, frozenset(), literals=False)
                                     for k in ("at", "item", "count")))


def _phrases(raw: Any, where: str, keys: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """``[[key, phrase], ...]``: each phrase says its own key, ``{key}``, and nothing else."""
    if not isinstance(raw, list):
        raise CatalogError(f"{where}: expected a list of [key, phrase] pairs")
    out = []
    for i, pair in enumerate(raw):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise CatalogError(f"{where}[{i}]: expected [key, phrase], got {pair!r}")
        key, phrase = pair
        if key not in keys:
            raise CatalogError(f"{where}[{i}]: {key!r} is not an argument key of the skill; expected one of {sorted(keys)}")
        if _PLACEHOLDER.findall(phrase) != [key]:
            raise CatalogError(f"{where}[{i}]: the phrase {phrase!r} must say {{{key}}} once and no other key")
        out.append((key, phrase))
    return tuple(out)


def _say(raw: Any, where: str, spec: SkillSpec, every: tuple[tuple[str, str], ...]) -> Clause:
    """The skill's clause, checked so that a said task reads back whole: the head says every required key,
    and every other key has a phrase (its own, or every skill's)."""
    entry = _object(raw, where, {"head", "optional"}, {"head", "optional"})
    head = entry["head"]
    if not isinstance(head, str) or not head:
        raise CatalogError(f"{where}.head: expected a non-empty string")
    said = _PLACEHOLDER.findall(head)
    if sorted(said) != sorted(spec.required):
        raise CatalogError(f"{where}.head: says {sorted(said)}; it must say each required key once: {sorted(spec.required)}")
    own = _phrases(entry["optional"], f"{where}.optional", spec.keys - frozenset(spec.required))
    mine = {k for k, _ in own}
    phrases = own + tuple((k, p) for k, p in every if k not in mine and k in spec.keys)
    unsaid = spec.keys - frozenset(spec.required) - {k for k, _ in phrases}
    if unsaid:
        raise CatalogError(f"{where}.optional: no phrase says {sorted(unsaid)}; a said task would lose them")
    return Clause(head, phrases)


def _rules(spec: SkillSpec, entry: dict[str, Any], where: str, location: tuple[str, ...],
           every_say: tuple[tuple[str, str], ...] = ()) -> SkillSpec:
    """``spec`` with the rules of its catalog entry, checked against its keys and the op table."""
    keys = spec.keys
    for field in ("lower", "node_only_rank", "say"):
        if field not in entry:
            raise CatalogError(f"{where}: missing field {field!r} ({_NEEDED_BY[field]})")
    rank = entry["node_only_rank"]
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise CatalogError(f"{where}.node_only_rank: expected an integer >= 0, got {rank!r}")
    defaults = entry.get("defaults", {})
    if not isinstance(defaults, dict):
        raise CatalogError(f"{where}.defaults: expected an object mapping optional keys to values")
    for key in defaults:
        if key not in spec.optional:
            raise CatalogError(f"{where}.defaults.{key}: only an optional key can have a default; "
                               f"optional keys are {sorted(spec.optional)}")
    transform = entry.get("transform", False)
    if not isinstance(transform, bool):
        raise CatalogError(f"{where}.transform: expected true or false, got {transform!r}")
    return dataclasses.replace(
        spec,
        location=_location(entry["location"], f"{where}.location", keys) if "location" in entry else location,
        lowering=_lowering(entry["lower"], f"{where}.lower", spec, defaults),
        transform=transform,
        consumes=_flow(entry["consumes"], f"{where}.consumes", keys) if "consumes" in entry else None,
        produces=_flow(entry["produces"], f"{where}.produces", keys) if "produces" in entry else None,
        handoff=_flow(entry["handoff"], f"{where}.handoff", keys, handoff=True) if "handoff" in entry else None,
        stores=_stores(entry["stores"], f"{where}.stores", keys) if "stores" in entry else None,
        node_only_rank=rank,
        say=_say(entry["say"], f"{where}.say", spec, every_say),
    )


#: What each required field of a skill's row is for, said when it is missing.
_NEEDED_BY = {
    "lower": "the skill calls that realize the skill",
    "node_only_rank": "where a reader of the node_only view puts the skill's tasks in a path",
    "say": "the skill's English clause on the free-form surface",
}


def parse_catalog(raw: Any, limits: Limits = LIMITS) -> Catalog:
    """Validate a decoded catalog document and build the frozen ``Catalog`` (bounded by ``limits``)."""
    if not isinstance(raw, dict):
        raise CatalogError(f"catalog: expected a JSON object, got {type(raw).__name__}")
    for field in ("key_order", "key_aliases", "every_skill", "skills", "key_limits"):
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
    every = _object(raw["every_skill"], "catalog.every_skill", {"optional", "location", "say_optional"})
    common = _table(every.get("optional", {}), "catalog.every_skill.optional")
    every_say = _phrases(every.get("say_optional", []), "catalog.every_skill.say_optional", frozenset(common))
    default_location = _location(every.get("location", ["loc"]), "catalog.every_skill.location", frozenset(common))
    skills_raw = raw["skills"]
    if not isinstance(skills_raw, dict) or not skills_raw:
        raise CatalogError("catalog.skills: expected a non-empty object of skill paths")
    skills: dict[str, SkillSpec] = {}
    key_types: dict[str, tuple[str, str]] = {}  # key -> (type, where it was first typed)
    for name, entry in skills_raw.items():
        where = f"catalog.skills.{name}"
        if not isinstance(entry, dict):
            raise CatalogError(f"{where}: expected an object")
        unknown = set(entry) - {"required", "optional", "exactly_one_of"} - _RULE_FIELDS
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
        for table_name, table in zip(("required", "optional", "exactly_one_of"), tables):
            for key, type_name in table.items():
                seen = key_types.setdefault(key, (type_name, f"{where}.{table_name}.{key}"))
                if seen[0] != type_name:
                    raise CatalogError(f"{where}.{table_name}.{key}: type {type_name!r} differs from {seen[0]!r} "
                                       f"at {seen[1]}; a key has one type in every skill")
        spec = SkillSpec(
            name=name,
            required=MappingProxyType(required),
            optional=MappingProxyType(optional),
            exactly_one_of=MappingProxyType(one_of),
        )
        skills[name] = _rules(spec, entry, where, default_location, every_say)
    ranks: dict[int, str] = {}
    for name, spec in skills.items():
        if spec.node_only_rank in ranks:
            raise CatalogError(f"catalog.skills.{name}.node_only_rank: {spec.node_only_rank} is also "
                               f"{ranks[spec.node_only_rank]}'s; each skill needs its own place in a node_only path")
        ranks[spec.node_only_rank] = name
    types = {key: t for key, (t, _) in key_types.items()}
    key_limits = _key_limits(raw["key_limits"], types, limits)
    for spec in skills.values():
        _check_fits(spec, key_limits, limits, raw["skills"][spec.name].get("defaults", {}))
    return Catalog(
        skills=MappingProxyType(skills),
        key_order=key_order,
        key_aliases=MappingProxyType(dict(aliases)),
        key_types=MappingProxyType(types),
        location=default_location,
        limits=limits.args,
        key_limits=key_limits,
    )


def _key_limits(raw: Any, types: Mapping[str, str], limits: Limits) -> Mapping[str, Limit]:
    """``key_limits``: every integer argument key -> the limit of ``limits.args`` that bounds its value."""
    where = "catalog.key_limits"
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: expected an object mapping integer argument keys to limits of limits.json's args")
    ints = sorted(k for k, t in types.items() if t == "positive_int")
    if sorted(raw) != ints:
        raise CatalogError(f"{where}: expected exactly the integer argument keys {ints}, got {sorted(raw)}")
    out = {}
    for key, name in raw.items():
        if name not in limits.args:
            raise CatalogError(f"{where}.{key}: {name!r} is not a limit of limits.json's args; expected one of "
                               f"{sorted(limits.args)}")
        out[key] = limits.args[name]
    return MappingProxyType(out)


def _check_fits(spec: SkillSpec, key_limits: Mapping[str, Limit], limits: Limits, defaults: Mapping[str, Any]) -> None:
    """Every value the contract lets through fits each op argument it lowers into (and every default fits
    its key's limit), so that an agent's input can never be refused by a world's check of a compiled call."""
    names = limits.args["name_chars"]
    for i, case in enumerate(spec.lowering):
        for j, step in enumerate(case.steps):
            for arg, slot in step.args:
                if slot.source != "arg":
                    continue
                op_type = OP_ARGS[step.op][arg]
                limit = key_limits.get(slot.name, names)
                low = max(limit.min, 1) if slot.name in key_limits else limit.min  # positive_int: >= 1
                kind = "int" if slot.name in key_limits else "string"
                if op_type.kind == "item" and kind == "string":
                    continue  # an item argument is a known item name (contract: not_minecraft_item)
                if op_type.kind != kind or low < op_type.min or limit.max > op_type.max:
                    raise CatalogError(
                        f"catalog.skills.{spec.name}.lower[{i}].ops[{j}].args.{arg}: ${slot.name} may be "
                        f"{'an int' if kind == 'int' else 'a string of'} {low} to {limit.max}"
                        f"{'' if kind == 'int' else ' characters'} ({limit.cite()}), but {step.op}.{arg} takes "
                        f"{op_type.expected()} (skill_ops.json); make the limit fit the op argument")
    for key, value in defaults.items():
        bound = key_limits.get(key)
        if bound is not None and value not in bound:
            raise CatalogError(f"catalog.skills.{spec.name}.defaults.{key}: {value!r} is not within {bound.cite()} "
                               f"[{bound.min}, {bound.max}]")


def load_catalog(path: Path = CATALOG_PATH) -> Catalog:
    """Read and validate a catalog file (the packaged one by default)."""
    return parse_catalog(read_json(path, "catalog file", CatalogError))


@cache(maxsize=1)
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
