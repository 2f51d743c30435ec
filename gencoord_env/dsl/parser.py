"""Short DSL parser: text -> ``Proposal``, exactly the supplement's BNF.

Hand-written in the style of tomli: each grammar rule is a pure function ``parse_x(src, pos) -> (pos,
value)`` that reads from ``pos`` and returns where it stopped, so an error can always say where it
happened and what was expected there. Regular expressions scan whole tokens at a time because the codec
sits on the hot path of every episode and every training row.

Tolerated beyond the canonical form: spaces around ``>``, after commas, and one or more spaces after
``SELF``, ``REQ`` and the agent id; one trailing LF; ``REQ`` lines in any target order (the proposal keeps
them in target order). Not tolerated: CR, tabs, any other whitespace.

``max_requests`` is the grammar's one parameter: how many ``REQ <agent> <path>`` lines may follow the
``SELF`` line. 1, the default, is the paper's two-line record; a team of n agents reads records with up to
n - 1 (one per peer). ``REQ -`` always stands alone.
"""
from __future__ import annotations

import math
import re
from json import JSONDecodeError
from json.decoder import scanstring  # type: ignore[attr-defined]  # C-accelerated, stdlib

from gencoord_env.dsl.errors import DSLSyntaxError
from gencoord_env.caches import Memo, entry_bytes
from gencoord_env.errors import UsageError
from gencoord_env.types import Args, PeerRequest, Proposal, Task, Value
from gencoord_env.dsl.syntax import (
    ATOM_CHARS,
    ATOM_RE,
    KEY_ALIASES,
    KEY_RE,
    LITERALS,
    MAX_PATH_TASKS,
    NUMBER_RE,
    NUMBER_START,
    SEPARATOR_RE,
    SKILLS,
    SPACES_RE,
    TOKEN_RE,
    shorten,
    unknown_skill_message,
)

Pos = int

#: An argument list with no quoted string, up to its closing parenthesis: handled by the fast path.
SIMPLE_ARGS_RE = re.compile(r'[^()"\n]*\)')
# Keys and tokens recur across records (item names, agent ids): the argument shortcut memoizes them. Every
# memo is bounded in bytes too (caches.Memo), since its keys are agent text.
_KEYS = Memo("dsl.parser.keys")
_RECORDS = Memo("dsl.parser.records", maxsize=1 << 14)
_TOKENS = Memo("dsl.parser.tokens")
_MISSING = object()


def parse(text: str, max_requests: int = 1) -> Proposal:
    """Parse one Short DSL record: the SELF line and at most ``max_requests`` REQ lines.

    >>> parse("SELF -\\nREQ agent_b craft.item(q=1,item=crafting_table)").peer_requests[0].target
    'agent_b'
    >>> len(parse("SELF -\\nREQ agent_b control.wait()\\nREQ agent_c control.wait()", max_requests=2).peer_requests)
    2

    Raises ``DSLSyntaxError`` (a ``ValueError``) for anything outside the grammar.
    """
    if not isinstance(text, str):
        raise TypeError(f"Expected the Short DSL text as str but got {type(text).__name__}")
    if type(max_requests) is not int or max_requests < 1:
        raise UsageError(f"max_requests must be a positive int, got {max_requests!r}")
    # Agents repeat records (rule agents, menu slots): a parsed record is an immutable value, so the same
    # text always gives the same Proposal. Errors are not memoized; they are raised again each time.
    key = text if max_requests == 1 else (max_requests, text)
    proposal = _RECORDS.get(key)
    if proposal is None:
        # a record holds about its text again; the memo keeps none over its entry bound (caches.Memo)
        proposal = _RECORDS.put(key, parse_full(text, max_requests), size=2 * entry_bytes(key))
    return proposal


def parse_full(src: str, max_requests: int = 1) -> Proposal:
    """The grammar, rule by rule."""
    if type(max_requests) is not int or max_requests < 1:
        raise UsageError(f"max_requests must be a positive int, got {max_requests!r}")
    for forbidden, message in (
        ("\r", "a carriage return is not allowed; lines end with LF only"),
        ("\t", "a tab is not allowed; use spaces"),
    ):
        at = src.find(forbidden)
        if at >= 0:
            raise DSLSyntaxError(message, src, at)
    pos, self_plan = parse_self_line(src, 0)
    if pos >= len(src):
        raise DSLSyntaxError("expected a line break and then the REQ line, found end of input", src, pos)
    pos, peer_requests = parse_req_line(src, pos + 1)
    while peer_requests and len(peer_requests) < max_requests and src.startswith("REQ", pos + 1):
        pos, more = parse_more_req_line(src, pos + 1, peer_requests)
        peer_requests += more
    parse_end(src, pos, len(peer_requests), max_requests)
    return Proposal(self_plan=self_plan, peer_requests=peer_requests)


def describe(src: str, pos: Pos) -> str:
    """What stands at ``pos``, for the 'found ...' part of a message."""
    if pos >= len(src):
        return "end of input"
    char = src[pos]
    if char == "\n":
        return "a line break"
    return repr(char)


def at_line_end(src: str, pos: Pos) -> bool:
    return pos >= len(src) or src[pos] == "\n"


def parse_end(src: str, pos: Pos, requests: int = 0, max_requests: int = 1) -> None:
    """After the last REQ line only one trailing LF may follow (``requests``: how many REQ lines were read)."""
    if pos >= len(src) or (pos + 1 == len(src) and src[pos] == "\n"):
        return
    line = src.count("\n", 0, pos + 1) + 1
    if max_requests == 1:
        expected = "after the REQ line (a record has exactly two lines)"
    elif not requests:
        expected = "after 'REQ -'"
    elif requests == max_requests:
        expected = f"after the last REQ line (a record carries at most {max_requests} peer requests)"
    else:
        expected = f"or another REQ line (a record carries at most {max_requests} peer requests)"
    raise DSLSyntaxError(f"expected the end of input {expected}, found {describe(src, pos + 1)} on line {line}",
                         src, pos + 1)


def parse_more_req_line(src: str, pos: Pos, earlier: tuple[PeerRequest, ...]) -> tuple[Pos, tuple[PeerRequest, ...]]:
    """A REQ line after the first one: ``"REQ " agent " " path``, to a peer no earlier line addressed."""
    line = src.count("\n", 0, pos) + 1
    after = SPACES_RE.match(src, pos + 3).end()  # type: ignore[union-attr]
    if src.startswith("-", after) and at_line_end(src, after + 1):
        raise DSLSyntaxError(f"'REQ -' on line {line}: 'REQ -' stands alone, after requests only 'REQ <agent> <path>' lines follow",
                             src, after)
    end, requests = parse_req_line(src, pos)
    target = requests[0].target if requests else ""
    if any(r.target == target for r in earlier):
        raise DSLSyntaxError(f"a second REQ line for {target!r}: a record sends at most one request to each peer",
                             src, after)
    return end, requests


def skip_required_spaces(src: str, pos: Pos, after: str) -> Pos:
    if not src.startswith(" ", pos):
        raise DSLSyntaxError(f"expected a space after {after}, found {describe(src, pos)}", src, pos)
    return SPACES_RE.match(src, pos).end()  # type: ignore[union-attr]  # " *" always matches


def parse_self_line(src: str, pos: Pos) -> tuple[Pos, tuple[Task, ...]]:
    """``self_line ::= "SELF -" | "SELF " path``; returns the position of the line's end."""
    if not src.startswith("SELF", pos):
        if src.startswith("REQ", pos):
            raise DSLSyntaxError("lines out of order: the SELF line comes first, then the REQ line", src, pos)
        raise DSLSyntaxError(f"expected 'SELF' at the start of line 1, found {describe(src, pos)}", src, pos)
    pos = skip_required_spaces(src, pos + 4, "'SELF'")
    if src.startswith("-", pos) and (ATOM_RE.match(src, pos).group() == "-"):  # type: ignore[union-attr]
        pos += 1
        if not at_line_end(src, pos):
            raise DSLSyntaxError(
                f"expected the end of the line after 'SELF -', found {describe(src, pos)}", src, pos
            )
        return pos, ()
    pos, plan = parse_path(src, pos)
    if not at_line_end(src, pos):
        raise DSLSyntaxError(unexpected_after_task(src, pos), src, pos)
    return pos, plan


def parse_req_line(src: str, pos: Pos) -> tuple[Pos, tuple[PeerRequest, ...]]:
    """``req_line ::= "REQ -" | "REQ " agent " " path``; returns the position of the line's end."""
    if not src.startswith("REQ", pos):
        if src.startswith("SELF", pos):
            raise DSLSyntaxError("expected the REQ line on line 2, found a second SELF line", src, pos)
        raise DSLSyntaxError(f"expected 'REQ' at the start of line 2, found {describe(src, pos)}", src, pos)
    pos = skip_required_spaces(src, pos + 3, "'REQ'")
    match = ATOM_RE.match(src, pos)
    if match is None:
        raise DSLSyntaxError(
            f"expected an agent id [A-Za-z0-9_.:/+-]+ or '-' after 'REQ', found {describe(src, pos)}", src, pos
        )
    agent = match.group()
    agent_pos, pos = pos, match.end()
    if agent == "-":
        if not at_line_end(src, pos):
            raise DSLSyntaxError(f"expected the end of the line after 'REQ -', found {describe(src, pos)}", src, pos)
        return pos, ()
    if src.startswith("(", pos):
        raise DSLSyntaxError(
            f"missing agent id: expected 'REQ <agent> <path>', found the task {agent!r} first", src, agent_pos
        )
    after_spaces = SPACES_RE.match(src, pos).end()  # type: ignore[union-attr]
    if at_line_end(src, after_spaces):
        raise DSLSyntaxError(
            f"empty requested plan: expected a path after the agent id {agent!r}, "
            f"found {describe(src, after_spaces)}",
            src,
            after_spaces,
        )
    if src[pos] != " ":
        raise DSLSyntaxError(
            f"invalid agent id: expected a space after {agent!r}, found {describe(src, pos)}", src, pos
        )
    pos, plan = parse_path(src, after_spaces)
    if not at_line_end(src, pos):
        raise DSLSyntaxError(unexpected_after_task(src, pos), src, pos)
    return pos, (PeerRequest(target=agent, requested_plan=plan),)


def unexpected_after_task(src: str, pos: Pos) -> str:
    return f"unexpected {describe(src, pos)} after a task; expected ' > ' and another task, or the end of the line"


def parse_path(src: str, pos: Pos) -> tuple[Pos, tuple[Task, ...]]:
    """``path ::= task (" > " task){0,4}``; stops before anything that is not a separator."""
    tasks: list[Task] = []
    while True:
        pos, task = parse_task(src, pos)
        tasks.append(task)
        separator = SEPARATOR_RE.match(src, pos)
        if separator is None:
            return pos, tuple(tasks)
        pos = separator.end()
        if at_line_end(src, pos):
            raise DSLSyntaxError(
                f"dangling '>': expected a task after '>', found {describe(src, pos)}", src, pos
            )
        if len(tasks) == MAX_PATH_TASKS:
            raise DSLSyntaxError(
                f"a path has at most {MAX_PATH_TASKS} tasks; this is task {MAX_PATH_TASKS + 1}", src, pos
            )


def parse_task(src: str, pos: Pos) -> tuple[Pos, Task]:
    """``task ::= skill "(" [args] ")"`` with ``args ::= arg ("," arg)*``."""
    match = ATOM_RE.match(src, pos)
    if match is None:
        raise DSLSyntaxError(
            f"expected a task 'skill(key=value,...)', found {describe(src, pos)}", src, pos
        )
    skill = match.group()
    if skill not in SKILLS:
        raise DSLSyntaxError(unknown_skill_message(skill), src, pos)
    pos = match.end()
    if not src.startswith("(", pos):
        raise DSLSyntaxError(f"expected '(' after the skill {skill!r}, found {describe(src, pos)}", src, pos)
    pos += 1
    simple = SIMPLE_ARGS_RE.match(src, pos)
    if simple is not None:
        fast = parse_simple_args(src[pos : simple.end() - 1])
        if fast is not None:
            return simple.end(), Task(skill, Args(fast))
    args: dict[str, Value] = {}
    if src.startswith(")", pos):
        return pos + 1, Task(skill, Args(args))
    spelled: dict[str, str] = {}
    while True:
        pos = parse_arg(src, pos, args, spelled)
        char = src[pos : pos + 1]
        if char == ",":
            pos = SPACES_RE.match(src, pos + 1).end()  # type: ignore[union-attr]
        elif char == ")":
            return pos + 1, Task(skill, Args(args))
        elif char in ("", "\n"):
            raise DSLSyntaxError(
                f"unclosed parenthesis of {skill!r}: expected ',' or ')', found {describe(src, pos)}", src, pos
            )
        else:
            raise DSLSyntaxError(f"expected ',' or ')' after a value, found {describe(src, pos)}", src, pos)


def parse_simple_args(body: str) -> dict[str, Value] | None:
    """Shortcut of ``parse_arg`` for an argument list without quoted strings; ``None``: use the full rule.

    Kept because it doubles parse throughput (``benchmarks/dsl_codec.py``: without it the codec falls
    below its 50,000 round trips/s target).

    Accepts exactly what ``parse_arg`` accepts for such a list and builds the same mapping; anything
    unusual (a bad key, a duplicate, a token that is not a number, literal or atom) returns ``None`` so
    that the full rules produce the exact error.
    """
    args: dict[str, Value] = {}
    if not body:
        return args
    pieces = body.split(",")
    if " " in body:  # spaces are tolerated after commas only
        pieces = [pieces[0], *[piece.lstrip(" ") for piece in pieces[1:]]]
    key_cache = _KEYS
    token_cache = _TOKENS
    for piece in pieces:
        # A piece without "=" leaves an empty token, which is never in the token cache nor a value.
        key, _, token = piece.partition("=")
        canonical = key_cache.get(key)
        if canonical is None:
            if KEY_RE.fullmatch(key) is None:
                return None
            canonical = key_cache.put(key, KEY_ALIASES.get(key, key))
        if canonical in args:
            return None
        value = token_cache.get(token, _MISSING)
        if value is _MISSING:
            if not token:
                return None
            try:
                value = classify_token(token, 0, len(token), key)
            except DSLSyntaxError:
                return None
            token_cache.put(token, value)
        args[canonical] = value
    return args


def parse_arg(src: str, pos: Pos, args: dict[str, Value], spelled: dict[str, str]) -> Pos:
    """``arg ::= key "=" value``; stores the value under the canonical compact key."""
    match = KEY_RE.match(src, pos)
    if match is None:
        raise DSLSyntaxError(
            f"expected a key [A-Za-z][A-Za-z0-9_]*, found {describe(src, pos)}", src, pos
        )
    key = match.group()
    key_pos, pos = pos, match.end()
    if not src.startswith("=", pos):
        raise DSLSyntaxError(f"expected '=' after the key {key!r}, found {describe(src, pos)}", src, pos)
    canonical = KEY_ALIASES.get(key, key)
    if canonical in args:
        first = spelled[canonical]
        detail = f"{canonical!r} is already given" if first == key else f"{canonical!r} is already given as {first!r}"
        raise DSLSyntaxError(f"duplicate key {key!r}: {detail}", src, key_pos)
    pos, value = parse_value(src, pos + 1, key)
    args[canonical] = value
    spelled[canonical] = key
    return pos


def parse_value(src: str, pos: Pos, key: str) -> tuple[Pos, Value]:
    """A JSON string, else the token up to ``,``/``)`` as a JSON number, literal or atom, in that order."""
    if src.startswith('"', pos):
        return parse_json_string(src, pos)
    end = TOKEN_RE.match(src, pos).end()  # type: ignore[union-attr]  # "[^,)\n]*" always matches
    if end == pos:
        raise DSLSyntaxError(f"missing value for the key {key!r}, found {describe(src, pos)}", src, pos)
    return end, classify_token(src, pos, end, key)


def parse_json_string(src: str, pos: Pos) -> tuple[Pos, str]:
    """A strict RFC 8259 string starting at the quote at ``pos``; escapes are decoded."""
    try:
        value, end = scanstring(src, pos + 1, True)
    except JSONDecodeError as err:
        raise DSLSyntaxError(*json_string_error(src, pos, err)) from None
    return end, value


def json_string_error(src: str, start: Pos, err: JSONDecodeError) -> tuple[str, str, Pos]:
    column = start - src.rfind("\n", 0, start)
    if err.msg.startswith("Unterminated string") or (err.pos < len(src) and src[err.pos] == "\n"):
        end = src.find("\n", start)
        end = len(src) if end < 0 else end
        return (f"unclosed string starting at column {column}: expected '\"', found {describe(src, end)}", src, end)
    if err.msg.startswith("Invalid control character"):
        return (f"invalid control character {src[err.pos]!r} in a string; escape it", src, err.pos)
    backslash = src.rfind("\\", start, err.pos + 1)
    return (
        "invalid escape in a string; expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX",
        src,
        backslash if backslash >= 0 else err.pos,
    )


def classify_token(src: str, pos: Pos, end: Pos, key: str) -> Value:
    """Classify an unquoted token whole: number, then ``true``/``false``/``null``, then atom."""
    token = src[pos:end]
    if token[0] in NUMBER_START:
        number = NUMBER_RE.fullmatch(token)
        if number is not None:
            if number.group(1) is None and number.group(2) is None:
                try:
                    return int(token)
                except ValueError:  # more digits than int() converts
                    raise DSLSyntaxError(f"integer {shorten(token)} is too long", src, pos) from None
            value = float(token)
            if not math.isfinite(value):
                raise DSLSyntaxError(f"number {shorten(token)} is out of range", src, pos) from None
            return value
    if token in LITERALS:
        return LITERALS[token]
    if ATOM_RE.fullmatch(token) is not None:
        return token
    bad = next(i for i, char in enumerate(token) if char not in ATOM_CHARS)
    raise DSLSyntaxError(
        f"invalid atom {shorten(token)} for the key {key!r}: {token[bad]!r} is not allowed in an atom "
        f"[A-Za-z0-9_.:/+-]+; write the value as a JSON string",
        src,
        pos + bad,
    )
