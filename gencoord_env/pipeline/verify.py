"""Verify from world truth: execution events, the handoff, then the terminal predicate.

A failed ``await_handoff`` (the items never reached the recipient) is ``HANDOFF_FAILURE``; any other
failed call is ``EXECUTION_FAILURE``. A handoff is verified only by a ``handoff`` event, which both backends emit after reading the
recipient's inventory; success only when every handoff of the plan (one per handoff edge; a two-agent plan
has one) is verified and every clause of the true binding's terminal predicate holds in the ground truth read
back after execution. A team's verdict checks each handoff edge apart (``checks["handoffs"]``) and its
reasons name the edge that failed.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gencoord_env.errors import DataError
from gencoord_env.outcomes import FailureCode
from gencoord_env.pipeline.types import DispatchPlan, Verdict
from gencoord_env.world.types import GroundTruth, WorldEvent


def _count(truth: GroundTruth, kind: str, where: str, item: str) -> int:
    if kind == "container":
        return int(truth.containers.get(where, {}).get(item, 0))
    if kind == "inventory":
        return int(truth.inventories.get(where, {}).get(item, 0))
    if kind == "site":
        return sum(1 for cell in truth.sites.get(where, ()) if cell[3] == item)
    raise DataError(f"unknown terminal clause kind {kind!r}")


def verify(plan: DispatchPlan, events: Sequence[WorldEvent], truth: GroundTruth) -> Verdict:
    failed = next((e for e in events if not e.ok), None)
    arrived = {(e.data.get("from"), e.data.get("to"), e.data.get("item"), int(e.data.get("count", 0)))
               for e in events if e.kind == "handoff" and e.ok}
    edges = [{"producer": p, "receiver": r, "item": i, "count": c, "ok": (p, r, i, c) in arrived}
             for p, r, i, c in plan.handoffs]
    handoff_ok = all(h["ok"] for h in edges)
    clauses: list[dict[str, Any]] = []
    for c in plan.terminal:
        have = _count(truth, c.kind, c.where, c.item)
        clauses.append({"kind": c.kind, "where": c.where, "item": c.item, "expected": c.count, "observed": have,
                        "ok": have == c.count})
    terminal_ok = all(c["ok"] for c in clauses)
    team = len(edges) > 1
    checks = {"handoffs" if team else "handoff": edges if team else edges[0], "terminal": clauses}
    if failed is not None:
        # a handoff that never reached the recipient is a handoff failure, whatever stopped it
        code = FailureCode.HANDOFF_FAILURE if failed.op == "await_handoff" else FailureCode.EXECUTION_FAILURE
        return Verdict(code, handoff_ok, terminal_ok,
                       (f"{failed.call_id} {failed.actor} {failed.op}: {failed.reason}",), checks)
    if not handoff_ok:
        missing = [h for h in edges if not h["ok"]]
        return Verdict(FailureCode.HANDOFF_FAILURE, False, terminal_ok,
                       tuple(f"no verified handoff of {h['count']} {h['item']} from {h['producer']} to {h['receiver']}"
                             for h in missing), checks)
    if not terminal_ok:
        bad = [f"{c['kind']} {c['where']}: {c['observed']} {c['item']}, expected {c['expected']}" for c in clauses if not c["ok"]]
        return Verdict(FailureCode.TERMINAL_FAILURE, True, False, tuple(bad), checks)
    return Verdict(FailureCode.SUCCESS, True, True, (), checks)
