"""Rule agents (zero model calls), all behind ``act(observation, info) -> str``.

- ``RuleMinimalRequest``: the sender forwards its private binding; the public composer builds both
  role-local paths; the receiver realizes the delivered REQ; the requester follows the bounded response.
- ``ExplicitFactorComposer``: composes from canonical factors (template, binding, quantity) through the
  template table, not from the context's rendered DAG.
- ``CompleteCaseTable``: looks up whole sender cases seen in a training pool; unseen cases get no plan.
- ``RequesterLocal`` (A-only): plans from its own view only, always the default branch, never asks.
- ``RandomAgent``: a random admissible branch (or random text), seeded.

In a team each agent does the same from what reaches it: a fact holder composes the requests its fact
decides, a receiver realizes the requests delivered to it (and, in a relay, passes on what they decide for
the agents after it), and where a request never arrived it takes the first admissible branch of that
fact, as a two-agent receiver does.
"""
from __future__ import annotations

import hashlib
import random
from typing import Any

from gencoord_env import dsl
from gencoord_env.types import PeerRequest, Proposal, Task
from gencoord_env.tasks import Cluster, Episode, pool as load_pool
from gencoord_env.tasks.compose import role_paths
from gencoord_env.tasks.prior import GOAL_CAPABILITY, prior

from gencoord_env.agents.base import RulePolicy
from gencoord_env.tasks.context_view import JOINT_STAGES, codebook, compose, delivered, roles, team, team_record
from gencoord_env.caches import Memo
from gencoord_env.lifecycle import DecisionStage
from gencoord_env.messages import RequestMessage, ResponseMessage
from gencoord_env.tasks.contexts import Context

NO_PLAN = "SELF -\nREQ -"


def _joint(first: tuple[Task, ...], second: tuple[Task, ...], peer: str) -> str:
    return dsl.format(Proposal(first, (PeerRequest(peer, second),)))


#: The joint record of a branch, by (rendered prior, binding, peer): the rule's own memo of what it says.
_SAID = Memo("agents.rules.joint", maxsize=16384)


def _joint_branch(ctx: Context, binding: str, peer: str) -> str:
    key = (ctx.prior.text, binding, peer)
    text = _SAID.get(key)
    if text is None:
        first, second = roles(ctx)
        text = _SAID.put(key, _joint(*compose(ctx, binding, first, second), peer))
    return text


def _self_only(path: tuple[Task, ...]) -> str:
    return dsl.format(Proposal(path, ()))


class RuleMinimalRequest(RulePolicy):
    """Rule-Minimal-Request: forward the private binding; compose paths from the shared prior."""

    name = "rule"

    def __init__(self, surface: str = "dsl") -> None:
        self.surface = surface

    def _out(self, text: str, max_requests: int = 1) -> str:
        if self.surface == "dsl":
            return text
        return dsl.to_json(dsl.parse(text, max_requests=max_requests), max_requests=max_requests)

    def binding(self, ctx: Context) -> str | None:
        """The branch this agent can justify from its own context."""
        private = ctx.private
        if private.active_binding_id is not None:
            return private.active_binding_id
        if private.workcell_mode is not None:  # a merged (centralized) view exposes the peer's mode
            return prior().goal_capability.modes[private.workcell_mode]
        return None

    def act(self, observation: str, info: dict[str, Any]) -> str:
        ctx = info.get("context")
        if ctx is None:
            return NO_PLAN
        return self._out(self.decide(ctx), max(1, len(ctx.team) - 1))

    def decide(self, ctx: Context) -> str:
        if ctx.team:
            return self.decide_team(ctx)
        stage, peer = ctx.stage, ctx.peer
        first, second = roles(ctx)
        if stage == DecisionStage.RECEIVER_AFTER_REQUEST:
            delivered = next((m for m in ctx.messages if isinstance(m, RequestMessage)), None)
            if delivered is not None:  # realize the delivered REQ as its own SELF path
                if delivered.payload.startswith("REQ "):  # the DSL line itself: copy its path
                    return f"SELF {delivered.payload.split(' ', 2)[2]}\nREQ -"
                return _self_only(delivered.request.requested_plan)
            return _self_only(compose(ctx, self.guess(ctx), first, second)[1])
        if stage == DecisionStage.CENTRALIZED:
            uploaded = self.binding(ctx.peer_view) if ctx.peer_view is not None else None
            b = self.binding(ctx) or uploaded or self.guess(ctx)
            return _joint(*compose(ctx, b, first, second), peer)
        if stage in (DecisionStage.REQUESTER_INITIAL, DecisionStage.REQUESTER_AFTER_RESPONSE):
            b = self.requester_branch(ctx)
            return _joint(*compose(ctx, b, first, second), peer)
        b = self.binding(ctx) or self.guess(ctx)
        mine, theirs = compose(ctx, b, first, second)
        if ctx.route == "single_step":
            if stage == DecisionStage.SENDER_INITIAL:
                return _self_only(mine[:1])
            return _joint(mine[len(ctx.history):], theirs, peer)
        return _joint_branch(ctx, b, peer)

    def guess(self, ctx: Context) -> str:
        """Without the deciding fact: the first admissible branch (a fixed, view-only choice)."""
        return codebook(ctx)[0]

    def decide_team(self, ctx: Context) -> str:
        """A team agent's record: the branches it can justify, a guess for each other fact it must act on."""
        shape = team(ctx)
        max_requests = len(shape.roles) - 1
        mine = self.binding(ctx)
        known = [mine] if mine else []  # in order of trust: its own fact first
        for view in ctx.peer_views:  # a centralized planner reads every uploaded fact
            if view.private.active_binding_id:
                known.append(view.private.active_binding_id)
        requests = delivered(ctx)
        for m in requests:
            known += [b for t in m.request.requested_plan if isinstance(b := t.args.get("bind"), str)]
        for message in ctx.messages:  # a peer's COUNTER names the branch of its edge; ACCEPT keeps the first one
            if isinstance(message, ResponseMessage) and message.response.decision == "COUNTER" \
                    and message.response.counter_offer_id:
                known.append(message.response.counter_offer_id)
        joint = ctx.stage in JOINT_STAGES
        needed = set(range(len(shape.factors))) if joint else shape.known(ctx.role)
        selected: set[str] = set()
        for k, (_, values) in enumerate(shape.factors):  # one branch per fact: two would plan both
            held = next((b for b in known if b in values), None)
            if held is not None:
                selected.add(held)
            elif k in needed:
                selected.add(self.team_guess(ctx, values))
        record = team_record(ctx, selected, joint=joint)
        senders = shape.senders(ctx.role)
        if not joint and senders and len(requests) == len(senders):  # realize exactly what it was asked
            own = tuple(t for m in requests for t in m.request.requested_plan)
            record = Proposal(own, record.peer_requests)
        return dsl.format(record, max_requests=max_requests)

    def team_guess(self, ctx: Context, values: tuple[str, ...]) -> str:
        """Without a fact of the team: its first admissible value."""
        return values[0]

    def requester_branch(self, ctx: Context) -> str:
        r = ctx.response
        default = prior().goal_capability.initial_branch if ctx.task.template == GOAL_CAPABILITY else self.guess(ctx)
        if r is None or r.decision == "ACCEPT":
            return default
        return r.counter_offer_id or default


class RequesterLocal(RuleMinimalRequest):
    """A-only: plans from the requester's own view and ignores any response."""

    name = "requester_local"

    def requester_branch(self, ctx: Context) -> str:
        return prior().goal_capability.initial_branch if ctx.task.template == GOAL_CAPABILITY else self.guess(ctx)


class ExplicitFactorComposer(RuleMinimalRequest):
    """Composes from canonical factors (template id, binding, order quantity) via the template table."""

    name = "factor"

    def decide(self, ctx: Context) -> str:
        b = self.binding(ctx)
        if ctx.stage not in (DecisionStage.SENDER_INITIAL, DecisionStage.CENTRALIZED) or b is None or ctx.route == "single_step" or ctx.team:
            return super().decide(ctx)
        return self.compose_factors(ctx.task.template, b, ctx.task.quantity, ctx.agent, ctx.peer)

    @staticmethod
    def compose_factors(template: str, binding: str, q: int, agent: str, peer: str) -> str:
        perm = 0 if agent == "agent_a" else 1
        ep = Episode(Cluster("factors", template, binding, q, prior().variants[0].id, prior().decoys[0].id), perm)
        first, second = role_paths(ep, binding)
        return _joint(first, second, peer)


class CompleteCaseTable(RuleMinimalRequest):
    """Looks up the whole sender case (template, binding, every observed factor) in a training pool."""

    name = "table"

    def __init__(self, pool: str = "train", seed: int = 0, surface: str = "dsl") -> None:
        super().__init__(surface)
        self.table: dict[tuple[Any, ...], str] = {}
        for c in load_pool(pool, seed):
            for perm in (0, 1):
                ep = Episode(c, perm)
                first, second = role_paths(ep, ep.binding)
                self.table[self._case(ep.first, c.template, c.binding, c.q)] = _joint(first, second, ep.second)

    @staticmethod
    def _case(agent: str, template: str, binding: str, q: int) -> tuple[Any, ...]:
        return (agent, template, binding, q)

    def decide(self, ctx: Context) -> str:
        b = self.binding(ctx)
        if ctx.stage != DecisionStage.SENDER_INITIAL or b is None or ctx.team:
            return super().decide(ctx)
        return self.table.get(self._case(ctx.agent, ctx.task.template, b, ctx.task.quantity), NO_PLAN)


class RandomAgent(RuleMinimalRequest):
    """Chooses a uniformly random admissible branch (``garbage=True``: random printable text).

    Each decision draws from its own stream, seeded by (``seed``, the episode, the deciding role, the turn),
    so an episode's draws are the same whichever episodes this agent played before it: a rollout over several
    arenas or workers, each with its own agent, equals the serial one. Two plays of one episode draw alike.
    """

    name = "random"

    def __init__(self, seed: int = 0, garbage: bool = False, surface: str = "dsl") -> None:
        super().__init__(surface)
        self.seed = seed
        self.rng = random.Random(seed)
        self.garbage = garbage

    def act(self, observation: str, info: dict[str, Any]) -> str:
        key = f"{self.seed}|{info.get('episode_id')}|{info.get('role')}|{info.get('turn')}"
        self.rng = random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))
        if self.garbage:
            import string

            return "".join(self.rng.choice(string.printable) for _ in range(self.rng.randint(0, 80)))
        return super().act(observation, info)

    def binding(self, ctx: Context) -> str | None:
        return str(self.rng.choice(list(codebook(ctx))))

    guess = binding  # type: ignore[assignment]
    requester_branch = binding  # type: ignore[assignment]

    def team_guess(self, ctx: Context, values: tuple[str, ...]) -> str:
        return str(self.rng.choice(list(values)))
