"""The run spec: what a run's weights depend on (its key), what a play's rows depend on, and the studies as
specs (each table's and the transfer experiment's lanes, runs and plays). The runner itself is exercised end to
end by the tables and transfer tests."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("torch")

from gencoord_env.commands.experiments.specs import Condition  # noqa: E402
from gencoord_env.train import tables, transfer  # noqa: E402
from gencoord_env.train.pipeline import After, Inputs, Lane, Play, Recipe, RunSpec, Scratch, rows_of  # noqa: E402

INPUTS = Inputs("data", "tokenizer", {"forward": "a" * 64, "procedural": "b" * 64}, "c" * 64)


def _lane(*runs: RunSpec, **kw: object) -> Lane:
    return Lane("1/x", 1, runs, INPUTS, "work", "work/lanes", **kw)  # type: ignore[arg-type]


def test_a_runs_key_is_what_its_weights_depend_on() -> None:
    heldout = Play("heldout", Condition("heldout", "heldout", "model"), episodes=4)
    run = RunSpec("direct", "forward", Scratch(hidden_size=32), Recipe(steps=4), (heldout,))
    lane = _lane(run)
    same = [_lane(dataclasses.replace(run, plays=())),  # what it plays afterwards
            _lane(dataclasses.replace(run, recipe=Recipe(steps=4, resume_every=10))),  # how often it saves its state
            _lane(run, device="cuda:1", threads=8)]  # where and how fast it runs
    assert all(other.run_key(other.runs[0]) == lane.run_key(run) for other in same)
    other = [_lane(dataclasses.replace(run, recipe=Recipe(steps=5))), _lane(dataclasses.replace(run, data="procedural")),
             _lane(dataclasses.replace(run, init=Scratch(hidden_size=64))),
             Lane("1/x", 2, (run,), INPUTS, "work", "work/lanes"),
             Lane("1/x", 1, (run,), dataclasses.replace(INPUTS, tokenizer_sha256="d" * 64), "work", "work/lanes")]
    assert len({lane.run_key(run), *(o.run_key(o.runs[0]) for o in other)}) == 1 + len(other)


def test_a_run_after_another_depends_on_it_and_must_follow_it() -> None:
    pre = RunSpec("pre", "procedural", Scratch(), Recipe(steps=2))
    fine = RunSpec("fine", "forward", After("pre"), Recipe(steps=2))
    lane = _lane(pre, fine)
    longer = _lane(dataclasses.replace(pre, recipe=Recipe(steps=3)), fine)
    assert lane.run_key(fine) != longer.run_key(longer.runs[1])  # the fine-tune continues the pretraining
    assert fine.format.name == "direct" and lane.run_dir(fine) == Path("work/runs/1-x/fine")
    with pytest.raises(ValueError, match="starts after 'pre', which is not an earlier run of the lane"):
        _lane(fine, pre)
    with pytest.raises(ValueError, match="run names repeat"):
        _lane(pre, pre)


def test_equal_setups_play_once_whatever_they_are_called() -> None:
    c = Condition("DSL", "heldout", "rule")
    a, b = Play("representation/DSL", c), Play("backend/Direct DSL", dataclasses.replace(c, name="Direct DSL", policy="x"))
    assert a.cache_key(256) == b.cache_key(256)
    assert len({a.cache_key(256), dataclasses.replace(a, batch=0).cache_key(256), dataclasses.replace(a, role="sender").cache_key(256),
                dataclasses.replace(a, episodes=4).cache_key(256), a.cache_key(24)}) == 5


def test_each_table_is_one_lane_per_seed_and_model_playing_its_conditions(tmp_path: Path) -> None:
    config = tables.TablesConfig(out=str(tmp_path), seeds=(1, 2), tables=("backend", "horizon"))
    lanes = tables.lanes_for(config, INPUTS)
    assert sorted(lane.name for lane in lanes) == sorted(f"{s}/{m}" for s in (1, 2) for m in ("direct", "factor_code", "single_step"))
    direct = next(lane for lane in lanes if lane.name == "1/direct").runs[0]
    assert [p.name for p in direct.plays] == ["backend/Direct DSL", "backend/Direct DSL#timing", "horizon/multi-step"]
    assert direct.plays[1].batch == 0 and direct.plays[1].warm_up  # the timing pool: batch-1 calls, warmed first
    factor = next(lane for lane in lanes if lane.name == "1/factor_code").runs[0]
    assert factor.format.name == "factor_code" and factor.data == "factor_code"
    full = dataclasses.replace(config, budget=tables.BUDGETS["full"], tables=("representation",))
    renaming = {r.runs[0].data: r.runs[0].recipe.code_renaming for r in tables.lanes_for(full, INPUTS)}
    assert renaming == {"forward": 0.5, "forward_json": 0.5, "freeform": 0.0}  # free-form says its codes in words


def test_transfer_is_a_protocol_lane_and_a_pretrain_then_fine_tune_lane_per_seed_and_format(tmp_path: Path) -> None:
    config = transfer.TransferConfig(out=str(tmp_path), seeds=(1,))
    lanes = {lane.name: lane for lane in transfer.lanes_for(config, INPUTS)}
    assert list(lanes) == ["1/direct/pretrained", "1/factor_code/pretrained", "1/direct/protocol", "1/factor_code/protocol"]
    pre, fine = lanes["1/factor_code/pretrained"].runs
    assert (pre.data, fine.data, fine.init) == ("procedural_factor_code", "factor_code", After("procedural_only"))
    assert pre.recipe.subword_dropout > 0 and fine.recipe.subword_dropout == 0
    names = [p.name for p in fine.plays]
    assert names[:4] == ["train", "heldout", "heldout/sender", "heldout/receiver"] and "heldout/generate" in names
    assert "heldout/generate" not in [p.name for p in pre.plays]  # only the arms trained on the paper's rows
    assert Path(lanes["1/direct/protocol"].results) == tmp_path / "lanes"


def test_nondeterministic_kernels_reach_every_run_and_part_its_key_from_the_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gencoord_env.train.transfer_report as report
    from gencoord_env.train.cli import transfer_main
    from gencoord_env.train.pipeline import sft_config

    run = RunSpec("direct", "forward", Scratch(hidden_size=32), Recipe(steps=4))
    fused = dataclasses.replace(run, recipe=Recipe(steps=4, deterministic=False))
    lane = _lane(run)
    assert lane.run_key(run) != _lane(fused).run_key(fused)  # results may differ, so cached weights may not be reused
    assert sft_config(lane, run, None).deterministic and not sft_config(_lane(fused), fused, None).deterministic
    # the CLI flag reaches every run of every lane of the transfer experiment
    seen: list[transfer.TransferConfig] = []

    def capture(config: transfer.TransferConfig, argv: object) -> dict[str, object]:
        seen.append(config)
        raise SystemExit(0)

    monkeypatch.setattr(report, "run", capture)
    for flag in ([], ["--nondeterministic"]):
        with pytest.raises(SystemExit):
            transfer_main(["--out", str(tmp_path), "--seeds", "1", *flag])
    default, fast = (transfer.lanes_for(c, INPUTS) for c in seen)
    assert all(r.recipe.deterministic for lane in default for r in lane.runs)
    assert not any(r.recipe.deterministic for lane in fast for r in lane.runs)


def test_a_sampled_play_is_its_own_setup_and_replays_alike_from_the_lanes_seed(tmp_path: Path) -> None:
    """``Play(temperature=...)`` samples with the decoder's seeded sampler (the lane's seed): its key differs from
    the greedy play's (whose key stays what it was), the same seed samples the same episodes again, and a commit
    tool checkpoint decodes to its end instead of stopping at the record's second newline."""
    from gencoord_env.agents.formats import output_format
    from gencoord_env.agents.lm.loading import build_tiny
    from gencoord_env.train.data import build_set
    from gencoord_env.train.pipeline import Checkpoint, Player, digest, run_lane, setup_of

    c = Condition("heldout", "heldout", "model")
    greedy, sampled = Play("greedy", c, episodes=2, batch=2), Play("sampled", c, episodes=2, batch=2, temperature=1.0)
    assert greedy.cache_key(8) == digest([setup_of(c), 2, True, None, None, False, 8])  # the keys of earlier lanes
    assert len({greedy.cache_key(8), sampled.cache_key(8), dataclasses.replace(sampled, temperature=0.7).cache_key(8)}) == 3
    with pytest.raises(ValueError, match="temperature must be > 0"):
        Play("x", c, temperature=0.0)
    assert not output_format("commit_tool").stops_at_record_end and output_format("direct").stops_at_record_end

    rows = build_set("forward")[:4]
    lm = build_tiny([r.prompt + r.target for r in rows], hidden_size=32, num_layers=1, vocab_size=400)
    lm.model.save_pretrained(tmp_path / "m")
    lm.tokenizer.save_pretrained(tmp_path / "m")
    player = Player(tmp_path / "m", output_format("direct"), 8, "cpu", seed=5)
    config = player.make(temperature=0.7).generator.config
    assert config.do_sample and config.temperature == 0.7 and config.seed == 5 and not player.policy.generator.config.do_sample
    run = RunSpec("as_is", None, Checkpoint(str(tmp_path / "m")), None, (greedy, sampled), max_new_tokens=8, output_format="direct")
    inputs = Inputs("", None, {}, None)
    once, twice = (run_lane(Lane("1/s", 5, (run,), inputs, str(tmp_path), str(tmp_path / out))) for out in ("a", "b"))
    plays = once["runs"]["as_is"]["plays"]
    assert plays["sampled"]["key"] == sampled.cache_key(8) and len(plays["sampled"]["rows"]) == 2
    assert plays["sampled"]["rows"] == twice["runs"]["as_is"]["plays"]["sampled"]["rows"]


def test_success_and_its_paired_change_are_the_harness_analysis_of_the_same_rows() -> None:
    """``success_record`` (what ``train grpo`` and ``train selfplay`` keep of a play) gives the interval that
    ``train evaluate`` prints for the same rows (the harness's analysis), and ``paired_change`` pairs two records
    by the clusters of the pool's episode ids."""
    import gencoord_env
    from gencoord_env.commands.experiments.analysis import analyze
    from gencoord_env.commands.experiments.runner import EpisodeRow
    from gencoord_env.commands.experiments.specs import Experiment
    from gencoord_env.train.pipeline import paired_change, success_record

    env = gencoord_env.parallel_env(pool="heldout", backend="sim")
    episodes = env.episodes[:8]
    env.close()

    def rows(ok: Callable[[int], bool]) -> list[dict[str, object]]:
        return [EpisodeRow("heldout", ep.id, ep.cluster.id, ep.perm, ep.template.family, ep.template.motif,
                           "SUCCESS" if ok(k) else "TERMINAL_FAILURE", {"decisions": 2}, 2).to_json()
                for k, ep in enumerate(episodes)]

    before, after = rows(lambda k: k < 4), rows(lambda k: k < 6 or k == 7)
    record = success_record(before)
    condition = Condition("heldout", "heldout", "model")
    harness = analyze(Experiment("e", "e", (condition,)), {"heldout": rows_of(before)}, {"heldout": "model"})[0]
    assert record["ci95"] == harness["success_ci95"] and record["clusters"] == harness["clusters"] == 4
    assert record["success_rate"] == 0.5 and record["outcomes"] == {"SUCCESS": 4, "TERMINAL_FAILURE": 4}
    change = paired_change(record, success_record(after))
    assert change is not None and change["clusters"] == 4
    assert change["diff"] == pytest.approx(0.375)  # the third cluster +1, the fourth +0.5, over 4 clusters
    assert paired_change(None, record) is None
