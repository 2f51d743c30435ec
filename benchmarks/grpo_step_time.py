"""GRPO optimizer steps per second: TRL's multi-turn path through ``model.generate`` against this package's loop
through its static decoder, with one model, one batch shape and one device, in one run.

Every path starts from the same warm start (a scratch model SFT-trained on the forward rows in the tool format,
``gencoord train selfplay``'s phase 1; or ``--model``) and times ``--steps`` GRPO steps after ``--warmup`` of
``--prompts`` train-pool episodes x ``--generations`` samples:

- ``trl``: ``trl.GRPOTrainer(environment_factory=GencoordToolEnv.factory(plays="both"))``, the self-play path
  before this loop (``gencoord train selfplay --trainer trl``): one transcript per episode, each turn generated
  by ``model.generate``, TRL's loss;
- ``trl-static``: the same trainer with its generation turns sampled through the package's static decoder
  (``train.episode_grpo.static_rollouts``);
- ``episode-generate``: this package's loop (``train.episode_grpo``: each decision from its agent's own context,
  one batched call per turn, the same loss) with ``model.generate`` as the decoder;
- ``episode-static``: the same loop with the package's static decoder (static cache, CUDA graphs on CUDA): the
  default of ``gencoord train selfplay``.

Printed per path: seconds per step (median), steps per second, seconds of rollout per step, completion tokens
per step, and the ratio to ``trl``. The issue's setting is the default: a 4-layer, 256-wide model, 8 x 8.

    python benchmarks/grpo_step_time.py --device cuda                   # the 4-layer model, 8 prompts x 8
    python benchmarks/grpo_step_time.py --tiny                          # a CPU check of every path
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

# the default order: this package's loop first, so a machine where TRL cannot run still times it
PATHS = ("episode-static", "episode-generate", "trl-static", "trl")


def _trl_steps(model_dir: str, a: argparse.Namespace, out: Path, static: bool = False) -> dict[str, Any]:
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from gencoord_env.commands.llm_rl import GencoordToolEnv, episode_dataset, staged_reward
    from gencoord_env.train.selfplay import load_tool_model

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    lm = load_tool_model(model_dir, a.device)
    times: list[float] = []
    tokens: list[float] = []

    class Clock(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.t = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if lm.device.type == "cuda":
                import torch

                torch.cuda.synchronize()
            times.append(time.perf_counter() - self.t)

    def reward(environments: Any, **kw: Any) -> list[float]:
        return staged_reward(environments)

    reward.__name__ = "staged_reward"
    args = GRPOConfig(
        output_dir=str(out / "trl"), max_steps=a.warmup + a.steps, num_generations=a.generations,
        per_device_train_batch_size=a.prompts * a.generations, max_completion_length=a.max_completion_length,
        max_tool_calling_iterations=4, learning_rate=1e-4, beta=0.0, loss_type="dapo", logging_steps=1, save_strategy="no",
        report_to="none", bf16=False, use_cpu=lm.device.type != "cuda", disable_dropout=True, activation_checkpointing=False,
        dataloader_num_workers=0, disable_tqdm=True, seed=0)
    from gencoord_env.train.episode_grpo import static_rollouts

    trainer = (static_rollouts(GRPOTrainer) if static else GRPOTrainer)(
                          model=lm.model, processing_class=lm.tokenizer, reward_funcs=[reward], args=args,
                          train_dataset=episode_dataset("train", range(a.episodes)), callbacks=[Clock()],
                          environment_factory=GencoordToolEnv.factory(pool="train", plays="both"))
    trainer.train()
    logs = [h for h in trainer.state.log_history if "completions/mean_length" in h]
    tokens = [h["completions/mean_length"] * a.prompts * a.generations for h in logs]
    return {"step_seconds": times[a.warmup:], "tokens": tokens[a.warmup:], "rollout_seconds": None,
            "reward": [h.get("reward") for h in logs][a.warmup:]}


def _episode_steps(model_dir: str, a: argparse.Namespace, backend: str) -> dict[str, Any]:
    import torch

    from gencoord_env.train.episode_grpo import Learner, grpo_update, play_batch, reward_of
    from gencoord_env.train.selfplay import load_tool_model, turn_envs

    lm = load_tool_model(model_dir, a.device)
    learner = Learner("self", lm.model, lm.tokenizer, trainable=True, lr=1e-4, max_new_tokens=a.max_new_tokens, backend=backend)
    policies = {"sender": learner, "receiver": learner}
    envs = turn_envs("train", a.prompts * a.generations, {"route": "forward"})
    times, rolls, tokens, mean_reward = [], [], [], []
    for step in range(a.warmup + a.steps):
        t = time.perf_counter()
        batch = [(step * a.prompts + k) % a.episodes for k in range(a.prompts) for _ in range(a.generations)]
        played = play_batch(envs, batch, policies, sample=True)
        roll = time.perf_counter() - t
        rewards = [reward_of(p.outcome) for p in played]
        grpo_update([learner], played, rewards, a.generations)
        if lm.device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
        rolls.append(roll)
        tokens.append(float(sum(len(d.completion) for p in played for d in p.decisions)))
        mean_reward.append(statistics.fmean(rewards))
    w = a.warmup
    return {"step_seconds": times[w:], "rollout_seconds": rolls[w:], "tokens": tokens[w:], "reward": mean_reward[w:]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a warm-started checkpoint in the tool format (default: SFT a scratch model here)")
    p.add_argument("--sft-epochs", type=float, default=2.0)
    p.add_argument("--hidden-size", type=int, default=256)
    p.add_argument("--num-layers", type=int, default=4)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--episodes", type=int, default=960, help="train-pool episodes the steps draw from (the first N)")
    p.add_argument("--max-new-tokens", type=int, default=192, help="per decision (this package's loop)")
    p.add_argument("--max-completion-length", type=int, default=512, help="per transcript (TRL)")
    p.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    p.add_argument("--device", default=None)
    p.add_argument("--out", default=None, help="write the numbers here as JSON")
    p.add_argument("--tiny", action="store_true", help="a CPU check: a 2-layer model warm-started on 8 rows, 2 x 4, 1 step")
    a = p.parse_args(argv)
    if a.tiny:
        a.hidden_size, a.num_layers, a.steps, a.warmup, a.prompts, a.generations, a.episodes = 64, 2, 1, 0, 2, 4, 4
        a.device = a.device or "cpu"
        a.max_new_tokens, a.max_completion_length = 96, 256
    import torch

    from gencoord_env.train.lanes import device_name
    from gencoord_env.train.selfplay import SelfPlayConfig, warm_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = a.model
        t = time.perf_counter()
        if model_dir is None:
            tiny = dict(sft_rows=8, sft_lr=1e-2, sft_grad_accum=1) if a.tiny else {}
            config = SelfPlayConfig(out_dir=tmp, hidden_size=a.hidden_size, num_layers=a.num_layers, device=a.device, **tiny)
            model_dir = warm_checkpoint(config, 30.0 if a.tiny else a.sft_epochs)
        warm = time.perf_counter() - t
        results: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for path in a.paths:
            torch.manual_seed(0)
            try:
                results[path] = _trl_steps(model_dir, a, Path(tmp), static=path == "trl-static") if path.startswith("trl") else \
                    _episode_steps(model_dir, a, "generate" if path == "episode-generate" else "auto")
            except Exception as exc:  # one path that cannot run on this machine must not lose the others' numbers
                errors[path] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                print(f"{path}: failed ({errors[path]})", flush=True)
                continue
            print(f"{path}: {statistics.median(results[path]['step_seconds']):.3f} s per step (median)", flush=True)
    device = device_name(a.device)
    print(f"grpo_step_time: {a.num_layers} layers x {a.hidden_size}, {a.prompts} prompts x {a.generations} generations, "
          f"{a.steps} timed steps after {a.warmup}, {device}, torch {torch.__version__}; warm start {warm:.0f} s")
    print("| path | s/step (median) | steps/s | rollout s/step | completion tokens/step | mean reward | x trl |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    base = statistics.median(results["trl"]["step_seconds"]) if "trl" in results and results["trl"]["step_seconds"] else None
    for path in a.paths:
        if path in errors:
            print(f"| {path} | failed: {errors[path]} | | | | | |")
            continue
        r = results[path]
        med = statistics.median(r["step_seconds"])
        roll = "-" if not r["rollout_seconds"] else f"{statistics.median(r['rollout_seconds']):.3f}"
        rewards = [x for x in r["reward"] if x is not None]
        print(f"| {path} | {med:.3f} | {1 / med:.2f} | {roll} | {statistics.fmean(r['tokens']):.0f} | "
              f"{statistics.fmean(rewards) if rewards else float('nan'):.2f} | {'-' if base is None else f'{base / med:.1f}'} |")
    if a.out:
        Path(a.out).write_text(json.dumps({"device": device, "args": vars(a), "results": results, "errors": errors}, indent=2) + "\n",
                               encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
