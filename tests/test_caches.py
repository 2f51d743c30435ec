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
    """functools caches, memo fields written into frozen values (``cached_property``) and id()-keyed dicts are
    how hidden state crept in; all memos go through caches."""
    offenders = []
    for root in ROOTS:
        for path in root.rglob("*.py"):
            if path.name == "caches.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr in ("lru_cache", "cached_property") or \
                   isinstance(node, ast.alias) and node.name in ("lru_cache", "cached_property"):
                    offenders.append(f"{path}:{node.lineno}: {getattr(node, 'attr', None) or node.name}")
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "id":
                    offenders.append(f"{path}:{node.lineno}: id(...)")
    assert offenders == []


def test_a_used_episode_holds_only_its_fields_and_clearing_regrounds_it() -> None:
    """An episode's derived values live in the registered memos, not in the frozen value: after every one has
    been asked for, the episode holds its declared fields only; ``clear()`` empties those memos and the values
    come back equal."""
    import dataclasses

    from gencoord_env.tasks import pool_episodes

    for ep in (pool_episodes("heldout")[0], pool_episodes("teams")[4], pool_episodes("goal_capability")[1]):
        derived = (ep.nodes, ep.world, ep.scope(ep.first), ep.terminal(), ep.handoff_edges, ep.source_stock,
                   ep.references, ep.public_stations, ep.branch_nodes(ep.binding), ep.node(ep.nodes[0].id),
                   ep.peers_of, ep.message_edges, ep.private_fields(ep.first))
        assert set(vars(ep)) == {f.name for f in dataclasses.fields(ep)}
        assert caches.stats()["gencoord_env.tasks.episode._world_memo"].currsize > 0
        caches.clear()
        assert caches.stats()["gencoord_env.tasks.episode._world_memo"].currsize == 0
        again = (ep.nodes, ep.world, ep.scope(ep.first), ep.terminal(), ep.handoff_edges, ep.source_stock,
                 ep.references, ep.public_stations, ep.branch_nodes(ep.binding), ep.node(ep.nodes[0].id),
                 ep.peers_of, ep.message_edges, ep.private_fields(ep.first))
        assert again == derived


def test_stats_name_every_registered_cache() -> None:
    summarize(rollout(gencoord_env.parallel_env(backend="sim", pool="heldout"), make_policy("rule"), episodes=4))
    names = set(caches.stats())
    assert {"gencoord_env.tasks.contexts._static", "dsl.parser.tokens", "tasks.context_view.compose"} <= names


def test_parsing_many_large_inputs_keeps_every_memo_within_its_byte_budget() -> None:
    """Agent text is a memo key: 1 MB inputs are not kept, and many medium ones push out the oldest."""
    from gencoord_env import dsl
    from gencoord_env.dsl import parser

    caches.clear()
    for i in range(40):  # 1 MB atoms: over the entry bound, parsed but never kept
        proposal = dsl.parse(f"SELF resource.obtain(q=1,item=x{i}_{'a' * (1 << 20)})\nREQ -")
        assert len(proposal.self_plan[0].args["item"]) > 1 << 20
    records = caches.stats()["dsl.parser.records"]
    assert records.currsize == 0 and records.bytes == 0
    assert caches.stats()["dsl.parser.tokens"].bytes < 1000  # the token "1" only
    budget = parser._RECORDS.max_bytes
    size = parser._RECORDS.max_entry_bytes // 4  # each record kept; together far over the budget
    n = 3 * budget // size
    for i in range(n):
        dsl.parse(f"SELF resource.obtain(q=1,item=y{i}_{'b' * (size // 2 - 64)})\nREQ -")
    for name, info in caches.stats().items():
        if info.max_bytes is not None:
            assert 0 <= info.bytes <= info.max_bytes, (name, info)
    records = caches.stats()["dsl.parser.records"]
    assert records.bytes > budget - 2 * size and records.currsize < n  # full, the oldest pushed out
    assert records.bytes == sum(parser._RECORDS.costs.values())
    newest = f"SELF resource.obtain(q=1,item=y{n - 1}_{'b' * (size // 2 - 64)})\nREQ -"
    assert newest in parser._RECORDS and dsl.parse(newest) is parser._RECORDS[newest]
    caches.clear()
    assert caches.stats()["dsl.parser.records"].bytes == 0


def test_a_memo_drops_its_oldest_entries_to_stay_within_entries_and_bytes() -> None:
    memo = caches.Memo("tests.memo", maxsize=3, max_bytes=1000, max_entry_bytes=400)
    try:
        assert memo.put("a", 1, size=300) == 1 and memo.put("b", 2, size=300) == 2
        memo.put("c", 3, size=300)
        memo.put("d", 4, size=300)  # 1,200 bytes would be over: "a" goes
        assert list(memo) == ["b", "c", "d"] and memo.bytes == 900
        memo.put("e", 5, size=10)  # three entries at most: "b" goes
        assert list(memo) == ["c", "d", "e"] and memo.bytes == 610
        assert memo.put("f", 6, size=401) == 6 and "f" not in memo  # over the entry bound: not kept
        memo.put("c", 7, size=10)  # already held: unchanged
        assert memo["c"] == 3 and memo.bytes == 610
        assert caches.stats()["tests.memo"] == caches.CacheStats(-1, -1, 3, 3, 610, 1000)
        assert caches.entry_bytes(("k", "x" * 1000)) > 1000
    finally:
        caches._REGISTRY.remove(memo)
