"""The suite's xdist groups (tests/conftest.py): a test file that uses a shared expensive fixture runs on its
group's worker, so the fixture is built once per run instead of once per worker that meets it."""
from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _shared_fixtures() -> dict[str, tuple[str, ...]]:
    """tests/conftest.py's ``SHARED_FIXTURES``, read from its source (importing it again would run its set-up, and
    under a whole run the module named ``conftest`` may be a subfolder's)."""
    tree = ast.parse((TESTS / "conftest.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "SHARED_FIXTURES":
            assert node.value is not None
            return ast.literal_eval(node.value)  # type: ignore[no-any-return]
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SHARED_FIXTURES" for t in node.targets):
            return ast.literal_eval(node.value)  # type: ignore[no-any-return]
    raise AssertionError("tests/conftest.py has no SHARED_FIXTURES")


def _users(fixture: str) -> set[str]:
    """Test files (relative to tests/) with a test or fixture that takes ``fixture`` as an argument."""
    pattern = re.compile(rf"^def \w+\([^)]*\b{fixture}\b", re.M)
    return {p.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py") if pattern.search(p.read_text(encoding="utf-8"))}


def test_every_file_using_the_built_data_sets_shares_their_worker() -> None:
    group = set(_shared_fixtures()["train-data"])
    users = _users("data_dir")
    assert users and users <= group, sorted(users - group)
