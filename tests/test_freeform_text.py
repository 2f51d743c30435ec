"""The free-form extractor reads any text: it never raises but ``DSLSyntaxError`` (from ``parse``)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gencoord_env import freeform
from gencoord_env.dsl import DSLSyntaxError
from gencoord_env.types import PeerRequest, Proposal, Task

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=200)  # surrogates included
OPENING = freeform.say(Proposal((Task("resource.obtain", {"q": 3, "item": "oak_planks"}),),
                                (PeerRequest("agent_b", (Task("resource.obtain", {"q": 1, "item": "stick"}),)),)))
#: valid utterances with arbitrary text spliced in: reaches the clause patterns, not just the sentence split
SPLICED = st.builds(lambda k, junk: OPENING[:k] + junk + OPENING[k:], st.integers(0, len(OPENING)), ANY_TEXT)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(ANY_TEXT, SPLICED))
def test_any_text_is_read_without_raising(text: str) -> None:
    said = freeform.statements(text)
    assert all(s.kind in ("self", "request", "unreadable") for s in said)
    found = freeform.extract([("agent_a", text), ("agent_b", text)], "agent_a", "agent_b")
    assert found is None or isinstance(found.receiver, Proposal)
    try:
        assert isinstance(freeform.parse(text), Proposal)
    except DSLSyntaxError:
        pass


def test_a_valid_utterance_still_parses() -> None:
    assert freeform.parse(OPENING).peer_requests[0].requested_plan[0].args["item"] == "stick"


@pytest.mark.parametrize("number", ["٣", "３", "३", "9" * 5000])
def test_a_quantity_is_ascii_digits_that_int_converts(number: str) -> None:
    assert freeform.read_task(f"take {number} oak_planks") is None
    [said] = freeform.statements(f"I will take {number} oak_planks.")
    assert said.kind == "unreadable"
    with pytest.raises(DSLSyntaxError, match="is not in the controlled clause table"):
        freeform.parse(f"I will take {number} oak_planks.")


def test_a_lone_surrogate_is_text() -> None:
    assert freeform.statements("I will take 3\ud800 oak_planks.")[0].kind == "unreadable"
    assert freeform.parse("\ud800. I will take 3 oak_planks.").self_plan == (Task("resource.obtain", {"q": 3, "item": "oak_planks"}),)


def test_parse_takes_at_most_max_requests() -> None:
    two = OPENING + " agent_c, please take 1 stick."
    with pytest.raises(DSLSyntaxError, match=r"at most 1 '<agent>, please \.\.\.' request\(s\); found 2"):
        freeform.parse(two)
    assert [r.target for r in freeform.parse(two, max_requests=2).peer_requests] == ["agent_b", "agent_c"]
