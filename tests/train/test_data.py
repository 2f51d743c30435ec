"""The programmatic SFT sets: the paper's row counts, stable hashes, targets that map back to their
binding, and prompts that are exactly what the env shows (replaying the targets in the env succeeds)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gencoord_env.agents.freeform import FreeformRule
from gencoord_env import dsl, freeform
from gencoord_env.envs.gencoord.gencoord import parallel_env
from gencoord_env.types import Proposal
from gencoord_env.tasks import Episode, pool
from gencoord_env.tasks.contexts import build_context, render
from gencoord_env.tasks.references import binding_of
from gencoord_env.train.data import (
    Row,
    build_all,
    build_set,
    expected_rows,
    file_sha256,
    gc_train_episodes,
    load_rows,
    training_variants,
)
from gencoord_env.train.evaluate import evaluate

PAPER_STAGES = {
    "forward": {"sender_initial": 960, "receiver_after_request": 960},
    "forward_json": {"sender_initial": 960, "receiver_after_request": 960},
    "single_step": {"sender_initial": 960, "sender_after_obtain": 960, "receiver_after_request": 960},
    "factor_code": {"sender_initial": 960, "receiver_after_request": 960},
    "gc_requester": {"requester_initial": 320, "requester_after_response": 320},
    "gc_centralized": {"centralized": 320},
    "freeform": {"sender_initial": 960, "receiver_question": 240, "sender_answer": 240, "receiver_after_request": 960},
}


def test_row_counts_match_the_paper(data_dir: Path) -> None:
    manifest = json.loads((data_dir / "manifest.json").read_text())
    assert {k: v["rows"] for k, v in manifest["files"].items()} == {
        "forward": 1920, "forward_json": 1920, "single_step": 2880, "factor_code": 1920,
        "gc_requester": 640, "gc_centralized": 320, "freeform": 2400,
    }
    for name, stages in PAPER_STAGES.items():
        assert manifest["files"][name]["stages"] == stages
        assert len(load_rows(data_dir / f"{name}.jsonl")) == expected_rows(name)  # derived from tasks.json


def test_manifest_hashes_are_the_file_hashes_and_builds_are_deterministic(data_dir: Path, tmp_path: Path) -> None:
    manifest = json.loads((data_dir / "manifest.json").read_text())
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == file_sha256(data_dir / entry["file"]), name
    again = build_all(tmp_path, ["forward"])
    assert again["files"]["forward"]["sha256"] == manifest["files"]["forward"]["sha256"]
    other_seed = build_all(tmp_path / "s1", ["forward"], seed=1)
    assert other_seed["files"]["forward"]["sha256"] != manifest["files"]["forward"]["sha256"]


def test_unknown_set_name_suggests_the_closest() -> None:
    with pytest.raises(ValueError, match="did you mean 'forward'"):
        build_set("froward")


@pytest.mark.parametrize("name", ["forward", "single_step", "gc_requester", "gc_centralized"])
def test_targets_parse_and_select_the_rows_binding(data_dir: Path, name: str) -> None:
    for r in load_rows(data_dir / f"{name}.jsonl"):
        proposal = dsl.parse(r.target)
        assert dsl.format(proposal) == r.target  # canonical form
        if r.stage == "requester_initial":  # the default branch, whatever the hidden mode
            continue
        b = binding_of(proposal)
        assert b is None or b == r.binding, r.id


def test_factor_code_targets_name_the_stage_field(data_dir: Path) -> None:
    for r in load_rows(data_dir / "factor_code.jsonl"):
        field = "active_binding_id" if r.stage == "sender_initial" else "accepted_binding_id"
        assert r.target == f"{field}={r.binding}"


def test_forward_prompts_are_the_same_contexts_for_factor_code_and_direct(data_dir: Path) -> None:
    direct = {r.id.split("/", 1)[1]: r.prompt for r in load_rows(data_dir / "forward.jsonl")}
    codes = {r.id.split("/", 1)[1]: r.prompt for r in load_rows(data_dir / "factor_code.jsonl")}
    assert direct == codes


def test_goal_capability_training_side_is_disjoint_from_evaluation(data_dir: Path) -> None:
    episodes = gc_train_episodes()
    assert len(episodes) == 320 and len({e.cluster for e in episodes}) == 160
    eval_variants = {v.id for v in episodes[0].prior.variants[:10]}
    train_variants = {v.id for v in training_variants()}
    assert not eval_variants & train_variants
    eval_keys = {(v.shift, v.mirror) for v in episodes[0].prior.variants[:10]}
    assert not eval_keys & {(v.shift, v.mirror) for v in training_variants()}
    eval_prompts = {
        render(build_context(Episode(c, perm), Episode(c, perm).first, stage, route=route))
        for c in pool("goal_capability") for perm in (0, 1)
        for stage, route in (("requester_initial", "feedback"), ("centralized", "centralized"))
    }
    for name in ("gc_requester", "gc_centralized"):
        assert not eval_prompts & {r.prompt for r in load_rows(data_dir / f"{name}.jsonl")}


class _Replay:
    """Answers each observation with the row whose prompt is exactly that observation."""

    name = "replay"

    def __init__(self, rows: list[Row]) -> None:
        self.table: dict[str, str] = {}
        for r in rows:
            assert self.table.setdefault(r.prompt, r.target) == r.target, f"same prompt, two targets: {r.id}"
        self.seen: set[str] = set()

    def act(self, observation: str, info: dict) -> str:
        assert observation in self.table, f"the env showed a context no row has:\n{observation}"
        self.seen.add(observation)
        return self.table[observation]

    def act_batch(self, observations: list[str], infos: list[dict]) -> list[str]:
        return [self.act(o, i) for o, i in zip(observations, infos)]


@pytest.mark.parametrize(
    ("name", "route", "surface", "gc"),
    [
        ("forward", "forward", "dsl", False),
        ("forward_json", "forward", "json", False),
        ("single_step", "single_step", "dsl", False),
        ("gc_requester", "feedback", "dsl", True),
        ("gc_centralized", "centralized", "dsl", True),
        ("freeform", "forward", "freeform", False),
    ],
)
def test_prompts_are_env_observations_and_targets_succeed_in_closed_loop(
    data_dir: Path, name: str, route: str, surface: str, gc: bool
) -> None:
    rows = load_rows(data_dir / f"{name}.jsonl")
    policy = _Replay(rows)
    report = evaluate(policy, gc_train_episodes() if gc else "train", route=route, surface=surface, batch_size=16)
    m = report["metrics"]
    assert m["episodes"] == (320 if gc else 960)
    assert m["success_rate"] == 1.0, m["outcomes"]
    assert policy.seen == set(policy.table)  # every row was shown by the env, none is orphaned


def test_env_observation_matches_builder_for_every_stage_of_a_few_episodes() -> None:
    env = parallel_env(backend="sim", pool="train", route="forward")
    rows = {(r.episode, r.stage): r for r in build_set("forward")}
    for k in (0, 1, 101, 777):
        obs, infos = env.reset(options={"index": k})
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            row = rows[(infos[turn]["episode_id"], infos[turn]["stage"])]
            assert obs[turn] == row.prompt and row.agent == turn
            obs, _, _, _, infos = env.step({turn: row.target})
        assert str(infos["agent_a"]["outcome"]) == "SUCCESS"


def _dialogues(rows: list[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for r in rows:
        out.setdefault(r.episode, []).append(r)
    return out


def test_freeform_is_1200_sender_and_1200_receiver_rows_with_a_clarification_in_one_episode_in_four(
    data_dir: Path,
) -> None:
    rows = load_rows(data_dir / "freeform.jsonl")
    roles = [r.stage.split("_", 1)[0] for r in rows]
    assert roles.count("sender") == 1200 and roles.count("receiver") == 1200
    episodes = {ep.id: ep for ep in (Episode(c, perm) for c in pool("train") for perm in (0, 1))}
    turns = {ep: [r.stage for r in rs] for ep, rs in _dialogues(rows).items()}
    assert len(turns) == 960 and sum(len(t) for t in turns.values()) / 960 == 2.5
    for ep_id, stages in turns.items():
        family = episodes[ep_id].template.family
        assert stages == (["sender_initial", "receiver_question", "sender_answer", "receiver_after_request"]
                          if family == "recipe" else ["sender_initial", "receiver_after_request"]), ep_id
    assert sum(len(t) == 4 for t in turns.values()) == 240


def test_freeform_dialogues_extract_the_forward_commitments_with_or_without_the_clarification(data_dir: Path) -> None:
    forward = {(r.episode, r.stage): dsl.parse(r.target) for r in load_rows(data_dir / "forward.jsonl")}
    for ep_id, rs in _dialogues(load_rows(data_dir / "freeform.jsonl")).items():
        said = [(r.agent, r.target) for r in rs]
        first, second = rs[0].agent, rs[-1].agent
        full = freeform.extract(said, first, second)
        short = freeform.extract([said[0], said[-1]], first, second)
        assert full is not None and short is not None, ep_id
        assert (full.sender, full.receiver) == (short.sender, short.receiver)
        assert full.turns == ((0, 2, 3) if len(said) == 4 else (0, 0, 1))
        sender, receiver = forward[(ep_id, "sender_initial")], forward[(ep_id, "receiver_after_request")]
        assert full.sender == sender and full.receiver == Proposal(receiver.self_plan, ())
        for _, utterance in said[1:-1]:  # the clarification states nothing on its own but the request
            assert [s.kind for s in freeform.statements(utterance)] in ([], ["request"])


def test_freeform_rule_agent_says_exactly_the_training_targets(data_dir: Path) -> None:
    rows = load_rows(data_dir / "freeform.jsonl")
    table = {r.prompt: r.target for r in rows}
    rule = FreeformRule()

    class Checked(_Replay):
        def act(self, observation: str, info: dict) -> str:
            target = super().act(observation, info)
            assert rule.act(observation, info) == target, observation
            return target

    policy = Checked(rows)
    report = evaluate(policy, "train", route="forward", surface="freeform", batch_size=16)
    assert report["metrics"]["success_rate"] == 1.0 and policy.seen == set(table)
