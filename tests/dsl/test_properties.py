"""Property tests: random valid proposals round-trip; arbitrary strings only ever raise DSLSyntaxError."""
from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gencoord_env import dsl
from gencoord_env.catalog import CATALOG
from gencoord_env.dsl import DSLSyntaxError, PeerRequest, Proposal, Task
from gencoord_env.dsl import parser
from gencoord_env.dsl.parser import parse_full
from gencoord_env.dsl.serializer import canonical_items, format_value
from gencoord_env.dsl.syntax import KEY_ALIASES

settings.register_profile("dsl", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("dsl")

ATOMS = st.from_regex(r"[A-Za-z0-9_.:/+\-]{1,12}", fullmatch=True)
KEYS = st.one_of(
    st.sampled_from([*CATALOG.key_order, "ticks"]),
    st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,8}", fullmatch=True).filter(lambda key: key not in KEY_ALIASES),
)
TEXT = st.text(st.characters(exclude_categories=()), max_size=12)  # includes control chars and surrogates
VALUES = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    TEXT,
    ATOMS,
    st.sampled_from(["true", "null", "1", "1.0", "-", "-0", "01", "", " ", ">", '"', "a,b", "a)b", "\\"]),
)
TASKS = st.builds(Task, st.sampled_from(CATALOG.skill_names), st.dictionaries(KEYS, VALUES, max_size=6))
PATHS = st.lists(TASKS, min_size=1, max_size=5).map(tuple)
TARGETS = ATOMS.filter(lambda atom: atom != "-")
REQUESTS = st.one_of(st.just(()), st.builds(lambda target, plan: (PeerRequest(target, plan),), TARGETS, PATHS))
PROPOSALS = st.builds(Proposal, st.one_of(st.just(()), PATHS), REQUESTS)


def typed(proposal: Proposal) -> Any:
    """The proposal with every value paired with its type, so that 1 == 1.0 == True cannot hide a change."""

    def path(tasks: tuple[Task, ...]) -> Any:
        return [(t.skill, sorted((k, type(v).__name__, repr(v)) for k, v in t.args.items())) for t in tasks]

    return (path(proposal.self_plan), [(r.target, path(r.requested_plan)) for r in proposal.peer_requests])


def rule_by_rule(text: str) -> Proposal:
    """``parse`` with the quote-free argument shortcut switched off: every argument through ``parse_arg``."""
    shortcut = parser.parse_simple_args
    parser.parse_simple_args = lambda body: None
    try:
        return parse_full(text)
    finally:
        parser.parse_simple_args = shortcut


@given(PROPOSALS)
def test_format_parse_round_trip(proposal: Proposal) -> None:
    text = dsl.format(proposal)
    back = dsl.parse(text)
    assert back == proposal
    assert typed(back) == typed(proposal)
    assert dsl.format(back) == text
    lines = text.split("\n")
    assert len(lines) == 2 and lines[0].startswith("SELF ") and lines[1].startswith("REQ ")
    assert text.isascii() and text == text.strip()
    assert rule_by_rule(text) == back


@given(PROPOSALS)
def test_json_round_trip(proposal: Proposal) -> None:
    text = dsl.to_json(proposal)
    back = dsl.from_json(text)
    assert back == proposal and typed(back) == typed(proposal)
    assert dsl.to_json(back) == text and text.isascii()
    assert dsl.parse(dsl.format(back)) == proposal


@st.composite
def noncanonical(draw: st.DrawFn, proposal: Proposal) -> str:
    """A tolerated non-canonical spelling: shuffled args, aliases, spaces around '>' and after commas."""

    def task(t: Task) -> str:
        items = draw(st.permutations(canonical_items(t)))
        parts = []
        for key, value in items:
            aliases = [alias for alias, canonical in KEY_ALIASES.items() if canonical == key]
            spelled = draw(st.sampled_from([key, *aliases]))
            parts.append(f"{spelled}={format_value(value)}")
        separators = [draw(st.sampled_from([",", ", ", ",   "])) for _ in parts[1:]]
        body = parts[0] if parts else ""
        for separator, part in zip(separators, parts[1:]):
            body += separator + part
        return f"{t.skill}({body})"

    def path(tasks: tuple[Task, ...]) -> str:
        out = task(tasks[0])
        for t in tasks[1:]:
            out += draw(st.sampled_from([" > ", ">", "  >", ">   "])) + task(t)
        return out

    spaces = st.sampled_from([" ", "  "])
    self_line = "SELF" + draw(spaces) + (path(proposal.self_plan) if proposal.self_plan else "-")
    if proposal.peer_requests:
        request = proposal.peer_requests[0]
        req_line = "REQ" + draw(spaces) + request.target + draw(spaces) + path(request.requested_plan)
    else:
        req_line = "REQ" + draw(spaces) + "-"
    return self_line + "\n" + req_line + draw(st.sampled_from(["", "\n"]))


@given(st.data())
def test_noncanonical_spellings_parse_to_the_same_proposal(data: st.DataObject) -> None:
    proposal = data.draw(PROPOSALS)
    text = data.draw(noncanonical(proposal))
    assert dsl.parse(text) == proposal
    assert rule_by_rule(text) == proposal


def check_only_syntax_errors(text: str) -> None:
    try:
        full = parse_full(text)
    except DSLSyntaxError as error:
        assert 0 <= error.offset <= len(text)
        assert error.line == text.count("\n", 0, error.offset) + 1
        try:
            rule_by_rule(text)
        except DSLSyntaxError as again:
            assert str(again) == str(error)  # the argument shortcut never changes an error
        else:
            raise AssertionError("the rules without the argument shortcut accepted what parse rejected")
        return
    assert typed(rule_by_rule(text)) == typed(full)  # the argument shortcut builds the same values
    assert dsl.parse(dsl.format(full)) == full


EDIT_CHARS = st.sampled_from(list('"(),=> \n\r\t\\-.:_aZ09SELFREQ{}[]\x00\u00e9'))


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = dsl.format(draw(PROPOSALS))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        at = draw(st.integers(min_value=0, max_value=len(text)))
        kind = draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        char = draw(st.one_of(EDIT_CHARS, st.characters()))
        if kind == "insert":
            text = text[:at] + char + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + 1 :]
        elif kind == "replace":
            text = text[:at] + char + text[at + 1 :]
        else:
            text = text[:at] + text[at : at + 8] + text[at:]
    return text


@settings(max_examples=300)
@given(mutated())
def test_mutated_records_raise_only_syntax_errors(text: str) -> None:
    check_only_syntax_errors(text)


@given(st.text())
def test_random_text_raises_only_syntax_errors(text: str) -> None:
    check_only_syntax_errors(text)
    check_only_syntax_errors("SELF " + text + "\nREQ -")
    check_only_syntax_errors("SELF -\nREQ agent_b control.wait(x=" + text + ")")


@given(st.one_of(st.text(), PROPOSALS.map(dsl.to_json)), st.integers(min_value=0, max_value=200), EDIT_CHARS)
def test_from_json_raises_only_syntax_errors(text: str, at: int, char: str) -> None:
    for candidate in (text, text[:at] + char + text[at:], text[:at] + text[at + 1 :]):
        try:
            proposal = dsl.from_json(candidate)
        except DSLSyntaxError as error:
            assert 0 <= error.offset <= len(candidate)
        else:
            assert dsl.from_json(dsl.to_json(proposal)) == proposal
