"""One episode of one route: whose turn it is, what each agent sees, and the stages each record runs through.

``EpisodeSession`` is the state machine behind the ParallelEnv's ``step``. The route (``routes.py``) is
data: each decision names the stage its agent sees, the shape a valid record has and the step that
consumes it. A record goes parse -> contract check -> shape -> step, where the step is one of

- ``deliver``: the REQ crosses to its target (through the deliver stage and any intervention on it);
- ``respond``: the bounded response comes back to the requester;
- ``execute``: single-step: the one SELF task runs in the world now;
- ``resolve_forward`` / ``resolve_feedback`` / ``resolve_joint``: a commitment is formed and committed;
- a team's ``hold``: the record waits for the last decision, whose ``resolve_edges`` resolves every edge.

A team's rows come from its template's channels (``routes.route_rows``); its records may carry one REQ
per peer, each delivered along its own edge through the deliver stage and the interventions on it, and
the metrics count the bytes of every edge (``edges``: the paper's B_local / B_central accounting,
``gencoord_env.traffic``) and name the edge a failure is attributed to (``failed_edge``, by roles:
``crafter>courier``).

Committing is one step for every route: materialize -> compile -> execute -> verify (single-step's early
task goes through the same compile and execute). Agent mistakes end the episode with a failure code;
nothing here raises for agent input: an action that is not a ``str`` or is longer than the action space's
``max_length`` (``MAX_ACTION`` characters) is a ``PARSE_FAILURE`` before anything reads it. An
infrastructure fault of the world raises out of ``act``; the env either lets it through or calls
``truncate`` (``parallel_env(on_fault=...)``), which ends the episode with no outcome and the fault
recorded. ``observation()`` has no side effects.
"""
from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

from gencoord_env import contract
from gencoord_env.caches import Memo
from gencoord_env.dsl.errors import DSLSyntaxError
from gencoord_env.envs.gencoord.interface import MAX_ACTION, brief
from gencoord_env.envs.gencoord.routes import ROUTES, Decision, route_rows
from gencoord_env.envs.gencoord.stages import Intervention, Stages
from gencoord_env.lifecycle import DecisionStage, PipelineStage, Step
from gencoord_env.envs.gencoord.surfaces import Surface
from gencoord_env.messages import Done, Message, ProposalMessage, RequestMessage, Response, ResponseMessage
from gencoord_env.outcomes import FailureCode
from gencoord_env.pipeline.materialize import MaterializationError, materialize_step
from gencoord_env.pipeline.resolve import resolve_step
from gencoord_env.pipeline.response import response_valid
from gencoord_env.pipeline.types import Delivery, DispatchPlan, Resolution
from gencoord_env.tasks.contexts import Context, build_context, render, uploads
from gencoord_env.tasks.episode import Episode
from gencoord_env.trace import (
    ABSENT,
    CompileRecord,
    DecisionRecord,
    DeliverRecord,
    ExecuteRecord,
    FaultRecord,
    InterventionRecord,
    MaxCyclesRecord,
    MaterializeRecord,
    ResolveRecord,
    RespondRecord,
    TraceRecord,
    VerifyRecord,
)
from gencoord_env.types import PeerRequest, Proposal, Task
from gencoord_env.world.types import World, WorldEvent

F = FailureCode
#: the members as plain attributes, read on every step: an enum's own class attribute goes through a
#: descriptor on each access (Python 3.11), 4 % of a sim episode
P = SimpleNamespace(**PipelineStage.__members__)
_CENTRALIZED = DecisionStage.CENTRALIZED
#: contract verdicts by (record text, surface, public scope): agents repeat records across episodes
_CHECKED = Memo("envs.session.checked", maxsize=1 << 15)


def unreadable(action: Any) -> str | None:
    """Why ``action`` cannot be read as a record or utterance at all (not a str, or over the action space's
    ``max_length``), or None. Checked before any parser sees the action.

    >>> unreadable(b"SELF -"), unreadable("x" * (MAX_ACTION + 1))[:32]
    ('expected the action to be a str, got bytes', 'the action has 4097 characters; ')
    """
    if not isinstance(action, str):
        return f"expected the action to be a str, got {type(action).__name__}"
    if len(action) > MAX_ACTION:
        return f"the action has {len(action)} characters; the action space takes at most {MAX_ACTION} (Text max_length)"
    return None


#: Characters of an overlong action the trace keeps.
TRACED_PREFIX = 256


def traced(action: Any) -> Any:
    """``action`` as the trace keeps it (strict JSON): a str, finite float or machine-sized int as it is, a str
    over ``MAX_ACTION`` characters (refused unread) as ``{"prefix", "characters", "sha256"}`` (its first
    ``TRACED_PREFIX`` characters, its length, the sha256 of its UTF-8), anything else as a short ``repr``
    (``interface.brief``).

    >>> traced("x" * 5000)["characters"]
    5000
    """
    if isinstance(action, str) and len(action) > MAX_ACTION:
        raw = action.encode("utf-8", "surrogatepass")
        return {"prefix": action[:TRACED_PREFIX], "characters": len(action), "sha256": hashlib.sha256(raw).hexdigest()}
    if action is None or isinstance(action, (str, bool)) or (isinstance(action, float) and math.isfinite(action)):
        return action  # NaN and infinities are not JSON
    if isinstance(action, int) and -(1 << 63) <= action < (1 << 63):
        return action
    return brief(action)


def printable(text: str) -> str:
    """``text`` with characters that UTF-8 cannot encode (lone surrogates) escaped, so it can be written."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class Setup:
    """How an env runs its episodes: route, view of the prior, surface and private-fact form."""

    route: str
    view: str
    surface: Surface
    private_fact: str = "id"
    describe: Callable[[str, str, Episode], str] | None = None

    @property
    def decisions(self) -> tuple[Decision, ...]:
        return ROUTES[self.route]


@dataclass(frozen=True)
class Progress:
    """What has happened so far in an episode (replaced, never mutated, at each step)."""

    index: int = 0
    inbox: dict[str, tuple[Message, ...]] = field(default_factory=dict)
    history: dict[str, tuple[Done, ...]] = field(default_factory=dict)
    proposals: dict[str, Proposal] = field(default_factory=dict)  # by decision stage
    records: dict[str, Proposal] = field(default_factory=dict)  # each agent's latest record
    deliveries: dict[tuple[str, str], Delivery] = field(default_factory=dict)  # by edge (sender, target)
    response: Any = None  # a team's feedback route: the responses by peer
    executed: tuple[Task, ...] = ()
    rounds: dict[str, int] = field(default_factory=dict)  # a team: the message round each agent decided in

    @property
    def delivery(self) -> Delivery | None:
        """The latest delivery (a two-agent episode has one)."""
        return next(reversed(self.deliveries.values()), None)

    def evolve(self, **changes: Any) -> Progress:
        """A copy with ``changes`` (``dataclasses.replace`` without its per-call field checks: hot path)."""
        new = object.__new__(Progress)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    def receive(self, agent: str, *messages: Message) -> Progress:
        return self.evolve(inbox={**self.inbox, agent: self.inbox.get(agent, ()) + messages})


class Metrics:
    """Per-episode counters (``as_dict`` is what ``infos[agent]["metrics"]`` carries)."""

    def __init__(self, team: bool = False, agents: int = 2) -> None:
        self.values: dict[str, Any] = {
            "decisions": 0, "raw_validity": True, "commitment_validity": False, "handoff_verified": False,
            "wire_bytes": 0, "wire_messages": 0, "request_bytes": 0, "response_bytes": 0, "upload_bytes": 0,
            "time_to_commitment": None, "episode_seconds": None,
        }
        self.team = team
        self.agents = agents
        #: a team's per-edge messages: {sender, receiver, kind, bytes, round}, in the order they crossed
        self.edges: list[dict[str, Any]] = []
        self.failed_edge: str | None = None  # a team: "sender role>receiver role" of the edge a failure names
        self.t_start = time.perf_counter()
        self.t_first_observation: float | None = None

    def wire(self, payload: str, kind: str | None = None, edge: tuple[str, str] | None = None, round: int = 1) -> None:
        """One peer-directed message; ``kind`` (request / response / upload) also counts it on its own;
        ``edge`` (sender, receiver) puts it into a team's per-edge accounting."""
        n = len(payload.encode("utf-8", "surrogatepass"))  # an agent's text may hold lone surrogates
        self.values["wire_bytes"] += n
        self.values["wire_messages"] += 1
        if kind is not None:
            self.values[f"{kind}_bytes"] += n
        if self.team and edge is not None:
            self.edge(edge, kind or "message", n, round)

    def edge(self, edge: tuple[str, str], kind: str, n: int, round: int = 1) -> None:
        """A team's message on ``edge`` that the two-agent metrics do not count (a centralized download)."""
        self.edges.append({"sender": edge[0], "receiver": edge[1], "kind": kind, "bytes": n, "round": round})

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.values)
        if self.team:  # two-agent metrics keep their keys (recorded traces replay unchanged)
            out["agents"] = self.agents
            out["edges"] = [dict(e) for e in self.edges]
            out["failed_edge"] = self.failed_edge
        return out


class EpisodeSession:
    def __init__(self, episode: Episode, setup: Setup, stages: Stages, world: World,
                 interventions: Sequence[Intervention] = ()) -> None:
        self.episode = episode
        self.setup = setup
        self.stages = stages
        self.world = world
        self.interventions = tuple(interventions)  # innermost wrapper first
        self.decisions = route_rows(setup.route, episode.template)
        self.turns = tuple(episode.role_agents[d.role] for d in self.decisions)
        #: the peers a record may address: one, or in a team one per other agent
        self.max_requests = len(episode.agents) - 1
        self.progress = Progress(inbox={a: () for a in episode.agent_of.values()},
                                 history={a: () for a in episode.agent_of.values()})
        self.trace: list[TraceRecord] = []
        self.events: list[WorldEvent] = []
        self.metrics = Metrics(team=episode.is_team, agents=len(episode.agents))
        self.outcome: FailureCode | None = None
        self.reason = ""
        #: an infrastructure fault that truncated the episode: {"type", "message"} (``truncate``)
        self.fault: dict[str, str] | None = None
        #: why the env stopped the episode unfinished (its ``max_cycles``), or None
        self.stopped: str | None = None
        world.reset(episode.world)
        # time to commitment starts at the first observation, after the reset (and any sidecar start)

    # --- who decides, what they see ---------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.outcome is not None or self.truncated

    @property
    def truncated(self) -> bool:
        """Ended without an outcome: an infrastructure fault, or the env's ``max_cycles``."""
        return self.fault is not None or self.stopped is not None

    @property
    def decision(self) -> Decision:
        return self.decisions[self.progress.index]

    @property
    def turn(self) -> str:
        return self.turns[self.progress.index]

    def context(self, agent: str) -> Context:
        """The deciding agent's local context at the current decision."""
        s, p = self.setup, self.progress
        return build_context(self.episode, agent, self.decision.stage, route=s.route, view=s.view,
                             history=p.history[agent], messages=p.inbox[agent], private_fact=s.private_fact,
                             describe=s.describe)

    def observation(self, agent: str) -> str:
        """What ``agent`` sees now (text); only the deciding agent sees a context."""
        if self.fault is not None:
            return f"AGENT {agent}\nSTAGE done\nFAULT {self.fault['type']}"
        if self.stopped is not None:
            return f"AGENT {agent}\nSTAGE done\nOUTCOME None"
        if self.done:
            return f"AGENT {agent}\nSTAGE done\nOUTCOME {self.outcome}"
        if agent != self.turn:
            return f"AGENT {agent}\nSTAGE wait\nTURN {self.turn}"
        return render(self.context(agent))

    def observed(self) -> None:
        """The env showed the deciding agent its observation: the commitment clock starts (once)."""
        if self.metrics.t_first_observation is None:
            self.metrics.t_first_observation = time.perf_counter()

    # --- one decision -----------------------------------------------------------------------------
    def act(self, action: Any, observation: str = "") -> None:
        """Consume the deciding agent's action and run every stage it unlocks."""
        if self.done:
            return
        decision, agent = self.decision, self.turn
        if decision.stage is _CENTRALIZED:  # the peers' local views were uploaded to the planner
            for peer, text in uploads(self.context(agent)):
                self.metrics.wire(text, "upload", (peer, agent))
        q = self._read(agent, decision.stage, observation, action)
        if q is None:
            return
        if not decision.shape.holds(q):
            self._end(F.CONTRACT_REJECT, f"{decision.stage}: expected {decision.shape.expected}")
            return
        if decision.sends:
            targets = [self.episode.role_agents[i] for i in decision.sends]
            if sorted(r.target for r in q.peer_requests) != sorted(targets):
                self._end(F.CONTRACT_REJECT, f"{decision.stage}: expected one non-empty REQ to each of "
                                             f"{', '.join(targets)} (its channels), got REQ to "
                                             f"{', '.join(r.target for r in q.peer_requests)}")
                return
        p = self.progress
        self.progress = p.evolve(proposals={**p.proposals, decision.stage: q}, records={**p.records, agent: q})
        _STEP_METHODS[decision.then](self, q, agent)

    def refuse(self, action: Any, reason: str, observation: str = "") -> None:
        """The deciding agent's action names no record (e.g. a masked menu slot): a parse failure."""
        if self.done:
            return
        self.metrics.values["decisions"] += 1
        self.trace.append(DecisionRecord(self.decision.stage, self.turn, observation, traced(action), {"error": reason}))
        self._parse_failure(reason)

    def _read(self, agent: str, stage: DecisionStage, observation: str, action: Any) -> Proposal | None:
        """Parse and contract-check one action; on failure end the episode and return None."""
        self.metrics.values["decisions"] += 1
        seen = (stage, agent, observation, traced(action))
        why = unreadable(action)
        if why is not None:
            self.trace.append(DecisionRecord(*seen, parse={"error": why}))
            self._parse_failure(why)
            return None
        try:
            proposal = self.setup.surface.read(action, self.max_requests)
        except DSLSyntaxError as e:
            self.trace.append(DecisionRecord(*seen, parse={"error": str(e)}))
            self._parse_failure(str(e))
            return None
        at = len(self.trace)  # the decision's record goes before any check intervention's
        violations = self._rewritten(P.CHECK, self._check(action, proposal, agent), proposal=proposal, agent=agent)
        self.trace.insert(at, DecisionRecord(*seen, parse=proposal, violations=violations))
        if violations:
            self._end(F.CONTRACT_REJECT, "; ".join(f"{v.where}: {v.message}" for v in violations))
            return None
        return proposal

    def _check(self, text: str, proposal: Proposal, agent: str) -> Any:
        """The contract check of a record; the package's own (pure) checker is memoized by record and scope."""
        scope = self.episode.scope(agent)
        if self.stages.check is not contract.check:
            return self.stages.check(proposal, scope)
        key = (text, self.setup.surface.name, scope)
        violations = _CHECKED.get(key)
        if violations is None:
            violations = _CHECKED.put(key, contract.check(proposal, scope))
        return violations

    def _parse_failure(self, reason: str) -> None:
        self.metrics.values["raw_validity"] = False
        self._end(F.PARSE_FAILURE, reason)

    def _rewritten(self, stage: PipelineStage, value: Any, **inputs: Any) -> Any:
        """``value`` as every intervention on ``stage`` leaves it, innermost first, each one traced
        (``stages.REWRITABLE`` names the inputs each stage's interventions are given)."""
        if not self.interventions:
            return value
        for iv in self.interventions:
            if iv.stage == stage:
                value, fields = iv.rewrite(value, self.episode, **inputs)
                if fields is not None:  # None: the intervention left this message alone (another edge)
                    self.trace.append(InterventionRecord(type(iv).__name__, fields))
        return value

    def _advance(self) -> None:
        self.progress = self.progress.evolve(index=self.progress.index + 1)

    def _record_before(self, step: Step) -> Proposal:
        """The record of the latest decision before this one whose step is ``step`` (the route says which:
        on ``single_step`` the sender's REQ is delivered from ``sender_after_obtain``)."""
        decision = next(d for d in reversed(self.decisions[: self.progress.index]) if d.then is step)
        return self.progress.proposals[decision.stage]

    # --- steps (routes.STEPS) -----------------------------------------------------------------------
    def _deliver(self, q: Proposal, sender: str) -> None:
        """Each REQ crosses its own edge (a two-agent record has one), in the order of the decision's channels."""
        requests = q.peer_requests
        if len(requests) > 1:
            order = {self.episode.role_agents[i]: k for k, i in enumerate(self.decision.sends)}
            requests = tuple(sorted(requests, key=lambda r: order.get(r.target, 0)))
        round = self.progress.rounds.get(sender, 0) + 1
        for request in requests:
            self._deliver_one(request, sender, round)
        self._advance()

    def _deliver_one(self, request: PeerRequest, sender: str, round: int) -> None:
        edge = (sender, request.target)
        delivery: Delivery = self._rewritten(P.DELIVER, self.stages.deliver(request, self.episode), request=request,
                                             edge=edge)
        surface = self.setup.surface
        sent = surface.request_payload(request)
        payloads = [sent if copy is request else surface.request_payload(copy) for copy in delivery.received]
        self.trace.append(DeliverRecord(sent, payloads[0] if payloads else None,
                                        len(payloads) if len(payloads) > 1 else ABSENT,
                                        list(edge) if self.episode.is_team else ABSENT))
        for payload in payloads:
            self.metrics.wire(payload, "request", edge, round)
        messages = tuple(RequestMessage(sender, copy, payload) for copy, payload in zip(delivery.received, payloads))
        p = self.progress.receive(request.target, *messages)
        if self.episode.is_team and payloads:  # the round a receiver decides in follows the latest it was reached in
            p = p.evolve(rounds={**p.rounds, request.target: max(p.rounds.get(request.target, 0), round)})
        self.progress = p.evolve(deliveries={**p.deliveries, edge: delivery})

    def _hold(self, q: Proposal, agent: str) -> None:
        """A team's record waits (in ``Progress.records``) for the decision that resolves every edge."""
        self._advance()

    def _respond(self, q: Proposal, agent: str) -> None:
        """Each peer answers the request on its edge (a two-agent proposal has one); a REJECT on any edge
        ends the episode without a commitment."""
        team = self.episode.is_team
        responses: dict[str, Response] = {}
        for request in q.peer_requests:
            edge = (agent, request.target)
            self.metrics.wire(self.setup.surface.request_payload(request), "request", edge)
            response = self._rewritten(P.RESPOND, self.stages.respond(request, self.episode), request=request, edge=edge)
            self.trace.append(RespondRecord(response, list(edge) if team else ABSENT))
            problem = response_valid(response, self.episode, request)
            if problem:
                self._end(F.CONTRACT_REJECT, f"invalid response: {problem}" + (f" (edge {edge[0]}->{edge[1]})" if team else ""))
                return
            self.metrics.wire(response.wire(), "response", (request.target, agent))
            responses[request.target] = response
        self.progress = self.progress.evolve(response=responses if team else responses[q.peer_requests[0].target])
        rejected = next(((t, r) for t, r in responses.items() if r.decision == "REJECT"), None)
        if rejected is not None:
            self._commit(Resolution(None, F.NO_COMMITMENT, rejected[1].reason_code, (agent, rejected[0]) if team else None))
            return
        shown = ProposalMessage(q, self.setup.surface.write(q, self.max_requests))
        answers = tuple(ResponseMessage(r, t if team else None) for t, r in responses.items())
        self.progress = self.progress.receive(agent, shown, *answers)
        self._advance()

    def _execute(self, q: Proposal, agent: str) -> None:
        """Single-step: the one SELF task is discharged in the world before the rest is decided."""
        task = q.self_plan[0]
        step = len(self.progress.executed) + 1
        conflict = resolve_step(self.progress.executed, task, agent, self.episode)
        if conflict is not None:  # not a next task of the public DAG: it never reaches the world
            self._commit(conflict)
            return
        try:
            plan = materialize_step(task, agent, self.episode, step)
        except MaterializationError as e:
            self.trace.append(MaterializeRecord(error=str(e)))
            self._end(F.MATERIALIZATION_FAILURE, str(e))
            return
        events = self._discharge(plan, (), prefix=f"s{step}-")
        failed = next((e for e in events if not e.ok), None)
        if failed is not None:
            self._end(F.EXECUTION_FAILURE, f"{failed.op}: {failed.reason}")
            return
        p = self.progress
        self.progress = p.evolve(executed=p.executed + (task,),
                                history={**p.history, agent: p.history[agent] + (Done(task),)})
        self._advance()

    def _resolve_forward(self, q: Proposal, agent: str) -> None:
        p = self.progress
        q_snd = self._record_before(Step.DELIVER)
        delivery = p.delivery
        assert delivery is not None
        if delivery.operative != q_snd.peer_requests[0]:
            # An intervention rewrote or removed the REQ: the commitment is formed from what the receiver
            # was actually given (paper: validity is checked against the delivered request when present);
            # with nothing delivered, the receiver's SELF path is its only obligation. A substituted
            # sender-local consequence brings its own sender path, unless the sender already acted.
            obligation = delivery.operative or PeerRequest(agent, q.self_plan)
            own = delivery.sender_plan if delivery.sender_plan is not None and not p.executed else q_snd.self_plan
            q_snd = Proposal(own, (obligation,))
        if p.executed:
            q_snd = Proposal(p.executed + q_snd.self_plan, q_snd.peer_requests)
        self._commit(self._rewritten(P.RESOLVE_FORWARD, self.stages.resolve_forward(q_snd, q, self.episode),
                                     records=p.records))

    def _resolve_feedback(self, q: Proposal, agent: str) -> None:
        q0 = self._record_before(Step.RESPOND)
        if sorted(r.target for r in q.peer_requests) != sorted(r.target for r in q0.peer_requests):
            self._end(F.CONTRACT_REJECT, "requester_after_response: the revision must keep the target peer")
            return
        resolution = self.stages.resolve_feedback(q0, self.progress.response, q, self.episode)
        self._commit(self._rewritten(P.RESOLVE_FEEDBACK, resolution, records=self.progress.records))

    def _resolve_edges(self, q: Proposal, agent: str) -> None:
        """A team's forward route: every edge at once, from what each receiver was actually given.

        As on the two-agent route, an intervention's substituted sender path (the same-template alternative)
        goes into the commitment in place of the sender's SELF path; the realization checks read the records.
        """
        p = self.progress
        obligations = {edge: d.operative for edge, d in p.deliveries.items()}
        plans = {a: r.self_plan for a, r in p.records.items()}
        for (sender, _), d in p.deliveries.items():
            if d.sender_plan is not None and d.operative != d.sent:
                plans[sender] = d.sender_plan
        resolution = self.stages.resolve_edges(p.records, obligations, self.episode, plans)
        self._commit(self._rewritten(P.RESOLVE_EDGES, resolution, records=p.records))

    def _resolve_joint(self, q: Proposal, agent: str) -> None:
        # A-only and centralized: the one proposal is the joint plan; nothing crosses to a peer's model
        if self.decision.stage is _CENTRALIZED and self.episode.is_team:
            for r in q.peer_requests:  # the dispatched decision d_i reaches each agent (B_central's download)
                self.metrics.edge((agent, r.target), "download", len(self.setup.surface.request_payload(r).encode("utf-8")))
        self._commit(self._rewritten(P.RESOLVE_JOINT, self.stages.resolve_joint(q, self.episode), records=self.progress.records))

    # --- commit: materialize -> compile -> execute -> verify -----------------------------------------
    def _discharge(self, plan: DispatchPlan, skip: Sequence[str], prefix: str = "") -> list[WorldEvent]:
        """Compile ``plan`` (less the tasks in ``skip``) and run it in the world.

        ``prefix`` keeps call ids unique within the episode when several plans run (single-step).
        """
        calls = self._rewritten(P.COMPILE, self.stages.compile(plan, skip), plan=plan)
        if prefix:
            calls = [replace(c, id=prefix + c.id, after=tuple(prefix + a for a in c.after)) for c in calls]
        events = self.world.run(calls)
        self.events += events
        self.trace += (MaterializeRecord(plan), CompileRecord(calls), ExecuteRecord(events))
        return events

    def _failed_on(self, edge: Sequence[str] | None) -> None:
        """A team's failure names its edge; the metrics keep it by roles (agents rotate between episodes)."""
        if edge is not None and self.episode.is_team:
            role = self.episode.role_of
            self.metrics.failed_edge = f"{role[edge[0]]}>{role[edge[1]]}"

    def _commit(self, resolution: Resolution) -> None:
        self.trace.append(ResolveRecord(resolution))
        if resolution.commitment is None:
            self._failed_on(resolution.edge)
            self._end(resolution.code or F.RESOLUTION_CONFLICT, resolution.reason)
            return
        m = self.metrics
        m.values["commitment_validity"] = True
        m.values["time_to_commitment"] = time.perf_counter() - (m.t_first_observation or m.t_start)
        try:
            plan = self._rewritten(P.MATERIALIZE, self.stages.materialize(resolution.commitment, self.episode),
                                   commitment=resolution.commitment)
        except MaterializationError as e:
            self.trace.append(MaterializeRecord(error=str(e)))
            self._end(F.MATERIALIZATION_FAILURE, str(e))
            return
        done_nodes = set(resolution.commitment.node_ids[0][: len(self.progress.executed)])
        self._discharge(plan, [t.id for t in plan.tasks if t.node in done_nodes])
        truth = self.world.observe()
        verdict = self._rewritten(P.VERIFY, self.stages.verify(plan, self.events, truth), plan=plan, events=self.events,
                                  ground_truth=truth)
        self.trace.append(VerifyRecord(verdict, truth))
        m.values["handoff_verified"] = verdict.handoff_verified
        missing = next((h for h in verdict.checks.get("handoffs", ()) if not h["ok"]), None)
        if missing is not None and verdict.code is F.HANDOFF_FAILURE:
            self._failed_on((missing["producer"], missing["receiver"]))
        self._end(verdict.code, "; ".join(verdict.reasons))

    def _end(self, code: FailureCode, reason: str = "") -> None:
        self.outcome = code
        self.reason = printable(reason)  # a parser's message may quote an agent's lone surrogate
        self.metrics.values["episode_seconds"] = time.perf_counter() - self.metrics.t_start

    def truncate(self, fault: BaseException) -> None:
        """End the episode because the world broke (an infrastructure fault, not an agent's mistake): no
        outcome, the fault's type and message kept in ``fault`` and in the trace."""
        self.fault = {"type": type(fault).__name__, "message": printable(str(fault))}
        self.reason = self.fault["message"]
        self.trace.append(FaultRecord(self.fault["type"], self.fault["message"]))
        self.metrics.values["episode_seconds"] = time.perf_counter() - self.metrics.t_start

    def stop(self, reason: str) -> None:
        """End the episode unfinished, as a truncation (the env's ``max_cycles`` ran out): no outcome, the
        reason kept and a ``{"stage": "max_cycles"}`` trace record."""
        self.stopped = self.reason = reason
        self.trace.append(MaxCyclesRecord(reason))
        self.metrics.values["episode_seconds"] = time.perf_counter() - self.metrics.t_start


#: The method that runs each step, found at import: a step no method implements fails here, not mid-episode.
_STEP_METHODS: dict[Step, Callable[[EpisodeSession, Proposal, str], None]] = {
    step: getattr(EpisodeSession, f"_{step.value}") for step in Step}


__all__ = ["EpisodeSession", "Metrics", "Progress", "Setup", "printable", "traced", "unreadable"]
