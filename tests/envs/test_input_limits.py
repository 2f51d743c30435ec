"""Agent input beyond the limits (data/limits.json) or off the public task DAG ends as a failure code on every
route that runs it; nothing reaches the world that a world's own checks would refuse. The same cases run on
Minecraft in tests/minecraft/test_input_limits_mc.py, which checks both backends give the same code."""
from __future__ import annotations

from typing import Any

import pytest

import gencoord_env
from gencoord_env import FailureCode, dsl
from gencoord_env.pipeline.resolve import resolve_step
from gencoord_env.tasks import Episode, pool
from gencoord_env.tasks import references as R

F = FailureCode
BIG = "a" * 3000  # a name far over name_chars, in an action within the action space

#: (hostile first task, the code it ends as): each runs as single-step's first SELF task and inside a
#: forward route's first record
CASES: list[tuple[str, FailureCode]] = [
    ("resource.obtain(q=2305,item=oak_planks)", F.CONTRACT_REJECT),
    ("control.wait(ticks=1201)", F.CONTRACT_REJECT),
    (f"resource.obtain(q={2**64},item=oak_planks)", F.CONTRACT_REJECT),
    (f"resource.obtain(q={10**3000},item=oak_planks)", F.CONTRACT_REJECT),
    (f"resource.obtain(q=-{10**3000},item=oak_planks)", F.CONTRACT_REJECT),
    (f"control.wait(ticks={2**63})", F.CONTRACT_REJECT),
    ("resource.obtain(q=-5,item=oak_planks)", F.CONTRACT_REJECT),
    ("resource.obtain(q=1e308,item=oak_planks)", F.CONTRACT_REJECT),
    (f"resource.obtain(q=1,item={BIG})", F.CONTRACT_REJECT),
    (f'resource.obtain(q=1,item="{BIG} ")', F.CONTRACT_REJECT),
    (f"resource.obtain(q=1,item=oak_planks,loc={'x' * 129})", F.CONTRACT_REJECT),
    (f"resource.obtain(q=1,{'k' * 3000}=1)", F.CONTRACT_REJECT),
    ("control.wait(" + ",".join(f"k{i}=1" for i in range(40)) + ")", F.CONTRACT_REJECT),
    (f"resource.obtain(q=1,item={'a' * 100_000})", F.PARSE_FAILURE),  # longer than the action space's max_length
    # within the limits but no task of the public DAG: never run
    ("resource.obtain(q=2304,item=oak_planks)", F.RESOLUTION_CONFLICT),
    ("control.wait(ticks=1200)", F.RESOLUTION_CONFLICT),
]
SS_ONLY = {F.RESOLUTION_CONFLICT}  # the forward route's first record needs a REQ; the DAG check comes later


def episode() -> Episode:
    return Episode(pool("heldout")[0], 0)


def first_record(route: str, task: str, ep: Episode) -> str:
    if route == "single_step":
        return f"SELF {task}\nREQ -"
    request = dsl.format(R.sender_initial(ep)).split("\n")[1]
    return f"SELF {task}\n{request}"


def play_first(route: str, task: str, backend: str = "sim", **kwargs: Any) -> dict[str, Any]:
    """One episode whose first decision is the hostile record; the infos of the deciding agent."""
    ep = episode()
    env = gencoord_env.parallel_env(pool=[ep], backend=backend, route=route, **kwargs)
    _, infos = env.reset(options={"index": 0})
    turn = next(a for a, i in infos.items() if i["deciding"])
    _, rewards, terms, _, infos = env.step({turn: first_record(route, task, env.unwrapped.session.episode)})
    assert all(terms.values()) and set(rewards.values()) == {0.0}
    return infos[turn]


def cases(route: str) -> list[tuple[str, FailureCode]]:
    return [(t, c) for t, c in CASES if route == "single_step" or c not in SS_ONLY]


@pytest.mark.parametrize("route", ["single_step", "forward"])
def test_hostile_first_records_end_as_failure_codes_on_the_sim(route: str) -> None:
    for task, code in cases(route):
        info = play_first(route, task)
        assert info["outcome"] is code, (task[:60], info["reason"][:300])
        assert len(info["reason"]) < 2000  # a message names the value, it does not repeat it
        assert not any(t["stage"] == "execute" for t in info["trace"]), task[:60]


def test_single_step_runs_only_a_next_task_of_the_public_dag() -> None:
    ep = episode()
    sender = ep.first
    path = R.sender_initial(ep).self_plan
    assert resolve_step((), path[0], sender, ep) is None
    assert resolve_step(path[:1], path[1], sender, ep) is None
    late = resolve_step((), path[1], sender, ep)  # its predecessor has not run
    assert late is not None and late.code is F.RESOLUTION_CONFLICT
    assert late.reason.startswith(f"single-step task 0 {dsl.serializer.format_task(path[1])} is not a next ")
    assert dsl.serializer.format_task(path[0]) in late.reason  # what could run now
    twice = resolve_step(path[:1], path[0], sender, ep)
    assert twice is not None and twice.code is F.RESOLUTION_CONFLICT
