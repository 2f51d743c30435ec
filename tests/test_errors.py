"""The package's errors come from one small hierarchy (``gencoord_env.errors``), and the code keeps to it: no bare
``ValueError``, no data error raised as ``ImportError`` or ``AssertionError``, and every "did you mean" from
``gencoord_env.suggest`` rather than a hand-written ``difflib.get_close_matches``."""
from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import pytest

import gencoord_env
from gencoord_env.catalog import CatalogError
from gencoord_env.commands.arenas import EpisodeLost
from gencoord_env.commands.replay import ReplayError
from gencoord_env.dsl import DSLSyntaxError, parse
from gencoord_env.errors import DataError, Fault, GencoordError, UnknownName, UsageError
from gencoord_env.limits import LimitsError
from gencoord_env.tasks.prior import prior
from gencoord_env.world.minecraft.errors import MinecraftBackendError, SidecarDied
from gencoord_env.world.recipes import RecipeTableError, load_recipes
from gencoord_env.world.sim import WorldSpecError
from gencoord_env.world.types import OpTableError

REPO = Path(__file__).resolve().parents[1]
#: The folders the rules below hold for: the library and its commands, the agents, training.
CHECKED = (REPO / "gencoord_env", REPO / "agents", REPO / "train")


def test_the_hierarchy_keeps_the_builtin_bases() -> None:
    assert issubclass(UsageError, GencoordError) and issubclass(UsageError, ValueError)
    assert issubclass(DataError, GencoordError) and issubclass(DataError, ValueError)
    assert issubclass(Fault, GencoordError) and issubclass(Fault, RuntimeError)
    assert issubclass(UnknownName, UsageError) and issubclass(UnknownName, KeyError)
    for usage in (DSLSyntaxError, WorldSpecError):
        assert issubclass(usage, UsageError)
    for data in (CatalogError, RecipeTableError, OpTableError, LimitsError, ReplayError):
        assert issubclass(data, DataError)
    for fault in (MinecraftBackendError, SidecarDied, EpisodeLost):
        assert issubclass(fault, Fault)


def test_an_unknown_name_lists_the_names_and_suggests_one() -> None:
    with pytest.raises(UnknownName, match=re.escape(
            "unknown pool 'heldot'; expected one of train, heldout, request, horizon, crossproduct")) as info:
        gencoord_env.parallel_env(backend="sim", pool="heldot")
    e = info.value
    assert (e.what, e.value, e.suggestion) == ("pool", "heldot", "heldout") and "heldout" in e.names
    assert str(e).endswith("(did you mean 'heldout'?)")  # its text, not a KeyError's quoted repr
    with pytest.raises(KeyError):  # a lookup by name keeps its usual except
        prior().template("chest_abb")
    copy = pickle.loads(pickle.dumps(e))
    assert type(copy) is UnknownName and str(copy) == str(e) and copy.suggestion == "heldout"


def test_a_large_set_keeps_its_own_message_and_pickles() -> None:
    with pytest.raises(UnknownName, match=re.escape("no craftable item named 'stik'; did you mean 'stick'?")) as info:
        load_recipes().craft_plan("stik", 1)
    copy = pickle.loads(pickle.dumps(info.value))
    assert str(copy) == str(info.value) and copy.suggestion == "stick"


def test_a_bad_record_is_a_usage_error_and_a_bad_option_too() -> None:
    with pytest.raises(UsageError, match=re.escape("expected")):
        parse("SELF craft.item(q=1")
    with pytest.raises(UsageError, match=re.escape("max_cycles must be a positive int or None, got 0")):
        gencoord_env.parallel_env(backend="sim", max_cycles=0)


def _raises(path: Path) -> list[tuple[int, str]]:
    """(line, exception name) of every ``raise Name(...)`` in a file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name):
            out.append((node.lineno, node.exc.func.id))
    return out


def _files() -> list[Path]:
    """The checked folders' modules, each once (``gencoord_env/agents`` and ``gencoord_env/train`` are links)."""
    found = {p.resolve() for root in CHECKED for p in root.rglob("*.py") if "node_modules" not in p.parts}
    return sorted(p for p in found if p.is_relative_to(REPO))


def test_no_bare_value_error_and_no_data_error_as_import_or_assertion_error() -> None:
    """A ``ValueError`` is a ``UsageError`` or a ``DataError``; ``ImportError`` is raised only for a missing
    package (re-raised from the import that failed) and ``AssertionError`` only for the package's own bugs."""
    bare = [f"{p.relative_to(REPO)}:{line}" for p in _files() for line, name in _raises(p) if name == "ValueError"]
    assert not bare, f"raise UsageError or DataError (gencoord_env.errors) instead: {bare}"
    for p in _files():
        text = p.read_text(encoding="utf-8")
        for line, name in _raises(p):
            if name == "ImportError":
                statement = text.splitlines()[line - 1:line + 2]
                assert any("pip install" in s or "changed shape" in s or "changed (" in s or "differ from" in s
                           for s in statement), f"{p.relative_to(REPO)}:{line}: an ImportError that is no missing package"
            if name == "AssertionError":
                statement = " ".join(text.splitlines()[line - 1:line + 2])
                assert not re.search(r"\.json|table|catalog|data/", statement), \
                    f"{p.relative_to(REPO)}:{line}: a data error raised as AssertionError; raise a DataError"


def test_did_you_mean_comes_from_one_helper() -> None:
    hand_written = [f"{p.relative_to(REPO)}" for p in _files() if p.name != "suggest.py"
                    and "get_close_matches" in p.read_text(encoding="utf-8")]
    assert not hand_written, f"use gencoord_env.suggest.close_match(es) or errors.UnknownName: {hand_written}"
