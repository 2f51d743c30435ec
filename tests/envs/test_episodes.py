from __future__ import annotations

import json

import pytest

import gencoord_env
from gencoord_env.agents.rollout import rollout, run_episode, summarize
from gencoord_env.agents import make_policy
from gencoord_env import FailureCode, dsl
from gencoord_env.tasks import references as R


def _play(env, actions_by_stage):  # type: ignore[no-untyped-def]
    obs, infos = env.reset(options={"index": 0})
    while env.agents:
        turn = next(a for a, i in infos.items() if i["deciding"])
        stage = infos[turn]["stage"]
        obs, rewards, _, _, infos = env.step({turn: actions_by_stage(stage, env.session.episode), "ignored": 1})
    return infos["agent_a"], rewards


def _good(stage, ep):  # type: ignore[no-untyped-def]
    q = R.sender_initial(ep)
    return dsl.format(q if stage == "sender_initial" else R.receiver_after_request(q.peer_requests[0]))


def test_success_gives_reward_one_to_both() -> None:
    info, rewards = _play(gencoord_env.parallel_env(backend="sim"), _good)
    assert info["outcome"] is FailureCode.SUCCESS
    assert rewards == {"agent_a": 1.0, "agent_b": 1.0}
    assert info["metrics"]["handoff_verified"] and info["metrics"]["commitment_validity"]
    assert [t["stage"] for t in info["trace"]] == [
        "sender_initial", "deliver", "receiver_after_request", "resolve", "materialize", "compile", "execute", "verify"]


@pytest.mark.parametrize(
    "mutate,code",
    [
        (lambda s, ep: "hello", FailureCode.PARSE_FAILURE),
        (lambda s, ep: "SELF resource.obtain(q=0,item=oak_planks)\nREQ -", FailureCode.CONTRACT_REJECT),
        (lambda s, ep: _good(s, ep).split("\n")[0] + "\nREQ -" if s == "sender_initial" else "", FailureCode.CONTRACT_REJECT),
        (lambda s, ep: _good(s, ep) if s == "sender_initial" else "SELF control.wait(ticks=5)\nREQ -", FailureCode.RESOLUTION_CONFLICT),
    ],
)
def test_agent_mistakes_are_failure_codes_not_exceptions(mutate, code) -> None:  # type: ignore[no-untyped-def]
    info, rewards = _play(gencoord_env.parallel_env(backend="sim"), mutate)
    assert info["outcome"] is code
    assert rewards == {"agent_a": 0.0, "agent_b": 0.0}
    assert info["reason"]


def _wrong_binding(stage, ep):  # type: ignore[no-untyped-def]
    other = next(b for b in ep.template.bindings if b != ep.binding)
    q = R.joint(ep, other)
    return dsl.format(q if stage == "sender_initial" else R.receiver_after_request(q.peer_requests[0]))


def test_wrong_binding_fails_at_the_terminal_predicate() -> None:
    info, _ = _play(gencoord_env.parallel_env(backend="sim", pool="heldout"), _wrong_binding)
    assert info["outcome"] is FailureCode.TERMINAL_FAILURE
    assert info["metrics"]["handoff_verified"]


def test_missing_items_give_execution_failure() -> None:
    from gencoord_env.types import PeerRequest, Proposal, Task

    def greedy(stage, ep):  # type: ignore[no-untyped-def]
        q = R.sender_initial(ep)
        doubled = tuple(Task(t.skill, {**t.args, "q": t.args["q"] * 50}) for t in q.self_plan)
        req = tuple(Task(t.skill, {**t.args, "q": t.args["q"] * 50}) for t in q.peer_requests[0].requested_plan)
        big = Proposal(doubled, (PeerRequest(ep.second, req),))
        return dsl.format(big if stage == "sender_initial" else R.receiver_after_request(big.peer_requests[0]))

    # the DAG fixes quantities, so an inflated plan does not resolve; run the inflated plan directly instead
    info, _ = _play(gencoord_env.parallel_env(backend="sim"), greedy)
    assert info["outcome"] is FailureCode.RESOLUTION_CONFLICT


def test_execution_and_handoff_failures_from_world_truth() -> None:
    from gencoord_env.envs.gencoord.stages import Stages

    # a world where the source chest is empty: the withdraw cannot happen
    def starve(plan, skip=()):  # type: ignore[no-untyped-def]
        calls = Stages().compile(plan, skip)
        return [c if c.op != "withdraw" else type(c)(c.id, c.actor, c.op, {**c.args, "count": 999}, c.after, c.task_id) for c in calls]

    env = gencoord_env.parallel_env(backend="sim", stages=Stages(compile=starve))
    info, _ = _play(env, _good)
    assert info["outcome"] is FailureCode.EXECUTION_FAILURE

    def short(plan, skip=()):  # type: ignore[no-untyped-def]  # the receiver waits for more than was given
        calls = Stages().compile(plan, skip)
        return [c if c.op != "await_handoff" else type(c)(c.id, c.actor, c.op, {**c.args, "count": c.args["count"] + 1}, c.after, c.task_id) for c in calls]

    env = gencoord_env.parallel_env(backend="sim", stages=Stages(compile=short))
    info, _ = _play(env, _good)
    assert info["outcome"] is FailureCode.HANDOFF_FAILURE


def test_materialization_failure() -> None:
    from gencoord_env.envs.gencoord.stages import Stages
    from gencoord_env.pipeline.materialize import MaterializationError

    def broken(commitment, episode):  # type: ignore[no-untyped-def]
        raise MaterializationError("no station for this task")

    env = gencoord_env.parallel_env(backend="sim", stages=Stages(materialize=broken))
    info, _ = _play(env, _good)
    assert info["outcome"] is FailureCode.MATERIALIZATION_FAILURE


def test_reject_gives_no_commitment() -> None:
    from gencoord_env.envs.gencoord.stages import Stages
    from gencoord_env.messages import Response

    reject = Stages(respond=lambda request, episode: Response("REJECT", "PEER_CANNOT_EXECUTE"))
    env = gencoord_env.parallel_env(backend="sim", pool="goal_capability", route="feedback", stages=reject)
    info = run_episode(env, make_policy("rule"), index=0)
    assert info["outcome"] is FailureCode.NO_COMMITMENT
    assert info["metrics"]["decisions"] == 1


def test_a_counter_naming_the_requested_branch_is_a_contract_reject() -> None:
    """A COUNTER must offer an admissible alternative other than the branch it answers."""
    from gencoord_env.envs.gencoord.stages import Stages
    from gencoord_env.messages import Response
    from gencoord_env.tasks import prior

    requested = prior().goal_capability.initial_branch  # what the rule requester asks first
    counter = Stages(respond=lambda request, episode: Response("COUNTER", "PEER_RECEIVES_FINISHED_ONLY", requested))
    env = gencoord_env.parallel_env(backend="sim", pool="goal_capability", route="feedback", stages=counter)
    info = run_episode(env, make_policy("rule"), index=0)
    assert info["outcome"] is FailureCode.CONTRACT_REJECT
    assert "names the requested branch itself" in info["reason"]
    assert info["metrics"]["decisions"] == 1


def test_feedback_metrics_count_request_and_response_bytes_apart() -> None:
    env = gencoord_env.parallel_env(backend="sim", pool="goal_capability", route="feedback")
    for index in range(4):
        info = run_episode(env, make_policy("rule"), index=index)
        m = info["metrics"]
        [response] = [r["response"] for r in info["trace"] if r["stage"] == "respond"]
        assert m["response_bytes"] == len(response.wire().encode())
        assert m["request_bytes"] > 0 and m["wire_bytes"] == m["request_bytes"] + m["response_bytes"]


def test_time_to_commitment_leaves_out_the_reset() -> None:
    """TTC runs from the first decision's observation; a slow world reset must not show up in it."""
    import time

    from gencoord_env.world.sim import SimWorld

    class SlowReset(SimWorld):
        def reset(self, spec):  # type: ignore[no-untyped-def]
            time.sleep(0.3)
            return super().reset(spec)

    env = gencoord_env.parallel_env(backend="sim", world=SlowReset(), timings=True)
    info = run_episode(env, make_policy("rule"), index=0)
    assert info["timings"]["time_to_commitment"] < 0.2 < info["timings"]["episode_seconds"]
    assert not {"time_to_commitment", "episode_seconds"} & set(info["metrics"])


def test_starting_the_backend_is_no_episodes_time() -> None:
    """World.start runs before the episode's clock: a backend that takes 0.5 s to start (the Minecraft sidecar
    takes seconds) shows in no episode's seconds."""
    import time

    from gencoord_env.world.sim import SimWorld

    class SlowStart(SimWorld):
        """Starts in its first reset if nobody started it before, as the Minecraft world starts its sidecar."""

        ready_at: float | None = None

        def start(self) -> None:
            if self.ready_at is None:
                time.sleep(0.5)
                self.ready_at = time.perf_counter()

        def reset(self, spec):  # type: ignore[no-untyped-def]
            self.start()
            return super().reset(spec)

    world = SlowStart()
    env = gencoord_env.parallel_env(backend="sim", world=world, timings=True)
    seconds = run_episode(env, make_policy("rule"), index=0)["timings"]["episode_seconds"]
    # the episode's clock started after the start ended: no threshold, so no load makes it flaky
    assert world.ready_at is not None and seconds <= time.perf_counter() - world.ready_at, seconds


def test_any_string_is_a_legal_action() -> None:
    env = gencoord_env.parallel_env(backend="sim")
    for junk in ["", "SELF", "\x00\x01", "SELF -\nREQ -\n\n", "é" * 10, "SELF a(" * 100]:
        env.reset(options={"index": 3})
        _, _, term, _, infos = env.step({"agent_a": junk, "agent_b": junk})
        assert all(term.values())
        assert infos["agent_a"]["outcome"] in (FailureCode.PARSE_FAILURE, FailureCode.CONTRACT_REJECT)


def test_determinism_same_seed_same_everything() -> None:
    def run() -> list:
        env = gencoord_env.parallel_env(backend="sim", pool="request", seed=7)
        out = []
        policy = make_policy("random", seed=3)
        for _ in range(20):
            info = run_episode(env, policy)
            out.append((info["episode_id"], str(info["outcome"]), json.dumps(info["metrics"]["wire_bytes"]),
                        [t.get("action") for t in info["trace"]], [str(t.get("parse")) for t in info["trace"]]))
        return out

    assert run() == run()


@pytest.mark.parametrize("pool", ["heldout", "request", "horizon", "crossproduct"])
def test_rule_minimal_request_succeeds_everywhere(pool: str) -> None:
    s = summarize(rollout(gencoord_env.parallel_env(backend="sim", pool=pool), make_policy("rule")))
    assert s["success_rate"] == 1.0, s["outcomes"]
    assert s["decisions_per_episode"] == 2.0


def test_complete_case_table_fails_on_crossproduct_and_factor_composer_succeeds() -> None:
    env = gencoord_env.parallel_env(backend="sim", pool="crossproduct")
    assert summarize(rollout(env, make_policy("table")))["success_rate"] == 0.0
    assert summarize(rollout(env, make_policy("factor")))["success_rate"] == 1.0
    # the table does know the cases it was built from
    assert summarize(rollout(gencoord_env.parallel_env(backend="sim", pool="train"), make_policy("table"), episodes=40))["success_rate"] == 1.0


def test_goal_capability_correct_feedback_and_a_only() -> None:
    fb = summarize(rollout(gencoord_env.parallel_env(backend="sim", pool="goal_capability", route="feedback"), make_policy("rule")))
    assert fb["success_rate"] == 1.0 and fb["decisions_per_episode"] == 2.0
    a_only = summarize(rollout(gencoord_env.parallel_env(backend="sim", pool="goal_capability", route="requester_only"), make_policy("requester_local")))
    assert a_only["success_rate"] == 0.5 and a_only["decisions_per_episode"] == 1.0
    central = summarize(rollout(gencoord_env.parallel_env(backend="sim", pool="goal_capability", route="centralized"), make_policy("rule")))
    assert central["success_rate"] == 1.0


def test_single_step_route_runs_the_first_task_before_the_rest() -> None:
    env = gencoord_env.parallel_env(backend="sim", route="single_step")
    info = run_episode(env, make_policy("rule"), index=0)
    assert info["outcome"] is FailureCode.SUCCESS
    assert info["metrics"]["decisions"] == 3
    stages = [t["stage"] for t in info["trace"]]
    assert stages.index("execute") < stages.index("sender_after_obtain")
