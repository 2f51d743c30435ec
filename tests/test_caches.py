"""Every memo is registered in one place, and clearing them changes no result."""
from __future__ import annotations

import ast
from pathlib import Path

import gencoord_env
from gencoord_env import caches
from gencoord_env.agents import make_policy
from gencoord_env.agents.rollout import rollout, summarize

ROOTS = [Path(gencoord_env.__file__).parent, Path(gencoord_env.__file__).parent.parent / "agents",
         Path(gencoord_env.__file__).parent.parent / "train"]


def _outcomes() -> list[tuple[str, str]]:
    env = gencoord_env.parallel_env(backend="sim", pool="heldout")
    return [(r["episode_id"], str(r["outcome"])) for r in rollout(env, make_policy("rule"), episodes=24)]


def test_clearing_every_cache_changes_no_result() -> None:
    first = _outcomes()
    assert any(info[3] > 0 for info in caches.stats().values())
    caches.clear()
    assert all(info[3] == 0 for info in caches.stats().values())
    assert _outcomes() == first


def test_no_module_keeps_an_unregistered_memo() -> None:
    """functools caches and id()-keyed dicts are how hidden state crept in; all memos go through caches."""
    offenders = []
    for root in ROOTS:
        for path in root.rglob("*.py"):
            if path.name == "caches.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr in ("lru_cache",) or \
                   isinstance(node, ast.alias) and node.name in ("lru_cache",):
                    offenders.append(f"{path}: lru_cache")
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "id":
                    offenders.append(f"{path}:{node.lineno}: id(...)")
    assert offenders == []


def test_stats_name_every_registered_cache() -> None:
    summarize(rollout(gencoord_env.parallel_env(backend="sim", pool="heldout"), make_policy("rule"), episodes=4))
    names = set(caches.stats())
    assert {"gencoord_env.tasks.contexts._static", "dsl.parser.tokens", "agents.context_view.compose"} <= names
