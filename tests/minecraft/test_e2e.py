"""End to end on the embedded Minecraft server: rule agents, every template x binding x role permutation,
the Goal x Capability route in both workcell modes, and failing cases, all verified from server truth."""
from __future__ import annotations

import pytest

import gencoord_env
from gencoord_env.agents.rollout import run_episode
from gencoord_env.agents import make_policy
from gencoord_env import FailureCode, dsl
from gencoord_env.tasks import Episode, pool, prior
from gencoord_env.tasks import references as R

pytestmark = pytest.mark.usefixtures("mc_world")


def _one_per(pool_name: str, key) -> list[Episode]:  # type: ignore[no-untyped-def]
    seen, out = set(), []
    for c in pool(pool_name):
        for perm in (0, 1):
            k = key(c, perm)
            if k not in seen:
                seen.add(k)
                out.append(Episode(c, perm))
    return out


CORE = _one_per("heldout", lambda c, perm: (c.template, c.binding, perm))
GOAL_CAPABILITY = _one_per("goal_capability", lambda c, perm: (c.mode, c.goal, perm))


def test_covers_every_core_template_binding_and_role() -> None:
    core = {t.id for t in prior().templates.values() if t.split == "core"}
    assert {(e.template.id, e.binding, e.perm) for e in CORE} == {
        (t, b, p) for t in core for b in prior().template(t).bindings for p in (0, 1)}


@pytest.mark.parametrize("episode", CORE, ids=lambda e: f"{e.template.id}-{e.binding}-R{e.perm}")
def test_forward_route_succeeds_from_server_truth(mc_world, episode: Episode) -> None:  # type: ignore[no-untyped-def]
    env = gencoord_env.parallel_env(pool=[episode], backend="minecraft", world=mc_world)
    info = run_episode(env, make_policy("rule"), index=0)
    assert info["outcome"] is FailureCode.SUCCESS, info["reason"]
    verify = next(t for t in info["trace"] if t["stage"] == "verify")
    assert verify["verdict"].handoff_verified and verify["verdict"].terminal_ok


@pytest.mark.parametrize("episode", GOAL_CAPABILITY, ids=lambda e: f"{e.cluster.mode}-{e.cluster.goal}-R{e.perm}")
def test_goal_capability_feedback_succeeds(mc_world, episode: Episode) -> None:  # type: ignore[no-untyped-def]
    env = gencoord_env.parallel_env(pool=[episode], backend="minecraft", route="feedback", world=mc_world)
    info = run_episode(env, make_policy("rule"), index=0)
    assert info["outcome"] is FailureCode.SUCCESS, info["reason"]


def _wrong_binding(stage: str, ep: Episode) -> str:
    other = next(b for b in ep.template.bindings if b != ep.binding)
    q = R.joint(ep, other)
    return dsl.format(q if stage == "sender_initial" else R.receiver_after_request(q.peer_requests[0]))


def _play(env, decide) -> dict:  # type: ignore[no-untyped-def]
    obs, infos = env.reset(options={"index": 0})
    while env.agents:
        turn = next(a for a, i in infos.items() if i["deciding"])
        obs, _, _, _, infos = env.step({turn: decide(infos[turn]["stage"], env.unwrapped.session.episode)})
    return infos["agent_a"]


def test_wrong_binding_is_a_terminal_failure(mc_world) -> None:  # type: ignore[no-untyped-def]
    ep = next(e for e in CORE if e.template.id == "chest_ab")
    info = _play(gencoord_env.parallel_env(pool=[ep], backend="minecraft", world=mc_world), _wrong_binding)
    assert info["outcome"] is FailureCode.TERMINAL_FAILURE
    assert info["metrics"]["handoff_verified"]


def test_missing_items_is_an_execution_failure(mc_world) -> None:  # type: ignore[no-untyped-def]
    from gencoord_env.envs.gencoord.stages import Stages

    ep = next(e for e in CORE if e.template.id == "build_site_ab")
    def greedy(plan, skip=()):  # type: ignore[no-untyped-def]
        calls = Stages().compile(plan, skip)
        return [c if c.op != "withdraw" else type(c)(c.id, c.actor, c.op, {**c.args, "count": 200}, c.after, c.task_id) for c in calls]

    env = gencoord_env.parallel_env(pool=[ep], backend="minecraft", world=mc_world, stages=Stages(compile=greedy))
    info = run_episode(env, make_policy("rule"), index=0)
    assert info["outcome"] is FailureCode.EXECUTION_FAILURE
    assert "withdraw" in info["reason"]
