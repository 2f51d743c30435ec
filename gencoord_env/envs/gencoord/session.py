"""One episode of one route: whose turn it is, what each agent sees, and the stage chain after each action.

``EpisodeSession`` is the state machine behind the ParallelEnv's ``step``: an agent's action goes through
parse -> contract check -> (deliver / respond) -> resolve -> materialize -> compile -> execute -> verify.
Agent mistakes end the episode with a failure code; nothing here raises for agent input.
"""
from __future__ import annotations

import time
from typing import Any

from gencoord_env.dsl.errors import DSLSyntaxError
from gencoord_env.dsl.model import PeerRequest, Proposal
from gencoord_env.dsl.serializer import format_task
from gencoord_env.envs.gencoord.routes import ROUTES, Decision
from gencoord_env.envs.gencoord.stages import Stages
from gencoord_env.envs.gencoord.surfaces import Surface
from gencoord_env.outcomes import FailureCode
from gencoord_env.pipeline.compile import lower
from gencoord_env.pipeline.materialize import MaterializationError
from gencoord_env.pipeline.response import response_valid
from gencoord_env.pipeline.types import Delivery, DispatchTask, Resolution
from gencoord_env.tasks.contexts import build_context, delivered_message, observation
from gencoord_env.tasks.episode import Episode
from gencoord_env.world.types import SkillCall, World

F = FailureCode


class EpisodeSession:
    def __init__(self, episode: Episode, route: str, view: str, surface: Surface, stages: Stages, world: World,
                 private_fact: str = "id", describe: Any = None) -> None:
        if route not in ROUTES:
            raise ValueError(f"unknown route {route!r}; expected one of {sorted(ROUTES)}")
        self.episode = episode
        self.route = route
        self.decisions: tuple[Decision, ...] = ROUTES[route]
        self._turns = tuple(episode.first if d.role == 0 else episode.second for d in self.decisions)
        self.view = view
        self.surface = surface
        self.stages = stages
        self.world = world
        self.private_fact = private_fact
        self.describe = describe
        self.index = 0
        self.outcome: FailureCode | None = None
        self.reason = ""
        self.trace: list[dict[str, Any]] = []
        self.messages: dict[str, list[str]] = {a: [] for a in episode.agent_of.values()}
        self.history: dict[str, list[str]] = {a: [] for a in episode.agent_of.values()}
        self.proposals: dict[str, Proposal] = {}
        self.executed: list[Any] = []  # single-step: tasks already discharged, in order
        self.events: list[Any] = []
        self.response: Any = None
        self.delivery: Delivery | None = None  # what the deliver stage handed the receiver
        self.last_context: dict[str, Any] = {}
        self.metrics: dict[str, Any] = {
            "decisions": 0, "raw_validity": True, "commitment_validity": False, "handoff_verified": False,
            "wire_bytes": 0, "wire_messages": 0, "request_bytes": 0, "response_bytes": 0, "upload_bytes": 0,
            "time_to_commitment": None, "episode_seconds": None,
        }
        t = time.perf_counter()
        world.reset(episode.world)
        # Time to commitment runs from the first decision's observation, never through the reset (or the
        # sidecar start it may trigger); the episode clock includes both.
        self.t_start = t
        self.t_first_observation: float | None = None

    # --- who decides, what they see ---------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.outcome is not None

    @property
    def decision(self) -> Decision:
        return self.decisions[self.index]

    @property
    def turn(self) -> str:
        return self._turns[self.index]

    def context(self, agent: str, stage: str | None = None) -> dict[str, Any]:
        return build_context(
            self.episode, agent, stage or self.decision.stage, route=self.route, view=self.view, history=self.history[agent],
            messages=self.messages[agent], private_fact=self.private_fact, describe=self.describe,
        )

    def observation(self, agent: str) -> str:
        if self.done:
            return f"AGENT {agent}\nSTAGE done\nOUTCOME {self.outcome}"
        if agent != self.turn:
            return f"AGENT {agent}\nSTAGE wait\nTURN {self.turn}"
        if self.t_first_observation is None:
            self.t_first_observation = time.perf_counter()
        text, ctx = self._observe(agent)
        self.last_context = ctx
        return text

    def _observe(self, agent: str) -> tuple[str, dict[str, Any]]:
        return observation(
            self.episode, agent, self.decision.stage, route=self.route, view=self.view, history=self.history[agent],
            messages=self.messages[agent], private_fact=self.private_fact, describe=self.describe,
        )

    # --- stage chain -----------------------------------------------------------------------------
    def _record(self, entry: dict[str, Any]) -> None:
        self.trace.append(entry)

    def _wire(self, payload: str, kind: str | None = None) -> None:
        """Count one peer-directed message; ``kind`` ("request" / "response") also counts it on its own."""
        n = len(payload.encode("utf-8"))
        self.metrics["wire_bytes"] += n
        self.metrics["wire_messages"] += 1
        if kind is not None:
            self.metrics[f"{kind}_bytes"] += n

    def _end(self, code: FailureCode, reason: str = "") -> None:
        self.outcome = code
        self.reason = reason
        self.metrics["episode_seconds"] = time.perf_counter() - self.t_start

    def _read(self, agent: str, stage: str, observation: str, action: Any) -> Proposal | None:
        """Parse and contract-check one action; on failure end the episode and return None."""
        self.metrics["decisions"] += 1
        entry: dict[str, Any] = {"stage": stage, "agent": agent, "observation": observation, "action": action}
        self._record(entry)
        if not isinstance(action, str):
            entry["parse"] = {"error": f"expected the action to be a str, got {type(action).__name__}"}
            self.metrics["raw_validity"] = False
            self._end(F.PARSE_FAILURE, entry["parse"]["error"])
            return None
        try:
            proposal = self.surface.parse(action)
        except DSLSyntaxError as e:
            entry["parse"] = {"error": str(e)}
            self.metrics["raw_validity"] = False
            self._end(F.PARSE_FAILURE, str(e))
            return None
        entry["parse"] = proposal
        violations = self.stages.check(proposal, self.episode.scope(agent))
        entry["violations"] = violations
        if violations:
            self._end(F.CONTRACT_REJECT, "; ".join(f"{v.where}: {v.message}" for v in violations))
            return None
        self.proposals[stage] = proposal
        return proposal

    def _shape(self, ok: bool, reason: str) -> bool:
        if not ok:
            self._end(F.CONTRACT_REJECT, reason)
        return ok

    def act(self, action: Any, observation: str = "") -> None:
        """Consume the deciding agent's action and run every stage it unlocks."""
        if self.done:
            return
        stage, agent = self.decision.stage, self.turn
        if stage == "centralized":
            # the peer's local view was uploaded to the planner for this decision (once per decision)
            _, ctx = self._observe(agent)
            self._wire(ctx["upload"], "upload")
        q = self._read(agent, stage, observation, action)
        if q is None:
            return
        handler = getattr(self, f"_on_{stage}")
        handler(q, agent)

    def _one_request(self, q: Proposal, who: str) -> bool:
        return self._shape(len(q.peer_requests) == 1 and bool(q.peer_requests[0].requested_plan),
                           f"{who} must send exactly one non-empty REQ")

    def _on_sender_initial(self, q: Proposal, agent: str) -> None:
        if self.route == "single_step":
            if not self._shape(len(q.self_plan) == 1 and not q.peer_requests,
                               "single-step: the first decision is one SELF task and REQ -"):
                return
            self._execute_now(q.self_plan[0], agent)
            return
        if not self._one_request(q, "the sender"):
            return
        self._deliver(q.peer_requests[0], agent)

    def _on_sender_after_obtain(self, q: Proposal, agent: str) -> None:
        if not self._one_request(q, "the sender"):
            return
        self._deliver(q.peer_requests[0], agent)

    def _deliver(self, request: PeerRequest, sender: str) -> None:
        # The receiver reads every copy the deliver stage hands over, and each one crosses the wire.
        delivery = self.stages.deliver(request, self.episode, self._record)
        self.delivery = delivery
        copies = delivery.received
        payload = self.surface.request_payload(request)
        texts = [payload if copy is request else self.surface.request_payload(copy) for copy in copies]
        entry: dict[str, Any] = {"stage": "deliver", "sent": payload, "delivered": texts[0] if texts else None}
        if len(copies) > 1:
            entry["copies"] = len(copies)
        self._record(entry)
        for text in texts:
            self._wire(text, "request")
            self.messages[request.target].append(delivered_message(sender, text))
        self.index += 1

    def _on_receiver_after_request(self, q: Proposal, agent: str) -> None:
        if not self._shape(bool(q.self_plan) and not q.peer_requests, "the receiver must answer with a SELF path and REQ -"):
            return
        sender_stage = "sender_after_obtain" if self.route == "single_step" else "sender_initial"
        q_snd = self.proposals[sender_stage]
        delivery = self.delivery
        assert delivery is not None
        if delivery.operative != q_snd.peer_requests[0]:
            # An intervention rewrote or removed the REQ: the commitment is formed from what the receiver
            # was actually given (paper: validity is checked against the delivered request when present);
            # with nothing delivered, the receiver's SELF path is its only obligation. A substituted
            # sender-local consequence brings its own sender path, unless the sender already acted.
            obligation = delivery.operative or PeerRequest(agent, q.self_plan)
            own = delivery.sender_plan if delivery.sender_plan is not None and not self.executed else q_snd.self_plan
            q_snd = Proposal(own, (obligation,))
        if self.executed:
            q_snd = Proposal(tuple(self.executed) + q_snd.self_plan, q_snd.peer_requests)
        self._commit(self.stages.resolve_forward(q_snd, q, self.episode))

    def _on_requester_initial(self, q: Proposal, agent: str) -> None:
        if not self._one_request(q, "the requester"):
            return
        if self.route == "requester_only":
            # A-only: the plan goes straight to the executor; nothing crosses to the peer's decision maker
            self._commit(self.stages.resolve_joint(q, self.episode))
            return
        self._wire(self.surface.request_payload(q.peer_requests[0]), "request")
        response = self.stages.respond(q.peer_requests[0], self.episode, self._record)
        self._record({"stage": "respond", "response": response})
        problem = response_valid(response, self.episode, q.peer_requests[0])
        if problem:
            self._end(F.CONTRACT_REJECT, f"invalid response: {problem}")
            return
        self._wire(response.wire(), "response")
        self.response = response
        if response.decision == "REJECT":
            self._commit(Resolution(None, F.NO_COMMITMENT, response.reason_code))
            return
        self.messages[agent] += [f"PROPOSAL {self.surface.show(q).replace(chr(10), ' | ')}", f"RESPONSE {response.wire()}"]
        self.index += 1

    def _on_requester_after_response(self, q: Proposal, agent: str) -> None:
        if not self._one_request(q, "the requester"):
            return
        q0 = self.proposals["requester_initial"]
        if not self._shape(q.peer_requests[0].target == q0.peer_requests[0].target, "the revision must keep the target peer"):
            return
        self._commit(self.stages.resolve_feedback(q0, self.response, q, self.episode))

    def _on_centralized(self, q: Proposal, agent: str) -> None:
        if not self._one_request(q, "the joint plan"):
            return
        self._commit(self.stages.resolve_joint(q, self.episode))

    # --- world ----------------------------------------------------------------------------------
    def _execute_now(self, task: Any, agent: str) -> None:
        """Single-step: run one SELF task in the world right away."""
        dt = DispatchTask(f"s{len(self.executed) + 1}", "", agent, task, self.episode.location(task, agent), ())
        steps = lower(dt)
        calls = [SkillCall(f"s{len(self.events) + i + 1}", a, op, args, (), dt.id) for i, (a, op, args) in enumerate(steps)]
        events = self.world.run(calls)
        self.events += events
        self._record({"stage": "execute", "calls": calls, "events": events})
        if any(not e.ok for e in events):
            bad = next(e for e in events if not e.ok)
            self._end(F.EXECUTION_FAILURE, f"{bad.op}: {bad.reason}")
            return
        self.executed.append(task)
        self.history[agent].append(f"DONE {format_task(task)} ok")
        self.index += 1

    def _commit(self, resolution: Resolution) -> None:
        self._record({"stage": "resolve", "resolution": resolution})
        if resolution.commitment is None:
            self._end(resolution.code or F.RESOLUTION_CONFLICT, resolution.reason)
            return
        self.metrics["commitment_validity"] = True
        self.metrics["time_to_commitment"] = time.perf_counter() - (self.t_first_observation or self.t_start)
        try:
            plan = self.stages.materialize(resolution.commitment, self.episode)
        except MaterializationError as e:
            self._record({"stage": "materialize", "error": str(e)})
            self._end(F.MATERIALIZATION_FAILURE, str(e))
            return
        done_nodes = set(resolution.commitment.node_ids[0][: len(self.executed)])
        skip = {t.id for t in plan.tasks if t.node in done_nodes}
        calls = self.stages.compile(plan, skip)
        events = self.world.run(calls)
        self.events += events
        truth = self.world.observe()
        verdict = self.stages.verify(plan, self.events, truth)
        self._record({"stage": "materialize", "plan": plan})
        self._record({"stage": "compile", "calls": calls})
        self._record({"stage": "execute", "events": events})
        self._record({"stage": "verify", "verdict": verdict, "ground_truth": truth})
        self.metrics["handoff_verified"] = verdict.handoff_verified
        self._end(verdict.code, "; ".join(verdict.reasons))
