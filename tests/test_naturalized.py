from __future__ import annotations

import re

import pytest
from gencoord_env.agents.rollout import rollout, summarize
from gencoord_env.agents import make_policy

import gencoord_env
from gencoord_env.tasks import Episode, pool, prior
from gencoord_env.tasks.naturalized import FORMS, describe, phrasings, table


def _episodes(name: str = "heldout") -> list[Episode]:
    return [Episode(c, perm) for c in pool(name) for perm in (0, 1)]


def test_every_binding_of_every_template_has_every_form():
    bindings = {b for t in prior().templates.values() for b in t.bindings}
    assert bindings <= set(table()["bindings"])
    for b in bindings:
        train, c1, c2 = (set(phrasings(b, f)) for f in ("train", "C1", "C2"))
        assert len(train) >= 3 and c1 and c2
        assert not (train & c1) and not (train & c2) and not (c1 & c2)  # held-out surfaces are new strings


#: function words and passive participles a syntactic recombination may add to the training words
GRAMMAR = {"is", "are", "what", "by", "the", "to", "a", "built", "deposited", "done", "crafted", "handed"}


def test_c1_reuses_training_words_and_c2_mostly_does_not():
    words = lambda texts: {w for t in texts for w in re.findall(r"\w+", t.lower())}  # noqa: E731
    for b in table()["bindings"]:
        train = words(phrasings(b, "train"))
        assert words(phrasings(b, "C1")) <= train | GRAMMAR, b
        assert len(words(phrasings(b, "C2")) - train) >= 2, b


def test_describe_is_stable_per_cluster_and_c3_mentions_the_other_option():
    for ep in _episodes()[:40]:
        twin = Episode(ep.cluster, 1 - ep.perm)
        for form in FORMS:
            assert describe(ep.binding, form, ep) == describe(ep.binding, form, twin)
        c3 = describe(ep.binding, "C3", ep)
        other = next(b for b in ep.template.bindings if b != ep.binding)
        assert any(p in c3 for p in phrasings(ep.binding, "C2"))
        assert any(p in c3 for p in phrasings(other, "C2"))


def test_the_sender_sees_a_description_not_the_id():
    env = gencoord_env.parallel_env(backend="sim", pool="heldout", private_fact="C2")
    obs, infos = env.reset(options={"index": 0})
    sender = env.unwrapped.session.turn
    ctx = infos[sender]["context"]
    episode = env.unwrapped.session.episode
    assert ctx.private.items() == [("active_fact", describe(episode.binding, "C2", episode))]
    assert f"PRIVATE active_fact={describe(episode.binding, 'C2', episode)}" in obs[sender]
    assert "active_binding_id" not in obs[sender]  # the codebook stays public; the active id is gone


def test_unknown_form_and_binding_fail_early():
    ep = _episodes()[0]
    with pytest.raises(ValueError, match=re.escape("unknown private-fact form 'C4'; expected one of ['train', 'C1', 'C2', 'C3']")):
        describe(ep.binding, "C4", ep)
    with pytest.raises(ValueError, match="has no naturalized description"):
        describe("NOPE", "C1", ep)


@pytest.mark.parametrize("pool", ["procedural", "teams", "chain3"])
def test_a_pool_whose_bindings_have_no_description_is_refused_when_the_env_is_made(pool):
    """Not at the first reset: generated bindings (procedural) and team facts have no written phrasings."""
    with pytest.raises(ValueError, match=r"private_fact='C3' needs a (written )?description of (each|every) binding.*"
                                         r"use private_fact='id'"):
        gencoord_env.parallel_env(backend="sim", pool=pool, private_fact="C3")
    gencoord_env.parallel_env(backend="sim", pool=pool, private_fact="id").reset(options={"index": 0})


@pytest.mark.parametrize("form", ["train", "C1"])
def test_tfidf_rule_recovers_every_binding_on_training_words(form):
    summary = summarize(rollout(gencoord_env.parallel_env(backend="sim", pool="heldout", private_fact=form), make_policy("tfidf")))
    assert summary["success_rate"] == 1.0


def test_tfidf_rule_degrades_under_lexical_shift():
    # Every template's paired bindings are disjoint in the world, so a wrong nearest neighbour always fails:
    # the rate is the share of paraphrases whose nearest training phrasing has the right binding.
    rates = {f: summarize(rollout(gencoord_env.parallel_env(backend="sim", pool="heldout", private_fact=f), make_policy("tfidf")))["success_rate"]
             for f in ("C2", "C3")}
    assert all(0.3 <= r < 1.0 for r in rates.values()), rates


def test_tfidf_nearest_ignores_inadmissible_bindings():
    from gencoord_env.agents.tfidf import TfidfNearestNeighbour

    rule = TfidfNearestNeighbour()
    assert rule.nearest("build at site B", ["SITE_A", "SITE_B"]) == "SITE_B"
    assert rule.nearest("build at site B", ["CHEST_A", "CHEST_B"]) in ("CHEST_A", "CHEST_B")
    assert rule.nearest("zzz qqq", ["SITE_A", "SITE_B"]) == "SITE_A"  # no shared words: the fixed guess
