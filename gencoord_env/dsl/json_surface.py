"""GenCoord-JSON: the same canonical fields as the Short DSL, serialized as JSON.

This is the paper's JSON comparator surface. It carries exactly what the Short DSL record carries (at most
``max_requests`` peer requests, one per peer - one in a two-agent episode -, paths of one to five tasks,
primitive argument values), so both surfaces round-trip the same proposals and a comparison between them
isolates serialization cost.

    {"self_plan":[{"skill":"resource.obtain","args":{"q":4,"item":"oak_planks"}}],"peer_requests":[]}

Errors are ``DSLSyntaxError``. JSON syntax errors carry the decoder's offset; structural errors carry
offset 0 and name the JSON path (``$.self_plan[0].args``) in the message.
"""
from __future__ import annotations

import json
import math
from typing import Any

from gencoord_env.dsl.errors import DSLSyntaxError
from gencoord_env.errors import UsageError
from gencoord_env.types import Args, PeerRequest, Proposal, Task, Value
from gencoord_env.dsl.serializer import canonical_items, checked_requests, format_path
from gencoord_env.dsl.syntax import (
    ATOM_RE,
    KEY_ALIASES,
    KEY_RE,
    MAX_PATH_TASKS,
    SKILLS,
    unknown_skill_message,
)

_ENCODER = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"))


def to_json(proposal: Proposal, max_requests: int = 1) -> str:
    """Serialize the canonical fields of ``proposal`` as compact ASCII JSON (args in canonical order).

    Raises ``ValueError`` for the same proposals that ``format`` cannot express.
    """
    if not isinstance(proposal, Proposal):
        raise TypeError(f"Expected a Proposal but got {type(proposal).__name__}")
    format_path(proposal.self_plan, "self_plan")  # validates length, skills, keys and values
    peer_requests = []
    for request in checked_requests(proposal.peer_requests, max_requests):
        format_path(request.requested_plan, "requested_plan")
        peer_requests.append(
            {"target": request.target, "requested_plan": [_task_object(t) for t in request.requested_plan]}
        )
    return _ENCODER.encode(
        {"self_plan": [_task_object(t) for t in proposal.self_plan], "peer_requests": peer_requests}
    )


def _task_object(task: Task) -> dict[str, Any]:
    return {"skill": task.skill, "args": dict(canonical_items(task))}


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _pairs_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _reject_constant(name: str) -> float:
    raise UsageError(f"{name} is not a JSON number")


def from_json(text: str, max_requests: int = 1) -> Proposal:
    """Parse a GenCoord-JSON record into a ``Proposal``; aliases are canonicalized like the DSL parser does.

    ``max_requests``: the peer requests a record may carry (1: a two-agent episode; n - 1 in a team of n).
    """
    if type(max_requests) is not int or max_requests < 1:
        raise UsageError(f"max_requests must be a positive int, got {max_requests!r}")
    if not isinstance(text, str):
        raise TypeError(f"Expected the JSON text as str but got {type(text).__name__}")
    try:
        raw = json.loads(text, object_pairs_hook=_pairs_without_duplicates, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        raise DSLSyntaxError(f"invalid JSON: {err.msg}", text, err.pos) from None
    except _DuplicateKey as err:
        raise DSLSyntaxError(f"invalid JSON record: duplicate object key {err.key!r}", text, 0) from None
    except RecursionError:
        raise DSLSyntaxError("invalid JSON record: nested too deeply", text, 0) from None
    except ValueError as err:  # NaN/Infinity, or an integer with more digits than int() converts
        raise DSLSyntaxError(f"invalid JSON number: {err}", text, 0) from None
    return _proposal(raw, text, max_requests)


def _fail(text: str, where: str, message: str) -> DSLSyntaxError:
    return DSLSyntaxError(f"{where}: {message}", text, 0)


def _fields(raw: Any, fields: tuple[str, ...], where: str, text: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _fail(text, where, f"expected an object with fields {', '.join(fields)}, found {_kind(raw)}")
    for field in fields:
        if field not in raw:
            raise _fail(text, where, f"missing field {field!r}")
    extra = sorted(set(raw) - set(fields))
    if extra:
        raise _fail(text, where, f"unknown field {extra[0]!r}; expected only {', '.join(fields)}")
    return raw


def _kind(raw: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(raw), "a number")


def _proposal(raw: Any, text: str, max_requests: int) -> Proposal:
    record = _fields(raw, ("self_plan", "peer_requests"), "$", text)
    self_plan = _path(record["self_plan"], "$.self_plan", text, allow_empty=True)
    requests_raw = record["peer_requests"]
    if not isinstance(requests_raw, list):
        raise _fail(text, "$.peer_requests", f"expected an array, found {_kind(requests_raw)}")
    if len(requests_raw) > max_requests:
        most = "one peer request" if max_requests == 1 else f"{max_requests} peer requests"
        raise _fail(text, "$.peer_requests", f"at most {most}; found {len(requests_raw)}")
    peer_requests: list[PeerRequest] = []
    for index, request_raw in enumerate(requests_raw):
        where = f"$.peer_requests[{index}]"
        request = _fields(request_raw, ("target", "requested_plan"), where, text)
        target = request["target"]
        if not isinstance(target, str) or ATOM_RE.fullmatch(target) is None or target == "-":
            raise _fail(text, f"{where}.target", "expected an agent id [A-Za-z0-9_.:/+-]+ other than '-'")
        if any(r.target == target for r in peer_requests):
            raise _fail(text, f"{where}.target", f"a second request to {target!r}; a record sends at most one request to each peer")
        plan = _path(request["requested_plan"], f"{where}.requested_plan", text, allow_empty=False)
        peer_requests.append(PeerRequest(target=target, requested_plan=plan))
    return Proposal(self_plan=self_plan, peer_requests=tuple(peer_requests))


def _path(raw: Any, where: str, text: str, *, allow_empty: bool) -> tuple[Task, ...]:
    if not isinstance(raw, list):
        raise _fail(text, where, f"expected an array of tasks, found {_kind(raw)}")
    if not raw and not allow_empty:
        raise _fail(text, where, "empty requested plan: expected 1 to 5 tasks")
    if len(raw) > MAX_PATH_TASKS:
        raise _fail(text, where, f"a path has at most {MAX_PATH_TASKS} tasks; found {len(raw)}")
    return tuple(_task(item, f"{where}[{i}]", text) for i, item in enumerate(raw))


def _task(raw: Any, where: str, text: str) -> Task:
    task = _fields(raw, ("skill", "args"), where, text)
    skill = task["skill"]
    if not isinstance(skill, str):
        raise _fail(text, f"{where}.skill", f"expected a skill path string, found {_kind(skill)}")
    if skill not in SKILLS:
        raise _fail(text, f"{where}.skill", unknown_skill_message(skill))
    args_raw = task["args"]
    if not isinstance(args_raw, dict):
        raise _fail(text, f"{where}.args", f"expected an object of arguments, found {_kind(args_raw)}")
    args: dict[str, Value] = {}
    spelled: dict[str, str] = {}
    for key, value in args_raw.items():
        if KEY_RE.fullmatch(key) is None:
            raise _fail(text, f"{where}.args", f"key {key!r} is not an identifier [A-Za-z][A-Za-z0-9_]*")
        canonical = KEY_ALIASES[key] if key in KEY_ALIASES else key
        if canonical in args:
            raise _fail(text, f"{where}.args", f"duplicate key {key!r}: {canonical!r} is already given as {spelled[canonical]!r}")
        if isinstance(value, (dict, list)):
            raise _fail(text, f"{where}.args.{key}", f"expected a string, number, boolean or null, found {_kind(value)}")
        if type(value) is float and not math.isfinite(value):
            raise _fail(text, f"{where}.args.{key}", "number is out of range")
        args[canonical] = value
        spelled[canonical] = key
    return Task(skill, Args(args))
