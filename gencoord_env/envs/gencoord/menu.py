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

This is the ``default`` menu (``parallel_env(menu="default")``). Its shortcut: the receiver's slot 1 copies
whatever request arrived, so a receiver that always takes slot 1 succeeds without reading the request's
content (a trained receiver chose it in 256 of 256 held-out episodes); fine for the paper's receiver, which
realizes the delivered REQ, but it cannot show whether a learner uses the message.

``menu="branches"`` has no copy slot: slot 0 the empty record, then the template's branches in an order
that depends only on the public prior (a hash of its text and the branch id, the same for every binding of
a matched pair, different between templates), each as the decision needs it (a receiver's SELF path; a
sender's cuts, branch after branch; a single-step task). A receiver must map the request's content to the
branch that realizes it; before a request arrives no slot index tells the bindings apart
(``tests/rl/test_menus.py``). A team agent's menu drops its copy slot (slot 1 stays masked) and keeps one
record per combination of the fact values it acts on, in the same hashed order.

Labels. Each usable slot also has a label, in the public terms of the agent's view: ``empty`` (slot 0),
``request`` / ``requests`` (a copy slot), ``branch=<id>`` (a receiver's path, a team's combination
``branch=<id>+<id>``), ``branch=<id> self=<k>`` (a joint record whose SELF takes the first k tasks of that
branch's joint path), ``branch=<id> task=<i>`` (a single-step task, the i-th of the agent's path). The
deciding agent's observation carries them (``interface``: a ``MENU <slot> <label>`` line per usable slot in
its text, between the messages and the prior, so also in its token ids; with a tokenizer, ``menu_labels``,
each slot's label as token ids, which is where a bag learner reads them), so a learner can tell which slot
holds which branch without ``infos["candidates"]``. A label is a function of the menu's key (the prior, stage, route, history
and requests: ``menu_key``) and never of the private field, so it is the same for every binding behind
one observation (``tests/tasks/test_paired_views.py``): it names branches the codebook already lists and
says which slot holds each; which branch is *true* stays with the fact's holder and the request.

Slots that a decision does not use are masked (``action_mask`` 0). ``N`` (``menu_size``) is the most
any two-branch template can need under the Short DSL's path limit, the same for every pool. An agent that is not deciding gets a mask with slot 0 only;
its action is ignored.

A team agent's menu (same ``N``): slot 0 the empty record, slot 1 the requests delivered to it realized as
its SELF path (with what they decide passed on along its channels; masked when none arrived), then one
record per combination of the fact values it acts on (its own fact and those that reach it; a one-call
planner: every fact), each its SELF path and one REQ along each of its channels - built by the same
composer as the rule agents, from the agent's own context.
"""
from __future__ import annotations

import itertools
import zlib
from collections.abc import Sequence

from gencoord_env.caches import Memo, cache
from gencoord_env.envs.gencoord.routes import ROUTES
from gencoord_env.errors import UsageError
from gencoord_env.messages import RequestMessage
from gencoord_env.tasks.compose import order_nodes
from gencoord_env.tasks.context_view import JOINT_STAGES, delivered, team, team_record
from gencoord_env.tasks.contexts import Context, PriorNode, PriorView
from gencoord_env.dsl.syntax import MAX_PATH_TASKS
from gencoord_env.tasks.prior import prior
from gencoord_env.types import PeerRequest, Proposal, Task

EMPTY = Proposal((), ())
#: the menus an env can build (module docstring)
MENUS: tuple[str, ...] = ("default", "branches")



def _shape(context: Context) -> str | None:
    """The name of the shape a valid record has at the context's decision (``routes.ROUTES``)."""
    return next((d.shape.name for d in ROUTES.get(context.route, ()) if d.stage == context.stage), None)


def _branch_path(prior_view: PriorView, binding: str) -> tuple[tuple[Task, ...], tuple[Task, ...]]:
    """(first-role tasks, second-role tasks) of ``binding`` as the view orders them."""
    nodes: list[PriorNode] = [n for n in prior_view.nodes if n.branch in (None, binding)]
    ordered = order_nodes(nodes, prior_view.view)  # type: ignore[arg-type]
    first, second = prior_view.roles
    return (tuple(n.task for n in ordered if n.role == first), tuple(n.task for n in ordered if n.role == second))


def _cuts(path: Sequence[Task], peer: str) -> list[Proposal | None]:
    """Every split of a joint path into SELF and REQ; a side longer than the DSL's path limit cannot be
    written, so that slot stays masked."""
    return [Proposal(tuple(path[:k]), (PeerRequest(peer, tuple(path[k:])),))
            if k <= MAX_PATH_TASKS and len(path) - k <= MAX_PATH_TASKS else None
            for k in range(1, len(path))]


def menu_key(context: Context, menu: str = "default") -> tuple[object, ...]:
    """What a decision's menu depends on: the menu kind, the rendered prior, the stage, who decides, history
    and requests."""
    return (menu, context.prior.text, context.stage, context.route, context.agent, context.peer, len(context.history),
            tuple(m.payload for m in context.messages if isinstance(m, RequestMessage)), context.team)


def candidates(context: Context, key: tuple[object, ...] | None = None, menu: str = "default") -> tuple[Proposal | None, ...]:
    """The decision's candidate records in slot order (``None``: an unused slot), before padding."""
    return _entries(context, key, menu)[0]


def labels(context: Context, key: tuple[object, ...] | None = None, menu: str = "default") -> tuple[str | None, ...]:
    """Each slot's label, aligned with ``candidates`` (``None`` where that is ``None``): what the slot is in
    the public terms of the agent's view (module docstring, Labels). Built from the same walk as the
    records, never from the private field.

    >>> from gencoord_env.tasks import Episode, pool
    >>> from gencoord_env.tasks.contexts import build_context
    >>> episode = Episode(pool("train")[0], perm=0)
    >>> labels(build_context(episode, episode.first, "sender_initial"), menu="branches")[:2]
    ('empty', 'branch=SITE_B self=1')
    """
    return _entries(context, key, menu)[1]


def _entries(context: Context, key: tuple[object, ...] | None, menu: str) -> tuple[tuple[Proposal | None, ...], tuple[str | None, ...]]:
    key = key or menu_key(context, menu)
    found = _MENUS.get(key)
    if found is None:
        entries = _candidates(context, menu)
        found = _MENUS.put(key, (tuple(r for r, _ in entries), tuple(label if r is not None else None for r, label in entries)))
    return found


def _public_order(prior_text: str, branches: Sequence[str]) -> list[str]:
    """``branches`` in the ``branches`` menu's order: by a hash of the public prior's text and the branch id,
    so the same for every binding of a matched pair and not the codebook's order."""
    return sorted(branches, key=lambda b: (zlib.crc32(f"{prior_text}\n{b}".encode("utf-8")), b))


_MENUS = Memo("envs.menu.candidates", maxsize=1 << 15)
Entry = tuple[Proposal | None, str]


def _candidates(context: Context, menu: str = "default") -> list[Entry]:
    if context.team:
        return _team_candidates(context, menu)
    view, stage, peer = context.prior, context.stage, context.peer
    branches = view.codebook if menu == "default" else _public_order(view.text, view.codebook)
    out: list[Entry] = [(EMPTY, "empty")]
    shape = _shape(context)
    if shape == "self_only":  # the receiver after the request
        if menu == "default":
            request = context.request
            out.append((Proposal(request.requested_plan, ()) if request is not None else None, "request"))
        out += [(Proposal(_branch_path(view, b)[1], ()), f"branch={b}") for b in branches]
    elif shape == "one_task":  # single-step's first decision
        for b in branches:
            out += [(Proposal((t,), ()), f"branch={b} task={i}") for i, t in enumerate(_branch_path(view, b)[0], 1)]
    elif shape == "one_request":  # a joint record
        done = len(context.history)
        for b in branches:
            first, second = _branch_path(view, b)
            out += [(record, f"branch={b} self={k}") for k, record in enumerate(_cuts(first[done:] + second, peer), 1)]
    else:
        raise UsageError(f"stage {stage!r} has no menu (menus are for the structured surfaces)")
    return out


def _team_candidates(context: Context, menu: str = "default") -> list[Entry]:
    shape = team(context)
    joint = context.stage in JOINT_STAGES
    factors = range(len(shape.factors)) if joint else sorted(shape.known(context.role))
    requests = delivered(context)
    out: list[Entry] = [(EMPTY, "empty")]
    if requests and not joint and menu == "default":
        binds = {b for m in requests for t in m.request.requested_plan if isinstance(b := t.args.get("bind"), str)}
        passed = team_record(context, binds)
        out.append((Proposal(tuple(t for m in requests for t in m.request.requested_plan), passed.peer_requests), "requests"))
    else:
        out.append((None, "requests"))
    combos = list(itertools.product(*(shape.factors[k][1] for k in factors)))
    if menu != "default":
        order = _public_order(context.prior.text, ["+".join(c) for c in combos])
        combos.sort(key=lambda c: order.index("+".join(c)))
    for combo in combos:
        out.append((team_record(context, set(combo), joint=joint), f"branch={'+'.join(combo)}"))
    return out


def menu_size(bindings: int | None = None) -> int:
    """N: the slots any decision can need, for templates of at most ``bindings`` branches (default: the
    prior's largest codebook). A joint record has at most ``2 * MAX_PATH_TASKS`` tasks, so ``2 *
    MAX_PATH_TASKS - 1`` cuts per branch; one N for every pool, procedural ones included, so that a
    policy trained on one pool acts in the same action space on another."""
    b = bindings if bindings is not None else _largest_codebook()
    return 1 + b * (2 * MAX_PATH_TASKS - 1)


@cache(maxsize=1)
def _largest_codebook() -> int:
    p = prior()
    return max(len(t.bindings) for t in (*p.templates.values(), p.goal_capability.template))


__all__ = ["EMPTY", "MENUS", "candidates", "labels", "menu_key", "menu_size"]
