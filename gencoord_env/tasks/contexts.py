"""Local contexts x_i^t = (o_i^t, h_i^t, m_i^t) plus the shared prior K, as a dict and as text.

The dict is the structured form for researchers who do not want text; the text is rendered from it and
nothing else, so both always carry the same information. What an agent sees:

- identity, role, peer, decision stage, the public order;
- its private field where it has one (sender: the active binding; requester: its goal). Private facts
  can be shown as the binding id or as a naturalized description (``private_fact``);
- its local observation: own position and inventory, the public stations, the contents of its own chests;
- its execution history and the messages it received (the delivered REQ or the bounded response);
- the shared prior through one of three projections (``view``): ``full`` (nodes with typed fields,
  stages, predecessors), ``skeleton`` (stages, no predecessors), ``node_only`` (neither; stable order).

Receiver views of paired bindings are identical until a request arrives, and Goal x Capability requester
views are identical across the two workcell modes: nothing here depends on the hidden fact.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from gencoord_env.catalog import CATALOG
from gencoord_env.dsl import format as format_dsl
from gencoord_env.dsl.model import PeerRequest, Proposal, Task
from gencoord_env.dsl.serializer import format_task
from gencoord_env.tasks.compose import view_order
from gencoord_env.tasks.episode import Episode
from gencoord_env.world.types import Station

PRIVATE_FACT_FORMS: tuple[str, ...] = ("id", "train", "C1", "C2", "C3")


def build_context(
    episode: Episode,
    agent: str,
    stage: str,
    *,
    route: str = "forward",
    view: str = "full",
    history: Sequence[str] = (),
    messages: Sequence[str] = (),
    private_fact: str = "id",
    describe: Any = None,
) -> dict[str, Any]:
    """The structured local context of ``agent`` at decision ``stage``.

    ``describe(binding, form, episode)`` renders a naturalized private fact; it is only used when
    ``private_fact`` is not ``"id"``. The ``observation`` and ``prior`` parts are shared between calls for
    the same episode, agent and view: treat the returned dict as read-only.
    """
    private = dict(episode.private_fields(agent))
    if "active_binding_id" in private and private_fact != "id":
        private = {"active_fact": describe(private["active_binding_id"], private_fact, episode)}
    head, observation, prior_part = _static(episode, agent, view)
    return {
        **head,
        "stage": stage,
        "route": route,
        "private": private,
        "observation": observation,
        "history": list(history),
        "messages": list(messages),
        "prior": prior_part,
    }


def observation(
    episode: Episode,
    agent: str,
    stage: str,
    *,
    route: str = "forward",
    view: str = "full",
    history: Sequence[str] = (),
    messages: Sequence[str] = (),
    private_fact: str = "id",
    describe: Any = None,
) -> tuple[str, dict[str, Any]]:
    """What the deciding agent observes: (text, structured context).

    At the ``centralized`` stage the planner also receives the peer's local view (without the shared
    prior, which it already holds); that upload is in ``context["upload"]`` so its bytes can be counted.
    """
    ctx = build_context(episode, agent, stage, route=route, view=view, history=history, messages=messages,
                        private_fact=private_fact, describe=describe)
    text = render(ctx)
    if stage == "centralized":
        peer_ctx = build_context(episode, episode.second if agent == episode.first else episode.first,
                                 "centralized_peer_view", route=route, view=view, private_fact=private_fact,
                                 describe=describe)
        upload = render(peer_ctx, with_prior=False)
        ctx = {**ctx, "peer_context": peer_ctx, "upload": upload}
        text = text + "\n" + upload
    return text, ctx


#: Rendered text of the shared (cached) observation and prior parts, keyed by object identity.
_RENDERED: dict[int, tuple[object, str]] = {}


@lru_cache(maxsize=4096)
def _static(episode: Episode, agent: str, view: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The parts of a context that do not change during an episode, built once per (episode, agent, view)."""
    world = episode.world
    t = episode.template
    own_chests = {s.name for s in episode.prior.stations if s.owner == agent}
    head = {
        "agent": agent,
        "role": episode.role_of[agent],
        "peer": episode.second if agent == episode.first else episode.first,
        "task": {"template": t.id, "family": t.family, "title": t.title,
                 "order": t.order.format(q=episode.quantities["q"], goal="the goal item")},
    }
    observation = {
        "position": list(world.positions[agent]),
        "inventory": dict(sorted(world.inventories.get(agent, {}).items())),
        "stations": [
            {"name": s.name, "kind": s.kind, "pos": list(s.pos),
             **({"contents": dict(sorted(world.containers.get(s.name, {}).items()))} if s.name in own_chests else {})}
            for s in _visible_stations(episode)
        ],
    }
    prior_part = {
        "view": view,
        "roles": list(t.roles),
        "codebook": list(t.bindings),
        "skills": _skill_lines(),
        "nodes": [_node_dict(n, view) for n in view_order(episode.nodes, view)],
    }
    if len(_RENDERED) > 4 * 4096:
        _RENDERED.clear()
    _RENDERED[id(observation)] = (observation, _render_observation(observation))
    _RENDERED[id(prior_part)] = (prior_part, _render_prior(prior_part))
    return head, observation, prior_part


def _visible_stations(episode: Episode):  # type: ignore[no-untyped-def]
    """Public stations at their episode positions; Goal x Capability stations are listed whatever the mode."""
    placed = {s.name: s for s in episode.world.stations}
    for spec in episode.public_stations:
        s = placed.get(spec.name)
        if s is None:  # a workcell station of the other mode: its reference is public, its state is not
            s = Station(spec.name, spec.kind, episode._place(spec.pos))
        yield s


def _node_dict(n: Any, view: str) -> dict[str, Any]:
    d: dict[str, Any] = {"id": n.id, "actor": n.role, "branch": n.branch or "*", "task": format_task(n.task), "loc": n.loc}
    if view in ("full", "skeleton"):
        d["stage"] = n.stage
    if view == "full":
        d["preds"] = list(n.preds)
    return d


def render(context: Mapping[str, Any], *, with_prior: bool = True) -> str:
    """The text form of a context dict: one fact per line, stable order.

    ``with_prior=False`` leaves out the shared prior (which every agent already holds): what a
    centralized planner has to collect from a peer is only its local view.
    """
    c = context
    lines = [
        f"AGENT {c['agent']}",
        f"ROLE {c['role']}",
        f"PEER {c['peer']}",
        f"STAGE {c['stage']}",
        f"ROUTE {c['route']}",
        f"TASK {c['task']['template']} ({c['task']['family']}): {c['task']['order']}",
    ]
    lines += [f"PRIVATE {k}={v}" for k, v in c["private"].items()] or ["PRIVATE -"]
    lines.append(_cached(c["observation"], _render_observation))
    lines += [f"HISTORY {h}" for h in c["history"]] or ["HISTORY -"]
    lines += [f"MESSAGE {m}" for m in c["messages"]] or ["MESSAGE -"]
    if with_prior:
        lines.append(_cached(c["prior"], _render_prior))
    return "\n".join(lines)


def _cached(part: Mapping[str, Any], fn: Any) -> str:
    hit = _RENDERED.get(id(part))
    return hit[1] if hit is not None and hit[0] is part else fn(part)  # type: ignore[no-any-return]


def _render_observation(obs: Mapping[str, Any]) -> str:
    lines = [f"POSITION {tuple(obs['position'])}", "INVENTORY " + _counts(obs["inventory"])]
    for s in obs["stations"]:
        extra = f" contents={_counts(s['contents'])}" if "contents" in s else ""
        lines.append(f"STATION {s['name']} {s['kind']} {tuple(s['pos'])}{extra}")
    return "\n".join(lines)


@lru_cache(maxsize=1)
def _skill_lines() -> tuple[str, ...]:
    """The skill ontology of the prior: each catalog skill with its required and [optional] keys."""
    out = []
    for name, spec in CATALOG.skills.items():
        required = list(spec.required) + ([" | ".join(spec.exactly_one_of)] if spec.exactly_one_of else [])
        out.append(f"{name} {','.join(required) or '-'} [{','.join(spec.optional)}]")
    return tuple(out)


def _render_prior(p: Mapping[str, Any]) -> str:
    lines = [f"PRIOR view={p['view']} roles={','.join(p['roles'])} codebook={','.join(p['codebook'])}"]
    lines += [f"SKILL {line}" for line in p.get("skills", ())]
    for n in p["nodes"]:
        fields = [n["id"], f"actor={n['actor']}", f"branch={n['branch']}"]
        if "stage" in n:
            fields.append(f"stage={n['stage']}")
        if "preds" in n:
            fields.append("preds=" + (",".join(n["preds"]) or "-"))
        lines.append("NODE " + " ".join(fields) + " " + n["task"])
    return "\n".join(lines)


def _counts(counts: Mapping[str, int]) -> str:
    return ",".join(f"{k}:{v}" for k, v in counts.items()) or "-"


def delivered_message(sender: str, payload: str) -> str:
    """How a delivered REQ payload (in whatever surface carried it) appears in the receiver's context."""
    return f"REQ from {sender}: {payload}"


def request_message(sender: str, tasks: Sequence[Task], target: str) -> str:
    """The receiver's context line for a Short DSL request."""
    return delivered_message(sender, format_dsl_request(target, tasks))


def format_dsl_request(target: str, tasks: Sequence[Task]) -> str:
    return format_dsl(Proposal((), (PeerRequest(target, tuple(tasks)),))).split("\n", 1)[1]
