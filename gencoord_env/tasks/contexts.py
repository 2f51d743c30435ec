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
from typing import Any

from gencoord_env.dsl import format as format_dsl
from gencoord_env.dsl.model import Task
from gencoord_env.dsl.serializer import format_task
from gencoord_env.tasks.compose import view_order
from gencoord_env.tasks.episode import Episode

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
    ``private_fact`` is not ``"id"``.
    """
    role = episode.role_of[agent]
    peer = episode.second if agent == episode.first else episode.first
    private = dict(episode.private_fields(agent))
    if "active_binding_id" in private and private_fact != "id":
        private = {"active_fact": describe(private["active_binding_id"], private_fact, episode)}
    world = episode.world
    own_chests = {s.name for s in episode.prior.stations if s.owner == agent}
    t = episode.template
    nodes = view_order(episode.nodes, view)
    return {
        "agent": agent,
        "role": role,
        "peer": peer,
        "stage": stage,
        "route": route,
        "task": {"template": t.id, "family": t.family, "title": t.title,
                 "order": t.order.format(q=episode.quantities["q"], goal="the goal item")},
        "private": private,
        "observation": {
            "position": list(world.positions[agent]),
            "inventory": dict(sorted(world.inventories.get(agent, {}).items())),
            "stations": [
                {"name": s.name, "kind": s.kind, "pos": list(s.pos),
                 **({"contents": dict(sorted(world.containers.get(s.name, {}).items()))} if s.name in own_chests else {})}
                for s in _visible_stations(episode)
            ],
        },
        "history": list(history),
        "messages": list(messages),
        "prior": {
            "view": view,
            "roles": list(t.roles),
            "codebook": list(t.bindings),
            "nodes": [_node_dict(n, view) for n in nodes],
        },
    }


def _visible_stations(episode: Episode):  # type: ignore[no-untyped-def]
    """Public stations at their episode positions; Goal x Capability stations are listed whatever the mode."""
    placed = {s.name: s for s in episode.world.stations}
    for spec in episode.public_stations:
        s = placed.get(spec.name)
        if s is None:  # a workcell station of the other mode: its reference is public, its state is not
            from gencoord_env.world.types import Station

            s = Station(spec.name, spec.kind, episode._place(spec.pos))
        yield s


def _node_dict(n: Any, view: str) -> dict[str, Any]:
    d: dict[str, Any] = {"id": n.id, "actor": n.role, "branch": n.branch or "*", "task": format_task(n.task), "loc": n.loc}
    if view in ("full", "skeleton"):
        d["stage"] = n.stage
    if view == "full":
        d["preds"] = list(n.preds)
    return d


def render(context: Mapping[str, Any]) -> str:
    """The text form of a context dict: one fact per line, stable order."""
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
    obs = c["observation"]
    lines.append(f"POSITION {tuple(obs['position'])}")
    lines.append("INVENTORY " + _counts(obs["inventory"]))
    for s in obs["stations"]:
        extra = f" contents={_counts(s['contents'])}" if "contents" in s else ""
        lines.append(f"STATION {s['name']} {s['kind']} {tuple(s['pos'])}{extra}")
    lines += [f"HISTORY {h}" for h in c["history"]] or ["HISTORY -"]
    lines += [f"MESSAGE {m}" for m in c["messages"]] or ["MESSAGE -"]
    p = c["prior"]
    lines.append(f"PRIOR view={p['view']} roles={','.join(p['roles'])} codebook={','.join(p['codebook'])}")
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


def request_message(sender: str, tasks: Sequence[Task], target: str) -> str:
    """How a delivered REQ appears in the receiver's context."""
    return f"REQ from {sender}: " + format_dsl_request(target, tasks)


def format_dsl_request(target: str, tasks: Sequence[Task]) -> str:
    from gencoord_env.dsl.model import PeerRequest, Proposal

    return format_dsl(Proposal((), (PeerRequest(target, tuple(tasks)),))).split("\n", 1)[1]
