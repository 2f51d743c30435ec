from __future__ import annotations

import pytest

from gencoord_env.contract import check
from gencoord_env.dsl import format, parse
from gencoord_env.tasks import Episode, pool, prior
from gencoord_env.tasks import references as R
from gencoord_env.tasks.compose import role_paths
from gencoord_env.tasks.contexts import build_context, render

CORE = [t for t in prior().templates.values() if t.split == "core"]


def _episode(template: str, binding: str, perm: int = 0, q: int = 3) -> Episode:
    from gencoord_env.tasks import Cluster

    return Episode(Cluster("test", template, binding, q, "W0", "D0"), perm)


def test_eight_core_templates_in_four_families() -> None:
    families = {}
    for t in CORE:
        families.setdefault(t.family, []).append(t.title)
        assert len(t.bindings) == 2
    assert {f: len(v) for f, v in families.items()} == {"destination": 2, "recipe": 2, "allocation": 2, "active_branch": 2}


def _work(paths: tuple, roles: tuple[str, str]) -> set[tuple[str, str, str]]:
    """(role, skill, location) of every task that changes the world beyond the handoff."""
    out = set()
    for role, path in zip(roles, paths):
        for t in path:
            where = t.args.get("dst") or t.args.get("site") or t.args.get("station") or ""
            if t.skill != "resource.obtain" and "to" not in t.args:
                out.add((role, t.skill, str(where)))
    return out


def _changes(template: str) -> set[str]:
    """Which of the paper's commitment fields the two bindings' joint paths differ in."""
    t = prior().template(template)
    (s1, r1), (s2, r2) = (role_paths(_episode(template, x), x) for x in t.bindings)
    out = set()
    if {t.args.get("dst") or t.args.get("site") for t in r1} != {t.args.get("dst") or t.args.get("site") for t in r2}:
        out.add("destination")
    if [t.args["item"] for t in s1 if "to" in t.args] != [t.args["item"] for t in s2 if "to" in t.args]:
        out.add("handoff item")
    crafts = [{(x.args["input"], x.args["item"]) for x in r if x.skill == "craft.item"} for r in (r1, r2)]
    if crafts[0] != crafts[1]:
        out.add("transformation")
    w1, w2 = _work((s1, r1), ("sender", "receiver")), _work((s2, r2), ("sender", "receiver"))
    shared = {(k, loc) for _, k, loc in w1} & {(k, loc) for _, k, loc in w2}
    if any({r for r, k, loc in w1 if (k, loc) == m} != {r for r, k, loc in w2 if (k, loc) == m} for m in shared):
        out.add("actor")
    if {(k, loc) for r, k, loc in w1 if r == "receiver"} != {(k, loc) for r, k, loc in w2 if r == "receiver"}:
        out.add("remaining work")
    return out


@pytest.mark.parametrize(
    "template,expected",
    [
        ("build_site_ab", {"destination"}),
        ("chest_ab", {"destination"}),
        ("chest_or_table", {"transformation", "handoff item"}),
        ("planks_or_sticks", {"transformation", "handoff item"}),
        ("deposit_or_build", {"actor", "remaining work"}),
        ("dual_build", {"actor", "remaining work"}),
        ("active_order", {"remaining work"}),
        ("remaining_terminal", {"destination", "remaining work"}),
    ],
)
def test_bindings_change_the_papers_field(template: str, expected: set[str]) -> None:
    """Destination: where; Recipe: transformation and handoff item; Allocation: actor and remaining work;
    Active branch: the continuation after the handoff."""
    assert _changes(template) >= expected
    if prior().template(template).family in ("destination", "active_branch"):
        assert not {"actor", "handoff item"} & _changes(template)


def test_a_consistent_plan_for_the_other_binding_never_meets_the_terminal_predicate() -> None:
    """Paired bindings are disjoint in the world: both agents agreeing on the wrong branch still fails."""
    from gencoord_env.pipeline import compile_plan, materialize, resolve_forward, verify
    from gencoord_env.world.sim import SimWorld

    world = SimWorld()
    for t in [*CORE, *(t for t in prior().templates.values() if t.split != "core")]:
        for b in t.bindings:
            ep = _episode(t.id, b)
            other = next(x for x in t.bindings if x != b)
            q = R.joint(ep, other)
            res = resolve_forward(q, R.receiver_after_request(q.peer_requests[0]), ep)
            assert res.commitment is not None, res.reason
            plan = materialize(res.commitment, ep)
            world.reset(ep.world)
            verdict = verify(plan, world.run(compile_plan(plan)), world.observe())
            assert verdict.code.value == "TERMINAL_FAILURE", (t.id, b)


def test_every_instance_needs_a_handoff_and_has_a_binding_specific_terminal() -> None:
    for t in [*prior().templates.values(), prior().goal_capability.template]:
        for b in t.bindings:
            assert any(n.skill == "resource.deliver" and "to" in n.args for n in t.nodes if n.branch in (None, b))
        assert t.terminal[t.bindings[0]] != t.terminal[t.bindings[1]]


def test_goal_capability_pairs_have_byte_identical_requester_views() -> None:
    clusters = pool("goal_capability")
    pairs: dict[tuple, list] = {}
    for c in clusters:
        pairs.setdefault((c.goal, c.variant), []).append(c)
    assert len(pairs) == 20
    for pair in pairs.values():
        assert {c.mode for c in pair} == {"RAW_PROCESSOR", "FINISHED_RECEIVER"}
        for perm in (0, 1):
            eps = [Episode(c, perm) for c in pair]
            views = [render(build_context(e, e.first, "requester_initial")) for e in eps]
            assert views[0] == views[1]
            assert format(R.requester_initial(eps[0])) == format(R.requester_initial(eps[1]))


POOLS = ["train", "heldout", "request", "horizon", "crossproduct", "visibility"]


@pytest.mark.parametrize("name", POOLS)
def test_references_pass_the_contract_and_map_back_to_their_binding(name: str) -> None:
    for c in pool(name)[:40]:
        for perm in (0, 1):
            ep = Episode(c, perm)
            q = R.sender_initial(ep)
            assert check(q, ep.scope(ep.first)) == ()
            assert R.binding_of(q) == c.binding
            r = R.receiver_after_request(q.peer_requests[0])
            assert check(r, ep.scope(ep.second)) == ()
            assert R.binding_of(r) == c.binding
            assert parse(format(q)) == q
            single, rest = R.sender_single_step(ep), R.sender_after_obtain(ep)
            assert single.self_plan + rest.self_plan == q.self_plan
            assert R.factor_codes(ep) == {"active_binding_id": c.binding, "accepted_binding_id": c.binding}


def test_goal_capability_references() -> None:
    for c in pool("goal_capability"):
        ep = Episode(c, 0)
        q0 = R.requester_initial(ep)
        assert check(q0, ep.scope(ep.first)) == ()
        assert R.binding_of(q0) == prior().goal_capability.initial_branch
        q1 = R.requester_after_response(ep, "COUNTER", prior().goal_capability.counter_offer_id)
        assert q1 is not None and R.binding_of(q1) == "CRAFT_AT_REQUESTER_HANDOFF_FINISHED"
        assert R.binding_of(R.centralized(ep)) == c.binding
        assert R.requester_after_response(ep, "REJECT", None) is None


def test_paper_example_shape() -> None:
    ep = _episode("chest_or_table", "CRAFTING_TABLE", q=1)
    text = format(R.sender_initial(ep))
    assert text == (
        "SELF resource.obtain(q=4,item=oak_planks) > resource.deliver(q=4,item=oak_planks,to=agent_b)\n"
        "REQ agent_b craft.item(bind=CRAFTING_TABLE,q=1,input=oak_planks,item=crafting_table) > "
        "resource.deliver(q=1,item=crafting_table,dst=order_chest)"
    )
