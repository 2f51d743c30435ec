"""GRPO on the env's decisions with TRL: a prompt dataset of decision points and an env-replay reward.

:func:`prompt_dataset` turns :class:`~gencoord_env.train.decisions.DecisionPoint` values into the
``datasets.Dataset`` that ``trl.GRPOTrainer`` samples prompts from: the ``prompt`` column is the decision's
observation through the tokenizer's chat template (:func:`gencoord_env.agents.lm.policy.prompt_text`,
exactly what SFT and the learned policies feed the model), and ``decision_id`` names the point.
:class:`EnvReward` is the reward function TRL calls with ``prompts``, ``completions`` and the dataset's
other columns: it maps each completion back to its decision point through ``decision_id`` and scores it
with :meth:`gencoord_env.train.decisions.Replay.score_point` (the episode replayed on the sim, the
completion as the decider's action, the partner policy for every later decision). Identical
completions of one decision within a batch are scored once (the sim is deterministic). Every call is
kept, per decision point (a GRPO group), for the reward curve.

:func:`run` is ``gencoord train grpo``: one lane of the training pipeline (:func:`specs`,
:mod:`gencoord_env.train.pipeline`): with ``eval_pool``, the SFT checkpoint plays it as it is, then
:class:`GRPORecipe` (GRPO on a pool's decisions) trains from it and the result plays it again, the change
paired by cluster; writes ``reward_curve.json`` (per optimizer step: reward mean and standard deviation,
per-group reward variance, outcome counts, loss), ``points.jsonl``, ``provenance.json`` and the final
checkpoint. Needs the ``lm`` and ``rl`` extras.

Example::

    points = decision_points("train", "forward")
    replay = Replay("train", "forward", partial_credit=True)
    trainer = GRPOTrainer(model=lm.model, processing_class=lm.tokenizer, args=GRPOConfig(...),
                          train_dataset=prompt_dataset(points, lm.tokenizer),
                          reward_funcs=EnvReward(points, replay))
"""
from __future__ import annotations

import dataclasses
import json
import math
import platform
import shutil
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch

from gencoord_env.agents.base import Policy
from gencoord_env.agents.formats import RECORD, resolve_format
from gencoord_env.agents.lm.loading import load_model
from gencoord_env.agents.lm.policy import prompt_text
from gencoord_env.commands.experiments.specs import Condition
from gencoord_env.errors import UsageError
from gencoord_env.train.data import file_sha256
from gencoord_env.train.decisions import DecisionPoint, Replay, decision_points, write_points
from gencoord_env.train.pipeline import Checkpoint, Inputs, Lane, Play, RunSpec, paired_change, run_lane, success_record
from gencoord_env.train.sft import read_record, tree_sha256

__all__ = ["EnvReward", "GRPORecipe", "GRPOResult", "GRPORunConfig", "group_stats", "libraries", "prompt_dataset", "run", "specs"]


def prompt_dataset(points: Sequence[DecisionPoint], tokenizer: Any):  # type: ignore[no-untyped-def]
    """A ``datasets.Dataset`` with ``prompt`` (chat-templated observation), ``decision_id``, ``index``, ``stage``, ``agent``."""
    from datasets import Dataset

    ids = [p.id for p in points]
    if len(set(ids)) != len(ids):
        raise UsageError("decision point ids repeat; build the points of one pool and route with decision_points")
    return Dataset.from_list([
        {"prompt": prompt_text(tokenizer, p.prompt), "decision_id": p.id, "index": p.index, "stage": p.stage, "agent": p.agent}
        for p in points
    ])


def _completion_text(completion: Any) -> str:
    """TRL passes plain strings for text prompts and message lists for conversational ones."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"expected a completion string or a list of chat messages, got {type(completion).__name__}")


class EnvReward:
    """TRL reward function: ``reward(prompts, completions, decision_id, **kwargs) -> list[float]``.

    ``history`` holds one entry per call: the trainer's step, the rewards in order, and per decision point
    (GRPO group) the rewards of its completions; ``outcomes`` counts the episodes' outcome codes.
    """

    __name__ = "env_reward"  # TRL logs rewards under the function's name

    def __init__(self, points: Iterable[DecisionPoint], replay: Replay, partner: Policy | str | None = None) -> None:
        self.points = {p.id: p for p in points}
        self.replay = replay
        self.partner = partner
        self.history: list[dict[str, Any]] = []
        self.scored = 0
        self.seconds = 0.0

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], decision_id: Sequence[str] | None = None,
                 trainer_state: Any = None, log_metric: Any = None, **_: Any) -> list[float]:
        if decision_id is None:
            raise UsageError("the dataset has no 'decision_id' column: build it with prompt_dataset(points, tokenizer) "
                             "and keep remove_unused_columns=False in GRPOConfig")
        if len(decision_id) != len(completions):
            raise UsageError(f"got {len(completions)} completions but {len(decision_id)} decision ids")
        start = time.perf_counter()
        done: dict[tuple[str, str], tuple[float, str]] = {}
        rewards: list[float] = []
        outcomes: Counter[str] = Counter()
        groups: dict[str, list[float]] = defaultdict(list)
        for did, completion in zip(decision_id, completions):
            point = self.points.get(did)
            if point is None:
                raise KeyError(f"decision id {did!r} is not among this reward's {len(self.points)} decision points")
            text = _completion_text(completion).strip()  # the action the env receives
            key = (did, text)
            if key not in done:
                played = self.replay.play(point.index, point.prefix, text, self.partner, expect_prompt=point.prompt)
                done[key] = (played.reward, str(played.outcome))
                self.scored += 1
            reward, outcome = done[key]
            rewards.append(reward)
            outcomes[outcome] += 1
            groups[did].append(reward)
        self.seconds += time.perf_counter() - start
        step = int(getattr(trainer_state, "global_step", len(self.history)))
        self.history.append({"step": step, "rewards": rewards, "groups": dict(groups), "outcomes": dict(outcomes)})
        if log_metric is not None:
            for code, n in outcomes.items():
                log_metric(f"outcome/{code}", n / len(rewards))
        return rewards


def group_stats(entry: dict[str, Any]) -> dict[str, Any]:
    """Mean, population variance and per-group variance of one :class:`EnvReward` call."""
    rewards = entry["rewards"]
    variances = [statistics.pvariance(g) for g in entry["groups"].values()]
    return {
        "reward_mean": statistics.fmean(rewards),
        "reward_var": statistics.pvariance(rewards),
        "groups": len(variances),
        "group_var_mean": statistics.fmean(variances),
        "group_var_max": max(variances),
        "groups_with_variance": sum(v > 0 for v in variances),
        "outcomes": dict(sorted(entry["outcomes"].items())),
    }


# --------------------------------------------------------------------------- the `gencoord train grpo` run


@dataclass(frozen=True)
class GRPOResult:
    checkpoint: Path | None
    provenance: dict[str, Any]
    curve: list[dict[str, Any]] = field(repr=False)


def libraries() -> dict[str, str]:
    """Versions of the libraries a run used, read from the installed distributions (nothing is imported, so a
    library that cannot be imported on this machine is recorded as such instead of failing the run)."""
    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "trl", "datasets"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    out["device_name"] = torch.cuda.get_device_name() if torch.cuda.is_available() else (platform.processor() or platform.machine())
    return out


def _curve(reward: EnvReward, log_history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per optimizer step: our reward statistics (by the step they trained) joined with TRL's log."""
    logs = {int(h["step"]): h for h in log_history if "loss" in h and "step" in h}
    rows = []
    for entry in reward.history:
        step = entry["step"] + 1  # rewards generated at global_step s train optimizer step s + 1
        row = {"step": step, **group_stats(entry)}
        log = logs.get(step, {})
        for ours, theirs in (("loss", "loss"), ("trl_reward", "reward"), ("trl_reward_std", "reward_std"),
                             ("frac_reward_zero_std", "frac_reward_zero_std"),
                             ("completion_mean_length", "completions/mean_length"), ("grad_norm", "grad_norm")):
            if theirs in log:
                row[ours] = log[theirs]
        rows.append(row)
    return rows


@dataclass(frozen=True)
class GRPORecipe:
    """GRPO (TRL) from a checkpoint on the decisions of ``pool`` / ``route``, each completion rewarded by
    replaying its episode: the training step of a :class:`gencoord_env.train.pipeline.RunSpec` (the lane gives
    the seed and the device). Writes ``points.jsonl``, ``reward_curve.json`` and ``final/`` into its folder."""

    pool: str = "train"
    route: str = "forward"
    stages: tuple[str, ...] | None = None  # None: every decision of the route
    episodes: int | None = None  # the first N episodes of the pool (None: all)
    partner: str = "rule"  # plays the prefixes and every decision after the learner's
    partial_credit: bool = False
    steps: int = 50
    prompts_per_step: int = 4
    num_generations: int = 8
    max_completion_length: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    lr: float = 1e-6
    lr_scheduler: str = "constant"
    beta: float = 0.0
    loss_type: str = "dapo"

    def __post_init__(self) -> None:
        if self.num_generations < 2:
            raise UsageError(f"num_generations must be >= 2 (GRPO compares completions within a group), got {self.num_generations}")
        if self.prompts_per_step < 1 or self.steps < 1:
            raise UsageError(f"prompts_per_step and steps must be >= 1, got {self.prompts_per_step} and {self.steps}")

    def train(self, lane: Lane, run: RunSpec, base: str, out: Path) -> tuple[Path, dict[str, Any]]:
        from trl import GRPOConfig, GRPOTrainer  # the rl extra

        fmt = resolve_format(base, run.format)  # completions are scored as the actions themselves
        # float32 weights; bf16 only as autocast on GPUs that support it (pure bf16 AdamW updates are lossy).
        lm = load_model(base, device=lane.device, dtype=torch.float32)
        model, tokenizer = lm.model, lm.tokenizer
        tokenizer.padding_side = "left"
        source = Path(base)
        described: dict[str, Any] = {"source": base}
        if source.is_dir():
            described["tree_sha256"] = tree_sha256(source)[0]
        points = decision_points(self.pool, self.route, self.partner, stages=self.stages, episodes=self.episodes)
        if not points:
            raise UsageError(f"no decision points in {self.pool!r}/{self.route!r} for stages {self.stages}")
        write_points(points, out / "points.jsonl")
        replay = Replay(self.pool, self.route, partial_credit=self.partial_credit, partner=self.partner)
        reward = EnvReward(points, replay)
        cuda = lm.device.type == "cuda"
        args = GRPOConfig(
            output_dir=str(out / "trainer"), max_steps=self.steps,
            per_device_train_batch_size=self.prompts_per_step * self.num_generations, gradient_accumulation_steps=1,
            num_generations=self.num_generations, max_completion_length=self.max_completion_length,
            temperature=self.temperature, top_p=self.top_p, learning_rate=self.lr, lr_scheduler_type=self.lr_scheduler,
            warmup_steps=0, beta=self.beta, loss_type=self.loss_type, seed=lane.seed, logging_steps=1, save_strategy="no",
            report_to="none", bf16=cuda and torch.cuda.is_bf16_supported(), use_cpu=not cuda,
            activation_checkpointing=False, disable_dropout=True, dataloader_num_workers=0, disable_tqdm=True,
        )
        trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=prompt_dataset(points, tokenizer),
                              processing_class=tokenizer)
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
        replay.close()
        curve = _curve(reward, trainer.state.log_history)
        (out / "reward_curve.json").write_text(json.dumps(curve, indent=2) + "\n", encoding="utf-8")
        if not all(math.isfinite(r["loss"]) for r in curve if "loss" in r):
            raise FloatingPointError(f"GRPO loss became non-finite; see {out / 'reward_curve.json'}")
        checkpoint = out / "final"
        trainer.save_model(str(checkpoint))
        tokenizer.save_pretrained(checkpoint)
        record = {**((read_record(base) or {}) if source.is_dir() else {}), "format": fmt.name}
        (checkpoint / RECORD).write_text(json.dumps(record, sort_keys=True) + "\n", encoding="utf-8")
        summary = {
            "kind": "grpo",
            "base_model": {**described, "model_type": model.config.model_type,
                           "parameters": sum(p.numel() for p in model.parameters())},
            "data": {"pool": self.pool, "route": self.route, "decision_points": len(points),
                     "stages": dict(sorted(Counter(p.stage for p in points).items())),
                     "file": "points.jsonl", "sha256": file_sha256(out / "points.jsonl")},
            "libraries": libraries(),
            "precision": "bfloat16 autocast, float32 weights" if args.bf16 else "float32",
            "optimizer_steps": trainer.state.global_step,
            "train_seconds": seconds,
            "completions_scored": reward.scored,
            "scoring_seconds": reward.seconds,
            "reward_first": curve[0]["reward_mean"] if curve else None,
            "reward_final": curve[-1]["reward_mean"] if curve else None,
            "reward_curve": "reward_curve.json",
        }
        return checkpoint, summary


@dataclass(frozen=True, kw_only=True)
class GRPORunConfig(GRPORecipe):
    """``gencoord train grpo``: the recipe, the checkpoint it starts from, where it writes, and what it plays."""

    model: str  # an SFT checkpoint directory (or hub id)
    out_dir: str
    seed: int = 0
    device: str | None = None
    eval_pool: str | None = None  # closed-loop greedy success before and after, on this pool
    eval_episodes: int | None = None
    save: bool = True

    def recipe(self) -> GRPORecipe:
        return GRPORecipe(**{f.name: getattr(self, f.name) for f in dataclasses.fields(GRPORecipe)})

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for key in ("out_dir", "device", "save"):
            d.pop(key)
        return d


def specs(config: GRPORunConfig) -> Lane:
    """``gencoord train grpo`` as a lane of the pipeline: with an ``eval_pool``, the base checkpoint as it is
    (``before``), then GRPO from it (``grpo``, into ``out_dir`` itself), each playing the eval pool greedily."""
    recipe = config.recipe()
    plays: tuple[Play, ...] = ()
    if config.eval_pool:
        condition = Condition(config.eval_pool, config.eval_pool, "model", route=config.route)
        plays = (Play("eval", condition, config.eval_episodes, batch=64),)
    base = Checkpoint(config.model)
    runs: tuple[RunSpec, ...] = ((RunSpec("before", None, base, None, plays, output_format="direct", dtype="float32"),) if plays else ())
    runs += (RunSpec("grpo", None, base, recipe, plays, output_format="direct", folder=".", dtype="float32"),)
    inputs = Inputs(data="", tokenizer=None, sets={}, tokenizer_sha256=None)
    return Lane("grpo", config.seed, runs, inputs, config.out_dir, config.out_dir, config.device, threads=torch.get_num_threads())


def _eval(result: dict[str, Any], run: str, pool: str, route: str) -> dict[str, Any] | None:
    """A run's greedy play of the eval pool as the run record keeps it: success, outcomes, per-episode success and
    the 95% cluster-bootstrap interval."""
    entry = result["runs"].get(run)
    if entry is None or "eval" not in entry["plays"]:
        return None
    return {"pool": pool, "route": route, **success_record(entry["plays"]["eval"]["rows"])}


def run(config: GRPORunConfig) -> GRPOResult:
    """GRPO from ``config.model`` on the decisions of ``config.pool`` / ``config.route``, with the greedy play of
    ``eval_pool`` before and after (see :func:`specs`); writes ``provenance.json`` beside the run's files."""
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lane = specs(config)
    result = run_lane(lane)
    trained = result["runs"]["grpo"]
    before = _eval(result, "before", str(config.eval_pool), config.route)
    after = _eval(result, "grpo", str(config.eval_pool), config.route)
    provenance: dict[str, Any] = {
        **{k: v for k, v in trained["summary"].items() if k not in ("checkpoint", "checkpoint_sha256")},
        "config": config.to_dict(), "eval_before": before, "eval_after": after, "eval_change": paired_change(before, after),
    }
    checkpoint = out / "final"
    if config.save:
        digest, files = tree_sha256(checkpoint)
        provenance["checkpoint"] = {"dir": "final", "tree_sha256": digest, "files": files}
    else:  # the lane played it; nothing is kept
        shutil.rmtree(checkpoint)
    (out / "provenance.json").write_text(json.dumps(provenance, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    curve = json.loads((out / "reward_curve.json").read_text(encoding="utf-8"))
    return GRPOResult(checkpoint if config.save else None, provenance, curve)
