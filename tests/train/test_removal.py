"""A receiver row without its request is exactly what the env shows a receiver under ``RequestRemoval`` and what
the rule receiver answers there (the first branch), for every core template and binding; training draws it."""
from __future__ import annotations

from pathlib import Path

import pytest

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.tasks.prior import prior
from gencoord_env.train.data import Row, load_rows
from gencoord_env.train.fit import template_of, twin_key
from gencoord_env.train.removal import default_code, without_request
from gencoord_env.wrappers.request_removal import RequestRemoval


@pytest.fixture(scope="module")
def forward(data_dir: Path) -> list[Row]:
    return load_rows(data_dir / "forward.jsonl")


def test_a_removed_row_is_the_envs_observation_and_the_rule_receivers_answer(forward: list[Row]) -> None:
    receivers = {r.episode: r for r in forward if r.stage == "receiver_after_request"}
    by_key = {(twin_key(r.episode, r.stage), r.binding): r for r in receivers.values()}
    env = RequestRemoval(gencoord_env.parallel_env(backend="sim", pool="train", route="forward"))
    rule = make_policy("rule")
    seen: set[tuple[str, str]] = set()
    for index in range(0, 1920, 2):
        obs, infos = env.reset(options={"index": index})
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            action = rule.act(obs[turn], infos[turn])
            if infos[turn]["stage"] == "receiver_after_request":
                row = receivers[infos[turn]["episode_id"]]
                key = (template_of(row.episode), row.binding)
                if key not in seen:
                    seen.add(key)
                    default = by_key[(twin_key(row.episode, row.stage), default_code(row))]
                    removed = without_request(row, default.target)
                    assert removed.prompt == obs[turn], key
                    assert removed.target == action, key
                    assert removed.binding == default_code(row) == row_codes_first(row)
            obs, _, _, _, infos = env.step({turn: action})
        if len(seen) == 2 * len([t for t in prior().templates.values() if t.split == "core"]):
            break
    assert len(seen) == 16, sorted(seen)  # 8 core templates x 2 bindings
    env.close()


def row_codes_first(row: Row) -> str:
    from gencoord_env.train.renaming import row_codes

    return row_codes(row.prompt)[0]


def test_a_row_without_a_message_line_is_refused(forward: list[Row]) -> None:
    sender = next(r for r in forward if r.stage == "sender_initial")
    with pytest.raises(ValueError, match="has no MESSAGE line"):
        without_request(sender.__class__(**{**sender.__dict__, "prompt": "PRIOR codebook=A,B"}), "SELF -")


def test_training_draws_receiver_samples_without_their_request(forward: list[Row], tmp_path: Path) -> None:
    from gencoord_env.train.data import write_rows
    from gencoord_env.train.sft import ScratchConfig, SFTConfig, train

    data = tmp_path / "rows.jsonl"
    first = forward[0]
    write_rows([r for r in forward if twin_key(r.episode, r.stage)[:2] == twin_key(first.episode, first.stage)[:2]], data)
    result = train(SFTConfig(data=(str(data),), out_dir=str(tmp_path / "run"), scratch=ScratchConfig(vocab_size=400, hidden_size=16,
                                                                                                    num_layers=1),
                             max_steps=3, micro_batch=4, grad_accum=1, progress=False, save=False, fit_rows=0, request_removal=1.0))
    exposure = result.provenance["token_exposure"]
    assert exposure["request_removed_samples"] == 6  # every receiver sample of 12 (2 of 4 rows are receivers)
    assert result.provenance["config"]["request_removal"] == 1.0
