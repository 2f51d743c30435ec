"""The evaluation protocol (``gencoord evaluate``): a pair's success with intervals over clusters and seeds,
the first role's policy answering only the first role, and cross-play over a zoo with its scores and picture."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gencoord_env.agents import make_policy
from gencoord_env.commands.experiments.protocol import Setting, cross_play, evaluate_pair, main, zoo_members
from gencoord_env.commands.experiments.stats import bootstrap_ci, exact_ci, two_way_bootstrap_ci

SMALL = Setting("heldout", episodes=24)


def test_the_two_way_interval_is_the_cluster_bootstrap_for_one_seed_and_holds_the_spread_of_seeds() -> None:
    rng = np.random.default_rng(0)
    one = (rng.random(128) < 0.8).astype(float)
    lo, hi = two_way_bootstrap_ci([one])
    blo, bhi = bootstrap_ci(one)
    assert abs(lo - blo) < 0.02 and abs(hi - bhi) < 0.02
    seeds = np.stack([(rng.random(128) < p).astype(float) for p in (0.6, 0.8, 0.95)])
    width = np.subtract(*two_way_bootstrap_ci(seeds)[::-1])
    pooled = np.subtract(*bootstrap_ci(seeds.mean(axis=0))[::-1])  # seeds averaged first: their spread is lost
    assert width > 2 * pooled
    assert two_way_bootstrap_ci(np.ones((3, 10))) == (1.0, 1.0) and two_way_bootstrap_ci(np.zeros((0, 0))) is None


class Recorder:
    """A rule agent that notes the role of every decision it answers."""

    def __init__(self) -> None:
        self.rule, self.roles = make_policy("rule"), []

    def act(self, observation: str, info: dict[str, Any]) -> str:
        self.roles.append(info["role"])
        return self.rule.act(observation, info)


def test_the_first_policy_answers_the_first_role_only() -> None:
    from gencoord_env.commands.experiments.protocol import play

    first, second = Recorder(), Recorder()
    cells = play(first, second, Setting("heldout", episodes=8))
    assert set(cells.values()) == {1.0} and len(cells) == 4
    assert set(first.roles) == {"sender"} and set(second.roles) == {"receiver"} and len(first.roles) == 8


def test_a_pair_over_seeds_and_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rule = evaluate_pair("rule", "rule", SMALL)
    assert rule.success == 1.0 and rule.interval == exact_ci(12, 12)  # every cluster: the exact interval over 12
    guess = evaluate_pair("random", "rule", SMALL, seeds=[0, 1, 2])
    assert guess.units == ["0", "1", "2"] and guess.table.shape == (3, 12)
    lo, hi = guess.interval
    assert 0.2 < guess.success < 0.8 and lo < guess.success < hi and hi - lo > 0.1
    assert len({tuple(row) for row in guess.table}) > 1  # each seed draws its own guesses
    assert main(["--first", "random", "--second", "rule", "--seeds", "0", "1", "--episodes", "8", "--out", str(tmp_path)]) == 0
    assert re.search(r"random \| rule on heldout: 0\.\d+ \[0\.\d+, [01]\.\d+\] \(4 clusters x 2 seeds\)", capsys.readouterr().out)
    saved = json.loads((tmp_path / "pair.json").read_text())
    assert saved["first"] == "random" and set(saved["per_unit"]) == {"0", "1"} and saved["clusters"] == 4


def test_bad_requests_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--pool", "heldout"]) == 2
    assert "give --first [--second] for one pair, or --zoo" in capsys.readouterr().err
    with pytest.raises(ValueError, match=re.escape("a zoo member is NAME=POLICY")):
        zoo_members(["rule"], [])
    with pytest.raises(ValueError, match=re.escape("has {seed}: give --seeds")):
        zoo_members(["x=rl:runs/s{seed}.pt"], [])
    assert main(["--first", "rulez", "--episodes", "2"]) == 2
    assert "did you mean 'rule'" in capsys.readouterr().err


def test_cross_play_of_rule_agents(tmp_path: Path) -> None:
    xp = cross_play(["rule=rule", "random=random", "tfidf=tfidf"], Setting("heldout", episodes=8))
    m = xp.matrix()
    assert xp.names == ["rule", "random", "tfidf"] and m.shape == (3, 3)
    assert m[0, 0] == m[2, 2] == m[0, 2] == 1.0 and m[1].max() < 1.0  # a random sender guesses its branch
    scores = xp.scores()
    assert scores["rule"]["cross_play"] is None and scores["rule"]["self_play"].success == 1.0
    assert scores["random"]["with_others"].table.shape == (4, 4)  # 2 partners x 2 orders, 4 clusters
    assert "| random | 1 |" in xp.table()
    path = xp.plot(tmp_path / "xp.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    data = json.loads(json.dumps(xp.to_json()))
    assert len(data["cells"]) == 9 and data["scores"]["random"]["with_others"]["units"][0] == "random|rule"
