"""The frozen factor parser and the complete surface table: what each reads, and that an unread
description is no plan rather than a guess."""
from __future__ import annotations

import pytest

import gencoord_env
from gencoord_env.agents.naturalized import CompleteSurfaceTable, FrozenFactorParser, keywords, words
from gencoord_env.agents import make_policy
from gencoord_env.agents.rules import NO_PLAN
from gencoord_env.tasks.naturalized import phrasings


def test_words_drop_function_words_and_keep_single_capital_labels() -> None:
    assert words("Onto site A go the planks") == {"site", "A", "go", "planks"}
    assert "a" not in words("a chest")


def test_keywords_come_from_the_training_phrasings_of_the_admissible_bindings_only() -> None:
    lexicon = keywords(("SITE_A", "SITE_B"))
    trained = {w for b in ("SITE_A", "SITE_B") for t in phrasings(b, "train") for w in words(t)}
    assert set(lexicon) == {"SITE_A", "SITE_B"}
    assert all(set(lexicon[b]) <= trained and all(x > 0 for x in lexicon[b].values()) for b in lexicon)
    assert not set(lexicon["SITE_A"]) & set(lexicon["SITE_B"])


def test_parser_ignores_word_order_and_gives_nothing_for_unknown_or_ambiguous_words() -> None:
    parser = FrozenFactorParser()
    pair = ("SITE_A", "SITE_B")
    for text in phrasings("SITE_B", "train"):
        assert parser.read(" ".join(reversed(text.split())), pair) == "SITE_B"
    assert parser.read("construct on plot beta", pair) is None
    assert parser.read("site A or site B", pair) is None
    assert parser.read("build at site B", ("CHEST_A", "CHEST_B")) == "CHEST_B"  # only the codebook's bindings


def test_surface_table_reads_exact_training_strings_only() -> None:
    table = CompleteSurfaceTable()
    text = phrasings("SITE_A", "train")[0]
    assert table.read(text, ("SITE_A", "SITE_B")) == "SITE_A"
    assert table.read(text + " ", ("SITE_A", "SITE_B")) is None
    assert table.read(text, ("CHEST_A", "CHEST_B")) is None


@pytest.mark.parametrize("name", ["frozen_parser", "surface_table"])
def test_an_unread_description_is_no_plan_and_an_id_is_read_as_the_rule_reads_it(name: str) -> None:
    policy = make_policy(name)
    env = gencoord_env.parallel_env(backend="sim", pool="heldout", private_fact="C2")
    _, infos = env.reset(options={"index": 0})
    sender = env.unwrapped.session.turn
    assert policy.act("", infos[sender]) == NO_PLAN
    env = gencoord_env.parallel_env(backend="sim", pool="heldout")
    _, infos = env.reset(options={"index": 0})
    sender = env.unwrapped.session.turn
    assert policy.act("", infos[sender]) == make_policy("rule").act("", infos[sender])
