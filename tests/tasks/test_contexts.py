from __future__ import annotations

import dataclasses
import json
import re

import pytest

import gencoord_env
from gencoord_env import dsl
from gencoord_env.messages import Done, ProposalMessage, RequestMessage, Response, ResponseMessage, Utterance
from gencoord_env.tasks import Episode, pool
from gencoord_env.tasks.compose import VIEW_FORMS, order_nodes
from gencoord_env.tasks.contexts import Context, build_context, render, upload


def _ep() -> Episode:
    return Episode(pool("heldout")[0], 0)


def test_context_carries_identity_observation_history_messages_and_prior() -> None:
    ep = _ep()
    task = dsl.parse("SELF resource.obtain(q=2,item=oak_planks)\nREQ -").self_plan[0]
    request = dsl.parse(f"SELF -\nREQ {ep.second} resource.obtain(q=1,item=oak_planks)").peer_requests[0]
    ctx = build_context(ep, ep.first, "sender_initial", history=[Done(task)],
                        messages=[RequestMessage(ep.second, request, "y")])
    text = render(ctx)
    for line in (f"AGENT {ep.first}", "ROLE sender", f"PEER {ep.second}", "STAGE sender_initial",
                 f"PRIVATE active_binding_id={ep.binding}", "HISTORY DONE resource.obtain(q=2,item=oak_planks) ok",
                 f"MESSAGE REQ from {ep.second}: y", "PRIOR view=full"):
        assert line in text
    assert ctx.request == request and ctx.task.quantity == ep.cluster.q
    own = ep.source_chest(ep.first)
    assert any(s.name == own and s.contents is not None for s in ctx.observation.stations)
    assert not any(s.name != own and s.contents is not None for s in ctx.observation.stations)


def test_every_message_kind_has_one_line() -> None:
    ep = _ep()
    q = dsl.parse(f"SELF resource.obtain(q=1,item=oak_planks)\nREQ {ep.second} resource.obtain(q=1,item=oak_planks)")
    response = Response("COUNTER", "WHY", "X")
    messages = [ProposalMessage(q, dsl.format(q)), ResponseMessage(response), Utterance(ep.second, "hello")]
    text = render(build_context(ep, ep.first, "requester_after_response", messages=messages))
    assert f"MESSAGE PROPOSAL {dsl.format(q).replace(chr(10), ' | ')}" in text
    assert f"MESSAGE RESPONSE {response.wire()}" in text
    assert f"MESSAGE {ep.second} says: hello" in text


def test_receiver_has_no_private_binding() -> None:
    ep = _ep()
    ctx = build_context(ep, ep.second, "receiver_after_request")
    assert "PRIVATE -" in render(ctx)
    assert ctx.private.items() == []


def test_views_project_the_prior() -> None:
    ep = _ep()
    full, skel, node = (build_context(ep, ep.first, "sender_initial", view=v).prior.nodes for v in ("full", "skeleton", "node_only"))
    assert all(n.preds is not None and n.stage is not None for n in full)
    assert all(n.preds is None and n.stage is not None for n in skel)
    assert all(n.preds is None and n.stage is None for n in node)
    assert sorted(n.id for n in full) == sorted(n.id for n in node)


def test_an_unknown_view_is_refused_naming_the_known_views() -> None:
    ep = _ep()
    expected = "unknown view 'skeletn'; expected one of full, skeleton, node_only (did you mean 'skeleton'?)"
    with pytest.raises(ValueError, match=re.escape(expected)):
        build_context(ep, ep.first, "sender_initial", view="skeletn")
    with pytest.raises(ValueError, match=re.escape(expected)):
        order_nodes(ep.nodes, "skeletn")
    with pytest.raises(ValueError, match=re.escape(expected)):
        gencoord_env.parallel_env(backend="sim", view="skeletn")


@pytest.mark.parametrize("view", list(VIEW_FORMS))
def test_each_view_row_says_what_its_prior_lines_show(view: str) -> None:
    """The PRIOR block of each view shows stage= and preds= exactly where its row says, and lists the nodes in
    the row's listing order (two agents and a team)."""
    form = VIEW_FORMS[view]
    for ep in (_ep(), Episode(pool("teams")[0], 0)):
        text = render(build_context(ep, ep.first, "sender_initial", view=view))
        lines = [line for line in text.split("\n") if line.startswith("NODE ")]
        assert f"PRIOR view={view} " in text
        assert [line.split()[1] for line in lines] == [n.id for n in form.order(ep.nodes, False)]
        assert all((" stage=" in line) is form.shows_stage and (" preds=" in line) is form.shows_preds for line in lines)


def test_contexts_are_frozen_values_and_render_deterministically() -> None:
    ep = _ep()
    a, b = build_context(ep, ep.first, "sender_initial"), build_context(ep, ep.first, "sender_initial")
    assert a == b and render(a) == render(b) and render(a).isascii()
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.stage = "x"  # type: ignore[misc]
    json.dumps(a.to_dict())  # plain JSON values


def test_the_dict_form_carries_what_the_text_does() -> None:
    ep = _ep()
    ctx = build_context(ep, ep.first, "sender_initial")
    d = ctx.to_dict()
    text = render(ctx)
    assert d["task"]["order"] in text and str(d["private"]["active_binding_id"]) in text
    assert all(n["task"] in text for n in d["prior"]["nodes"])


def test_centralized_context_carries_the_peer_upload_without_the_prior() -> None:
    ep = Episode(pool("goal_capability")[0], 0)
    ctx = build_context(ep, ep.first, "centralized", route="centralized")
    assert isinstance(ctx.peer_view, Context) and ctx.peer_view.private.workcell_mode == ep.cluster.mode
    up = upload(ctx)
    assert "PRIOR" not in up and render(ctx).endswith(up)
    with pytest.raises(ValueError, match="only 'centralized'"):
        upload(build_context(ep, ep.first, "requester_initial"))
