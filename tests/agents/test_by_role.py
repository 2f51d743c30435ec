"""One policy per role: the model in one role beside a rule partner in the other says which side fails."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gencoord_env.agents import make_policy
from gencoord_env.agents.by_role import ByRole
from gencoord_env.outcomes import FailureCode

pytest.importorskip("torch")

from gencoord_env.agents.lm.policy import DirectDSLPolicy  # noqa: E402
from gencoord_env.train.data import build_set  # noqa: E402
from gencoord_env.train.evaluate import evaluate  # noqa: E402
from test_lm_policy import _Scripted  # noqa: E402  (tests/agents is on the path)


def _receiver_only_knows_chest_ab() -> DirectDSLPolicy:
    """A scripted learned policy that answers every train-pool context of chest_ab and nothing else."""
    return DirectDSLPolicy(_Scripted({r.prompt: r.target for r in build_set("forward") if "-chest_ab-" in r.episode}))


def test_each_role_is_answered_by_its_policy_and_only_its_calls_are_counted() -> None:
    learned = _receiver_only_knows_chest_ab()
    report = evaluate(ByRole({"receiver": learned}, default=make_policy("rule")), "train", batch_size=64)
    by_template: dict[str, list[bool]] = {}
    for e in report["episodes"]:
        by_template.setdefault(e["episode_id"].split("-")[1], []).append(e["outcome"] is FailureCode.SUCCESS)
        assert e["calls"] == 1 and e["input_tokens"] > 0  # the rule sender's decision is no model call
        assert e["actions"][0]["stage"] == "sender_initial"
    assert all(by_template["chest_ab"]) and not any(v for t, vs in by_template.items() if t != "chest_ab" for v in vs)
    assert learned.model_calls == len(report["episodes"]) == 960
    # the same model as the sender, beside the rule receiver: chest_ab still plays, the others fail at once
    sender = evaluate(ByRole({"sender": _receiver_only_knows_chest_ab()}, default=make_policy("rule")), "train",
                      batch_size=64)
    assert [e["outcome"] is FailureCode.SUCCESS for e in sender["episodes"]] == \
           ["-chest_ab-" in e["episode_id"] for e in sender["episodes"]]


def test_both_roles_by_rule_is_the_rule_agent_and_an_unlisted_role_needs_a_default() -> None:
    rule = make_policy("rule")
    mixed = evaluate(ByRole({"sender": rule, "receiver": make_policy("rule")}), "heldout", episodes=32, batch_size=8)
    assert mixed["metrics"]["success_rate"] == 1.0
    with pytest.raises(ValueError, match=r"unknown role 'requester'.*expected one of sender.*give ByRole a default"):
        evaluate(ByRole({"sender": rule}), "goal_capability", route="feedback", episodes=1)
    with pytest.raises(ValueError, match="at least one role"):
        ByRole({})


def test_train_evaluate_plays_the_model_in_the_named_roles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gencoord_env.agents.lm.loading import build_tiny
    from gencoord_env.train import cli

    rows = build_set("forward")[:8]
    lm = build_tiny([r.prompt + r.target for r in rows], hidden_size=32, num_layers=1, vocab_size=400)
    lm.model.save_pretrained(tmp_path / "m")
    lm.tokenizer.save_pretrained(tmp_path / "m")
    out = tmp_path / "report.json"
    assert cli.main(["evaluate", "--model", str(tmp_path / "m"), "--pool", "heldout", "--episodes", "4", "--roles", "receiver",
                     "--partner", "rule", "--batch-size", "4", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "95% CI (cluster)" in printed and "playing ['receiver'] beside rule" in printed
    report = json.loads(out.read_text())
    assert report["roles"] == {"model": ["receiver"], "partner": "rule"} and report["format"] == "direct"
    (record,) = report["records"]
    assert record["condition"] == "heldout" and record["episodes"] == 4 and len(record["success_ci95"]) == 2
    for e in report["episodes"]["heldout"]:  # the rule sender's request reached the untrained receiver: its one call is the model's
        assert e["model_calls"] == 1 and e["actions"][0]["action"].startswith("SELF ")
