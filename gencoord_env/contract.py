"""Typed contract checker: a parsed proposal x the episode's public instantiation -> violations.

The parser accepts any identifier-shaped key and any primitive value; this stage decides whether the
proposal means something executable in this episode: every skill gets only its catalog keys, each with
the right type, quantities are positive, agents, references and bindings exist in the episode, and
items are Minecraft items the episode allows. Every value is within the limits of ``data/limits.json``
(``over_limit``: quantities, ticks, name lengths, arguments per task; ``path_too_long``), the numbers the
worlds and the Node sidecar check compiled calls against, so that agent input never reaches a world it
could make fail other than as an agent's mistake. It returns *every* violation with a reason, because an
agent's mistake is data (it becomes ``FailureCode.CONTRACT_REJECT`` with these reasons in the trace),
never an exception.

>>> from gencoord_env.dsl import parse
>>> scope = PublicScope(agents=("agent_a", "agent_b"), agent="agent_a",
...                     references=frozenset({"order_chest"}), bindings=frozenset())
>>> check(parse("SELF resource.obtain(q=0,item=oak_planks)\\nREQ -"), scope)[0].code
'non_positive'
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gencoord_env.catalog import CATALOG, Catalog, CatalogError, SkillSpec, minecraft_items
from gencoord_env.errors import UsageError
from gencoord_env.suggest import close_match
from gencoord_env.types import PeerRequest, Proposal, Task, Value
from gencoord_env.dsl.syntax import ATOM_RE, shorten


@dataclass(frozen=True)
class PublicScope:
    """The public episode instantiation xi_pub, as the checker sees it.

    ``items`` is the set of items this episode allows; ``None`` allows any Minecraft item.
    """

    agents: tuple[str, ...]
    agent: str
    references: frozenset[str]
    bindings: frozenset[str]
    items: frozenset[str] | None = None

    def __post_init__(self) -> None:
        # A malformed scope is a bug in the caller, not an agent mistake: fail early and say what to fix.
        object.__setattr__(self, "agents", tuple(self.agents))
        object.__setattr__(self, "references", frozenset(self.references))
        object.__setattr__(self, "bindings", frozenset(self.bindings))
        if self.items is not None:
            object.__setattr__(self, "items", frozenset(self.items))
        for name in ("agents", "references", "bindings", "items"):
            values = getattr(self, name)
            if values is not None and not all(isinstance(v, str) for v in values):
                raise TypeError(f"Expected PublicScope.{name} to hold str values but got {sorted(map(repr, values))}")
        if not isinstance(self.agent, str):
            raise TypeError(f"Expected PublicScope.agent to be a str but got {type(self.agent).__name__}")
        if self.agent not in self.agents:
            raise UsageError(f"PublicScope.agent {self.agent!r} is not one of the episode's agents {self.agents}")


@dataclass(frozen=True)
class Violation:
    """One reason a proposal is rejected.

    ``where`` points into the proposal (``self_plan[1].q``, ``peer_requests[0].target``), ``code`` is a
    short machine code, ``message`` says what was wrong and what was expected.
    """

    where: str
    code: str
    message: str


#: Every code ``check`` can return, for consumers that tabulate them.
VIOLATION_CODES = frozenset(
    {
        "unknown_skill",
        "unknown_key",
        "missing_key",
        "one_of",
        "wrong_type",
        "non_positive",
        "unknown_agent",
        "self_target",
        "not_minecraft_item",
        "item_not_in_episode",
        "inadmissible_binding",
        "unknown_reference",
        "empty_plan",
        "path_too_long",
        "too_many_requests",
        "over_limit",
    }
)


def check(proposal: Proposal, scope: PublicScope, catalog: Catalog = CATALOG) -> tuple[Violation, ...]:
    """Every contract violation of ``proposal`` in ``scope``; ``()`` means the proposal is valid.

    Tasks in ``self_plan`` are run by ``scope.agent``; tasks in a ``requested_plan`` are run by the
    request's target, so ``to`` must name a peer of *that* agent.
    """
    if not isinstance(proposal, Proposal):
        raise TypeError(f"Expected a Proposal but got {type(proposal).__name__}")
    if not isinstance(scope, PublicScope):
        raise TypeError(f"Expected a PublicScope but got {type(scope).__name__}")
    found: list[Violation] = []
    _check_path(proposal.self_plan, "self_plan", scope.agent, scope, catalog, found)
    # one request per peer: a two-agent episode allows one, a team of n agents n - 1
    most = max(1, len(scope.agents) - 1)
    if len(proposal.peer_requests) > most:
        limit = "one peer request" if most == 1 else f"{most} peer requests (one per peer)"
        found.append(
            Violation("peer_requests", "too_many_requests", f"at most {limit} per proposal; got {len(proposal.peer_requests)}")
        )
    else:
        targets = [getattr(r, "target", None) for r in proposal.peer_requests]
        twice = sorted({str(t) for t in targets if targets.count(t) > 1})
        if twice:
            found.append(
                Violation("peer_requests", "too_many_requests", f"more than one request to {', '.join(twice)}; one request per peer")
            )
    for index, request in enumerate(proposal.peer_requests):
        if not isinstance(request, PeerRequest):
            raise TypeError(f"Expected a PeerRequest but got {type(request).__name__}")
        where = f"peer_requests[{index}]"
        target = request.target
        long = _too_long("the target", target, catalog)
        if long is not None:
            found.append(Violation(f"{where}.target", "over_limit", long))
            continue
        if target == scope.agent:
            found.append(
                Violation(
                    f"{where}.target",
                    "self_target",
                    f"a request must go to a peer, not to the proposing agent {target!r}; "
                    f"expected one of {_peers(scope, scope.agent)}",
                )
            )
        elif target not in scope.agents:
            found.append(
                Violation(
                    f"{where}.target",
                    "unknown_agent",
                    f"{target!r} is not an agent of this episode; expected one of {_peers(scope, scope.agent)}",
                )
            )
        if not request.requested_plan:
            most = catalog.limits["path_tasks"].max
            found.append(Violation(f"{where}.requested_plan", "empty_plan", f"a peer request needs 1 to {most} tasks"))
        _check_path(request.requested_plan, f"{where}.requested_plan", target, scope, catalog, found)
    return tuple(found)


def _peers(scope: PublicScope, actor: str) -> list[str]:
    return [agent for agent in scope.agents if agent != actor]


def _check_path(
    tasks: tuple[Task, ...], where: str, actor: str, scope: PublicScope, catalog: Catalog, found: list[Violation]
) -> None:
    limit = catalog.limits["path_tasks"]
    if len(tasks) > limit.max:
        found.append(
            Violation(where, "path_too_long", f"a path has at most {limit.max} tasks ({limit.cite()}); got {len(tasks)}")
        )
    for index, task in enumerate(tasks):
        if not isinstance(task, Task):
            raise TypeError(f"Expected a Task in {where} but got {type(task).__name__}")
        _check_task(task, f"{where}[{index}]", actor, scope, catalog, found)


def _check_task(
    task: Task, where: str, actor: str, scope: PublicScope, catalog: Catalog, found: list[Violation]
) -> None:
    spec = catalog.skills.get(task.skill)
    if spec is None:
        found.append(Violation(f"{where}.skill", "unknown_skill",
                               f"unknown skill {shorten(task.skill)}{_suggest(task.skill, catalog.skills, catalog)}"))
        return
    most = catalog.limits["task_args"]
    if len(task.args) > most.max:
        found.append(Violation(where, "over_limit", f"{spec.name} has {len(task.args)} arguments; a task has at most "
                                                    f"{most.max} ({most.cite()})"))
        return
    for key, value in task.args.items():
        long = _too_long("a key", key, catalog)
        if long is not None:
            found.append(Violation(f"{where}.{key[:16]}...", "over_limit", long))
            continue
        type_name = spec.key_type(key)
        if type_name is None:
            found.append(
                Violation(
                    f"{where}.{key}",
                    "unknown_key",
                    f"{spec.name} takes no key {key!r}{_suggest(key, spec.keys, catalog)}; "
                    f"expected keys: {', '.join(_ordered_keys(spec, catalog))}",
                )
            )
            continue
        violation = _check_value(type_name, key, value, actor, scope, catalog)
        if violation is not None:
            code, message = violation
            found.append(Violation(f"{where}.{key}", code, message))
    for key in spec.required:
        if key not in task.args:
            found.append(
                Violation(f"{where}.{key}", "missing_key", f"{spec.name} requires the key {key!r} ({_TYPE_TEXT[spec.required[key]]})")
            )
    if spec.exactly_one_of:
        given = [key for key in spec.exactly_one_of if key in task.args]
        if len(given) != 1:
            choices = " or ".join(repr(key) for key in spec.exactly_one_of)
            got = f"got {' and '.join(repr(k) for k in given)}" if given else "got neither"
            found.append(Violation(where, "one_of", f"{spec.name} takes exactly one of {choices}; {got}"))


def _ordered_keys(spec: SkillSpec, catalog: Catalog) -> list[str]:
    rank = {key: i for i, key in enumerate(catalog.key_order)}
    return sorted(spec.keys, key=lambda key: (rank.get(key, len(rank)), key))


def _suggest(word: str, choices: Iterable[str], catalog: Catalog = CATALOG) -> str:
    close = close_match(word, choices) if len(word) <= catalog.limits["name_chars"].max else None
    return f" (did you mean {close!r}?)" if close else ""


def _too_long(what: str, name: str, catalog: Catalog) -> str | None:
    """A message if the string ``name`` has more characters than a name may have, else ``None``."""
    limit = catalog.limits["name_chars"]
    if len(name) <= limit.max:
        return None
    return f"{what} {shorten(name)} has {len(name)} characters; a name has at most {limit.max} ({limit.cite()})"


_TYPE_TEXT = {
    "positive_int": "a positive integer",
    "agent": "an agent id of the episode",
    "peer": "a peer agent id",
    "reference": "a grounding reference of the episode",
    "binding": "an admissible binding id",
    "item": "a Minecraft item name",
    "atom": "an atom [A-Za-z0-9_.:/+-]+",
}


def _show(value: Value) -> str:
    """A value with its type, since ``1``, ``1.0`` and ``true`` mean different things here."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true (a boolean)" if value else "false (a boolean)"
    if isinstance(value, str):
        return f"{shorten(value)} (a string)"
    return f"{_number(value)} (a {type(value).__name__})"


def _number(value: Value) -> str:
    """``repr`` of a number, cut so that a message stays one line (an int may have 4,300 digits)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


def _check_value(type_name: str, key: str, value: Value, actor: str, scope: PublicScope,
                 catalog: Catalog = CATALOG) -> tuple[str, str] | None:
    """``(code, message)`` if ``value`` does not fit ``type_name`` in ``scope``, else ``None``."""
    if type_name == "positive_int":
        if type(value) is not int:
            return "wrong_type", f"{key} must be a positive integer, got {_show(value)}"
        if value <= 0:
            return "non_positive", f"{key} must be a positive integer, got {_number(value)}"
        limit = catalog.limit_of(key)
        if limit is not None and not limit.min <= value <= limit.max:
            return "over_limit", (f"{key} must be an integer in [{max(limit.min, 1)}, {limit.max}] "
                                  f"({limit.cite()}: {limit.about}), got {_number(value)}")
        return None
    if not isinstance(value, str):
        return "wrong_type", f"{key} must be {_TYPE_TEXT[type_name]} (a string), got {_show(value)}"
    long = _too_long(key, value, catalog)
    if long is not None:
        return "over_limit", long
    if type_name in ("agent", "peer"):
        candidates = _peers(scope, actor) if type_name == "peer" else list(scope.agents)
        if type_name == "peer" and value == actor:
            return "self_target", f"{key} must name a peer of {actor!r}, not {actor!r} itself; expected one of {candidates}"
        if value not in scope.agents:
            return "unknown_agent", f"{key}={value!r} is not an agent of this episode; expected one of {candidates}"
        return None
    if type_name == "reference":
        if value not in scope.references:
            return (
                "unknown_reference",
                f"{key}={value!r} is not a grounding reference of this episode"
                f"{_suggest(value, scope.references, catalog)}; expected one of {sorted(scope.references)}",
            )
        return None
    if type_name == "binding":
        if value not in scope.bindings:
            return (
                "inadmissible_binding",
                f"{key}={value!r} is not an admissible binding of this episode; expected one of {sorted(scope.bindings)}",
            )
        return None
    if type_name == "item":
        if value not in minecraft_items():
            hint = (
                "; write item names without the 'minecraft:' namespace"
                if value.startswith("minecraft:")
                else _suggest(value, minecraft_items(), catalog)
            )
            return "not_minecraft_item", f"{key}={value!r} is not a Minecraft 1.21.4 item name{hint}"
        if scope.items is not None and value not in scope.items:
            return (
                "item_not_in_episode",
                f"{key}={value!r} is not an item of this episode; expected one of {sorted(scope.items)}",
            )
        return None
    if type_name == "atom":
        if ATOM_RE.fullmatch(value) is None:
            return "wrong_type", f"{key} must be an atom [A-Za-z0-9_.:/+-]+, got {_show(value)}"
        return None
    raise CatalogError(f"catalog type {type_name!r} has no check; add it to contract._check_value")
