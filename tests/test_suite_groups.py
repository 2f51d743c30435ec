"""The suite's xdist groups (tests/conftest.py): a test file that uses a shared expensive fixture runs on its
group's worker, so the fixture is built once per run instead of once per worker that meets it."""
from __future__ import annotations

import re
from pathlib import Path

from conftest import SHARED_FIXTURES

TESTS = Path(__file__).resolve().parent


def _users(fixture: str) -> set[str]:
    """Test files (relative to tests/) with a test or fixture that takes ``fixture`` as an argument."""
    pattern = re.compile(rf"^def \w+\([^)]*\b{fixture}\b", re.M)
    return {p.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py") if pattern.search(p.read_text(encoding="utf-8"))}


def test_every_file_using_the_built_data_sets_shares_their_worker() -> None:
    users = _users("data_dir")
    assert users and users <= set(SHARED_FIXTURES["train-data"]), sorted(users - set(SHARED_FIXTURES["train-data"]))
