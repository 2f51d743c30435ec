"""Local contexts x_i^t = (o_i^t, h_i^t, m_i^t) plus the shared prior K: typed values, and their one text form.

``build_context`` makes a frozen ``Context``; ``render`` turns it into the observation text, and nothing
else writes context text, so the text and the structured form always carry the same information. What
an agent sees:

- identity, role, peer, decision stage, the public order (with its quantity); in a team, every role's
  agent (``TEAM``) and its peers;
- its private field where it has one (sender: the active binding, or a naturalized description of it;
  requester: its goal; Goal x Capability peer: its workcell mode);
- its local observation: own position and inventory, the public stations, the contents of its own chests;
- its execution history (``Done``) and the messages it received (``gencoord_env.messages``);
- the shared prior through one of its projections (``view``, a row of ``tasks.compose.VIEW_FORMS``): ``full``
  (nodes with typed fields, stages, predecessors), ``skeleton`` (stages, no predecessors), ``node_only``
  (neither; stable order);
  a team template's prior also names its channels and who holds which fact.

Nothing here depends on the hidden fact of the agent's peer: the pools pair every public instance under
both bindings, and ``tests/tasks/test_paired_views.py`` checks that the uninformed agent's contexts are
identical across each pair.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gencoord_env.caches import Memo, cache
from gencoord_env.catalog import CATALOG
from gencoord_env.dsl import format as format_dsl
from gencoord_env.errors import UsageError
from gencoord_env.types import PeerRequest, Proposal, Task
from gencoord_env.dsl.serializer import format_task
from gencoord_env.lifecycle import DecisionStage
from gencoord_env.messages import Done, Message, RequestMessage, Response, ResponseMessage, render_done, render_message
from gencoord_env.tasks.compose import View, view_form
from gencoord_env.tasks.episode import Episode, GroundedNode
from gencoord_env.world.types import Pos, Station

PRIVATE_FACT_FORMS: tuple[str, ...] = ("id", "train", "C1", "C2", "C3")

Counts = tuple[tuple[str, int], ...]  # sorted (item, count) pairs


@dataclass(frozen=True)
class TaskInfo:
    """The public order: template, family, title, order text and its quantity."""

    template: str
    family: str
    title: str
    order: str
    quantity: int


@dataclass(frozen=True)
class Private:
    """The agent's private field; at most one of these is set (none for the uninformed agent)."""

    active_binding_id: str | None = None
    active_fact: str | None = None  # a naturalized description in place of the binding id
    goal: str | None = None
    workcell_mode: str | None = None

    def items(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in (("active_binding_id", self.active_binding_id), ("active_fact", self.active_fact),
                                    ("goal", self.goal), ("workcell_mode", self.workcell_mode)) if v is not None]


@dataclass(frozen=True)
class StationView:
    name: str
    kind: str
    pos: Pos
    contents: Counts | None = None  # only for the agent's own chests


@dataclass(frozen=True)
class LocalObservation:
    position: Pos
    inventory: Counts
    stations: tuple[StationView, ...]
    text: str = field(default="", repr=False, compare=False)  # rendered once, when built


@dataclass(frozen=True)
class PriorNode:
    """A public prior node as a view shows it; fields the view hides are ``None``."""

    id: str
    role: str
    branch: str | None  # None: shared by every binding
    task: Task
    loc: str
    stage: str | None = None
    preds: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PriorView:
    view: str
    roles: tuple[str, ...]
    codebook: tuple[str, ...]
    skills: tuple[str, ...]
    nodes: tuple[PriorNode, ...]
    text: str = field(default="", repr=False, compare=False)  # rendered once, when built
    channels: tuple[tuple[str, str], ...] = ()  # a team: (sender role, receiver role), in message order
    factors: tuple[tuple[str, tuple[str, ...]], ...] = ()  # a team: (holder role, branch ids) per fact factor


@dataclass(frozen=True)
class Context:
    """One agent's local context at one decision stage."""

    agent: str
    role: str
    peer: str
    stage: str
    route: str
    task: TaskInfo
    private: Private
    observation: LocalObservation
    history: tuple[Done, ...]
    messages: tuple[Message, ...]
    prior: PriorView
    peer_view: Context | None = None  # centralized: the peer's uploaded local view (no prior)
    team: tuple[tuple[str, str], ...] = ()  # a team: (role, agent) of every role
    peer_views: tuple[Context, ...] = ()  # centralized in a team: every other agent's uploaded view

    @property
    def request(self) -> PeerRequest | None:
        """The first REQ delivered to this agent, if any."""
        return next((m.request for m in self.messages if isinstance(m, RequestMessage)), None)

    @property
    def response(self) -> Response | None:
        """The bounded response this agent received, if any."""
        return next((m.response for m in self.messages if isinstance(m, ResponseMessage)), None)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (tasks as Short DSL text), for researchers who want neither text nor types."""
        return {
            "agent": self.agent, "role": self.role, "peer": self.peer, "stage": self.stage, "route": self.route,
            "task": {"template": self.task.template, "family": self.task.family, "title": self.task.title,
                     "order": self.task.order, "quantity": self.task.quantity},
            "private": dict(self.private.items()),
            "observation": {
                "position": list(self.observation.position), "inventory": dict(self.observation.inventory),
                "stations": [{"name": s.name, "kind": s.kind, "pos": list(s.pos),
                              **({"contents": dict(s.contents)} if s.contents is not None else {})}
                             for s in self.observation.stations],
            },
            "history": [render_done(d) for d in self.history],
            "messages": [render_message(m) for m in self.messages],
            "prior": {"view": self.prior.view, "roles": list(self.prior.roles), "codebook": list(self.prior.codebook),
                      "skills": list(self.prior.skills),
                      "nodes": [_node_dict(n) for n in self.prior.nodes],
                      **({"channels": [list(c) for c in self.prior.channels],
                          "facts": {holder: list(values) for holder, values in self.prior.factors}}
                         if self.team else {})},
            **({"peer_view": self.peer_view.to_dict()} if self.peer_view is not None else {}),
            **({"team": dict(self.team)} if self.team else {}),
            **({"peer_views": [v.to_dict() for v in self.peer_views]} if self.peer_views else {}),
        }


def _node_dict(n: PriorNode) -> dict[str, Any]:
    d: dict[str, Any] = {"id": n.id, "actor": n.role, "branch": n.branch or "*", "task": format_task(n.task), "loc": n.loc}
    if n.stage is not None:
        d["stage"] = n.stage
    if n.preds is not None:
        d["preds"] = list(n.preds)
    return d


Describe = Callable[[str, str, Episode], str]


def build_context(
    episode: Episode,
    agent: str,
    stage: str,
    *,
    route: str = "forward",
    view: str = "full",
    history: Sequence[Done] = (),
    messages: Sequence[Message] = (),
    private_fact: str = "id",
    describe: Describe | None = None,
) -> Context:
    """The local context of ``agent`` at decision ``stage``.

    ``describe(binding, form, episode)`` renders a naturalized private fact; it is used when
    ``private_fact`` is not ``"id"`` (a pure function: what it returns is kept with the context). At the
    ``centralized`` stage the context also carries the peer's local view (``peer_view``), which the
    planner receives as an upload.

    A context without history or messages (an episode's first decision) is the same value at every reset
    of the episode: it is built once and the same object returned after that. ``stage`` is kept as the plain
    name (a ``DecisionStage`` equals it), so a context is the same value whichever form built it first.
    """
    stage = str(stage)
    if not history and not messages:
        key = (episode, agent, stage, route, view, private_fact, describe)
        found = _OPENINGS.get(key)
        if found is None:
            found = _OPENINGS.put(key, _build(episode, agent, stage, route, view, (), (), private_fact, describe))
        return found
    return _build(episode, agent, stage, route, view, tuple(history), tuple(messages), private_fact, describe)


#: contexts of first decisions, by everything they depend on
_OPENINGS = Memo("tasks.contexts.openings", maxsize=1 << 14)
#: the parts of an agent's contexts that stay the same for the whole episode
_FIXED = Memo("tasks.contexts.fixed", maxsize=1 << 14)


def _build(episode: Episode, agent: str, stage: str, route: str, view: str, history: tuple[Done, ...],
           messages: tuple[Message, ...], private_fact: str, describe: Describe | None) -> Context:
    key = (episode, agent, view, private_fact, describe)
    fixed = _FIXED.get(key)
    if fixed is None:
        fixed = _FIXED.put(key, _fixed(episode, agent, view, private_fact, describe))
    role, peer, task, private, observation, prior_view, team = fixed
    peer_view = None
    peer_views: tuple[Context, ...] = ()
    if stage == DecisionStage.CENTRALIZED:
        views = tuple(build_context(episode, other, "centralized_peer_view", route=route, view=view,
                                    private_fact=private_fact, describe=describe) for other in episode.peers_of[agent])
        if episode.is_team:
            peer_views = views
        else:
            peer_view = views[0]
    return Context(
        agent=agent, role=role, peer=peer, stage=stage, route=route, task=task, private=private,
        observation=observation, history=history, messages=messages, prior=prior_view, peer_view=peer_view,
        team=team, peer_views=peer_views,
    )


def _fixed(episode: Episode, agent: str, view: str, private_fact: str,
           describe: Describe | None) -> tuple[str, str, TaskInfo, Private, LocalObservation, PriorView, tuple[tuple[str, str], ...]]:
    """(role, peer, task, private, observation, prior view, team) of ``agent``'s contexts in ``episode``."""
    private = _private(episode, agent)
    if private.active_binding_id is not None and private_fact != "id":
        if describe is None:
            raise UsageError(f"private_fact={private_fact!r} needs a describe function")
        private = Private(active_fact=describe(private.active_binding_id, private_fact, episode))
    task, observation, prior_view = _static(episode, agent, view)
    others = episode.peers_of[agent]
    team = tuple(zip(episode.roles, episode.role_agents)) if episode.is_team else ()
    return (episode.role_of[agent], others[0] if len(others) == 1 else ",".join(others), task, private, observation,
            prior_view, team)


def _private(episode: Episode, agent: str) -> Private:
    fields = episode.private_fields(agent)
    return Private(**fields)


@cache(maxsize=4096)
def _static(episode: Episode, agent: str, view: str) -> tuple[TaskInfo, LocalObservation, PriorView]:
    """The parts of a context that do not change during an episode, built and rendered once."""
    world = episode.world
    t = episode.template
    q = episode.quantities["q"]
    task = TaskInfo(t.id, t.family, t.title, t.order.format(q=q, goal="the goal item"), q)
    own_chests = {s.name for s in episode.prior.stations if s.owner == agent}
    stations = tuple(
        StationView(s.name, s.kind, s.pos, _counts(world.containers.get(s.name, {})) if s.name in own_chests else None)
        for s in _visible_stations(episode)
    )
    position, inventory = world.positions[agent], _counts(world.inventories.get(agent, {}))
    observation = LocalObservation(position, inventory, stations, render_observation(position, inventory, stations))
    form = view_form(view)
    nodes = tuple(_prior_node(n, form) for n in form.order(episode.nodes, False))
    roles, codebook = tuple(t.roles), tuple(t.branch_ids)
    channels = t.message_edges if episode.is_team else ()
    factors = tuple((f.holder, f.bindings) for f in t.fact_factors) if episode.is_team else ()
    prior_view = PriorView(view, roles, codebook, skill_lines(), nodes,
                           render_prior(view, roles, codebook, skill_lines(), nodes, channels, factors),
                           channels, factors)
    return task, observation, prior_view


def _counts(counts: Mapping[str, int]) -> Counts:
    return tuple(sorted((k, int(v)) for k, v in counts.items()))


def _visible_stations(episode: Episode) -> list[Station]:
    """Public stations at their episode positions; Goal x Capability stations are listed whatever the mode."""
    placed = {s.name: s for s in episode.world.stations}
    out = []
    for spec in episode.public_stations:
        s = placed.get(spec.name)
        if s is None:  # a workcell station of the other mode: its reference is public, its state is not
            s = Station(spec.name, spec.kind, episode.place(spec.pos))
        out.append(s)
    return out


def _prior_node(n: GroundedNode, view: View) -> PriorNode:
    return PriorNode(n.id, n.role, n.branch, n.task, n.loc, n.stage if view.shows_stage else None,
                     tuple(n.preds) if view.shows_preds else None)


# ----------------------------------------------------------------------------------------- text


def render(context: Context, *, with_prior: bool = True) -> str:
    """The text form of a context: one fact per line, stable order.

    ``with_prior=False`` leaves out the shared prior (which every agent already holds): what a
    centralized planner has to collect from a peer is only its local view. A centralized context's text
    ends with that upload.
    """
    return "\n".join(render_parts(context, with_prior=with_prior))


def render_parts(context: Context, *, with_prior: bool = True) -> tuple[str, ...]:
    """``render``'s text in blocks whose join by LF is the text; the large blocks (the local observation,
    the prior) are the same string objects at every decision of an episode, so consumers can memoize them."""
    c = context
    t, p = c.task, c.private
    if p.active_binding_id is None and p.active_fact is None and p.goal is None and p.workcell_mode is None:
        private = "PRIVATE -"
    else:
        private = "\n".join([f"PRIVATE {k}={v}" for k, v in p.items()])
    team = f"TEAM {' '.join(f'{r}={a}' for r, a in c.team)}\n" if c.team else ""
    head = (f"AGENT {c.agent}\nROLE {c.role}\nPEER {c.peer}\n{team}STAGE {c.stage}\nROUTE {c.route}\n"
            f"TASK {t.template} ({t.family}): {t.order}\n{private}")
    if c.history or c.messages:
        tail = "\n".join([*([f"HISTORY {render_done(h)}" for h in c.history] or ["HISTORY -"]),
                          *([f"MESSAGE {render_message(m)}" for m in c.messages] or ["MESSAGE -"])])
    else:
        tail = "HISTORY -\nMESSAGE -"
    if c.peer_view is None and not c.peer_views:
        return (head, c.observation.text, tail, c.prior.text) if with_prior else (head, c.observation.text, tail)
    parts = [head, c.observation.text, tail]
    if with_prior:
        parts.append(c.prior.text)
    if c.peer_view is not None:
        parts.append(upload(c))
    parts += [text for _, text in uploads(c)] if c.peer_views else []
    return tuple(parts)


def upload(context: Context) -> str:
    """What a centralized planner receives from its peer: the peer's local view without the prior."""
    if context.peer_view is None:
        raise UsageError(f"stage {context.stage!r} has no peer upload (only 'centralized' does)")
    return render(context.peer_view, with_prior=False)


def uploads(context: Context) -> tuple[tuple[str, str], ...]:
    """(peer agent, uploaded view) of every peer whose local view reached a centralized planner: one in a
    two-agent episode, every other agent in a team (each view without the prior)."""
    views = (context.peer_view,) if context.peer_view is not None else context.peer_views
    return tuple((v.agent, render(v, with_prior=False)) for v in views)


def render_observation(position: Pos, inventory: Counts, stations: Sequence[StationView]) -> str:
    """The local observation's block of a context's text (``LocalObservation.text``)."""
    lines = [f"POSITION {tuple(position)}", "INVENTORY " + _text_counts(inventory)]
    for s in stations:
        extra = f" contents={_text_counts(s.contents)}" if s.contents is not None else ""
        lines.append(f"STATION {s.name} {s.kind} {tuple(s.pos)}{extra}")
    return "\n".join(lines)


@cache(maxsize=1)
def skill_lines() -> tuple[str, ...]:
    """The skill ontology of the prior: each catalog skill with its required and [optional] keys."""
    out = []
    for name, spec in CATALOG.skills.items():
        required = list(spec.required) + ([" | ".join(spec.exactly_one_of)] if spec.exactly_one_of else [])
        out.append(f"{name} {','.join(required) or '-'} [{','.join(spec.optional)}]")
    return tuple(out)


def render_prior(view: str, roles: Sequence[str], codebook: Sequence[str], skills: Sequence[str],
                 nodes: Sequence[PriorNode], channels: Sequence[tuple[str, str]] = (),
                 factors: Sequence[tuple[str, Sequence[str]]] = ()) -> str:
    """The shared prior's block of a context's text (``PriorView.text``)."""
    head = f"PRIOR view={view} roles={','.join(roles)} codebook={','.join(codebook)}"
    if channels:  # a team: who tells whom, and who holds which fact
        head += f" channels={','.join(f'{a}>{b}' for a, b in channels)}"
        head += f" facts={','.join(f'{holder}:' + '|'.join(values) for holder, values in factors)}"
    lines = [head]
    lines += [f"SKILL {line}" for line in skills]
    for n in nodes:
        fields = [n.id, f"actor={n.role}", f"branch={n.branch or '*'}"]
        if n.stage is not None:
            fields.append(f"stage={n.stage}")
        if n.preds is not None:
            fields.append("preds=" + (",".join(n.preds) or "-"))
        lines.append("NODE " + " ".join(fields) + " " + format_task(n.task))
    return "\n".join(lines)


# The prior block as render_prior writes it: its header line, then one line per skill and per node.
_PRIOR_HEAD = "PRIOR "
_PRIOR_BODY = ("SKILL ", "NODE ")


def split_prior(context: str) -> tuple[str, str] | None:
    """(prior block, the observation without it) of a rendered observation, or None when it has no prior block:
    the inverse of rendering with and without the prior (``render(ctx, with_prior=False)``)."""
    lines = context.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith(_PRIOR_HEAD)), None)
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and lines[end].startswith(_PRIOR_BODY):
        end += 1
    return "\n".join(lines[start:end]), "\n".join(lines[:start] + lines[end:])


def _text_counts(counts: Counts) -> str:
    return ",".join(f"{k}:{v}" for k, v in counts) or "-"


def request_payload(target: str, tasks: Sequence[Task]) -> str:
    """A Short DSL request line, ``REQ <target> <path>`` (the DSL surface's payload)."""
    return format_dsl(Proposal((), (PeerRequest(target, tuple(tasks)),))).split("\n", 1)[1]


__all__ = [
    "PRIVATE_FACT_FORMS", "Context", "LocalObservation", "Private", "PriorNode", "PriorView", "StationView", "TaskInfo",
    "build_context", "render", "render_observation", "render_parts", "render_prior", "request_payload", "skill_lines",
    "split_prior", "upload", "uploads",
]
