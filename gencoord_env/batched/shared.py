"""One game tree per process for equal env arguments, and complete trees read from disk once computed.

``shared_tree`` builds the env (``parallel_env(backend="sim", actions="menu", infos="numbers", ...)``, wrapped
in the interventions named) and its ``GameTree`` once per process: runs that play the same env (seeds of a
sweep, the ippo and mappo runs of one menu) compute each node once between them. With ``complete=True`` the
tree holds every node its episodes reach through unmasked slots before it is returned: read from the per-user
store (``gencoord_env.batched.store``) when this package's code computed it before, else computed by the env
(``GameTree.expand_all``) and written there for the next process.
"""
from __future__ import annotations

from typing import Any

from gencoord_env.batched import store
from gencoord_env.batched.tree import GameTree
from gencoord_env.caches import cache


def shared_tree(interventions: tuple[str, ...] = (), episodes: int | None = None, state: bool = False,
                complete: bool = False, **env_kwargs: Any) -> GameTree:
    """The ``GameTree`` of ``parallel_env(backend="sim", actions="menu", infos="numbers", **env_kwargs)`` wrapped in
    the ``interventions`` named (``gencoord_env.wrappers.INTERVENTIONS``, innermost first, default arguments),
    one per process for equal arguments; ``complete``: every node reachable through unmasked slots computed
    (or read from the store) first. ``caches.clear()`` forgets them (not the store).

    >>> shared_tree(pool="heldout", menu="branches") is shared_tree(menu="branches", pool="heldout")
    True
    """
    return _shared(tuple(interventions), episodes, bool(state), bool(complete), tuple(sorted(env_kwargs.items())))


@cache(maxsize=32)
def _shared(interventions: tuple[str, ...], episodes: int | None, state: bool, complete: bool,
            env_kwargs: tuple[tuple[str, Any], ...]) -> GameTree:
    from gencoord_env.envs.gencoord_v0 import parallel_env
    from gencoord_env.wrappers import apply

    env = parallel_env(**{"backend": "sim", "actions": "menu", "infos": "numbers", **dict(env_kwargs)})
    tree = GameTree(apply(env, [{"name": name} for name in interventions]), episodes=episodes, state=state)
    if complete:
        path = store.folder() / f"{store.key(interventions=interventions, episodes=episodes, state=state, env=env_kwargs)}.npz"
        with store.computing(path):  # processes that ask for the same tree at once: one computes, the others read
            if not store.load(tree, path):
                tree.expand_all()
                if store.storable(tree):
                    store.save(tree, path)
    return tree


__all__ = ["shared_tree"]
