"""Hostile agent input on the embedded Minecraft server ends as the same failure code as on the sim, on the
single-step and forward routes: no ProtocolMismatch, no msgpack OverflowError, nothing the sidecar refuses.
The sim runs more such cases in tests/envs/test_input_limits.py; these are the ones that reached the sidecar
before the contract bounded agent input, and one within the limits that is no task of the public DAG."""
from __future__ import annotations

from typing import Any

import pytest

import gencoord_env
from gencoord_env import FailureCode, dsl
from gencoord_env.agents import make_policy
from gencoord_env.agents.rollout import run_episode
from gencoord_env.tasks import Episode, pool
from gencoord_env.tasks import references as R

pytestmark = pytest.mark.usefixtures("mc_world")
F = FailureCode

CASES: list[tuple[str, str, FailureCode]] = [
    (route, task, code)
    for route in ("single_step", "forward")
    for task, code in [
        ("resource.obtain(q=2305,item=oak_planks)", F.CONTRACT_REJECT),
        ("control.wait(ticks=1201)", F.CONTRACT_REJECT),
        (f"resource.obtain(q={2**64},item=oak_planks)", F.CONTRACT_REJECT),
        ("resource.obtain(q=-5,item=oak_planks)", F.CONTRACT_REJECT),
        (f"resource.obtain(q=1,item={'a' * 3000})", F.CONTRACT_REJECT),
        ("resource.obtain(q=2304,item=oak_planks)", F.RESOLUTION_CONFLICT),
    ]
    if route == "single_step" or code is not F.RESOLUTION_CONFLICT  # forward needs a REQ first
]
EPISODE = Episode(pool("heldout")[0], 0)


def play_first(route: str, task: str, **kwargs: Any) -> dict[str, Any]:
    env = gencoord_env.parallel_env(pool=[EPISODE], route=route, **kwargs)
    _, infos = env.reset(options={"index": 0})
    turn = next(a for a, i in infos.items() if i["deciding"])
    request = "REQ -" if route == "single_step" else dsl.format(R.sender_initial(EPISODE)).split("\n")[1]
    _, _, terms, _, infos = env.step({turn: f"SELF {task}\n{request}"})
    assert all(terms.values())
    return infos[turn]  # type: ignore[no-any-return]


def test_hostile_first_records_end_as_the_sims_failure_codes(mc_world) -> None:  # type: ignore[no-untyped-def]
    for route, task, code in CASES:
        mc = play_first(route, task, backend="minecraft", world=mc_world)
        sim = play_first(route, task, backend="sim")
        assert mc["outcome"] is code, (route, task[:60], mc["reason"][:300])
        assert (mc["outcome"], mc["reason"]) == (sim["outcome"], sim["reason"])
    # the sidecar refused nothing: the same world still plays an episode through
    env = gencoord_env.parallel_env(pool=[EPISODE], backend="minecraft", route="single_step", world=mc_world)
    assert run_episode(env, make_policy("rule"), index=0)["outcome"] is F.SUCCESS
