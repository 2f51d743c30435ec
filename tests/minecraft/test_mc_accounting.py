"""Runtime accounting on the embedded Minecraft server: the handoff's inventories come from the server's
read-back, and every event counts the real Mineflayer actions its skill took."""
from __future__ import annotations

import pytest

import gencoord_env
from gencoord_env.agents.rollout import run_episode
from gencoord_env.agents import make_policy
from gencoord_env.accounting import account
from gencoord_env.tasks.episode import Cluster, Episode
from gencoord_env.world.types import EXECUTOR_ACTIONS

pytestmark = pytest.mark.usefixtures("mc_world")

# the paper's representative episode: active order, work branch, one crafting table
REPRESENTATIVE = Episode(Cluster("heldout", "active_order", "WORK_BRANCH", 1, "W0", "D0"), 0)


def _info(backend: str, world: object = None) -> dict:  # type: ignore[type-arg]
    env = gencoord_env.parallel_env(pool=[REPRESENTATIVE], backend=backend, world=world)
    return run_episode(env, make_policy("rule"), index=0)  # type: ignore[no-any-return]


def test_the_representative_episode_on_minecraft(mc_world) -> None:  # type: ignore[no-untyped-def]
    info = _info("minecraft", mc_world)
    assert str(info["outcome"]) == "SUCCESS", info["reason"]
    events = [e for entry in info["trace"] if entry["stage"] == "execute" for e in entry["events"]]
    assert events and all(tuple(e.actions) == EXECUTOR_ACTIONS for e in events)
    [handoff] = [e for e in events if e.kind == "handoff"]
    assert handoff.data["inventories_before"]["agent_a"].get("oak_planks") == 8
    assert handoff.data["inventories_before"]["agent_b"].get("oak_planks", 0) == 0
    assert handoff.data["inventories_after"]["agent_a"].get("oak_planks", 0) == 0
    assert handoff.data["inventories_after"]["agent_b"].get("oak_planks") == 8

    acc = account(info)
    rows = dict(acc.rows())
    assert rows["Sender oak_planks (agent_a), before -> after"] == "8 -> 0"
    assert rows["Receiver oak_planks (agent_b), before -> after"] == "0 -> 8"
    assert rows["Terminal crafting_table in agent_b"] == "1"
    assert rows["Handoff / terminal verification"] == "pass / pass"

    # the same categories as the sim; tosses and placements as many, window clicks at least as many
    sim = account(_info("sim"))
    assert acc.actions is not None and sim.actions is not None
    assert tuple(acc.actions) == tuple(sim.actions) == EXECUTOR_ACTIONS
    assert acc.actions["tosses"] == sim.actions["tosses"] == 1
    assert acc.actions["placements"] == sim.actions["placements"] == 0
    assert acc.actions["window_clicks"] >= sim.actions["window_clicks"] > 0
    assert acc.executor_actions is not None and acc.executor_actions > 0
