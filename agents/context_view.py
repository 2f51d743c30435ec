"""Reading what a rule agent may use: its typed local context (``infos[agent]["context"]``).

Rule agents only read their own context: their private field, received messages and the public prior
as projected by the view. They never see the episode object or the hidden binding of the other role.
"""
from __future__ import annotations

from gencoord_env.caches import Memo
from gencoord_env.tasks.compose import order_nodes
from gencoord_env.tasks.contexts import Context, PriorView
from gencoord_env.types import Task


Paths = tuple[tuple[Task, ...], tuple[Task, ...]]

#: Composed paths by (rendered prior, binding, roles): the rendered text determines the prior view and
#: its hash is computed once per string, where hashing the view itself walks every node on each call.
_COMPOSED = Memo("agents.context_view.compose", maxsize=16384)


def compose(context: Context, binding: str, first_role: str, second_role: str) -> Paths:
    """Both role-local paths of ``binding`` from the public prior, ordered as the context's view allows."""
    key = (context.prior.text, binding, first_role, second_role)
    paths = _COMPOSED.get(key)
    if paths is None:
        paths = _COMPOSED.put(key, _compose(context.prior, binding, first_role, second_role))
    return paths  # type: ignore[no-any-return]


def _compose(prior: PriorView, binding: str, first_role: str, second_role: str) -> Paths:
    nodes = [n for n in prior.nodes if n.branch in (None, binding)]
    ordered = order_nodes(nodes, prior.view)  # type: ignore[arg-type]
    return (tuple(n.task for n in ordered if n.role == first_role),
            tuple(n.task for n in ordered if n.role == second_role))


def roles(context: Context) -> tuple[str, str]:
    """(first role, second role) names of this template's roles."""
    return context.prior.roles


def codebook(context: Context) -> tuple[str, ...]:
    return context.prior.codebook


__all__ = ["codebook", "compose", "roles"]
