"""Multi-turn self-play GRPO through TRL's ``environment_factory``, with held-out success before and after.

One lane (one seed) runs four phases, all from the package's own data, on one device:

1. **Warm start** (SFT): a scratch model learns the commit tool on the paper's forward rows
   (``gencoord_env.train.data.build_set("forward")``, each target the assistant's ``commit`` call,
   :func:`gencoord_env.commands.llm_rl.tool_rows`), for ``sft_epochs`` epochs. Fewer epochs than the paper's 16 on
   purpose: an SFT stopped early leaves headroom on the train pool, so GRPO groups have reward variance
   (the fully trained paper-protocol model solves most train decisions and GRPO had little to learn from).
   Or ``model=`` a checkpoint that already speaks the tool format.
2. **Before**: greedy closed-loop success on ``eval_pool`` (held out from the train pool), the model
   deciding every turn of both agents exactly as in training: the transcript grows by the model's call
   and the next observation (:func:`play`).
3. **GRPO** (TRL ``GRPOTrainer(environment_factory=GencoordToolEnv.factory(plays="both"))``) on the train
   pool's episodes, staged partial-credit reward (or binary), no KL.
4. **After**: the same evaluation, and the change paired by cluster with a 95% cluster-bootstrap interval.

Writes under ``out/seed<S>/``: ``reward_curve.json`` (per optimizer step: reward mean / std, the fraction
of groups without variance, tool calls, outcome counts, loss), ``provenance.json`` (config, seconds per
phase, versions, before / after with intervals, the paired change) and ``summary.json`` over seeds in
``out/``. Needs the ``lm`` and ``rl`` extras.

    python -m gencoord_env.train.selfplay --out runs/selfplay --seeds 0 1 2 --jobs 3 --device cuda
    python -m gencoord_env.train.selfplay --out runs/selfplay --tiny                       # CPU check, ~2 minutes
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gencoord_env.agents.formats import commit_record
from gencoord_env.commands.llm_rl import GencoordToolEnv, episode_dataset, staged_reward, success_reward, tool_rows, tool_tokenizer

__all__ = ["SelfPlayConfig", "main", "play", "run"]

@dataclass(frozen=True)
class SelfPlayConfig:
    out_dir: str
    seed: int = 0
    model: str | None = None  # a checkpoint in the tool format; None: warm-start a scratch model here
    sft_epochs: float = 4.0
    sft_lr: float = 1e-3  # train.sft.SCRATCH_LR
    sft_grad_accum: int = 4  # micro-batches of 4 rows per optimizer step (the paper's 4 x 4)
    sft_rows: int | None = None  # the first N forward rows (None: all 1,920)
    hidden_size: int = 256
    num_layers: int = 4
    pool: str = "train"
    route: str = "forward"
    train_episodes: int | None = None  # GRPO samples the first N episodes of the pool (None: all)
    eval_pool: str = "heldout"
    eval_episodes: int | None = None
    reward: str = "staged"
    lr: float = 1e-4
    steps: int = 40
    max_turns: int = 4  # tool calls per completion (a two-agent forward episode takes two)
    max_completion_length: int = 512  # calls and the observations they answer with, together
    prompts_per_step: int = 8
    num_generations: int = 8
    temperature: float = 1.0
    device: str | None = None

    def __post_init__(self) -> None:
        if self.reward not in ("staged", "binary"):
            raise ValueError(f"reward must be 'staged' or 'binary', got {self.reward!r}")


def _record(text: str) -> str | None:
    """The record of the first commit call in a completion; None when it makes none (the episode stays unfinished)."""
    return commit_record(text)


def play(model: Any, tokenizer: Any, pool: str, route: str, indices: Sequence[int], max_turns: int = 4,
         batch: int = 64, max_new_tokens: int = 256) -> list[dict[str, Any]]:
    """Greedy closed-loop self-play of ``indices``: the model decides every turn through the commit tool, each
    episode's transcript (the prompt of :func:`episode_dataset`, the calls, the answers) as in training.
    One dict per episode: ``episode_id``, ``outcome`` (None when the model stopped without committing), ``turns``."""
    from gencoord_env.agents.lm.generate import GenerationConfig, Generator

    was_training = model.training
    model.eval()
    # no torch.compile: the transcripts' widths vary, and a compile per shape would cost more than it saves here
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
            records = gen.generate_tokens(prompts)
            still = []
            for i, rec in zip(live, records):
                record = _record(rec.text)
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


def _success(results: Sequence[dict[str, Any]], pool: str) -> dict[str, Any]:
    from gencoord_env.train.grpo import _cluster_interval

    outcomes = Counter(str(r["outcome"]) if r["outcome"] else "UNFINISHED" for r in results)
    return {"pool": pool, "episodes": len(results), "success_rate": outcomes.get("SUCCESS", 0) / max(1, len(results)),
            "outcomes": dict(sorted(outcomes.items())), **_cluster_interval(results)}


def _warm_start(config: SelfPlayConfig, out: Path) -> tuple[str, dict[str, Any]]:
    from gencoord_env.agents.lm.loading import train_tokenizer
    from gencoord_env.train.data import build_set, write_rows
    from gencoord_env.train.sft import SFTConfig, ScratchConfig, train

    rows = build_set("forward")
    rows = rows[: config.sft_rows] if config.sft_rows else rows
    rows = tool_rows(rows, tool_tokenizer(train_tokenizer(["."], vocab_size=270)))
    tokenizer = tool_tokenizer(train_tokenizer([r.prompt + "\n" + r.target for r in rows], vocab_size=2048))
    tokenizer.save_pretrained(out / "tokenizer")
    write_rows(rows, out / "sft_rows.jsonl")
    result = train(SFTConfig(
        data=(str(out / "sft_rows.jsonl"),), out_dir=str(out / "sft"), lr=config.sft_lr, epochs=config.sft_epochs,
        scratch=ScratchConfig(hidden_size=config.hidden_size, num_layers=config.num_layers, tokenizer=str(out / "tokenizer")),
        grad_accum=config.sft_grad_accum, seed=config.seed, device=config.device, progress=False, format="commit_tool"))
    assert result.checkpoint is not None
    return str(result.checkpoint), {"rows": len(rows), "epochs": config.sft_epochs, "loss_first": result.losses[0],
                                    "loss_last": result.losses[-1]}


def run(config: SelfPlayConfig) -> dict[str, Any]:
    """One lane; see the module docstring. Returns its provenance (also written to ``provenance.json``)."""
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from gencoord_env.agents.lm.loading import load_model
    from gencoord_env.train.grpo import _libraries, _paired_change

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    warm: dict[str, Any] = {"source": config.model}
    model_dir = config.model
    if model_dir is None:
        model_dir, warm = _warm_start(config, out)
    seconds["warm_start"] = time.perf_counter() - t

    lm = load_model(model_dir, device=config.device, dtype=torch.float32)
    model, tokenizer = lm.model, tool_tokenizer(lm.tokenizer)
    tokenizer.padding_side = "left"
    size = len(GencoordToolEnv(pool=config.eval_pool, route=config.route).game.env.episodes)
    eval_indices = range(size if config.eval_episodes is None else min(size, config.eval_episodes))
    t = time.perf_counter()
    before = _success(play(model, tokenizer, config.eval_pool, config.route, eval_indices, config.max_turns), config.eval_pool)
    seconds["eval_before"] = time.perf_counter() - t

    train_size = len(GencoordToolEnv(pool=config.pool, route=config.route).game.env.episodes)
    train_indices = range(train_size if config.train_episodes is None else min(train_size, config.train_episodes))
    history: list[dict[str, Any]] = []

    def reward(environments: Sequence[GencoordToolEnv], trainer_state: Any = None, **kwargs: Any) -> list[float]:
        rewards = (staged_reward if config.reward == "staged" else success_reward)(environments)
        outcomes = Counter(e.outcome or "UNFINISHED" for e in environments)
        history.append({"step": int(getattr(trainer_state, "global_step", len(history))) + 1, "outcomes": dict(outcomes),
                        "turns_mean": statistics.fmean(len(e.records) for e in environments)})
        return rewards

    reward.__name__ = f"{config.reward}_reward"
    cuda = lm.device.type == "cuda"
    # float32 throughout: the scratch models are small (6M parameters at the default size), and bf16 autocast is
    # where `gencoord train grpo` met NaN sampling probabilities on long, unevenly padded prompts (multi-turn
    # transcripts are such prompts). The suspected cause, pad query rows that attend to nothing, is removed by the
    # models' attention (agents/lm/attention.py); until scripts/bf16_padding_nan.py confirms that on a GPU, this stays
    args = GRPOConfig(
        output_dir=str(out / "trainer"), max_steps=config.steps, num_generations=config.num_generations,
        per_device_train_batch_size=config.prompts_per_step * config.num_generations, gradient_accumulation_steps=1,
        max_completion_length=config.max_completion_length, max_tool_calling_iterations=config.max_turns,
        temperature=config.temperature, learning_rate=config.lr, lr_scheduler_type="constant", warmup_steps=0, beta=0.0,
        loss_type="dapo", seed=config.seed, logging_steps=1, save_strategy="no", report_to="none",
        bf16=False, use_cpu=not cuda, activation_checkpointing=False,
        disable_dropout=True, dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[reward], args=args,
                          train_dataset=episode_dataset(config.pool, train_indices, route=config.route),
                          environment_factory=GencoordToolEnv.factory(pool=config.pool, route=config.route, plays="both"))
    t = time.perf_counter()
    trainer.train()
    seconds["grpo"] = time.perf_counter() - t

    t = time.perf_counter()
    after = _success(play(model, tokenizer, config.eval_pool, config.route, eval_indices, config.max_turns), config.eval_pool)
    seconds["eval_after"] = time.perf_counter() - t

    logs = {int(h["step"]): h for h in trainer.state.log_history if "loss" in h}
    curve = []
    for entry in history:
        log = logs.get(entry["step"], {})
        curve.append({**entry, **{k: log[k] for k in ("reward", "reward_std", "frac_reward_zero_std", "loss",
                                                       "tools/call_frequency", "completions/mean_length") if k in log}})
    (out / "reward_curve.json").write_text(json.dumps(curve, indent=2) + "\n", encoding="utf-8")
    provenance = {
        "kind": "selfplay_grpo", "config": dataclasses.asdict(config), "warm_start": warm, "seconds": seconds,
        "libraries": _libraries(), "precision": "float32",
        "optimizer_steps": trainer.state.global_step,
        "eval_before": before, "eval_after": after, "eval_change": _paired_change(before, after),
        "reward_first": curve[0].get("reward") if curve else None, "reward_last": curve[-1].get("reward") if curve else None,
    }
    (out / "provenance.json").write_text(json.dumps(provenance, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return provenance


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gencoord_env.train.selfplay", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--model", default=None, help="a checkpoint in the tool format (default: warm-start a scratch model)")
    p.add_argument("--sft-epochs", type=float, default=SelfPlayConfig.sft_epochs)
    p.add_argument("--steps", type=int, default=SelfPlayConfig.steps)
    p.add_argument("--prompts-per-step", type=int, default=SelfPlayConfig.prompts_per_step)
    p.add_argument("--num-generations", type=int, default=SelfPlayConfig.num_generations)
    p.add_argument("--lr", type=float, default=SelfPlayConfig.lr)
    p.add_argument("--reward", default="staged", choices=("staged", "binary"))
    p.add_argument("--eval-pool", default=SelfPlayConfig.eval_pool)
    p.add_argument("--eval-episodes", type=int, default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--jobs", type=int, default=1, help="seeds run at once, each in a process of its own (one GPU serves all)")
    p.add_argument("--tiny", action="store_true", help="a CPU check: 8 SFT rows, a 2-layer model, 2 GRPO steps, 8 eval episodes")
    a = p.parse_args(argv)
    configs = []
    for seed in a.seeds:
        config = SelfPlayConfig(out_dir=str(Path(a.out) / f"seed{seed}"), seed=seed, model=a.model, sft_epochs=a.sft_epochs,
                                steps=a.steps, prompts_per_step=a.prompts_per_step, num_generations=a.num_generations,
                                lr=a.lr, reward=a.reward, eval_pool=a.eval_pool, eval_episodes=a.eval_episodes, device=a.device)
        if a.tiny:
            config = dataclasses.replace(config, hidden_size=64, num_layers=2, steps=2,
                                         prompts_per_step=2, num_generations=4, max_completion_length=400,
                                         train_episodes=32, eval_episodes=a.eval_episodes or 8, device=a.device or "cpu",
                                         sft_rows=8, sft_epochs=50, sft_lr=1e-2, sft_grad_accum=1)
        configs.append(config)
    from gencoord_env.train.lanes import run_lanes, threads_per_lane

    summary: list[dict[str, Any]] = []

    def done(config: SelfPlayConfig, prov: dict[str, Any] | None, error: str | None) -> None:
        if prov is None:
            summary.append({"seed": config.seed, "error": error})
        else:
            summary.append({"seed": config.seed, "before": prov["eval_before"]["success_rate"],
                            "after": prov["eval_after"]["success_rate"], "before_ci95": prov["eval_before"].get("ci95"),
                            "after_ci95": prov["eval_after"].get("ci95"), "change": prov["eval_change"],
                            "reward_first": prov["reward_first"], "reward_last": prov["reward_last"], "seconds": prov["seconds"]})
        print(json.dumps(summary[-1], default=str), flush=True)

    failures = run_lanes(run, configs, jobs=a.jobs, threads=threads_per_lane(a.jobs), done=done)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    summary.sort(key=lambda r: r["seed"])
    (Path(a.out) / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
