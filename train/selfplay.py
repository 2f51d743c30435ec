"""Self-play GRPO on the env's episodes (one policy, or sender and receiver as two), with held-out success
before and after.

One lane (one seed) runs four phases on one device, all from the package's own data:

1. **Warm start** (SFT): the commit tool learnt on the paper's forward rows (``train.data.build_set``, each
   target the assistant's ``commit`` call in the tokenizer's own format, :func:`gencoord_env.commands.llm_rl.tool_rows`),
   by a scratch model (offline tokenizer, :data:`gencoord_env.commands.llm_rl.TOOL_CHAT_TEMPLATE`) or from ``model``, a
   checkpoint folder of its own (a Qwen3 or Qwen3.5 checkpoint keeps its chat template and tool-call format).
   The number of epochs is chosen by measurement: every warm start's greedy self-play success on the train
   pool (``warm_episodes`` episodes) is measured; ``sft_epochs="auto"`` tries :data:`AUTO_EPOCHS` until that
   success lands in ``band`` (20-70% by default: a start GRPO groups disagree on; a start that already solves
   the train pool leaves them nothing to compare, one that solves nothing as little). ``sft_epochs=0`` starts
   GRPO from ``model`` as it is. A warm start outside the band is warned about and recorded.
2. **Before**: greedy closed-loop success on ``eval_pool`` (held out from the train pool), every decision made
   from the deciding agent's own local context (:func:`gencoord_env.train.episode_grpo.play_batch`).
3. **GRPO** (:mod:`gencoord_env.train.episode_grpo`): ``steps`` optimizer steps, each on ``prompts_per_step``
   train-pool episodes played ``num_generations`` times with the sampler (the package's static decoder),
   staged partial-credit reward (or binary), group advantages, no KL. ``policies="one"``: one model decides for
   both roles (self-play). ``policies="two"``: sender and receiver are separate models started from the same
   warm start, each with its own optimizer; ``train_roles`` says which learn (both, or one beside its frozen
   partner).
4. **After**: the same evaluation, the change paired by cluster with a 95% cluster-bootstrap interval, and the
   trained model(s) saved with their lineage (``training_record.json``) and digests.

``trainer="trl"`` runs phase 3 as it ran before this loop existed: TRL's ``GRPOTrainer`` with
``environment_factory`` (:class:`gencoord_env.commands.llm_rl.GencoordToolEnv`), one multi-turn transcript per episode
(the receiver's turn reads the sender's turn before it) and rollouts through ``model.generate``; evaluated on
the same transcripts (:func:`play_transcript`). It is kept as the reference the rollout benchmark times
(``benchmarks/grpo_step_time.py``). ``trainer="trl-static"`` is the same with TRL's generation turns sampled
through the package's static decoder (:func:`gencoord_env.train.episode_grpo.static_rollouts`).

Writes under ``out/seed<S>/``: ``reward_curve.json`` (per step: reward mean and std, groups without variance,
success, outcomes, completion tokens, per-learner loss, gradient norm and log-probability gap, seconds),
``provenance.json`` (config, warm-start measurements, seconds per phase, versions, before / after with
intervals, the paired change, checkpoints) and, over seeds, ``summary.json`` and (several seeds)
``cross_play.json``: every seed's sender beside every other seed's receiver on ``eval_pool``. Needs the ``lm``
and ``rl`` extras (``trl`` only for ``trainer="trl"``; ``datasets`` for either) and ``experiments`` for
intervals.

    gencoord train selfplay --out runs/selfplay --seeds 0 1 2 --jobs 3 --device cuda
    gencoord train selfplay --out runs/two --seeds 0 1 2 --jobs 3 --policies two --device cuda
    gencoord train selfplay --out runs/qwen --model path/to/Qwen3.5-0.8B --device cuda
    gencoord train selfplay --out runs/selfplay --tiny                     # CPU check, a minute or two
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import random
import statistics
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gencoord_env.agents.formats import commit_record
from gencoord_env.commands.llm_rl import GencoordToolEnv, episode_dataset, staged_reward, success_reward, tool_rows, tool_tokenizer
from gencoord_env.errors import UsageError

__all__ = ["AUTO_EPOCHS", "SelfPlayConfig", "cross_play", "evaluate", "main", "play_transcript", "run"]

#: The warm-start epochs ``sft_epochs="auto"`` tries, in order from the first, moving up while the train-pool
#: success is below the band and down while it is above.
AUTO_EPOCHS: tuple[float, ...] = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0)
ROLES: tuple[str, ...] = ("sender", "receiver")
TRAINERS: tuple[str, ...] = ("episode", "trl", "trl-static")


@dataclass(frozen=True)
class SelfPlayConfig:
    out_dir: str
    seed: int = 0
    # a checkpoint folder to warm-start from (its own chat template and tool-call format); None: a scratch model
    model: str | None = None
    sft_epochs: float | str = "auto"  # a number, or "auto": AUTO_EPOCHS searched for a train-pool success in band
    auto_start: float = 8.0  # where "auto" starts
    band: tuple[float, float] = (0.2, 0.7)
    warm_episodes: int = 128  # train-pool episodes that measure each warm start (the first N)
    sft_lr: float | None = None  # None: train.sft.default_lr (1e-3 from scratch, 1e-5 for a pretrained checkpoint)
    sft_grad_accum: int = 4  # micro-batches of 4 rows per optimizer step (the paper's 4 x 4)
    sft_rows: int | None = None  # the first N forward rows (None: all 1,920)
    hidden_size: int = 256
    num_layers: int = 4
    pool: str = "train"
    route: str = "forward"
    private_fact: str = "id"  # the env's private_fact ("id", or a naturalized form: train, C1, C2, C3) in GRPO and evaluation
    train_episodes: int | None = None  # GRPO samples the first N episodes of the pool (None: all)
    eval_pool: str = "heldout"
    eval_episodes: int | None = None
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
    device: str | None = None
    weights_dir: str | None = None  # where checkpoints go (None: out_dir); results stay in out_dir
    resume_every: int = 0  # GRPO state to <weights>/resume.pt every N steps; a run started again continues
    # GRPO stops after the step that ends past this many seconds of the lane (warm start included), then
    # evaluates and saves: a lane with a wall-time budget always comes back with results. None: no limit.
    max_seconds: float | None = None

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
        if isinstance(self.sft_epochs, str) and self.sft_epochs != "auto":
            raise UsageError(f"sft_epochs must be a number of epochs or 'auto', got {self.sft_epochs!r}")
        if not isinstance(self.sft_epochs, str) and self.sft_epochs < 0:
            raise UsageError(f"sft_epochs must be >= 0, got {self.sft_epochs}")
        if self.sft_epochs == 0 and self.model is None:
            raise UsageError("sft_epochs=0 starts GRPO from model as it is: give model (a checkpoint in the tool format)")
        if not 0.0 <= self.band[0] <= self.band[1] <= 1.0:
            raise UsageError(f"band must be (low, high) with 0 <= low <= high <= 1, got {self.band}")
        if self.num_generations < 2 or self.prompts_per_step < 1 or self.steps < 0:
            raise UsageError(f"num_generations must be >= 2 (GRPO compares a group), prompts_per_step >= 1 and steps >= 0; got "
                             f"{self.num_generations}, {self.prompts_per_step}, {self.steps}")

    @property
    def weights(self) -> Path:
        return Path(self.weights_dir or self.out_dir)

    @property
    def env_kwargs(self) -> dict[str, Any]:
        return {"route": self.route, **({"private_fact": self.private_fact} if self.private_fact != "id" else {})}


# --------------------------------------------------------------------------- evaluation


def _envs(pool: str, n: int, env_kwargs: Mapping[str, Any]) -> list[Any]:
    import gencoord_env
    from gencoord_env.turns import TurnEnv

    return [TurnEnv(gencoord_env.parallel_env(pool=pool, backend="sim", **env_kwargs)) for _ in range(n)]


def pool_size(pool: str, env_kwargs: Mapping[str, Any]) -> int:
    import gencoord_env

    env = gencoord_env.parallel_env(pool=pool, backend="sim", **env_kwargs)
    try:
        return len(env.episodes)
    finally:
        env.close()


def evaluate(policies: Mapping[str, Any], pool: str, indices: Sequence[int], env_kwargs: Mapping[str, Any],
             max_turns: int = 4, batch: int = 64, sample: bool = False) -> dict[str, Any]:
    """Greedy (or, with ``sample``, sampled) closed-loop success of ``policies`` (role ->
    :class:`~gencoord_env.train.episode_grpo.Learner`) on episodes ``indices`` of ``pool``: outcomes, per-episode
    success and a cluster-bootstrap interval."""
    from gencoord_env.train.episode_grpo import play_batch

    envs = _envs(pool, min(batch, len(indices)), env_kwargs)
    results: list[dict[str, Any]] = []
    try:
        for start in range(0, len(indices), batch):
            for p in play_batch(envs, indices[start : start + batch], policies, sample=sample, max_turns=max_turns):
                results.append({"episode_id": p.episode_id, "outcome": p.outcome, "turns": len(p.decisions)})
    finally:
        for env in envs:
            env.close()
    return _success(results, pool)


def _success(results: Sequence[dict[str, Any]], pool: str) -> dict[str, Any]:
    from gencoord_env.train.grpo import _cluster_interval

    outcomes = Counter(str(r["outcome"]) if r["outcome"] else "UNFINISHED" for r in results)
    return {"pool": pool, "episodes": len(results), "success_rate": outcomes.get("SUCCESS", 0) / max(1, len(results)),
            "outcomes": dict(sorted(outcomes.items())), **_cluster_interval(results)}


def play_transcript(model: Any, tokenizer: Any, pool: str, route: str, indices: Sequence[int], max_turns: int = 4,
                    batch: int = 64, max_new_tokens: int = 256) -> list[dict[str, Any]]:
    """Greedy closed-loop self-play as ``trainer="trl"`` trains: each episode one transcript (the prompt of
    :func:`episode_dataset`, then every call and the observation it answers with), so each decision reads every
    earlier turn of both agents. One dict per episode: ``episode_id``, ``outcome`` (None: unfinished), ``turns``."""
    from gencoord_env.agents.lm.generate import GenerationConfig, Generator

    was_training = model.training
    model.eval()
    gen = Generator(model, tokenizer, GenerationConfig(max_new_tokens=max_new_tokens, stop_at_record_end=False,
                                                       compile_decode=False, compile_prefill=False))
    dataset = episode_dataset(pool, indices, route=route)
    results: list[dict[str, Any]] = []
    for start in range(0, len(dataset), batch):
        rows = [dataset[k] for k in range(start, min(start + batch, len(dataset)))]
        envs = [GencoordToolEnv(pool=pool, route=route) for _ in rows]
        chats = []
        for env, row in zip(envs, rows):
            first = env.reset(**row)
            chats.append([*row["prompt"][:-1], {"role": "user", "content": first}])
        live = list(range(len(rows)))
        for _ in range(max_turns):
            if not live:
                break
            prompts = [tokenizer.apply_chat_template(chats[i], add_generation_prompt=True, tokenize=True, return_dict=False)
                       for i in live]
            still = []
            for i, rec in zip(live, gen.generate_tokens(prompts)):
                record = commit_record(rec.text)
                if record is None:
                    continue  # no commit: the episode ends unfinished
                answer = envs[i].commit(record)
                call = {"type": "function", "function": {"name": "commit", "arguments": {"record": record}}}
                chats[i] += [{"role": "assistant", "content": "", "tool_calls": [call]}, {"role": "tool", "name": "commit", "content": answer}]
                if envs[i].outcome is None:
                    still.append(i)
            live = still
        for env in envs:
            turn = env.turn
            results.append({"episode_id": turn.episode_id if turn else None, "outcome": env.outcome, "turns": len(env.records)})
    model.train(was_training)
    return results


# --------------------------------------------------------------------------- warm start


def _sft(config: SelfPlayConfig, epochs: float, out: Path) -> tuple[str, dict[str, Any]]:
    """One warm start of ``epochs`` epochs (reused when ``out`` already holds it); its checkpoint and description."""
    from transformers import AutoTokenizer

    from gencoord_env.agents.lm.loading import train_tokenizer
    from gencoord_env.train.data import build_set, write_rows
    from gencoord_env.train.sft import SCRATCH_LR, SFTConfig, ScratchConfig, default_lr, train

    done = out / "provenance.json"
    if (out / "final" / "config.json").is_file() and done.is_file():
        prov = json.loads(done.read_text(encoding="utf-8"))
        return str(out / "final"), {"epochs": epochs, "rows": prov["token_exposure"]["samples"] if "token_exposure" in prov else None,
                                    "loss_first": prov["loss_first"], "loss_last": prov["loss_final"], "reused": True}
    rows = build_set("forward")
    rows = rows[: config.sft_rows] if config.sft_rows else rows
    out.mkdir(parents=True, exist_ok=True)
    if config.model is None:
        rows = tool_rows(rows, tool_tokenizer(train_tokenizer(["."], vocab_size=270)))
        tokenizer = tool_tokenizer(train_tokenizer([r.prompt + "\n" + r.target for r in rows], vocab_size=2048))
        tokenizer.save_pretrained(out / "tokenizer")
        scratch = ScratchConfig(hidden_size=config.hidden_size, num_layers=config.num_layers, tokenizer=str(out / "tokenizer"))
        base = None
        lr = config.sft_lr or SCRATCH_LR
    else:
        rows = tool_rows(rows, tool_tokenizer(AutoTokenizer.from_pretrained(config.model, local_files_only=True)))
        scratch, base = None, config.model
        lr = config.sft_lr or default_lr(config.model, None)
    write_rows(rows, out / "sft_rows.jsonl")
    result = train(SFTConfig(
        data=(str(out / "sft_rows.jsonl"),), out_dir=str(out), base_model=base, scratch=scratch, lr=lr, epochs=epochs,
        grad_accum=config.sft_grad_accum, seed=config.seed, device=config.device, progress=False, fit_rows=0,
        format="commit_tool"))
    assert result.checkpoint is not None
    return str(result.checkpoint), {"epochs": epochs, "rows": len(rows), "lr": lr, "loss_first": result.losses[0],
                                    "loss_last": result.losses[-1], "reused": False}


def _load(path: str, device: str | None) -> Any:
    import torch

    from gencoord_env.agents.lm.loading import load_model

    lm = load_model(path, device=device, dtype=torch.float32)
    tool_tokenizer(lm.tokenizer)
    lm.tokenizer.padding_side = "left"
    return lm


def _warm_start(config: SelfPlayConfig, work: Path) -> tuple[str, dict[str, Any]]:
    """The warm start GRPO begins from: its checkpoint and every warm start measured on the way to it."""
    from gencoord_env.train.episode_grpo import Learner

    if config.sft_epochs == 0:
        assert config.model is not None
        candidates: list[float] = []
    elif config.sft_epochs == "auto":
        candidates = list(AUTO_EPOCHS)
    else:
        candidates = [float(config.sft_epochs)]
    size = pool_size(config.pool, config.env_kwargs)
    sample = list(range(min(size, config.warm_episodes)))
    low, high = config.band
    tried: list[dict[str, Any]] = []

    def measure(path: str, described: dict[str, Any]) -> float:
        """Greedy and sampled (GRPO's temperature) self-play success on the train sample; the band reads the
        sampled one: it is what GRPO's groups see."""
        lm = _load(path, config.device)
        learner = Learner("warm", lm.model, lm.tokenizer, trainable=False, max_new_tokens=config.max_new_tokens,
                          temperature=config.temperature, seed=config.seed)
        t = time.perf_counter()
        greedy = evaluate({r: learner for r in ROLES}, config.pool, sample, config.env_kwargs, config.max_turns)
        sampled = evaluate({r: learner for r in ROLES}, config.pool, sample, config.env_kwargs, config.max_turns, sample=True)
        tried.append({**described, "checkpoint": path, "train_success": sampled["success_rate"],
                      "train_outcomes": sampled["outcomes"], "train_success_greedy": greedy["success_rate"],
                      "train_outcomes_greedy": greedy["outcomes"], "train_episodes": greedy["episodes"],
                      "temperature": config.temperature, "measure_seconds": time.perf_counter() - t})
        print(f"seed {config.seed}: warm start of {described.get('epochs', 0):g} epochs: train-pool self-play success "
              f"{sampled['success_rate']:.1%} sampled at temperature {config.temperature:g}, {greedy['success_rate']:.1%} "
              f"greedy ({greedy['episodes']} episodes)", flush=True)
        return float(sampled["success_rate"])

    if not candidates:
        assert config.model is not None
        measure(config.model, {"epochs": 0, "source": config.model})
        chosen = tried[-1]
    else:
        k = min(range(len(candidates)), key=lambda i: abs(candidates[i] - config.auto_start)) if len(candidates) > 1 else 0
        moved = 0
        while True:
            epochs = candidates[k]
            path, described = _sft(config, epochs, work / f"warm_e{epochs:g}")
            success = measure(path, described)
            step = 1 if success < low else (-1 if success > high else 0)
            if step == 0 or not 0 <= k + step < len(candidates) or (moved and step != moved):
                break
            moved, k = step, k + step
        in_band = [t for t in tried if low <= t["train_success"] <= high]
        chosen = in_band[-1] if in_band else min(tried, key=lambda t: min(abs(t["train_success"] - low), abs(t["train_success"] - high)))
    if not low <= chosen["train_success"] <= high:
        warnings.warn(f"the warm start's train-pool self-play success is {chosen['train_success']:.1%}, outside the band "
                      f"[{low:.0%}, {high:.0%}] where GRPO groups have reward variance to learn from (tried "
                      f"{[(t['epochs'], round(t['train_success'], 3)) for t in tried]})", RuntimeWarning, stacklevel=2)
    return str(chosen["checkpoint"]), {"chosen": chosen, "tried": tried, "band": list(config.band), "in_band": low <= chosen["train_success"] <= high}


# --------------------------------------------------------------------------- GRPO


def _episode_order(size: int, steps: int, per_step: int, seed: int) -> list[int]:
    """Episode indices for every step: whole shuffled passes over the pool, as SFT orders its rows."""
    rng = random.Random(f"selfplay:{seed}")
    order: list[int] = []
    while len(order) < steps * per_step:
        epoch = list(range(size))
        rng.shuffle(epoch)
        order += epoch
    return order[: steps * per_step]


def _config_sha256(config: SelfPlayConfig) -> str:
    d = dataclasses.asdict(config)
    for key in ("out_dir", "weights_dir", "device", "resume_every"):
        d.pop(key)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()


def _save(learner: Any, directory: Path, warm: str, config: SelfPlayConfig, steps: int) -> dict[str, Any]:
    """Save a trained learner with its lineage: the warm start's ``training_record.json`` plus this run."""
    from gencoord_env.agents.formats import RECORD
    from gencoord_env.train.sft import read_record, tree_sha256

    learner.model.save_pretrained(directory)
    learner.tokenizer.save_pretrained(directory)
    previous = read_record(warm) or {}
    entry = {"from": "grpo", "base": Path(warm).parent.name, "base_tree_sha256": tree_sha256(warm)[0], "policy": learner.name,
             "policies": config.policies, "pool": config.pool, "route": config.route, "private_fact": config.private_fact,
             "optimizer_steps": steps, "lr": config.lr, "seed": config.seed, "reward": config.reward,
             "episodes_per_step": config.prompts_per_step * config.num_generations, "config_sha256": _config_sha256(config)}
    record = {**previous, "lineage": [*previous.get("lineage", []), entry]}
    (directory / RECORD).write_text(json.dumps(record, sort_keys=True) + "\n", encoding="utf-8")
    digest, files = tree_sha256(directory)
    return {"dir": str(directory), "tree_sha256": digest, "files": files}


def _grpo(config: SelfPlayConfig, warm: str, work: Path, out: Path, started: float,
          record: Callable[..., None] = lambda **_: None) -> dict[str, Any]:
    """Phases 2-4 with this package's loop; see the module docstring. ``started``: the lane's start (perf_counter);
    ``record(**parts)``: takes each result as it is measured (the provenance written so far)."""
    import torch

    from gencoord_env.train.episode_grpo import Learner, grpo_update, play_batch, reward_of
    from gencoord_env.train.grpo import _paired_change

    torch.manual_seed(config.seed)
    names = ("self",) if config.policies == "one" else ROLES
    learners = []
    for k, name in enumerate(names):
        lm = _load(warm, config.device)
        trainable = name == "self" or name in config.train_roles
        learners.append(Learner(name, lm.model, lm.tokenizer, trainable=trainable, lr=config.lr, warmup_steps=config.warmup_steps,
                                max_new_tokens=config.max_new_tokens, temperature=config.temperature, seed=config.seed * 10 + k))
    policies = {role: learners[0] for role in ROLES} if config.policies == "one" else dict(zip(ROLES, learners))
    size = pool_size(config.eval_pool, config.env_kwargs)
    eval_indices = list(range(size if config.eval_episodes is None else min(size, config.eval_episodes)))
    train_size = pool_size(config.pool, config.env_kwargs)
    train_size = train_size if config.train_episodes is None else min(train_size, config.train_episodes)
    per_step, group = config.prompts_per_step, config.num_generations
    order = _episode_order(train_size, config.steps, per_step, config.seed)

    resume_path = work / "resume.pt"
    digest = _config_sha256(config)
    seconds: dict[str, float] = {}
    curve: list[dict[str, Any]] = []
    first = 0
    before: dict[str, Any] | None = None
    if resume_path.is_file():
        state = torch.load(resume_path, map_location="cpu", weights_only=False)
        if state["config_sha256"] == digest:
            for learner in learners:
                learner.load_state(state["learners"][learner.name])
            first, curve, before, seconds = state["step"], state["curve"], state["before"], state["seconds"]
    if before is None:
        t = time.perf_counter()
        before = evaluate(policies, config.eval_pool, eval_indices, config.env_kwargs, config.max_turns)
        seconds["eval_before"] = time.perf_counter() - t
    record(eval_before=before)
    print(f"seed {config.seed}: {config.eval_pool} self-play success before GRPO {before['success_rate']:.1%}", flush=True)

    envs = _envs(config.pool, per_step * group, config.env_kwargs)
    t_grpo = time.perf_counter() - seconds.get("grpo", 0.0)
    for step in range(first, config.steps):
        if config.max_seconds is not None and time.perf_counter() - started > config.max_seconds:
            warnings.warn(f"GRPO stopped after {step} of {config.steps} steps: the lane reached max_seconds={config.max_seconds:g}",
                          RuntimeWarning, stacklevel=2)
            break
        t = time.perf_counter()
        batch = [i for i in order[step * per_step : (step + 1) * per_step] for _ in range(group)]
        played = play_batch(envs, batch, policies, sample=True, max_turns=config.max_turns)
        t_roll = time.perf_counter() - t
        rewards = [reward_of(p.outcome, config.reward) for p in played]
        stats = grpo_update(learners, played, rewards, group, scale=config.scale_rewards, temperature=config.temperature,
                            iterations=config.iterations)
        groups = [rewards[s : s + group] for s in range(0, len(rewards), group)]
        outcomes = Counter(p.outcome or "UNFINISHED" for p in played)
        lengths = [len(d.completion) for p in played for d in p.decisions]
        curve.append({
            "step": step + 1, "reward": statistics.fmean(rewards), "reward_std": statistics.pstdev(rewards),
            "frac_reward_zero_std": sum(statistics.pstdev(g) == 0 for g in groups) / len(groups),
            "success": outcomes.get("SUCCESS", 0) / len(played), "outcomes": dict(sorted(outcomes.items())),
            "decisions_mean": statistics.fmean(len(p.decisions) for p in played),
            "completion_mean_length": statistics.fmean(lengths) if lengths else 0.0,
            "learners": stats, "rollout_seconds": t_roll, "step_seconds": time.perf_counter() - t,
        })
        (out / "reward_curve.json").write_text(json.dumps(curve, indent=2) + "\n", encoding="utf-8")  # a cut-off lane keeps it
        if (step + 1) % 10 == 0 or step + 1 == config.steps:
            print(f"seed {config.seed}: step {step + 1}: reward {curve[-1]['reward']:.3f}, sampled success {curve[-1]['success']:.1%}, "
                  f"{curve[-1]['step_seconds']:.2f} s", flush=True)
        if not all(math.isfinite(s["loss"]) for s in stats.values()):
            raise FloatingPointError(f"GRPO loss became non-finite at step {step + 1}: {stats}")
        if config.resume_every and (step + 1) % config.resume_every == 0 and step + 1 < config.steps:
            seconds["grpo"] = time.perf_counter() - t_grpo
            tmp = resume_path.with_suffix(".tmp")
            torch.save({"config_sha256": digest, "step": step + 1, "curve": curve, "before": before, "seconds": seconds,
                        "learners": {lr.name: lr.state() for lr in learners}}, tmp)
            os.replace(tmp, resume_path)
    seconds["grpo"] = time.perf_counter() - t_grpo
    for env in envs:
        env.close()

    if not curve:  # no GRPO step (steps=0: a warm-start measurement): nothing changed, nothing to save
        return {"eval_before": before, "eval_after": before, "curve": curve, "seconds": seconds, "checkpoints": {},
                "role_checkpoints": {role: warm for role in ROLES}, "steps_per_second": None}
    t = time.perf_counter()
    after = evaluate(policies, config.eval_pool, eval_indices, config.env_kwargs, config.max_turns)
    seconds["eval_after"] = time.perf_counter() - t
    record(eval_after=after, optimizer_steps=len(curve), eval_change=_paired_change(before, after))
    print(f"seed {config.seed}: {config.eval_pool} self-play success after {len(curve)} GRPO steps {after['success_rate']:.1%}", flush=True)
    checkpoints: dict[str, Any] = {}
    for learner in learners:
        if learner.trainable:
            checkpoints[learner.name] = _save(learner, work / ("final" if learner.name == "self" else f"final_{learner.name}"),
                                              warm, config, len(curve))
    roles = {role: (checkpoints[lr.name]["dir"] if lr.name in checkpoints else warm) for role, lr in policies.items()}
    resume_path.unlink(missing_ok=True)
    step_seconds = [c["step_seconds"] for c in curve]
    return {"eval_before": before, "eval_after": after, "curve": curve, "seconds": seconds, "checkpoints": checkpoints,
            "role_checkpoints": roles, "steps_per_second": len(step_seconds) / sum(step_seconds) if step_seconds else None}


def _grpo_trl(config: SelfPlayConfig, warm: str, work: Path) -> dict[str, Any]:
    """Phases 2-4 as they ran through TRL's GRPOTrainer (multi-turn transcripts, ``model.generate`` rollouts)."""
    from trl import GRPOConfig, GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    lm = _load(warm, config.device)
    model, tokenizer = lm.model, lm.tokenizer
    size = pool_size(config.eval_pool, {"route": config.route})
    eval_indices = range(size if config.eval_episodes is None else min(size, config.eval_episodes))
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    before = _success(play_transcript(model, tokenizer, config.eval_pool, config.route, eval_indices, config.max_turns), config.eval_pool)
    seconds["eval_before"] = time.perf_counter() - t
    train_size = pool_size(config.pool, {"route": config.route})
    train_indices = range(train_size if config.train_episodes is None else min(train_size, config.train_episodes))
    history: list[dict[str, Any]] = []

    def reward(environments: Sequence[GencoordToolEnv], trainer_state: Any = None, **kwargs: Any) -> list[float]:
        rewards = (staged_reward if config.reward == "staged" else success_reward)(environments)
        outcomes = Counter(e.outcome or "UNFINISHED" for e in environments)
        history.append({"step": int(getattr(trainer_state, "global_step", len(history))) + 1, "outcomes": dict(outcomes),
                        "success": outcomes.get("SUCCESS", 0) / max(1, len(environments)),
                        "decisions_mean": statistics.fmean(len(e.records) for e in environments), "time": time.perf_counter()})
        return rewards

    reward.__name__ = f"{config.reward}_reward"
    cuda = lm.device.type == "cuda"
    args = GRPOConfig(
        output_dir=str(work / "trainer"), max_steps=config.steps, num_generations=config.num_generations,
        per_device_train_batch_size=config.prompts_per_step * config.num_generations, gradient_accumulation_steps=1,
        max_completion_length=config.max_completion_length, max_tool_calling_iterations=config.max_turns,
        temperature=config.temperature, learning_rate=config.lr, lr_scheduler_type="constant_with_warmup",
        warmup_steps=config.warmup_steps, beta=0.0,
        loss_type="dapo", seed=config.seed, logging_steps=1, save_strategy="no", report_to="none",
        bf16=False, use_cpu=not cuda, activation_checkpointing=False,
        disable_dropout=True, dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer_class = GRPOTrainer
    if config.trainer == "trl-static":
        from gencoord_env.train.episode_grpo import static_rollouts

        trainer_class = static_rollouts(GRPOTrainer)
    trainer = trainer_class(model=model, processing_class=tokenizer, reward_funcs=[reward], args=args,
                          train_dataset=episode_dataset(config.pool, train_indices, route=config.route),
                          environment_factory=GencoordToolEnv.factory(pool=config.pool, route=config.route, plays="both"))
    t = time.perf_counter()
    trainer.train()
    seconds["grpo"] = time.perf_counter() - t
    t = time.perf_counter()
    after = _success(play_transcript(model, tokenizer, config.eval_pool, config.route, eval_indices, config.max_turns), config.eval_pool)
    seconds["eval_after"] = time.perf_counter() - t
    logs = {int(h["step"]): h for h in trainer.state.log_history if "loss" in h}
    curve = []
    for entry in history:
        log = logs.get(entry["step"], {})
        curve.append({**{k: v for k, v in entry.items() if k != "time"},
                      **{k: log[k] for k in ("reward", "reward_std", "frac_reward_zero_std", "loss", "tools/call_frequency",
                                             "completions/mean_length") if k in log}})
    directory = work / "final"
    trainer.save_model(str(directory))
    tokenizer.save_pretrained(directory)
    from gencoord_env.train.sft import tree_sha256

    checkpoints = {"self": {"dir": str(directory), "tree_sha256": tree_sha256(directory)[0]}}
    return {"eval_before": before, "eval_after": after, "curve": curve, "seconds": seconds, "checkpoints": checkpoints,
            "role_checkpoints": {r: str(directory) for r in ROLES},
            "steps_per_second": trainer.state.global_step / seconds["grpo"] if seconds["grpo"] else None}


def run(config: SelfPlayConfig) -> dict[str, Any]:
    """One lane; see the module docstring. Returns its provenance (also written to ``provenance.json``)."""
    from gencoord_env.train.grpo import _libraries, _paired_change

    out, work = Path(config.out_dir), config.weights
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    provenance: dict[str, Any] = {"kind": "selfplay_grpo", "complete": False, "config": dataclasses.asdict(config),
                                  "config_sha256": _config_sha256(config), "libraries": _libraries(), "precision": "float32"}

    def record(**parts: Any) -> None:
        """The provenance so far, written at once: a lane cut off or failing later keeps what it measured."""
        provenance.update(parts)
        (out / "provenance.json").write_text(json.dumps(provenance, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")

    warm, warm_start = _warm_start(config, work)
    warm_seconds = time.perf_counter() - started
    record(warm_start=warm_start, warm_checkpoint=warm, seconds={"warm_start": warm_seconds})
    result = _grpo(config, warm, work, out, started, record) if config.trainer == "episode" else _grpo_trl(config, warm, work)
    seconds = {"warm_start": warm_seconds, **result["seconds"]}
    curve = result["curve"]
    (out / "reward_curve.json").write_text(json.dumps(curve, indent=2) + "\n", encoding="utf-8")
    before, after = result["eval_before"], result["eval_after"]
    record(complete=True, seconds=seconds, optimizer_steps=len(curve), steps_per_second=result["steps_per_second"],
           eval_before=before, eval_after=after, eval_change=_paired_change(before, after),
           reward_first=curve[0].get("reward") if curve else None, reward_last=curve[-1].get("reward") if curve else None,
           checkpoints=result["checkpoints"], role_checkpoints=result["role_checkpoints"])
    return provenance


# --------------------------------------------------------------------------- cross-play and the command


def cross_play(role_checkpoints: Mapping[int, Mapping[str, str]], pool: str, env_kwargs: Mapping[str, Any],
               episodes: int | None = None, device: str | None = None, max_turns: int = 4, max_new_tokens: int = 192) -> dict[str, Any]:
    """Every seed's sender beside every seed's receiver (``role_checkpoints``: seed -> role -> checkpoint) on
    ``pool``: success per pair, and the mean over pairs of one seed (the diagonal) against pairs of two seeds,
    paired by cluster where the same clusters are played."""
    from gencoord_env.train.episode_grpo import Learner
    from gencoord_env.train.grpo import _cluster_of

    loaded: dict[str, Learner] = {}

    def learner(path: str) -> Learner:
        if path not in loaded:
            lm = _load(path, device)
            loaded[path] = Learner(f"m{len(loaded)}", lm.model, lm.tokenizer, trainable=False, max_new_tokens=max_new_tokens)
        return loaded[path]

    size = pool_size(pool, env_kwargs)
    indices = list(range(size if episodes is None else min(size, episodes)))
    seeds = sorted(role_checkpoints)
    pairs: list[dict[str, Any]] = []
    for s in seeds:
        for r in seeds:
            policies = {"sender": learner(role_checkpoints[s]["sender"]), "receiver": learner(role_checkpoints[r]["receiver"])}
            got = evaluate(policies, pool, indices, env_kwargs, max_turns)
            pairs.append({"sender_seed": s, "receiver_seed": r, "success_rate": got["success_rate"], "ci95": got.get("ci95"),
                          "outcomes": got["outcomes"], "success_by_episode": got["success_by_episode"]})

    def cluster_success(same: bool) -> dict[str, float]:
        values: dict[str, list[float]] = {}
        for p in pairs:
            if (p["sender_seed"] == p["receiver_seed"]) == same:
                for e, ok in p["success_by_episode"].items():
                    values.setdefault(_cluster_of(e), []).append(float(ok))
        return {c: statistics.fmean(v) for c, v in values.items()}

    within, across = cluster_success(True), cluster_success(False)
    out: dict[str, Any] = {"pool": pool, "episodes": len(indices), "pairs": pairs,
                           "within_seed": statistics.fmean(within.values()) if within else None,
                           "across_seeds": statistics.fmean(across.values()) if across else None}
    if len(seeds) > 1:
        try:
            from gencoord_env.commands.experiments import stats
        except ImportError:  # no experiments extra (scipy): the per-episode successes above still give it later
            return out
        out["across_minus_within"] = stats.paired_bootstrap_ci(across, within)
    return out


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
    from gencoord_env.commands.cli import Parser  # argument errors in the one error line of every command

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
    from gencoord_env.train.lanes import lane_device, run_lanes, threads_per_lane

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
    if len(roles) > 1 and not a.no_cross_play and a.trainer == "episode":
        c = configs[0]
        try:
            got = cross_play(roles, c.eval_pool, c.env_kwargs, c.eval_episodes, c.device, c.max_turns, c.max_new_tokens)
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
