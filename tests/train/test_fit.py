"""What decides success, measured on the real training rows and the real train pool: the decision tokens,
a model built to fail one template is flagged for exactly that template, the train pool is played per
template x binding x role, codes are renamed consistently, and pretraining that misses a code is refused."""
from __future__ import annotations

import random
import re
import warnings
from pathlib import Path

import pytest
import torch

from gencoord_env.agents import make_policy
from gencoord_env.agents.lm.loading import build_tiny
from gencoord_env.tasks.prior import prior
from gencoord_env.tasks.procedural import codebook_names, procedural_episodes
from gencoord_env.train.data import Row, load_rows
from gencoord_env.train.fit import closed_loop, decision_indices, shout, teacher_forced, template_of, twin_key, verdict
from gencoord_env.train.renaming import public_codes, rename_row, renaming_for, row_codes
from gencoord_env.train.sft import encode
from gencoord_env.train.transfer_report import code_coverage


@pytest.fixture(scope="module")
def forward(data_dir: Path) -> list[Row]:
    return load_rows(data_dir / "forward.jsonl")


@pytest.fixture(scope="module")
def tokenizer(forward: list[Row]):  # type: ignore[no-untyped-def]
    return build_tiny([r.prompt + "\n" + r.target for r in forward[:64]], hidden_size=16, num_layers=1, vocab_size=600).tokenizer


def _cells(rows: list[Row]) -> list[Row]:
    """Both bindings of one instance per stage x template: a small set in which every row has its twin."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for r in rows:
        key = (r.stage, template_of(r.episode), r.binding)
        if key not in seen:
            seen.add(key)
            out.append(r)
    twins = {(r.episode.rsplit("-", 2)[0], r.episode[-1], r.stage) for r in out}
    return [r for r in rows if (r.episode.rsplit("-", 2)[0], r.episode[-1], r.stage) in twins]


def test_decision_tokens_are_where_the_twin_parts_and_the_code(forward: list[Row], tokenizer) -> None:  # type: ignore[no-untyped-def]
    rows = _cells(forward)
    targets = tokenizer([r.target for r in rows], add_special_tokens=False)["input_ids"]
    found = decision_indices(rows, tokenizer, targets)
    assert all(found), "every forward row has a decision token"
    for r, t, ks in zip(rows, targets, found):
        code_at = r.target.index(f"bind={r.binding}") + len("bind=")
        decoded = tokenizer.decode(t[: max(ks) + 1])
        assert len(decoded) > code_at, (r.id, decoded)  # the code's first token is among them
        twin = next(u for x, u in zip(rows, targets) if x.binding != r.binding
                    and twin_key(x.episode, x.stage) == twin_key(r.episode, r.stage))
        # every token the twin lacks is a decision token: a model may get the first one right and then
        # continue the other binding's path
        assert {k for k, x in enumerate(t) if x not in set(twin)} <= set(ks), r.id
        if r.stage == "sender_initial" and template_of(r.episode) == "deposit_or_build" and r.binding == "DEPOSIT":
            assert " build" in {tokenizer.decode([t[k]]) for k in ks}, r.id  # the sender builds before it hands off


def test_every_decision_token_starts_a_word(forward: list[Row]) -> None:
    """The offline tokenizer keeps binding codes and the world's names whole, so where a Direct target parts from
    its twin's (the code, ``site=site_b``, ``item=oak_log``) the first parting token begins a word: no decision is a
    letter after a stem both branches write. With the codes alone kept whole it is (``site`` ``_`` | ``a``)."""
    from gencoord_env.agents.lm.loading import binding_codes, train_tokenizer

    corpus = [r.prompt for r in forward] + [r.target for r in forward]
    rows = _cells(forward)

    def continuing(tokenizer) -> set[str]:  # type: ignore[no-untyped-def]
        """Decision tokens that continue a word begun by the token before them, as 'before|token'."""
        targets = tokenizer([r.target for r in rows], add_special_tokens=False)["input_ids"]
        out = set()
        for t, ks in zip(targets, decision_indices(rows, tokenizer, targets)):
            for k in ks:
                before, token = tokenizer.decode(t[k - 1:k]), tokenizer.decode(t[k:k + 1])
                if k and re.search(r"[A-Za-z0-9_]$", before) and re.match(r"[A-Za-z0-9_]", token):
                    out.add(f"{before}|{token}")
        return out

    assert continuing(train_tokenizer(corpus, vocab_size=2048)) == set()
    split = continuing(train_tokenizer(corpus, vocab_size=2048, whole_words=binding_codes()))
    assert {"_|a", "_|b"} <= split, split  # site_ | a, chest_ | b: the misfit's first wrong tokens


def _oracle(rows: list[Row], tokenizer, broken: str) -> torch.nn.Module:  # type: ignore[no-untyped-def]
    """A model that predicts every target token of ``rows`` except the decision tokens of template ``broken``,
    where it predicts the twin's token: what a model that answers from the template looks like."""
    encoded = encode(rows, tokenizer)
    width = max(len(e.input_ids) for e in encoded)
    vocab = len(tokenizer)
    table: dict[tuple[int, ...], torch.Tensor] = {}
    for r, e in zip(rows, encoded):
        logits = torch.full((width, vocab), -5.0)
        p = e.prompt_tokens
        for k, tok in enumerate(e.input_ids[p:]):
            logits[p - 1 + k, tok] = 5.0
        if template_of(r.episode) == broken:
            for k in e.decisions:
                wrong = (e.input_ids[p + k] + 1) % vocab
                logits[p - 1 + k, wrong] = 9.0
        table[tuple(e.input_ids)] = logits

    class Decoder(torch.nn.Module):
        def forward(self, input_ids: torch.Tensor, use_cache: bool = False):  # type: ignore[no-untyped-def]
            out = torch.stack([table[tuple(x for x in row.tolist())][: input_ids.shape[1]] for row in input_ids])
            return type("Out", (), {"last_hidden_state": out})()

    class Oracle(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = Decoder()
            self.head = torch.nn.Identity()
            self.anchor = torch.nn.Parameter(torch.zeros(1))

        def get_output_embeddings(self) -> torch.nn.Module:
            return self.head

    return Oracle()


def test_a_model_built_to_fail_one_template_is_flagged_for_that_template_only(forward: list[Row], tokenizer) -> None:  # type: ignore[no-untyped-def]
    rows = _cells(forward)
    model = _oracle(rows, tokenizer, broken="dual_build")
    fit = teacher_forced(model, tokenizer, rows, batch_size=1)  # batch 1: the oracle is keyed by exact ids
    assert fit["failing_cells"] == ["receiver_after_request/dual_build", "sender_initial/dual_build"]
    assert fit["by_cell"]["sender_initial/dual_build"]["decision_accuracy"] == 0.0
    assert fit["by_cell"]["sender_initial/chest_ab"]["decision_accuracy"] == 1.0
    broken = sum(template_of(r.episode) == "dual_build" for r in rows)
    assert fit["decision_accuracy"] == pytest.approx(1 - broken / len(rows))
    # where the rows go wrong: at a decision token, after the target text that leads to it, in every broken row
    first = fit["by_cell"]["sender_initial/dual_build"]["first_wrong"]
    assert first and all(w["decision"] and w["target"] != w["model"] for w in first)
    assert sum(w["rows"] for w in fit["first_wrong"]) <= broken and fit["by_cell"]["sender_initial/chest_ab"]["first_wrong"] == []
    assert any(w["after"] and first[0]["target"] for w in first)
    report = verdict(fit, None)
    assert not report["fits"] and "dual_build" in report["reasons"][0]
    top = fit["first_wrong"][0]
    assert report["reasons"][1].startswith(f"the commonest first wrong token ({top['rows']} rows): after {top['after']!r}")
    with pytest.warns(RuntimeWarning, match="MODEL DOES NOT FIT ITS TRAINING SET"):
        shout(report, "run")
    good = teacher_forced(_oracle(rows, tokenizer, broken="none"), tokenizer, rows, batch_size=1)
    assert good["decision_accuracy"] == 1.0 and good["row_exact"] == 1.0 and not good["failing_cells"]
    assert good["first_wrong"] == []
    assert verdict(good, None)["fits"]


class _Sabotaged:
    """The rule agent, except that the sender of one template swaps its code for the other binding's."""

    def __init__(self, template: str) -> None:
        self.rule = make_policy("rule")
        self.template = template

    def act(self, observation: str, info: dict) -> str:  # type: ignore[type-arg]
        action = self.rule.act(observation, info)
        codes = row_codes(observation)
        if f"TASK {self.template} " in observation and info.get("stage") == "sender_initial" and len(codes) == 2:
            return re.sub(rf"bind={codes[0]}\b|bind={codes[1]}\b",
                          lambda m: f"bind={codes[1] if m.group(0).endswith(codes[0]) else codes[0]}", action)
        return action

    def act_batch(self, observations, infos):  # type: ignore[no-untyped-def]
        return [self.act(o, i) for o, i in zip(observations, infos)]


def test_the_train_pool_is_played_per_template_binding_and_role() -> None:
    play = closed_loop(_Sabotaged("chest_ab"), "train", batch_size=16)
    assert play["episodes"] == 960
    assert play["successes"] == 960 - 120  # 30 pairs x 2 bindings x 2 roles of chest_ab
    assert play["failing_cells"] == [f"chest_ab/{b}/R{p}" for b in ("CHEST_A", "CHEST_B") for p in (0, 1)]
    assert all(c["successes"] == c["episodes"] == 30 for k, c in play["by_cell"].items() if not k.startswith("chest_ab/"))
    assert not verdict(None, play)["fits"]
    rule = closed_loop(make_policy("rule"), "train", batch_size=16)
    assert rule["successes"] == 960 and verdict(None, rule)["fits"]


def test_renaming_is_consistent_in_prompt_and_target(forward: list[Row]) -> None:
    rng = random.Random(0)
    for r in forward[:: 97]:
        codes = row_codes(r.prompt)
        assert r.binding in codes
        names = renaming_for(codes, rng, public_codes())
        renamed = rename_row(r, names)
        assert renamed.binding == names[r.binding]
        assert row_codes(renamed.prompt) == tuple(names[c] for c in codes)
        assert f"bind={names[r.binding]}" in renamed.target
        # every occurrence moved: back with the inverse map gives the row again
        assert rename_row(renamed, {v: k for k, v in names.items()}) == r


def test_the_procedural_pool_names_every_public_code_in_its_first_26_pairs() -> None:
    named = {c for k in range(0, 26, 2) for c in codebook_names(0, k)}
    assert named == set(prior().codebook)
    eps = procedural_episodes(seed=3)
    served = {eps[4 * k + 2 * j].binding for k in range(26) for j in (0, 1)}
    assert set(prior().codebook) <= served
    assert all(codebook_names(3, k) is None for k in range(1, 26, 2))


def test_pretraining_that_misses_a_code_is_refused(forward: list[Row]) -> None:
    procedural = [r for r in forward if r.binding not in ("ROOF", "WALL")]
    with pytest.raises(ValueError, match=re.escape("never name binding codes the evaluated pools use: {'heldout': ['ROOF', 'WALL']}")):
        code_coverage({"procedural": procedural, "forward": forward}, ["heldout"])
    ok = code_coverage({"procedural": forward}, ["heldout", "horizon"])
    assert set(ok["evaluated"]) <= set(ok["pretraining"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert code_coverage({"forward": forward}, ["heldout"])["pretraining"] == []
