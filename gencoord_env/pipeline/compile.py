"""Compile: a dispatch plan -> backend-neutral skill calls, dependency order preserved across agents.

Each task lowers to a short call sequence (walk to the station, then act). A handoff lowers to the
producer's ``give`` and the receiver's ``await_handoff``. Every call runs after the previous call of its
actor and after the last call of each task it depends on.
"""
from __future__ import annotations

from collections.abc import Collection
from typing import Any

from gencoord_env.pipeline.types import DispatchPlan, DispatchTask
from gencoord_env.world.types import SkillCall

_FURNACE_OPS = {
    "transform.supply_input": "furnace_input",
    "transform.supply_fuel": "furnace_fuel",
    "transform.collect_output": "furnace_output",
}


def lower(task: DispatchTask) -> list[tuple[str, str, dict[str, Any]]]:
    """(actor, op, args) steps realizing one task."""
    a, t = task.task.args, task.task
    actor, q, item = task.actor, a.get("q"), a.get("item")
    if t.skill == "resource.obtain":
        return [(actor, "goto", {"station": task.loc}), (actor, "withdraw", {"station": task.loc, "item": item, "count": q})]
    if t.skill == "resource.deliver":
        if "to" in a:
            return [(actor, "give", {"to": a["to"], "item": item, "count": q}),
                    (str(a["to"]), "await_handoff", {"from": actor, "item": item, "count": q})]
        return [(actor, "goto", {"station": task.loc}), (actor, "deposit", {"station": task.loc, "item": item, "count": q})]
    if t.skill == "craft.item":
        station = str(a.get("station") or "")
        steps = [(actor, "goto", {"station": station})] if station else []
        return steps + [(actor, "craft", {"item": item, "count": q, "station": station})]
    if t.skill in _FURNACE_OPS:
        station = task.loc
        return [(actor, "goto", {"station": station}), (actor, _FURNACE_OPS[t.skill], {"station": station, "item": item, "count": q})]
    if t.skill == "build.component":
        return [(actor, "goto", {"station": task.loc}), (actor, "place", {"site": task.loc, "item": item, "count": q})]
    if t.skill == "control.wait":
        return [(actor, "wait", {"ticks": a.get("ticks", 20)})]
    raise ValueError(f"no lowering for skill {t.skill!r}")


def compile_plan(plan: DispatchPlan, skip: Collection[str] = ()) -> list[SkillCall]:
    """Skill calls for every task not in ``skip`` (task ids already discharged, e.g. single-step)."""
    calls: list[SkillCall] = []
    last_of_actor: dict[str, str] = {}
    last_of_task: dict[str, str] = {}
    for task in plan.tasks:
        if task.id in skip:
            continue
        first_after = tuple(last_of_task[d] for d in task.deps if d in last_of_task)
        for step, (actor, op, args) in enumerate(lower(task)):
            after = [last_of_actor[actor]] if actor in last_of_actor else []
            if step == 0 or actor != task.actor:
                after += [c for c in (first_after if step == 0 else (calls[-1].id,)) if c not in after]
            cid = f"c{len(calls) + 1}"
            calls.append(SkillCall(cid, actor, op, args, tuple(after), task.id))
            last_of_actor[actor] = cid
        last_of_task[task.id] = calls[-1].id
    return calls
