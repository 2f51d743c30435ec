from __future__ import annotations

from gencoord_env.tasks import Episode, pool
from gencoord_env.tasks.contexts import build_context, render


def _ep() -> Episode:
    return Episode(pool("heldout")[0], 0)


def test_context_carries_identity_observation_history_messages_and_prior() -> None:
    ep = _ep()
    ctx = build_context(ep, ep.first, "sender_initial", history=["DONE x"], messages=["REQ from agent_b: y"])
    text = render(ctx)
    for line in (f"AGENT {ep.first}", "ROLE sender", f"PEER {ep.second}", "STAGE sender_initial",
                 f"PRIVATE active_binding_id={ep.binding}", "HISTORY DONE x", "MESSAGE REQ from agent_b: y", "PRIOR view=full"):
        assert line in text
    own = ep.source_chest(ep.first)
    assert any(s["name"] == own and "contents" in s for s in ctx["observation"]["stations"])
    assert not any(s["name"] != own and "contents" in s for s in ctx["observation"]["stations"])


def test_receiver_has_no_private_binding() -> None:
    ep = _ep()
    text = render(build_context(ep, ep.second, "receiver_after_request"))
    assert "PRIVATE -" in text
    assert ep.binding not in [line.split("=")[-1] for line in text.splitlines() if line.startswith("PRIVATE")]


def test_views_project_the_prior() -> None:
    ep = _ep()
    full, skel, node = (build_context(ep, ep.first, "sender_initial", view=v)["prior"]["nodes"] for v in ("full", "skeleton", "node_only"))
    assert all("preds" in n and "stage" in n for n in full)
    assert all("preds" not in n and "stage" in n for n in skel)
    assert all("preds" not in n and "stage" not in n for n in node)
    assert sorted(n["id"] for n in full) == sorted(n["id"] for n in node)


def test_text_is_rendered_from_the_dict_only() -> None:
    ep = _ep()
    ctx = build_context(ep, ep.first, "sender_initial")
    assert render(ctx) == render(dict(ctx))
    assert render(ctx).isascii()
