"""Canonical Short DSL serializer: ``Proposal`` -> the record text.

Canonical means: the ``SELF`` line, then ``REQ -`` or one ``REQ`` line per peer request in target order,
LF-separated; single spaces, no surrounding whitespace, arguments in the catalog's fixed key order (then
other keys alphabetically), strings bare only when they read back as the same string, floats as ``repr``.
So ``format(parse(format(p))) == format(p)`` and ``parse(format(p)) == p`` for every parsed ``p``.

``max_requests`` is the grammar's one parameter, the peers a record may address: 1 (the default) is the
paper's two-line record of a two-agent episode; a team of n agents uses n - 1.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from json.encoder import encode_basestring_ascii  # C-accelerated, stdlib

from gencoord_env.caches import Memo
from gencoord_env.errors import UsageError
from gencoord_env.types import PeerRequest, Proposal, Task, Value
from gencoord_env.dsl.syntax import (
    ATOM_RE,
    KEY_ALIASES,
    KEY_RE,
    MAX_PATH_TASKS,
    SKILLS,
    is_bare_string,
    key_rank,
)

# Both caches hold facts about short strings that recur in every record (keys, item names, agent ids);
# they are bounded so that adversarial input cannot grow them without limit.
# Argument-key tuples and string values recur across records (item names, agent ids).
_ORDERS = Memo("dsl.serializer.key_order")
_STRINGS = Memo("dsl.serializer.strings")


def format(proposal: Proposal, max_requests: int = 1) -> str:  # noqa: A001  # the issue names the API dsl.format
    """Write ``proposal`` in the canonical form.

    >>> from gencoord_env.types import Task
    >>> format(Proposal(self_plan=(Task("resource.obtain", {"item": "oak_planks", "q": 4}),)))
    'SELF resource.obtain(q=4,item=oak_planks)\\nREQ -'

    Raises ``ValueError`` for a proposal the record cannot express (more than ``max_requests`` peer
    requests or two to one peer, an empty requested plan, a path of more than five tasks, an unknown skill,
    a non-identifier or alias key, a value that is not a string, int, finite float, bool or None).
    """
    if not isinstance(proposal, Proposal):
        raise TypeError(f"Expected a Proposal but got {type(proposal).__name__}")
    if proposal.self_plan:
        self_line = "SELF " + format_path(proposal.self_plan, "self_plan")
    else:
        self_line = "SELF -"
    requests = checked_requests(proposal.peer_requests, max_requests)
    if not requests:
        return self_line + "\nREQ -"
    return self_line + "".join(
        f"\nREQ {request.target} {format_path(request.requested_plan, 'requested_plan')}" for request in requests
    )


def checked_requests(peer_requests: Sequence[PeerRequest], max_requests: int = 1) -> Sequence[PeerRequest]:
    """The peer requests a record with at most ``max_requests`` REQ lines can carry, validated."""
    if type(max_requests) is not int or max_requests < 1:
        raise UsageError(f"max_requests must be a positive int, got {max_requests!r}")
    if len(peer_requests) > max_requests:
        if max_requests == 1:
            raise UsageError(f"the REQ line carries at most one peer request; got {len(peer_requests)}")
        raise UsageError(f"a record carries at most {max_requests} peer requests; got {len(peer_requests)}")
    seen: set[str] = set()  # a two-line record's one request never meets a second
    for request in peer_requests:
        if not isinstance(request, PeerRequest):
            raise TypeError(f"Expected a PeerRequest but got {type(request).__name__}")
        target = request.target
        if not isinstance(target, str) or ATOM_RE.fullmatch(target) is None or target == "-":
            raise UsageError(f"peer request target {target!r} is not an agent id [A-Za-z0-9_.:/+-]+ other than '-'")
        if not request.requested_plan:
            raise UsageError(f"the peer request to {target!r} has an empty requested plan")
        if max_requests > 1:
            if target in seen:
                raise UsageError(f"two peer requests to {target!r}; a record sends at most one request to each peer")
            seen.add(target)
    return peer_requests


def format_path(tasks: Sequence[Task], where: str) -> str:
    if len(tasks) > MAX_PATH_TASKS:
        raise UsageError(f"{where} has {len(tasks)} tasks; a path has at most {MAX_PATH_TASKS}")
    return " > ".join([format_task(task) for task in tasks])


def format_task(task: Task) -> str:
    items = _checked_items(task)
    parts = []
    for key in key_order(task.skill, items):
        value = items[key]
        text = _STRINGS.get(value) if type(value) is str else None
        parts.append(f"{key}={text if text is not None else format_value(value)}")
    return f"{task.skill}({','.join(parts)})"


def canonical_items(task: Task) -> list[tuple[str, Value]]:
    """The task's arguments in canonical key order, after checking that the DSL can express them."""
    items = _checked_items(task)
    return [(key, items[key]) for key in key_order(task.skill, items)]


def _checked_items(task: Task) -> dict[str, Value]:
    if not isinstance(task, Task):
        raise TypeError(f"Expected a Task but got {type(task).__name__}")
    if task.skill not in SKILLS:
        raise UsageError(f"unknown skill {task.skill!r}; the Short DSL writes only catalog skills")
    return task.args.as_dict()


def key_order(skill: str, items: dict[str, Value]) -> tuple[str, ...]:
    """The keys of ``items`` in canonical order; refuses keys the parser would not read back unchanged."""
    keys = tuple(items)
    order: tuple[str, ...] | None = _ORDERS.get(keys)
    if order is None:
        for key in keys:
            if not isinstance(key, str) or KEY_RE.fullmatch(key) is None:
                raise UsageError(f"key {key!r} of {skill!r} is not an identifier [A-Za-z][A-Za-z0-9_]*")
            if key in KEY_ALIASES:
                raise UsageError(f"key {key!r} of {skill!r} is an alias; use the compact key {KEY_ALIASES[key]!r}")
        order = _ORDERS.put(keys, tuple(sorted(keys, key=key_rank)))
    return order


def format_value(value: Value) -> str:
    kind = type(value)
    if kind is str:
        assert isinstance(value, str)
        text: str | None = _STRINGS.get(value)
        if text is None:
            text = _STRINGS.put(value, value if is_bare_string(value) else encode_basestring_ascii(value))
        return text
    if kind is int:
        return repr(value)
    if kind is float:
        assert isinstance(value, float)
        if not math.isfinite(value):
            raise UsageError(f"cannot write the non-finite number {value!r}; JSON numbers are finite")
        return repr(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    # Subclasses (str enums, numpy scalars) are refused: they would read back as a different type.
    raise UsageError(f"cannot write a value of type {kind.__name__}; expected str, int, float, bool or None")
