"""Self-play GRPO on the env's episodes (one policy, or sender and receiver as two), with held-out success
before and after: ``gencoord train selfplay``, one lane of the training pipeline per seed
(:mod:`gencoord_env.train.pipeline`).

Each seed's lane, all from the package's own data:

1. **Warm start**: an SFT :class:`~gencoord_env.train.pipeline.Recipe` on the paper's forward rows with each
   target the assistant's ``commit`` call in the tokenizer's own format (:func:`tool_inputs`,
   :func:`gencoord_env.commands.llm_rl.tool_rows`), by a scratch model (offline tokenizer,
   :data:`gencoord_env.commands.llm_rl.TOOL_CHAT_TEMPLATE`) or from ``model``, a checkpoint folder of its own (a
   Qwen3 or Qwen3.5 checkpoint keeps its chat template and tool-call format). Each candidate warm start is a run
   of its own lane that plays the first ``warm_episodes`` of the train pool greedily and sampled at GRPO's
   temperature (two :class:`~gencoord_env.train.pipeline.Play` values); ``sft_epochs="auto"`` tries
   :data:`AUTO_EPOCHS` (:func:`search`) until the sampled success lands in ``band`` (20-70% by default: a start
   GRPO's groups disagree on; one that already solves the train pool leaves them nothing to compare, one that
   solves nothing as little). A candidate trained and measured before is reused, not retrained.
   ``sft_epochs=0`` starts GRPO from ``model`` as it is. A warm start outside the band is warned about and recorded.
2. **Before**: the chosen warm start plays ``eval_pool`` (held out from the train pool) greedily through the
   experiment harness, every decision from the deciding agent's own local context.
3. **GRPO**: :class:`SelfPlayRecipe`, the run's :class:`~gencoord_env.train.pipeline.Trainer`
   (:mod:`gencoord_env.train.episode_grpo`): ``steps`` optimizer steps, each on ``prompts_per_step``
   train-pool episodes played ``num_generations`` times with the sampler (the package's static decoder),
   staged partial-credit reward (or binary), group advantages, no KL. ``policies="one"``: one model decides for
   both roles (self-play). ``policies="two"``: sender and receiver are separate models started from the same
   warm start, each with its own optimizer, saved as one model per role
   (:data:`gencoord_env.train.pipeline.ROLES_FILE`); ``train_roles`` says which learn (both, or one beside its
   frozen partner). ``resume_every`` keeps the loop's state; ``max_seconds`` stops it past that many seconds
   of the lane (warm start included), which then plays and saves.
4. **After**: the trained model(s) play ``eval_pool`` as the warm start did; the change is paired by cluster
   with a 95% cluster-bootstrap interval (:func:`gencoord_env.train.pipeline.paired_change`, the function
   ``gencoord train grpo`` uses), and the model(s) are saved with their lineage (``training_record.json``).

``trainer="trl"`` runs step 3 through TRL's ``GRPOTrainer`` with ``environment_factory``
(:class:`gencoord_env.commands.llm_rl.GencoordToolEnv`): one multi-turn transcript per episode (the receiver's
turn reads the sender's turn before it), rollouts through ``model.generate``; the reference the rollout
benchmark times (``benchmarks/grpo_step_time.py``). ``trainer="trl-static"`` samples TRL's generation turns
through the package's static decoder (:func:`gencoord_env.train.episode_grpo.static_rollouts`). Both are
evaluated as the episode loop is, each decision from its agent's local context.

Writes under ``out/seed<S>/``: ``reward_curve.json`` (per step: reward mean and std, groups without variance,
success, outcomes, completion tokens, per-learner loss, gradient norm and log-probability gap, seconds),
``provenance.json`` (config, warm-start measurements, seconds per phase, versions, before / after with
intervals, the paired change, checkpoints) and ``lanes/`` (the lanes' results: every play's episodes); over
seeds ``summary.json`` and (several seeds) ``cross_play.json``: every seed's sender beside every other seed's
receiver on ``eval_pool``, itself a lane of untrained one-model-per-role checkpoints. Checkpoints go under
``weights_dir`` (default ``out``): ``warm_e<E>/final``, ``grpo/final``. Needs the ``lm``, ``rl`` (``trl`` only
for ``trainer="trl"``) and ``experiments`` extras.

    gencoord train selfplay --out runs/selfplay --seeds 0 1 2 --jobs 3 --device cuda
    gencoord train selfplay --out runs/two --seeds 0 1 2 --jobs 3 --policies two --device cuda
    gencoord train selfplay --out runs/qwen --model path/to/Qwen3.5-0.8B --device cuda
    gencoord train selfplay --out runs/selfplay --tiny                     # CPU check, a minute or two
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import shutil
import statistics
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from transformers import AutoTokenizer

import gencoord_env
from gencoord_env.agents.formats import RECORD
from gencoord_env.agents.lm.loading import LoadedModel, load_model, train_tokenizer
from gencoord_env.commands.cli import Parser
from gencoord_env.commands.experiments import stats
from gencoord_env.commands.experiments.specs import Condition
from gencoord_env.commands.llm_rl import GencoordToolEnv, episode_dataset, staged_reward, success_reward, tool_rows, tool_tokenizer
from gencoord_env.errors import UsageError
from gencoord_env.train.data import build_set, file_sha256, write_rows
from gencoord_env.train.episode_grpo import Learner, grpo_update, play_batch, reward_of, static_rollouts
from gencoord_env.train.grpo import libraries
from gencoord_env.train.lanes import lane_device, run_lanes, threads_per_lane
from gencoord_env.train.pipeline import (
    After, Checkpoint, Inputs, Lane, Play, Recipe, RunSpec, Scratch, cluster_success, paired_change, run_lane, success_record,
    write_roles,
)
from gencoord_env.train.sft import read_record, tree_sha256
from gencoord_env.turns import TurnEnv

__all__ = ["AUTO_EPOCHS", "SelfPlayConfig", "SelfPlayRecipe", "choose", "cross_play", "lane", "load_tool_model", "main",
           "run", "search", "tool_inputs", "turn_envs", "warm_checkpoint",
           "warm_run"]

#: The warm-start epochs ``sft_epochs="auto"`` tries, in order from the first, moving up while the train-pool
#: success is below the band and down while it is above.
AUTO_EPOCHS: tuple[float, ...] = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0)
ROLES: tuple[str, ...] = ("sender", "receiver")
TRAINERS: tuple[str, ...] = ("episode", "trl", "trl-static")
#: The warm start's data set: the forward rows with commit-call targets (:func:`tool_inputs`)
TOOL_SET = "tool"
FORMAT = "commit_tool"


# --------------------------------------------------------------------------- the GRPO step (a Trainer) and the config


@dataclass(frozen=True)
class SelfPlayRecipe:
    """Self-play GRPO over whole episodes of ``pool`` from a checkpoint in the commit tool's format: the
    :class:`~gencoord_env.train.pipeline.Trainer` of a run (the lane gives the seed and the device). Writes
    ``reward_curve.json`` (each step as it ends), ``resume.pt`` (every ``resume_every`` steps, removed at the
    end) and ``final/`` (one model, or with ``policies="two"`` one model per role) into its folder."""

    pool: str = "train"
    route: str = "forward"
    private_fact: str = "id"  # the env's private_fact ("id", or a naturalized form: train, C1, C2, C3) in GRPO and evaluation
    train_episodes: int | None = None  # GRPO samples the first N episodes of the pool (None: all)
    reward: str = "staged"
    lr: float = 5e-5  # 5e-4 broke every run in ~10 steps on H100 (reports/grpo/2026-11-27); 5e-5 held
    steps: int = 100
    max_turns: int = 4  # decisions per episode at most (a two-agent forward episode takes two)
    max_new_tokens: int = 192  # per decision (a commit call of a forward record takes 60-120)
    max_completion_length: int = 512  # trainer="trl": calls and the observations they answer with, together
    prompts_per_step: int = 8
    num_generations: int = 8
    temperature: float = 0.7
    scale_rewards: bool = True  # advantages divided by the group's standard deviation
    iterations: int = 2  # optimizer steps per batch of episodes (> 1: PPO's clipped ratio to the sampling policy)
    warmup_steps: int = 10  # GRPO's learning rate rises linearly over these first steps
    policies: str = "one"  # "one": self-play; "two": a sender model and a receiver model
    train_roles: tuple[str, ...] = ROLES  # with policies="two": the roles whose model learns
    # "episode": this package's loop; "trl": TRL's GRPOTrainer over transcripts; "trl-static": the same, its
    # generation through the package's static decoder
    trainer: str = "episode"
    # GRPO stops after the step that ends past this many seconds of the lane (warm start included), then
    # plays and saves: a lane with a wall-time budget always comes back with results. None: no limit.
    max_seconds: float | None = None
    resume_every: int = 0  # GRPO state to resume.pt every N steps; a run started again continues (not in the key)
    started: float | None = None  # the lane's start (time.time()), from which max_seconds counts; None: this step's

    UNKEYED: ClassVar[tuple[str, ...]] = ("resume_every", "started")

    def __post_init__(self) -> None:
        if self.reward not in ("staged", "binary"):
            raise UsageError(f"reward must be 'staged' or 'binary', got {self.reward!r}")
        if self.policies not in ("one", "two"):
            raise UsageError(f"policies must be 'one' (self-play) or 'two' (sender and receiver models), got {self.policies!r}")
        if self.trainer not in TRAINERS:
            raise UsageError(f"trainer must be one of {list(TRAINERS)}, got {self.trainer!r}")
        if self.trainer != "episode" and self.policies != "one":
            raise UsageError(f"trainer={self.trainer!r} trains one model (TRL's GRPOTrainer has one policy); use trainer='episode' for two")
        if not self.train_roles or any(r not in ROLES for r in self.train_roles):
            raise UsageError(f"train_roles must name roles among {list(ROLES)}, got {list(self.train_roles)}")
        if self.num_generations < 2 or self.prompts_per_step < 1 or self.steps < 0:
            raise UsageError(f"num_generations must be >= 2 (GRPO compares a group), prompts_per_step >= 1 and steps >= 0; got "
                             f"{self.num_generations}, {self.prompts_per_step}, {self.steps}")

    @property
    def env_kwargs(self) -> dict[str, Any]:
        return {"route": self.route, **({"private_fact": self.private_fact} if self.private_fact != "id" else {})}

    def condition(self, pool: str) -> Condition:
        """The harness's condition of ``pool`` as GRPO plays it (route, private fact), the model in every role."""
        return Condition(pool, pool, "model", route=self.route, private_fact=self.private_fact)

    def train(self, lane: Lane, run: RunSpec, base: str, out: Path) -> tuple[Path, dict[str, Any]]:
        out.mkdir(parents=True, exist_ok=True)
        if self.trainer == "episode":
            checkpoint, summary = self._episodes(lane, run, base, out)
        else:
            checkpoint, summary = self._trl(lane, base, out)
        curve = summary.pop("curve")
        (out / "reward_curve.json").write_text(json.dumps(curve, indent=2) + "\n", encoding="utf-8")
        return checkpoint, {"kind": "selfplay_grpo", "trainer": self.trainer, "optimizer_steps": len(curve),
                            "reward_first": curve[0].get("reward") if curve else None,
                            "reward_last": curve[-1].get("reward") if curve else None,
                            "reward_curve": "reward_curve.json", **summary}

    def _episodes(self, lane: Lane, run: RunSpec, base: str, out: Path) -> tuple[Path, dict[str, Any]]:
        """This package's loop (:mod:`gencoord_env.train.episode_grpo`), one policy or two."""
        started = self.started if self.started is not None else time.time()
        torch.manual_seed(lane.seed)
        names = ("self",) if self.policies == "one" else ROLES
        learners = []
        for k, name in enumerate(names):
            lm = load_tool_model(base, lane.device)
            trainable = name == "self" or name in self.train_roles
            learners.append(Learner(name, lm.model, lm.tokenizer, trainable=trainable, lr=self.lr, warmup_steps=self.warmup_steps,
                                    max_new_tokens=self.max_new_tokens, temperature=self.temperature, seed=lane.seed * 10 + k))
        policies = {role: learners[0] for role in ROLES} if self.policies == "one" else dict(zip(ROLES, learners))
        size = pool_size(self.pool, self.env_kwargs)
        size = size if self.train_episodes is None else min(size, self.train_episodes)
        per_step, group = self.prompts_per_step, self.num_generations
        order = _episode_order(size, self.steps, per_step, lane.seed)

        resume_path, key = out / "resume.pt", lane.run_key(run)
        curve: list[dict[str, Any]] = []
        first, spent = 0, 0.0
        if resume_path.is_file():
            state = torch.load(resume_path, map_location="cpu", weights_only=False)
            if state["key"] == key:
                for learner in learners:
                    learner.load_state(state["learners"][learner.name])
                first, curve, spent = state["step"], state["curve"], state["seconds"]
        envs = turn_envs(self.pool, per_step * group, self.env_kwargs)
        t_grpo = time.perf_counter() - spent
        for step in range(first, self.steps):
            if self.max_seconds is not None and time.time() - started > self.max_seconds:
                warnings.warn(f"GRPO stopped after {step} of {self.steps} steps: the lane reached max_seconds={self.max_seconds:g}",
                              RuntimeWarning, stacklevel=2)
                break
            t = time.perf_counter()
            batch = [i for i in order[step * per_step : (step + 1) * per_step] for _ in range(group)]
            played = play_batch(envs, batch, policies, sample=True, max_turns=self.max_turns)
            t_roll = time.perf_counter() - t
            rewards = [reward_of(p.outcome, self.reward) for p in played]
            steps = grpo_update(learners, played, rewards, group, scale=self.scale_rewards, temperature=self.temperature,
                                iterations=self.iterations)
            groups = [rewards[s : s + group] for s in range(0, len(rewards), group)]
            outcomes = Counter(p.outcome or "UNFINISHED" for p in played)
            lengths = [len(d.completion) for p in played for d in p.decisions]
            curve.append({
                "step": step + 1, "reward": statistics.fmean(rewards), "reward_std": statistics.pstdev(rewards),
                "frac_reward_zero_std": sum(statistics.pstdev(g) == 0 for g in groups) / len(groups),
                "success": outcomes.get("SUCCESS", 0) / len(played), "outcomes": dict(sorted(outcomes.items())),
                "decisions_mean": statistics.fmean(len(p.decisions) for p in played),
                "completion_mean_length": statistics.fmean(lengths) if lengths else 0.0,
                "learners": steps, "rollout_seconds": t_roll, "step_seconds": time.perf_counter() - t,
            })
            (out / "reward_curve.json").write_text(json.dumps(curve, indent=2) + "\n", encoding="utf-8")  # a cut-off lane keeps it
            if (step + 1) % 10 == 0 or step + 1 == self.steps:
                print(f"seed {lane.seed}: step {step + 1}: reward {curve[-1]['reward']:.3f}, sampled success "
                      f"{curve[-1]['success']:.1%}, {curve[-1]['step_seconds']:.2f} s", flush=True)
            if not all(math.isfinite(s["loss"]) for s in steps.values()):
                raise FloatingPointError(f"GRPO loss became non-finite at step {step + 1}: {steps}")
            if self.resume_every and (step + 1) % self.resume_every == 0 and step + 1 < self.steps:
                tmp = resume_path.with_suffix(".tmp")
                torch.save({"key": key, "step": step + 1, "curve": curve, "seconds": time.perf_counter() - t_grpo,
                            "learners": {lr.name: lr.state() for lr in learners}}, tmp)
                os.replace(tmp, resume_path)
        seconds = time.perf_counter() - t_grpo
        for env in envs:
            env.close()
        final = out / "final"
        trained = [lr for lr in learners if lr.trainable]
        if self.policies == "one":
            checkpoints = {"self": self._save(learners[0], final, base, lane, len(curve))}
        else:  # one model per role: the trainable ones under final/, a frozen one is the warm start itself
            checkpoints = {lr.name: self._save(lr, final / lr.name, base, lane, len(curve)) for lr in trained}
            write_roles(final, {role: final / role if role in checkpoints else Path(base) for role in ROLES})
        resume_path.unlink(missing_ok=True)
        step_seconds = [c["step_seconds"] for c in curve]
        return final, {"curve": curve, "grpo_seconds": seconds, "checkpoints": checkpoints,
                       "steps_per_second": len(step_seconds) / sum(step_seconds) if step_seconds else None}

    def _save(self, learner: Learner, directory: Path, base: str, lane: Lane, steps: int) -> dict[str, Any]:
        """A trained learner saved with its lineage: the warm start's ``training_record.json`` plus this run."""
        learner.model.save_pretrained(directory)
        learner.tokenizer.save_pretrained(directory)
        previous = read_record(base) or {}
        entry = {"from": "grpo", "base": Path(base).parent.name, "base_tree_sha256": tree_sha256(base)[0], "policy": learner.name,
                 "policies": self.policies, "pool": self.pool, "route": self.route, "private_fact": self.private_fact,
                 "optimizer_steps": steps, "lr": self.lr, "seed": lane.seed, "reward": self.reward,
                 "episodes_per_step": self.prompts_per_step * self.num_generations}
        (directory / RECORD).write_text(json.dumps({**previous, "lineage": [*previous.get("lineage", []), entry]}, sort_keys=True) + "\n",
                                        encoding="utf-8")
        return {"dir": str(directory.relative_to(lane.work)), "tree_sha256": tree_sha256(directory)[0]}

    def _trl(self, lane: Lane, base: str, out: Path) -> tuple[Path, dict[str, Any]]:
        """TRL's GRPOTrainer over multi-turn transcripts (``model.generate`` rollouts, or the static decoder's)."""
        from trl import GRPOConfig, GRPOTrainer  # the rl extra's optional trainer

        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
        lm = load_tool_model(base, lane.device)
        model, tokenizer = lm.model, lm.tokenizer
        size = pool_size(self.pool, {"route": self.route})
        indices = range(size if self.train_episodes is None else min(size, self.train_episodes))
        history: list[dict[str, Any]] = []

        def reward(environments: Sequence[GencoordToolEnv], trainer_state: Any = None, **kwargs: Any) -> list[float]:
            rewards: list[float] = (staged_reward if self.reward == "staged" else success_reward)(environments)
            outcomes = Counter(e.outcome or "UNFINISHED" for e in environments)
            history.append({"step": int(getattr(trainer_state, "global_step", len(history))) + 1, "outcomes": dict(outcomes),
                            "success": outcomes.get("SUCCESS", 0) / max(1, len(environments)),
                            "decisions_mean": statistics.fmean(len(e.records) for e in environments)})
            return rewards

        reward.__name__ = f"{self.reward}_reward"
        args = GRPOConfig(
            output_dir=str(out / "trainer"), max_steps=self.steps, num_generations=self.num_generations,
            per_device_train_batch_size=self.prompts_per_step * self.num_generations, gradient_accumulation_steps=1,
            max_completion_length=self.max_completion_length, max_tool_calling_iterations=self.max_turns,
            temperature=self.temperature, learning_rate=self.lr, lr_scheduler_type="constant_with_warmup",
            warmup_steps=self.warmup_steps, beta=0.0, loss_type="dapo", seed=lane.seed, logging_steps=1, save_strategy="no",
            report_to="none", bf16=False, use_cpu=lm.device.type != "cuda", activation_checkpointing=False,
            disable_dropout=True, dataloader_num_workers=0, disable_tqdm=True,
        )
        trainer_class = static_rollouts(GRPOTrainer) if self.trainer == "trl-static" else GRPOTrainer
        trainer = trainer_class(model=model, processing_class=tokenizer, reward_funcs=[reward], args=args,
                                train_dataset=episode_dataset(self.pool, indices, route=self.route),
                                environment_factory=GencoordToolEnv.factory(pool=self.pool, route=self.route, plays="both"))
        t = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - t
        logs = {int(h["step"]): h for h in trainer.state.log_history if "loss" in h}
        curve = [{**entry, **{k: logs.get(entry["step"], {})[k] for k in ("reward", "reward_std", "frac_reward_zero_std", "loss",
                                                                        "tools/call_frequency", "completions/mean_length")
                              if k in logs.get(entry["step"], {})}} for entry in history]
        final = out / "final"
        trainer.save_model(str(final))
        tokenizer.save_pretrained(final)
        record = read_record(base) or {}
        entry = {"from": "grpo", "trainer": self.trainer, "base": Path(base).parent.name, "optimizer_steps": trainer.state.global_step,
                 "lr": self.lr, "seed": lane.seed, "reward": self.reward}
        (final / RECORD).write_text(json.dumps({**record, "lineage": [*record.get("lineage", []), entry]}, sort_keys=True) + "\n",
                                    encoding="utf-8")
        return final, {"curve": curve, "grpo_seconds": seconds,
                       "checkpoints": {"self": {"dir": str(final.relative_to(lane.work)), "tree_sha256": tree_sha256(final)[0]}},
                       "steps_per_second": trainer.state.global_step / seconds if seconds else None}


@dataclass(frozen=True, kw_only=True)
class SelfPlayConfig(SelfPlayRecipe):
    """``gencoord train selfplay``, one seed: the GRPO recipe, its warm start, where it writes, what it plays."""

    out_dir: str
    seed: int = 0
    # a checkpoint folder to warm-start from (its own chat template and tool-call format); None: a scratch model
    model: str | None = None
    sft_epochs: float | str = "auto"  # a number, or "auto": AUTO_EPOCHS searched for a train-pool success in band
    auto_start: float = 8.0  # where "auto" starts
    band: tuple[float, float] = (0.2, 0.7)
    warm_episodes: int = 128  # train-pool episodes that measure each warm start (the harness's selection)
    sft_lr: float | None = None  # None: train.sft.default_lr (1e-3 from scratch, 1e-5 for a pretrained checkpoint)
    sft_grad_accum: int = 4  # micro-batches of 4 rows per optimizer step (the paper's 4 x 4)
    sft_rows: int | None = None  # the first N forward rows (None: all 1,920)
    hidden_size: int = 256
    num_layers: int = 4
    eval_pool: str = "heldout"
    eval_episodes: int | None = None
    device: str | None = None
    weights_dir: str | None = None  # where checkpoints go (None: out_dir); results stay in out_dir

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.sft_epochs, str) and self.sft_epochs != "auto":
            raise UsageError(f"sft_epochs must be a number of epochs or 'auto', got {self.sft_epochs!r}")
        if not isinstance(self.sft_epochs, str) and self.sft_epochs < 0:
            raise UsageError(f"sft_epochs must be >= 0, got {self.sft_epochs}")
        if self.sft_epochs == 0 and self.model is None:
            raise UsageError("sft_epochs=0 starts GRPO from model as it is: give model (a checkpoint in the tool format)")
        if not 0.0 <= self.band[0] <= self.band[1] <= 1.0:
            raise UsageError(f"band must be (low, high) with 0 <= low <= high <= 1, got {self.band}")

    @property
    def weights(self) -> Path:
        return Path(self.weights_dir or self.out_dir)


# --------------------------------------------------------------------------- what the GRPO step plays


def turn_envs(pool: str, n: int, env_kwargs: Mapping[str, Any]) -> list[TurnEnv]:
    """``n`` sim envs of ``pool``, one decision at a time (what :func:`play_batch` plays)."""
    return [TurnEnv(gencoord_env.parallel_env(pool=pool, backend="sim", **env_kwargs)) for _ in range(n)]


def pool_size(pool: str, env_kwargs: Mapping[str, Any]) -> int:
    env = gencoord_env.parallel_env(pool=pool, backend="sim", **env_kwargs)
    try:
        return len(env.episodes)
    finally:
        env.close()


def load_tool_model(path: str | Path, device: str | None) -> LoadedModel:
    """A checkpoint in the commit tool's format, float32, its tokenizer ready for tool calls, padding on the left."""
    lm = load_model(path, device=device, dtype=torch.float32)
    tool_tokenizer(lm.tokenizer)
    lm.tokenizer.padding_side = "left"
    return lm


def _episode_order(size: int, steps: int, per_step: int, seed: int) -> list[int]:
    """Episode indices for every step: whole shuffled passes over the pool, as SFT orders its rows."""
    rng = random.Random(f"selfplay:{seed}")
    order: list[int] = []
    while len(order) < steps * per_step:
        epoch = list(range(size))
        rng.shuffle(epoch)
        order += epoch
    return order[: steps * per_step]


def recipe(config: SelfPlayConfig, started: float | None = None) -> SelfPlayRecipe:
    """The GRPO step of ``config`` (``started``: the lane's start, from which ``max_seconds`` counts)."""
    return SelfPlayRecipe(**{f.name: getattr(config, f.name) for f in dataclasses.fields(SelfPlayRecipe) if f.name != "started"},
                          started=started)  # the config's own fields are the warm start's and the lane's


# --------------------------------------------------------------------------- the spec


def tool_inputs(config: SelfPlayConfig, work: Path) -> Inputs:
    """The warm start's inputs under ``work/inputs``: the forward rows (the first ``sft_rows``) with each target the
    commit call in the tokenizer's format, and for a scratch model the offline tokenizer trained on them (kept
    while the rows are the same)."""
    folder = work / "inputs"
    folder.mkdir(parents=True, exist_ok=True)
    rows = build_set("forward")
    rows = rows[: config.sft_rows] if config.sft_rows else rows
    if config.model is not None:
        write_rows(tool_rows(rows, tool_tokenizer(AutoTokenizer.from_pretrained(config.model, local_files_only=True))),
                   folder / f"{TOOL_SET}.jsonl")
        return Inputs(str(folder), None, {TOOL_SET: file_sha256(folder / f"{TOOL_SET}.jsonl")}, None)
    rows = tool_rows(rows, tool_tokenizer(train_tokenizer(["."], vocab_size=270)))
    write_rows(rows, folder / f"{TOOL_SET}.jsonl")
    digest = file_sha256(folder / f"{TOOL_SET}.jsonl")
    tokenizer, stamp = folder / "tokenizer", folder / "tokenizer" / "rows.sha256"
    if not (stamp.is_file() and stamp.read_text(encoding="utf-8") == digest):
        tool_tokenizer(train_tokenizer([r.prompt + "\n" + r.target for r in rows], vocab_size=2048)).save_pretrained(tokenizer)
        stamp.write_text(digest, encoding="utf-8")
    return Inputs(str(folder), str(tokenizer), {TOOL_SET: digest}, tree_sha256(tokenizer)[0])


def warm_run(config: SelfPlayConfig, epochs: float) -> RunSpec:
    """The warm start of ``epochs`` epochs (0: ``model`` as it is), playing the first ``warm_episodes`` of the train
    pool greedily and sampled at GRPO's temperature."""
    train = config.condition(config.pool)
    plays = (Play("train/greedy", train, config.warm_episodes, batch=64),
             Play("train/sampled", train, config.warm_episodes, batch=64, temperature=config.temperature))
    common: dict[str, Any] = dict(plays=plays, max_new_tokens=config.max_new_tokens, output_format=FORMAT, dtype="float32")
    if epochs == 0:
        assert config.model is not None
        return RunSpec("warm_e0", None, Checkpoint(config.model), None, **common)
    init = Scratch(hidden_size=config.hidden_size, num_layers=config.num_layers) if config.model is None else Checkpoint(config.model)
    sft = Recipe(epochs=epochs, lr=config.sft_lr, micro_batch=4, grad_accum=config.sft_grad_accum, fit_rows=0)
    return RunSpec(f"warm_e{epochs:g}", TOOL_SET, init, sft, folder=f"warm_e{epochs:g}", **common)


def _warm_lane(config: SelfPlayConfig, inputs: Inputs, spec: RunSpec) -> Lane:
    return Lane(f"{config.seed}/{spec.name}", config.seed, (spec,), inputs, str(config.weights), str(Path(config.out_dir) / "lanes"),
                config.device, threads=torch.get_num_threads())


def warm_checkpoint(config: SelfPlayConfig, epochs: float) -> str:
    """The warm start of ``epochs`` epochs, trained (or kept) under ``config.weights`` and not measured: its checkpoint."""
    spec = dataclasses.replace(warm_run(config, epochs), plays=())
    done = run_lane(_warm_lane(config, tool_inputs(config, config.weights), spec))
    return str(config.weights / done["runs"][spec.name]["summary"]["checkpoint"])


def lane(config: SelfPlayConfig, inputs: Inputs, warm: RunSpec, started: float | None = None) -> Lane:
    """A seed's lane after its warm start: ``warm`` plays the eval pool (before), then GRPO from it plays it again
    (after); no GRPO run with ``steps=0``."""
    before = Play("eval", config.condition(config.eval_pool), config.eval_episodes, batch=64)
    runs = [dataclasses.replace(warm, plays=(before,))]
    if config.steps:
        runs.append(RunSpec("grpo", None, After(warm.name), recipe(config, started), (before,), config.max_new_tokens,
                            output_format=FORMAT, folder="grpo", dtype="float32"))
    return Lane(str(config.seed), config.seed, tuple(runs), inputs, str(config.weights), str(Path(config.out_dir) / "lanes"),
                config.device, threads=torch.get_num_threads())


def search(candidates: Sequence[float], start: float, band: tuple[float, float], measure: Callable[[float], float]) -> None:
    """``measure`` warm starts of ``candidates`` epochs from the one nearest ``start``: up while the success is below
    ``band``, down while above, never back, until one lands in it or the candidates end."""
    k = min(range(len(candidates)), key=lambda i: abs(candidates[i] - start))
    moved = 0
    while True:
        success = measure(candidates[k])
        step = 1 if success < band[0] else (-1 if success > band[1] else 0)
        if step == 0 or not 0 <= k + step < len(candidates) or (moved and step != moved):
            return
        moved, k = step, k + step


def choose(tried: Sequence[Mapping[str, Any]], band: tuple[float, float]) -> Mapping[str, Any]:
    """The warm start GRPO begins from: the last one measured in ``band``, else the one nearest it (warned about)."""
    low, high = band
    inside = [t for t in tried if low <= t["train_success"] <= high]
    chosen = inside[-1] if inside else min(tried, key=lambda t: min(abs(t["train_success"] - low), abs(t["train_success"] - high)))
    if not inside:
        warnings.warn(f"the warm start's train-pool self-play success is {chosen['train_success']:.1%}, outside the band "
                      f"[{low:.0%}, {high:.0%}] where GRPO groups have reward variance to learn from (tried "
                      f"{[(t['epochs'], round(t['train_success'], 3)) for t in tried]})", RuntimeWarning, stacklevel=2)
    return chosen


def _warm_start(config: SelfPlayConfig, inputs: Inputs) -> tuple[RunSpec, dict[str, Any]]:
    """Every candidate warm start as a lane of its own (trained and measured once), and the one chosen."""
    tried: list[dict[str, Any]] = []
    runs: dict[float, RunSpec] = {}

    def measure(epochs: float) -> float:
        runs[epochs] = spec = warm_run(config, epochs)
        done = run_lane(_warm_lane(config, inputs, spec))
        entry = done["runs"][spec.name]
        greedy, sampled = (success_record(entry["plays"][f"train/{n}"]["rows"]) for n in ("greedy", "sampled"))
        s = entry["summary"]
        tried.append({"epochs": epochs, "checkpoint": str(Path(config.weights) / s["checkpoint"]) if epochs else config.model,
                      "reused": bool(done.get("reused")) or not entry["retrained"], "rows": s["data_files"][0]["rows"] if s.get("data_files") else None,
                      "lr": s.get("lr"), "loss_first": s.get("loss_first"), "loss_last": s.get("loss_final"),
                      "train_success": sampled["success_rate"], "train_outcomes": sampled["outcomes"],
                      "train_success_greedy": greedy["success_rate"], "train_outcomes_greedy": greedy["outcomes"],
                      "train_episodes": greedy["episodes"], "temperature": config.temperature,
                      "seconds": entry["seconds"]})
        print(f"seed {config.seed}: warm start of {epochs:g} epochs: train-pool self-play success {sampled['success_rate']:.1%} "
              f"sampled at temperature {config.temperature:g}, {greedy['success_rate']:.1%} greedy ({greedy['episodes']} episodes)",
              flush=True)
        return float(sampled["success_rate"])

    if config.sft_epochs == 0:
        measure(0.0)
    elif config.sft_epochs == "auto":
        search(AUTO_EPOCHS, config.auto_start, config.band, measure)
    else:
        measure(float(config.sft_epochs))
    chosen = choose(tried, config.band)
    low, high = config.band
    return runs[chosen["epochs"]], {"chosen": chosen, "tried": tried, "band": list(config.band),
                                    "in_band": low <= chosen["train_success"] <= high}


def run(config: SelfPlayConfig) -> dict[str, Any]:
    """One seed's lane; see the module docstring. Returns its provenance (also written to ``provenance.json``)."""
    started = time.time()
    out, work = Path(config.out_dir), config.weights
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    provenance: dict[str, Any] = {"kind": "selfplay_grpo", "complete": False,
                                  "config": {k: v for k, v in dataclasses.asdict(config).items() if k != "started"},
                                  "libraries": libraries(), "precision": "float32"}

    def record(**parts: Any) -> None:
        """The provenance so far, written at once: a lane cut off or failing later keeps what it measured."""
        provenance.update(parts)
        (out / "provenance.json").write_text(json.dumps(provenance, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")

    inputs = tool_inputs(config, work) if config.sft_epochs != 0 else Inputs("", None, {}, None)
    warm, warm_start = _warm_start(config, inputs)
    record(warm_start=warm_start, warm_checkpoint=warm_start["chosen"]["checkpoint"], seconds={"warm_start": time.time() - started})
    the_lane = lane(config, inputs, warm, started)
    result = run_lane(the_lane)
    provenance["config_sha256"] = the_lane.run_key(the_lane.runs[-1])  # what the final weights depend on
    first = result["runs"][warm.name]
    before = {"pool": config.eval_pool, **success_record(first["plays"]["eval"]["rows"])}
    seconds = {**provenance["seconds"], "eval_before": first["plays"]["eval"]["seconds"]}
    warm_roles = {role: str(warm_start["chosen"]["checkpoint"]) for role in ROLES}
    trained = result["runs"].get("grpo")
    if trained is None:  # steps=0: the warm start measured, nothing trained
        record(complete=True, seconds=seconds, optimizer_steps=0, steps_per_second=None, eval_before=before, eval_after=before,
               eval_change=paired_change(before, before), reward_first=None, reward_last=None, checkpoints={},
               role_checkpoints=warm_roles)
        return provenance
    s = trained["summary"]
    after = {"pool": config.eval_pool, **success_record(trained["plays"]["eval"]["rows"])}
    shutil.copyfile(work / "grpo" / "reward_curve.json", out / "reward_curve.json")
    checkpoints = {name: {**c, "dir": str(work / c["dir"])} for name, c in s["checkpoints"].items()}
    roles = {role: checkpoints["self"]["dir"] for role in ROLES} if "self" in checkpoints else \
        {role: checkpoints[role]["dir"] if role in checkpoints else warm_roles[role] for role in ROLES}
    record(complete=True, seconds={**seconds, "grpo": trained["seconds"]["train"], "eval_after": trained["plays"]["eval"]["seconds"]},
           optimizer_steps=s["optimizer_steps"], steps_per_second=s["steps_per_second"], eval_before=before, eval_after=after,
           eval_change=paired_change(before, after), reward_first=s["reward_first"], reward_last=s["reward_last"],
           checkpoints=checkpoints, role_checkpoints=roles, grpo_reused=not trained["retrained"])
    return provenance


# --------------------------------------------------------------------------- cross-play and the command


def cross_play(role_checkpoints: Mapping[int, Mapping[str, str]], config: SelfPlayConfig, out: Path) -> dict[str, Any]:
    """Every seed's sender beside every seed's receiver (``role_checkpoints``: seed -> role -> checkpoint) on the
    eval pool: one lane of untrained one-model-per-role checkpoints under ``out/cross_play``. Success per pair, and
    the mean over pairs of one seed (the diagonal) against pairs of two seeds, paired by cluster."""
    seeds = sorted(role_checkpoints)
    play = Play("eval", config.condition(config.eval_pool), config.eval_episodes, batch=64)
    runs = tuple(RunSpec(f"s{s}_r{r}", None, Checkpoint(str(write_roles(out / "cross_play" / f"s{s}_r{r}", {
        "sender": role_checkpoints[s]["sender"], "receiver": role_checkpoints[r]["receiver"]}))), None, (play,),
        config.max_new_tokens, output_format=FORMAT, dtype="float32") for s in seeds for r in seeds)
    result = run_lane(Lane("cross_play", 0, runs, Inputs("", None, {}, None), str(out), str(out / "lanes"), config.device,
                           threads=torch.get_num_threads()))
    pairs = []
    for s in seeds:
        for r in seeds:
            got = success_record(result["runs"][f"s{s}_r{r}"]["plays"]["eval"]["rows"])
            pairs.append({"sender_seed": s, "receiver_seed": r, **{k: got[k] for k in ("success_rate", "ci95", "outcomes", "success_by_episode")}})

    def pooled(same: bool) -> dict[str, float]:  # per cluster, the mean over the pairs (each plays every cluster alike)
        means = [cluster_success(p["success_by_episode"]) for p in pairs if (p["sender_seed"] == p["receiver_seed"]) == same]
        return {c: statistics.fmean(m[c] for m in means) for c in (means[0] if means else {})}

    within, across = pooled(True), pooled(False)
    got_all: dict[str, Any] = {"pool": config.eval_pool, "episodes": len(pairs[0]["success_by_episode"]), "pairs": pairs,
                               "within_seed": statistics.fmean(within.values()) if within else None,
                               "across_seeds": statistics.fmean(across.values()) if across else None}
    if len(seeds) > 1:
        got_all["across_minus_within"] = stats.paired_bootstrap_ci(across, within)
    return got_all


def _tiny(a: argparse.Namespace) -> None:
    """--tiny: a CPU check's settings for every argument not given on the command line."""
    # the SFT rows are the decisions of the pool's first 4 episodes, which GRPO then plays
    defaults = {"hidden_size": 64, "num_layers": 2, "steps": 4, "prompts_per_step": 2, "num_generations": 4,
                "train_episodes": 4, "eval_episodes": 8, "warm_episodes": 4, "device": "cpu", "sft_rows": 8,
                "sft_epochs": 60.0, "sft_lr": 1e-2, "sft_grad_accum": 1, "max_new_tokens": 160, "lr": 1e-3}
    for key, value in defaults.items():
        if getattr(a, key) is None:
            setattr(a, key, value)


def main(argv: Sequence[str] | None = None) -> int:
    p = Parser(prog="gencoord train selfplay", description=__doc__.splitlines()[0])
    d = SelfPlayConfig(out_dir="")
    p.add_argument("--out", required=True, help="results (curves, provenance, summary)")
    p.add_argument("--weights-dir", default=None, help="where checkpoints go (default: --out); one folder per seed")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--model", default=None, help="a checkpoint folder to warm-start from, e.g. a Qwen3.5 checkpoint (default: a scratch model)")
    p.add_argument("--sft-epochs", default=None, help=f"warm-start epochs, or 'auto' (default {d.sft_epochs!r}): tried in {list(AUTO_EPOCHS)} "
                   "until the train-pool self-play success lands in --band; 0: GRPO from --model as it is")
    p.add_argument("--band", type=float, nargs=2, default=list(d.band), metavar=("LOW", "HIGH"))
    p.add_argument("--warm-episodes", type=int, default=None, help=f"train-pool episodes measuring a warm start (default {d.warm_episodes})")
    p.add_argument("--sft-lr", type=float, default=None)
    p.add_argument("--sft-rows", type=int, default=None)
    p.add_argument("--sft-grad-accum", type=int, default=None)
    p.add_argument("--hidden-size", type=int, default=None)
    p.add_argument("--num-layers", type=int, default=None)
    p.add_argument("--steps", type=int, default=None, help=f"GRPO optimizer steps (default {d.steps})")
    p.add_argument("--prompts-per-step", type=int, default=None)
    p.add_argument("--num-generations", type=int, default=None)
    p.add_argument("--max-new-tokens", type=int, default=None, help=f"per decision (default {d.max_new_tokens})")
    p.add_argument("--lr", type=float, default=None, help=f"GRPO learning rate (default {d.lr})")
    p.add_argument("--warmup-steps", type=int, default=None, help=f"GRPO's linear learning-rate warm-up (default {d.warmup_steps})")
    p.add_argument("--iterations", type=int, default=None,
                   help=f"optimizer steps per batch of episodes, clipped ratio after the first (default {d.iterations})")
    p.add_argument("--temperature", type=float, default=None,
                   help=f"GRPO's sampling temperature, also the warm start's measured success's (default {d.temperature})")
    p.add_argument("--reward", default="staged", choices=("staged", "binary"))
    p.add_argument("--pool", default=d.pool)
    p.add_argument("--private-fact", default=d.private_fact, help="the env's private_fact in GRPO and evaluation: id, or a naturalized form")
    p.add_argument("--train-episodes", type=int, default=None)
    p.add_argument("--eval-pool", default=d.eval_pool)
    p.add_argument("--eval-episodes", type=int, default=None)
    p.add_argument("--policies", default="one", choices=("one", "two"), help="one model for both roles, or a sender and a receiver model")
    p.add_argument("--train-roles", nargs="+", default=list(ROLES), choices=ROLES, help="with --policies two: whose model learns")
    p.add_argument("--trainer", default="episode", choices=TRAINERS, help="episode: this package's loop (one policy or two); "
                   "trl: TRL's GRPOTrainer over transcripts, model.generate rollouts; trl-static: the same through the static decoder")
    p.add_argument("--resume-every", type=int, default=0)
    p.add_argument("--max-seconds", type=float, default=None, help="stop GRPO past this many seconds of a lane, then evaluate and save")
    p.add_argument("--device", default=None)
    p.add_argument("--jobs", type=int, default=1, help="seeds run at once, each in a process of its own (one GPU serves all)")
    p.add_argument("--no-cross-play", action="store_true", help="skip cross-play between seeds")
    p.add_argument("--tiny", action="store_true", help="a CPU check: a 2-layer model warm-started on 8 rows, 4 GRPO steps of 2 x 4 "
                   "episodes, 8 eval episodes; arguments given explicitly keep their values")
    a = p.parse_args(argv)
    if a.tiny:
        _tiny(a)
    given = {k: v for k, v in vars(a).items() if v is not None}
    epochs = given.get("sft_epochs", d.sft_epochs)
    epochs = epochs if epochs == "auto" else float(epochs)
    configs = []
    for seed in a.seeds:
        configs.append(SelfPlayConfig(
            out_dir=str(Path(a.out) / f"seed{seed}"), seed=seed, model=a.model, sft_epochs=epochs, band=tuple(a.band),
            weights_dir=str(Path(a.weights_dir) / f"seed{seed}") if a.weights_dir else None, pool=a.pool,
            private_fact=a.private_fact, eval_pool=a.eval_pool, reward=a.reward, policies=a.policies,
            train_roles=tuple(a.train_roles), trainer=a.trainer, resume_every=a.resume_every, max_seconds=a.max_seconds,
            **{k: given[k] for k in ("warm_episodes", "sft_lr", "sft_rows", "sft_grad_accum", "hidden_size", "num_layers", "steps",
                                     "prompts_per_step", "num_generations", "max_new_tokens", "lr", "temperature", "iterations", "warmup_steps", "train_episodes",
                                     "eval_episodes", "device") if k in given}))
    configs = [dataclasses.replace(c, device=lane_device(c.device, k)) for k, c in enumerate(configs)]
    summary: list[dict[str, Any]] = []
    roles: dict[int, dict[str, str]] = {}

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    def done(config: SelfPlayConfig, prov: dict[str, Any] | None, error: str | None) -> None:
        if prov is None:
            summary.append({"seed": config.seed, "error": error})
            last = (error or "").strip().splitlines()[-1:] or [""]
            print(f"seed {config.seed} failed: {last[0]} (the whole traceback is in summary.json)", flush=True)
        else:
            roles[config.seed] = prov["role_checkpoints"]
            chosen = prov["warm_start"]["chosen"]
            summary.append({"seed": config.seed, "warm_epochs": chosen["epochs"], "warm_train_success": chosen["train_success"],
                            "warm_train_success_greedy": chosen.get("train_success_greedy"),
                            "before": prov["eval_before"]["success_rate"], "after": prov["eval_after"]["success_rate"],
                            "before_ci95": prov["eval_before"].get("ci95"), "after_ci95": prov["eval_after"].get("ci95"),
                            "change": prov["eval_change"], "reward_first": prov["reward_first"], "reward_last": prov["reward_last"],
                            "optimizer_steps": prov["optimizer_steps"], "steps_per_second": prov["steps_per_second"],
                            "seconds": prov["seconds"]})
            print(json.dumps(summary[-1], default=str), flush=True)
        summary.sort(key=lambda r: r["seed"])
        (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")

    failures = run_lanes(run, configs, jobs=a.jobs, threads=threads_per_lane(a.jobs), done=done)
    if len(roles) > 1 and not a.no_cross_play:
        try:
            got = cross_play(roles, configs[0], out)
        except Exception as exc:  # the seeds' results are written; cross-play can be run again from their checkpoints
            print(f"cross-play failed: {type(exc).__name__}: {exc}", flush=True)
            failures.append("cross-play")
        else:
            (out / "cross_play.json").write_text(json.dumps(got, indent=2, default=str) + "\n", encoding="utf-8")
            print(json.dumps({k: got[k] for k in ("within_seed", "across_seeds", "across_minus_within") if k in got}, default=str))
    _print_table(summary)
    return 1 if failures else 0


def _print_table(summary: Sequence[Mapping[str, Any]]) -> None:
    def pct(x: Any) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    print("| seed | warm epochs | warm train success (sampled / greedy) | before | after | change [95% CI] | steps | steps/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in summary:
        if "error" in row:
            print(f"| {row['seed']} | failed: {str(row['error']).strip().splitlines()[-1] if row['error'] else ''} | | | | | | |")
            continue
        change = row["change"] or {}
        ci = change.get("ci95") or [None, None]
        diff = "-" if change.get("diff") is None else f"{100 * change['diff']:+.1f} pp" + \
            (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci[0] is not None else "")
        sps = row["steps_per_second"]
        print(f"| {row['seed']} | {row['warm_epochs']:g} | {pct(row['warm_train_success'])} / {pct(row.get('warm_train_success_greedy'))} | "
              f"{pct(row['before'])} | {pct(row['after'])} | {diff} | {row.get('optimizer_steps', '-')} | "
              f"{'-' if sps is None else f'{sps:.2f}'} |")


if __name__ == "__main__":
    raise SystemExit(main())
