"""Menu actions: the candidate records of a decision, built only from what the deciding agent may see.

With ``actions="menu"`` an agent acts by choosing one of a fixed number of slots (``Discrete(N)``); the
chosen record is written in the env's surface and goes through the same parse / check / resolve /
execute pipeline as free text. Candidates come from the agent's own context - the public prior's
branches and nodes (as its view shows them), the codebook, its received messages and its history -
never from the hidden fact (as TextWorld's admissible commands do for text games). Slots:

| stage | slot 0 | then |
| --- | --- | --- |
| sender / requester / centralized (a joint record) | the empty record ``SELF - / REQ -`` | for each codebook branch, every cut of its joint path: ``SELF`` the first k tasks, ``REQ <peer>`` the rest (k = 1 .. length - 1; the paper's cut is one of them) |
| single-step first decision | the empty record | for each branch, each of the agent's own tasks alone (``SELF <task> / REQ -``) |
| single-step ``sender_after_obtain`` | the empty record | as a joint record, over what is left after the executed tasks |
| receiver after the request | the empty record | the delivered request realized as the receiver's ``SELF`` (masked when none arrived), then each branch's receiver path |

Slots that a decision does not use are masked (``action_mask`` 0). ``N`` is the largest count any
template of the prior needs (``menu_size``). An agent that is not deciding gets a mask with slot 0 only;
its action is ignored.
"""
from __future__ import annotations

from collections.abc import Sequence

from gencoord_env.caches import Memo, cache
from gencoord_env.messages import RequestMessage
from gencoord_env.tasks.compose import order_nodes
from gencoord_env.tasks.contexts import Context, PriorNode, PriorView
from gencoord_env.tasks.episode import Cluster, Episode
from gencoord_env.tasks.prior import GOAL_CAPABILITY, Prior, prior
from gencoord_env.types import PeerRequest, Proposal, Task

EMPTY = Proposal((), ())

_JOINT_STAGES = frozenset({"sender_initial", "sender_after_obtain", "requester_initial", "requester_after_response", "centralized"})


def _branch_path(prior_view: PriorView, binding: str) -> tuple[tuple[Task, ...], tuple[Task, ...]]:
    """(first-role tasks, second-role tasks) of ``binding`` as the view orders them."""
    nodes: list[PriorNode] = [n for n in prior_view.nodes if n.branch in (None, binding)]
    ordered = order_nodes(nodes, prior_view.view)  # type: ignore[arg-type]
    first, second = prior_view.roles
    return (tuple(n.task for n in ordered if n.role == first), tuple(n.task for n in ordered if n.role == second))


def _cuts(path: Sequence[Task], peer: str) -> list[Proposal]:
    return [Proposal(tuple(path[:k]), (PeerRequest(peer, tuple(path[k:])),)) for k in range(1, len(path))]


def menu_key(context: Context) -> tuple[object, ...]:
    """What a decision's menu depends on: the rendered prior, the stage, who decides, history and requests."""
    return (context.prior.text, context.stage, context.route, context.agent, context.peer, len(context.history),
            tuple(m.payload for m in context.messages if isinstance(m, RequestMessage)))


def candidates(context: Context, key: tuple[object, ...] | None = None) -> tuple[Proposal | None, ...]:
    """The decision's candidate records in slot order (``None``: an unused slot), before padding."""
    key = key or menu_key(context)
    found = _MENUS.get(key)
    if found is None:
        found = _MENUS.put(key, _candidates(context))
    return found  # type: ignore[no-any-return]


_MENUS = Memo("envs.menu.candidates", maxsize=1 << 15)


def _candidates(context: Context) -> tuple[Proposal | None, ...]:
    view, stage, peer = context.prior, context.stage, context.peer
    out: list[Proposal | None] = [EMPTY]
    if stage == "receiver_after_request":
        request = context.request
        out.append(Proposal(request.requested_plan, ()) if request is not None else None)
        out += [Proposal(_branch_path(view, b)[1], ()) for b in view.codebook]
    elif stage == "sender_initial" and context.route == "single_step":
        for b in view.codebook:
            out += [Proposal((t,), ()) for t in _branch_path(view, b)[0]]
    elif stage in _JOINT_STAGES:
        done = len(context.history)
        for b in view.codebook:
            first, second = _branch_path(view, b)
            out += _cuts(first[done:] + second, peer)
    else:
        raise ValueError(f"stage {stage!r} has no menu (menus are for the structured surfaces)")
    return tuple(out)


@cache(maxsize=4)
def menu_size(p: Prior | None = None) -> int:
    """N: the most slots any decision of any template of the prior needs."""
    p = p or prior()
    largest = 1
    templates = [*p.templates.values(), p.goal_capability.template]
    for t in templates:
        binding = t.bindings[0]
        extra = {}
        if t.id == GOAL_CAPABILITY:
            gc = p.goal_capability
            extra = {"goal": gc.goals[0].id, "mode": next(iter(gc.modes))}
        ep = Episode(Cluster("menu", t.id, binding, t.quantities[0], p.variants[0].id, p.decoys[0].id, **extra), 0, p)
        paths = [_joint_length(ep, b) for b in t.bindings]
        joint = 1 + sum(max(0, n - 1) for n, _ in paths)
        single = 1 + sum(n_first for _, n_first in paths)
        receiver = 2 + len(t.bindings)
        largest = max(largest, joint, single, receiver)
    return largest


def _joint_length(ep: Episode, binding: str) -> tuple[int, int]:
    nodes = ep.branch_nodes(binding)
    return len(nodes), sum(1 for n in nodes if n.role == ep.roles[0])


__all__ = ["EMPTY", "candidates", "menu_key", "menu_size"]
