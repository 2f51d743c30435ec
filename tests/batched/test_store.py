"""Complete game trees on disk: read back equal to what the env computed, named by the env's arguments and the
package's code, and never read for another tree."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gencoord_env import caches
from gencoord_env.batched import BatchedEngine, GameTree, shared_tree, store

EPISODES = 6  # the first episodes of the pool: a complete tree of a few hundred nodes


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GENCOORD_TREE_STORE", str(tmp_path / "trees"))
    caches.clear()  # the process's shared trees: each test starts with none
    yield tmp_path / "trees"
    caches.clear()


def complete(**kwargs: object) -> GameTree:
    return shared_tree(pool="heldout", episodes=EPISODES, observations="bag", state=True, complete=True, **kwargs)


def assert_same(a: GameTree, b: GameTree) -> None:
    assert len(a) == len(b) and np.array_equal(a.root_nodes, b.root_nodes)
    for name, values in a.arrays.items():
        assert np.array_equal(values[: len(a)], b.arrays[name][: len(b)]), name
    for name in ("observations", "masks", "states"):
        rows_a, rows_b = getattr(a, name), getattr(b, name)
        assert rows_a.parts == rows_b.parts and len(rows_a) == len(rows_b), name
        for part in rows_a.parts:
            table_a, table_b = rows_a.table(part), rows_b.table(part)
            assert table_a.dtype == table_b.dtype and np.array_equal(table_a, table_b), (name, part)


def test_a_complete_tree_read_back_is_the_one_the_env_computed(folder: Path) -> None:
    computed = complete()
    assert computed.replays > 0 and len(list(folder.glob("*.npz"))) == 1
    # every node reachable through unmasked slots is there: no valid choice leads to an unknown child
    deciding = computed.turn >= 0
    nodes, columns = computed.choices(np.flatnonzero(deciding))
    assert (computed.child[nodes, columns] >= 0).all()
    caches.clear()
    loaded = complete()
    assert loaded is not computed and loaded.replays == computed.replays and loaded.restored and not computed.restored
    assert_same(computed, loaded)
    # the engine steps a loaded tree as the computed one, and a masked slot is still computed by the env
    engines = [BatchedEngine(t, 32, seed=5) for t in (computed, loaded)]
    for step in range(6):
        actions = np.random.default_rng(step).integers(0, computed.slots + 1, size=32)
        a, b = (engine.step(actions) if step else engine.reset() for engine in engines)
        for x, y in zip(a, b):
            assert np.array_equal(x, y)
    assert loaded.replays > computed.replays or len(loaded) == len(computed)


def test_the_name_holds_the_arguments_and_the_packages_code(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = {store.key(env=(("pool", "heldout"),)), store.key(env=(("pool", "horizon"),)),
             store.key(env=(("pool", "heldout"),), state=True)}
    assert len(names) == 3
    before = store.key(env=(("pool", "heldout"),))
    monkeypatch.setattr(store, "source_digest", lambda: "another version of the package")
    assert store.key(env=(("pool", "heldout"),)) != before


def test_the_digest_reads_every_file_of_the_package_and_no_compiled_one(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "package"
    (package / "data").mkdir(parents=True)
    (package / "__pycache__").mkdir()
    (package / "env.py").write_text("MENU = 'default'\n")
    (package / "data" / "tasks.json").write_text("{}")
    monkeypatch.setattr(store, "_PACKAGE", package)

    def digest() -> str:
        caches.clear()
        return store.source_digest()

    first = digest()
    (package / "__pycache__" / "env.cpython-311.pyc").write_bytes(b"compiled")
    assert digest() == first
    (package / "data" / "tasks.json").write_text('{"templates": 9}')
    changed = digest()
    assert changed != first
    (package / "data" / "tasks.json").rename(package / "tasks.json")  # the same bytes under another name
    assert digest() not in (first, changed)


def test_a_file_of_another_tree_or_a_broken_one_is_not_read(folder: Path) -> None:
    computed = complete()
    path = next(folder.glob("*.npz"))
    other = GameTree(computed.env, episodes=EPISODES - 1, state=True)  # another shape: fewer episodes
    assert not store.load(other, path) and len(other) == 0
    path.write_bytes(path.read_bytes()[:1000])  # cut short
    fresh = GameTree(computed.env, episodes=EPISODES, state=True)
    assert not store.load(fresh, path) and len(fresh) == 0
    caches.clear()
    again = complete()  # computed again by the env, and written whole
    assert again.replays > 0
    assert_same(computed, again)
    caches.clear()
    assert_same(computed, complete())


def test_trees_with_text_observations_are_computed_but_not_kept(folder: Path) -> None:
    tree = shared_tree(pool="heldout", episodes=2, observations="text", complete=True)
    assert len(tree) > 2 and not store.storable(tree)
    assert not folder.exists() or not list(folder.glob("*.npz"))


def _ask(folder: str) -> bool:
    import os

    os.environ["GENCOORD_TREE_STORE"] = folder
    return shared_tree(pool="heldout", episodes=40, observations="bag", complete=True).restored


def test_processes_asking_for_one_tree_at_once_compute_it_once(folder: Path) -> None:
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(2) as pool:
        restored = pool.map(_ask, [str(folder)] * 2)
    assert sorted(restored) == [False, True]  # one computed it, the other waited and read its file
    assert len(list(folder.glob("*.npz"))) == 1
