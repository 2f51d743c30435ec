"""Records of a team: the SELF line and several REQ lines (``max_requests``), golden files and properties.

The two-line record is the special case ``max_requests=1``: every record it reads reads the same under a
larger limit, and every text with several REQ lines is refused under it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gencoord_env import dsl
from gencoord_env.dsl import DSLSyntaxError, PeerRequest, Proposal
from gencoord_env.dsl.parser import parse_full

from test_golden import build_proposal, read_text
from test_properties import PATHS, PROPOSALS, TARGETS, typed

TEAM = Path(__file__).parent / "golden" / "teams"
VALID = sorted((TEAM / "valid").glob("*.dsl"))
INVALID = sorted((TEAM / "invalid").glob("*.dsl"))
LIMIT = 4  # a team of five


@pytest.mark.parametrize("source", VALID, ids=lambda p: p.stem)
def test_valid_team_golden(source: Path) -> None:
    expected = json.loads(source.with_suffix(".json").read_text(encoding="utf-8"))
    proposal = dsl.parse(read_text(source), max_requests=LIMIT)
    assert proposal == build_proposal(expected["proposal"])
    canonical = dsl.format(proposal, max_requests=LIMIT)
    assert canonical == expected["canonical"]
    assert dsl.parse(canonical, max_requests=LIMIT) == proposal
    assert dsl.from_json(dsl.to_json(proposal, max_requests=LIMIT), max_requests=LIMIT) == proposal
    targets = [r.target for r in proposal.peer_requests]
    assert targets == sorted(targets)  # one canonical order: by target


@pytest.mark.parametrize("source", INVALID, ids=lambda p: p.stem)
def test_invalid_team_golden(source: Path) -> None:
    with pytest.raises(DSLSyntaxError) as caught:
        dsl.parse(read_text(source), max_requests=LIMIT)
    assert str(caught.value) == source.with_suffix(".error").read_text(encoding="utf-8")


def test_golden_team_directories_are_populated() -> None:
    assert len(VALID) >= 4 and len(INVALID) >= 6


def test_the_two_line_limit_refuses_a_second_request_line_as_before() -> None:
    text = "SELF -\nREQ agent_b control.wait()\nREQ agent_c control.wait()"
    with pytest.raises(DSLSyntaxError, match=re.escape("a record has exactly two lines")):
        dsl.parse(text)
    assert len(dsl.parse(text, max_requests=2).peer_requests) == 2
    with pytest.raises(ValueError, match=re.escape("the REQ line carries at most one peer request; got 2")):
        dsl.format(dsl.parse(text, max_requests=2))
    with pytest.raises(ValueError, match=re.escape("a record carries at most 2 peer requests; got 3")):
        dsl.format(Proposal((), tuple(PeerRequest(t, PATH) for t in "abc")), max_requests=2)
    with pytest.raises(DSLSyntaxError, match=re.escape("$.peer_requests: at most 2 peer requests; found 3")):
        dsl.from_json('{"self_plan":[],"peer_requests":[1,2,3]}', max_requests=2)


PATH = dsl.parse("SELF control.wait()\nREQ -").self_plan


def test_two_requests_to_one_peer_are_refused_by_every_surface() -> None:
    twice = Proposal((), (PeerRequest("agent_b", PATH), PeerRequest("agent_b", PATH)))
    with pytest.raises(ValueError, match="two peer requests to 'agent_b'"):
        dsl.format(twice, max_requests=3)
    with pytest.raises(ValueError, match="two peer requests to 'agent_b'"):
        dsl.to_json(twice, max_requests=3)
    request = '{"target":"agent_b","requested_plan":[{"skill":"control.wait","args":{}}]}'
    with pytest.raises(DSLSyntaxError, match=re.escape("$.peer_requests[1].target: a second request to 'agent_b'")):
        dsl.from_json('{"self_plan":[],"peer_requests":[' + request + "," + request + "]}", max_requests=3)


def test_a_bad_limit_is_refused() -> None:
    for bad in (0, -1, 1.0, True):
        with pytest.raises(ValueError, match="max_requests must be a positive int"):
            dsl.parse("SELF -\nREQ -", max_requests=bad)  # type: ignore[arg-type]


TEAM_REQUESTS = st.lists(st.tuples(TARGETS, PATHS), max_size=LIMIT, unique_by=lambda r: r[0]).map(
    lambda pairs: tuple(PeerRequest(t, p) for t, p in pairs))
TEAM_PROPOSALS = st.builds(Proposal, st.one_of(st.just(()), PATHS), TEAM_REQUESTS)


@settings(max_examples=150)
@given(TEAM_PROPOSALS)
def test_team_records_round_trip(proposal: Proposal) -> None:
    text = dsl.format(proposal, max_requests=LIMIT)
    back = dsl.parse(text, max_requests=LIMIT)
    assert back == proposal and typed(back) == typed(proposal)
    assert dsl.format(back, max_requests=LIMIT) == text
    assert parse_full(text, LIMIT) == back
    lines = text.split("\n")
    assert len(lines) == 1 + max(1, len(proposal.peer_requests)) and text.isascii() and text == text.strip()
    assert dsl.from_json(dsl.to_json(proposal, max_requests=LIMIT), max_requests=LIMIT) == proposal


@settings(max_examples=100)
@given(TEAM_PROPOSALS, st.randoms(use_true_random=False))
def test_request_lines_in_any_order_read_as_one_proposal(proposal: Proposal, rng) -> None:  # type: ignore[no-untyped-def]
    lines = dsl.format(proposal, max_requests=LIMIT).split("\n")
    head, requests = lines[0], lines[1:]
    rng.shuffle(requests)
    assert dsl.parse("\n".join([head, *requests]), max_requests=LIMIT) == proposal


@given(PROPOSALS)
def test_every_two_line_record_reads_the_same_under_a_team_limit(proposal: Proposal) -> None:
    text = dsl.format(proposal)
    assert dsl.parse(text, max_requests=LIMIT) == dsl.parse(text)
    assert dsl.format(proposal, max_requests=LIMIT) == text
    assert dsl.to_json(proposal, max_requests=LIMIT) == dsl.to_json(proposal)
