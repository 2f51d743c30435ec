"""Procedural tasks on the embedded Minecraft server: a small sample of generated episodes, played by the
rule agents and verified from server truth (the sim checks every generated pair; this checks that the
rule table's smelts, crafts and builds mean the same on the server)."""
from __future__ import annotations

from collections.abc import Callable

import pytest

import gencoord_env
from gencoord_env import FailureCode
from gencoord_env.agents import make_policy
from gencoord_env.agents.rollout import run_episode
from gencoord_env.tasks import Episode
from gencoord_env.tasks.procedural import procedural_episodes

pytestmark = pytest.mark.usefixtures("mc_world")


def _skills(ep: Episode, role: str) -> set[tuple[str, bool]]:
    """(skill, at a station) of the tasks ``role`` runs on the episode's true branch."""
    return {(n.task.skill, "station" in n.task.args) for n in ep.branch_nodes(ep.binding) if n.role == role}


KINDS: dict[str, Callable[[Episode], bool]] = {
    "smelt": lambda ep: ("transform.supply_input", True) in _skills(ep, "receiver"),
    "table_craft": lambda ep: ("craft.item", True) in _skills(ep, "receiver"),
    "allocation": lambda ep: ep.template.family == "allocation" and ep.perm == 1,
}


def _sample() -> list[Episode]:
    """The first small episode (order quantity at most 2) of each kind among seed 0's first 200."""
    eps = procedural_episodes(0)
    out = []
    for fits in KINDS.values():
        out.append(next(ep for ep in (eps[k] for k in range(200)) if ep.cluster.q <= 2 and fits(ep)))
    return out


@pytest.mark.parametrize("episode", _sample(), ids=list(KINDS))
def test_procedural_episode_succeeds_from_server_truth(mc_world, episode: Episode) -> None:  # type: ignore[no-untyped-def]
    env = gencoord_env.parallel_env(pool=[episode], backend="minecraft", world=mc_world)
    info = run_episode(env, make_policy("rule"), index=0)
    assert info["outcome"] is FailureCode.SUCCESS, (episode.id, info["reason"])
    verdict = next(t for t in info["trace"] if t["stage"] == "verify")["verdict"]
    assert verdict.handoff_verified and verdict.terminal_ok
