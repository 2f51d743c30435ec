"""Every surface reads any text: a ``Proposal`` or ``DSLSyntaxError``, nothing else, whatever the characters."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gencoord_env import dsl
from gencoord_env.dsl import DSLSyntaxError
from gencoord_env.envs.gencoord.surfaces import SURFACES
from gencoord_env.tasks import references as R
from gencoord_env.tasks.pools import pool_episodes
from gencoord_env.types import Proposal
from hostile import STRINGS

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=300)
_EPISODE = pool_episodes("heldout", 0)[0]
#: a reference record of each surface, so that spliced junk lands inside records the surface can read
RECORDS = {name: s.write(R.sender_initial(_EPISODE)) for name, s in SURFACES.items()}


def _read(surface: str, text: str, max_requests: int) -> None:
    try:
        assert isinstance(SURFACES[surface].read(text, max_requests), Proposal)
    except DSLSyntaxError:
        pass


@pytest.mark.parametrize("surface", sorted(SURFACES))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_text_is_a_proposal_or_a_syntax_error(surface: str, data: st.DataObject) -> None:
    record = RECORDS[surface]
    spliced = st.builds(lambda k, junk: record[:k] + junk + record[k:], st.integers(0, len(record)), ANY_TEXT)
    text = data.draw(st.one_of(ANY_TEXT, spliced))
    _read(surface, text, data.draw(st.sampled_from([1, 2, 4])))


@pytest.mark.parametrize("surface", sorted(SURFACES))
@pytest.mark.parametrize("text", STRINGS, ids=range(len(STRINGS)))
def test_hostile_strings(surface: str, text: str) -> None:
    _read(surface, text, 1)


def test_the_reference_records_read_back() -> None:
    for name, text in RECORDS.items():
        assert SURFACES[name].read(text) == R.sender_initial(_EPISODE), name
    assert dsl.parse(RECORDS["dsl"]) == R.sender_initial(_EPISODE)
