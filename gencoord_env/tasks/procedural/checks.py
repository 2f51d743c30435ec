"""The checks every generated template passes before it is served: from the template alone
(``template_problems``), and in the sim world (``instance_problems``); usable on any template."""
from __future__ import annotations

from collections.abc import Sequence

from gencoord_env.contract import check as contract_check
from gencoord_env.dsl.syntax import MAX_PATH_TASKS
from gencoord_env.outcomes import FailureCode
from gencoord_env.pipeline import compile_plan, materialize, resolve_forward, verify
from gencoord_env.tasks import references as R
from gencoord_env.tasks.episode import Cluster, Episode
from gencoord_env.tasks.prior import STAGE_ORDER, Prior, TemplateSpec, prior
from gencoord_env.tasks.procedural.held_out import allowed_quantities, held_out, signature
from gencoord_env.world.sim import SimWorld


def template_problems(t: TemplateSpec, base: Prior | None = None) -> tuple[str, ...]:
    """What makes ``t`` unfit to serve, checked from the template alone; empty when it is fit."""
    base = base or prior()
    out: list[str] = []
    if t.id in base.templates or not t.id.startswith("proc"):
        out.append(f"template id {t.id!r} collides with the prior or lacks the proc prefix")
    if len(t.bindings) != 2 or len(set(t.bindings)) != 2:
        out.append(f"expected two distinct bindings, got {t.bindings}")
    for b in t.bindings:
        if b.lower() in t.id.lower():
            out.append(f"template id {t.id!r} names binding {b}")
    ids = [n.id for n in t.nodes]
    if len(set(ids)) != len(ids):
        out.append("node ids repeat")
    by_id = {n.id: n for n in t.nodes}
    for n in t.nodes:
        for p in n.preds:
            if p not in by_id:
                out.append(f"node {n.id} names unknown predecessor {p}")
            elif STAGE_ORDER.index(by_id[p].stage) > STAGE_ORDER.index(n.stage):
                out.append(f"edge {p} -> {n.id} goes from stage {by_id[p].stage} back to {n.stage}")
    for b in t.bindings:
        branch = [n for n in t.nodes if n.branch in (None, b)]
        handoffs = [n for n in branch if n.skill == "resource.deliver" and n.args.get("to") == "$receiver"]
        if len(handoffs) != 1 or handoffs[0].actor != "sender":
            out.append(f"branch {b}: expected one sender handoff, got {[n.id for n in handoffs]}")
        if not any(n.args.get("bind") == b and n.actor == "receiver" for n in branch):
            out.append(f"branch {b}: no receiver task carries bind={b}")
        lengths = {r: sum(1 for n in branch if n.actor == r) for r in t.roles}
        if not 2 <= lengths["sender"] <= MAX_PATH_TASKS or not 1 <= lengths["receiver"] <= MAX_PATH_TASKS:
            out.append(f"branch {b}: path lengths {lengths} outside sender 2..5, receiver 1..5")
    if len(t.bindings) == 2 and t.terminal[t.bindings[0]] == t.terminal[t.bindings[1]]:
        out.append("the two bindings share one terminal predicate")
    h = held_out()
    sig = signature(t)
    if sig in h.templates:
        out.append(f"structure of held-out template {h.templates[sig]}")
    if not t.quantities or allowed_quantities(t) != t.quantities:
        out.append(f"quantities {t.quantities} include a crossproduct combination")
    return tuple(out)


def _play(ep: Episode, binding: str, world: SimWorld) -> tuple[FailureCode, str]:
    """Run the reference commitment of ``binding`` (what the rule agents send and realize) in ``ep``'s world."""
    q = R.joint(ep, binding)
    r = R.receiver_after_request(q.peer_requests[0])
    violations = contract_check(q, ep.scope(ep.first)) + contract_check(r, ep.scope(ep.second))
    if violations:
        return FailureCode.CONTRACT_REJECT, violations[0].message
    res = resolve_forward(q, r, ep)
    if res.commitment is None:
        assert res.code is not None  # a resolution without a commitment always names its failure
        return res.code, res.reason
    plan = materialize(res.commitment, ep)
    world.reset(ep.world)
    verdict = verify(plan, world.run(compile_plan(plan)), world.observe())
    return verdict.code, "; ".join(verdict.reasons)


def instance_problems(clusters: Sequence[Cluster], p: Prior) -> tuple[str, ...]:
    """Sim check of a matched pair: each binding succeeds under both role permutations, and the other
    binding's consistent plan executes, hands off and fails the terminal predicate."""
    world = SimWorld()
    out: list[str] = []
    for c in clusters:
        other = next(b for b in p.template(c.template).bindings if b != c.binding)
        episodes = [Episode(c, perm, p) for perm in (0, 1)]
        for perm, ep in enumerate(episodes):
            code, why = _play(ep, c.binding, world)
            if code is not FailureCode.SUCCESS:
                out.append(f"{c.binding} R{perm} q={c.q}: {code.value} {why}")
        code, why = _play(episodes[0], other, world)
        if code is not FailureCode.TERMINAL_FAILURE:
            out.append(f"{other} in the world of {c.binding} q={c.q}: {code.value}, expected TERMINAL_FAILURE {why}")
    return tuple(out)
