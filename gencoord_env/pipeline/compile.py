"""Compile: a dispatch plan -> backend-neutral skill calls, dependency order preserved across agents.

Each task lowers to a short call sequence (walk to the station, then act), as its skill's ``lower`` rule
in ``data/catalog.json`` says. A handoff lowers to the producer's ``give`` and the receiver's
``await_handoff``. Every call runs after the previous call of its actor and after the last call of each
task it depends on.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

from gencoord_env.catalog import CATALOG, LoweringCase
from gencoord_env.errors import DataError
from gencoord_env.pipeline.types import DispatchPlan, DispatchTask
from gencoord_env.world.types import SkillCall

#: skill -> the cases of its ``lower`` rule
_LOWERINGS: dict[str, tuple[LoweringCase, ...]] = {name: spec.lowering for name, spec in CATALOG.skills.items()}

_new = object.__new__
if tuple(f.name for f in dataclasses.fields(SkillCall)) != ("id", "actor", "op", "args", "after", "task_id") \
        or hasattr(SkillCall, "__slots__") or hasattr(SkillCall, "__post_init__"):
    raise ImportError("SkillCall changed shape; update compile._call to match")


def _call(id: str, actor: str, op: str, args: dict[str, Any], after: tuple[str, ...], task_id: str) -> SkillCall:
    """``SkillCall(id, actor, op, args, after, task_id)`` without a frozen dataclass's per-field
    ``object.__setattr__`` (every dispatched task makes one or more)."""
    call = _new(SkillCall)
    call.__dict__.update(id=id, actor=actor, op=op, args=args, after=after, task_id=task_id)
    return call


def lower(task: DispatchTask) -> list[tuple[str, str, dict[str, Any]]]:
    """(actor, op, args) steps realizing one task: its skill's ``lower`` rule in ``data/catalog.json``.

    The first case whose ``when`` argument the task gives applies; ``$key`` is the task's argument,
    ``@actor`` the task's actor and ``@location`` its grounded location.

    >>> from gencoord_env.dsl import Task
    >>> lower(DispatchTask("t1", "n1", "agent_a", Task("build.component", {"q": 2, "item": "stone", "site": "site_a"}), "site_a", ()))
    [('agent_a', 'goto', {'station': 'site_a'}), ('agent_a', 'place', {'site': 'site_a', 'item': 'stone', 'count': 2})]
    """
    cases = _LOWERINGS.get(task.task.skill)
    if cases is None:
        raise DataError(f"no lowering for skill {task.task.skill!r}")
    args, actor = task.task.args, task.actor
    get, ground = args.as_dict().get, {"actor": actor, "location": task.loc}
    for case in cases:
        if case.when is None or get(case.when):
            break
    # plain loops and Slot.fill inlined: this runs for every dispatched task
    calls = []
    for step in case.steps:
        call_args = {}
        for name, (source, key, value) in step.args:
            call_args[name] = get(key, value) if source == "arg" else value if source == "literal" else ground[key]
        calls.append((actor if step.by is None else str(step.by.fill(args, ground)), step.op, call_args))
    return calls


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
            calls.append(_call(cid, actor, op, args, tuple(after), task.id))
            last_of_actor[actor] = cid
        last_of_task[task.id] = calls[-1].id
    return calls
