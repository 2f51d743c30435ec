"""``gencoord train data|sft|grpo|evaluate``: SFT data, training and closed-loop evaluation
(also ``python -m gencoord_env.train <command>``).

Each command is also a function taking ``argv`` (:func:`data_main`, :func:`sft_main`, :func:`grpo_main`,
:func:`evaluate_main`). ``sft`` and ``evaluate`` need the ``lm`` extra, ``grpo`` the ``lm`` and ``rl`` extras.

Examples::

    gencoord train data --out runs/data
    gencoord train sft --data runs/data/forward.jsonl --out runs/scratch --scratch qwen3 --lr 1e-3 --epochs 12
    gencoord train grpo --model runs/scratch/final --pool train --route forward --out runs/grpo --steps 200
    gencoord train evaluate --model runs/scratch/final --pool heldout --route forward --out runs/heldout.json
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from gencoord_env.cli import add_env_arguments, env_choices, one_of, positive_int

PROG = "gencoord train"


def data_main(argv: Sequence[str] | None = None) -> int:
    from gencoord_env.train.data import DATASETS, build_all

    p = argparse.ArgumentParser(prog=f"{PROG} data", description="Write the programmatic SFT sets and their manifest.")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--sets", nargs="*", choices=sorted(DATASETS), help="sets to build (default: all)")
    p.add_argument("--seed", type=int, default=0, help="pool seed")
    a = p.parse_args(argv)
    manifest = build_all(a.out, a.sets, a.seed)
    for name, f in manifest["files"].items():
        print(f"{name:15s} {f['rows']:5d} rows  sha256 {f['sha256'][:16]}  {f['stages']}")
    return 0


def sft_main(argv: Sequence[str] | None = None) -> int:
    from gencoord_env.train.sft import SCRATCH_LR, ScratchConfig, SFTConfig, train

    p = argparse.ArgumentParser(prog=f"{PROG} sft", description="Supervised fine-tuning (target + EOS loss) with provenance.")
    p.add_argument("--data", nargs="+", required=True, help="JSONL files written by `train data`")
    p.add_argument("--out", required=True, help="run directory (final/ and provenance.json)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--base-model", help="checkpoint directory or hub id to fine-tune")
    src.add_argument("--scratch", choices=["qwen3", "qwen3_5", "qwen3_5_08b"], help="train from random weights")
    p.add_argument("--hidden-size", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab-size", type=int, default=2048)
    p.add_argument("--lr", type=float, help=f"default 1e-5 (pretrained) or {SCRATCH_LR} (scratch)")
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--max-steps", type=int)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--grad-accum", type=int, default=4)
    p.add_argument("--max-length", type=int, default=2048)
    p.add_argument("--seed", type=int, default=2026073101)
    p.add_argument("--no-save", action="store_true", help="skip writing the checkpoint (timing runs)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    scratch = ScratchConfig(a.scratch, a.vocab_size, a.hidden_size, a.layers) if a.scratch else None
    lr = a.lr if a.lr is not None else (SCRATCH_LR if scratch else 1e-5)
    config = SFTConfig(
        data=tuple(a.data), out_dir=a.out, base_model=a.base_model, scratch=scratch, lr=lr, epochs=a.epochs,
        max_steps=a.max_steps, micro_batch=a.micro_batch, grad_accum=a.grad_accum, max_length=a.max_length,
        seed=a.seed, save=not a.no_save, progress=not a.quiet,
    )
    result = train(config)
    prov = result.provenance
    print(json.dumps({k: prov[k] for k in ("optimizer_steps", "train_seconds", "loss_first", "loss_final", "token_exposure")}
                     | {"parameters": prov["base_model"]["parameters"], "device": prov["libraries"]["device_name"],
                        "checkpoint": str(result.checkpoint) if result.checkpoint else None}, indent=2))
    return 0


def grpo_main(argv: Sequence[str] | None = None) -> int:
    from gencoord_env.agents.registry import POLICIES

    p = argparse.ArgumentParser(prog=f"{PROG} grpo", description="GRPO (TRL) from an SFT checkpoint on a pool's decisions, "
                                "each completion rewarded by replaying its episode on the sim; writes reward_curve.json, "
                                "provenance.json, points.jsonl and final/.")
    p.add_argument("--model", required=True, help="SFT checkpoint directory (or hub id)")
    p.add_argument("--out", required=True, help="run directory")
    add_env_arguments(p, {"pool": "train", "route": "forward"})
    p.add_argument("--stages", nargs="+", metavar="STAGE", help="learn only these decision stages (default: every stage of the route)")
    p.add_argument("--episodes", type=positive_int, help="the first N episodes of the pool (default: all)")
    p.add_argument("--partner", default="rule", type=one_of("policy", tuple(POLICIES)), metavar="POLICY",
                   help=f"rule agent that plays the prefixes and every later decision: {' | '.join(POLICIES)} (default: rule)")
    p.add_argument("--partial-credit", action="store_true",
                   help="the env's staged reward: parsed 0.2, contract-valid 0.4, resolved 0.6, handoff verified 0.8, success 1.0")
    p.add_argument("--steps", type=positive_int, default=50, help="optimizer steps (default: 50)")
    p.add_argument("--prompts-per-step", type=positive_int, default=4, help="decisions per step (default: 4)")
    p.add_argument("--num-generations", type=positive_int, default=8, help="completions per decision, one GRPO group (default: 8)")
    p.add_argument("--max-completion-length", type=positive_int, default=128)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=1e-6,
                   help="default 1e-6, TRL's, for pretrained models; a small model trained from scratch needs about 1e-4 to 1e-3")
    p.add_argument("--beta", type=float, default=0.0, help="KL coefficient (default 0: no reference model)")
    p.add_argument("--loss-type", default="dapo", help="TRL's GRPO loss (default: dapo)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device")
    p.add_argument("--eval-pool", type=one_of("pool", env_choices()["pool"]), metavar="POOL",
                   help="closed-loop greedy success on this pool before and after training")
    p.add_argument("--eval-episodes", type=positive_int)
    p.add_argument("--no-save", action="store_true", help="skip writing the checkpoint")
    a = p.parse_args(argv)
    from gencoord_env.train.grpo import GRPORunConfig, run

    config = GRPORunConfig(
        model=a.model, out_dir=a.out, pool=a.pool, route=a.route, stages=tuple(a.stages) if a.stages else None,
        episodes=a.episodes, partner=a.partner, partial_credit=a.partial_credit, steps=a.steps,
        prompts_per_step=a.prompts_per_step, num_generations=a.num_generations,
        max_completion_length=a.max_completion_length, temperature=a.temperature, top_p=a.top_p, lr=a.lr,
        beta=a.beta, loss_type=a.loss_type, seed=a.seed, device=a.device, eval_pool=a.eval_pool,
        eval_episodes=a.eval_episodes, save=not a.no_save,
    )
    result = run(config)
    prov = result.provenance
    print(json.dumps({k: prov[k] for k in ("optimizer_steps", "train_seconds", "reward_first", "reward_final",
                                           "completions_scored", "eval_before", "eval_after")}
                     | {"checkpoint": str(result.checkpoint) if result.checkpoint else None}, indent=2))
    return 0


def evaluate_main(argv: Sequence[str] | None = None) -> int:
    from gencoord_env.agents.lm.generate import GenerationConfig
    from gencoord_env.agents.lm.policy import POLICY_KINDS, load_policy
    from gencoord_env.train.evaluate import evaluate

    p = argparse.ArgumentParser(prog=f"{PROG} evaluate", description="Closed-loop evaluation of a checkpoint in the env.")
    p.add_argument("--model", required=True, help="checkpoint directory or hub id")
    p.add_argument("--policy", choices=list(POLICY_KINDS), default="direct",
                   help=f"how the model's output becomes an action: {' | '.join(POLICY_KINDS)} (default: direct)")
    add_env_arguments(p, {"pool": "heldout", "route": "forward", "view": "full", "surface": "dsl", "backend": "sim"})
    p.add_argument("--episodes", type=positive_int, help="at most this many episodes (default: the whole pool)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--decode", choices=["auto", "static", "generate"], default="auto", help="generation backend")
    p.add_argument("--device")
    p.add_argument("--out", help="write the full report (every episode) as JSON here")
    a = p.parse_args(argv)
    policy = load_policy(a.model, a.policy, device=a.device, config=GenerationConfig(backend=a.decode))
    report = evaluate(policy, a.pool, route=a.route, view=a.view, surface=a.surface, backend=a.backend,
                      episodes=a.episodes, batch_size=a.batch_size)
    report["model"] = a.model
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    print(json.dumps({"pool": a.pool, "route": a.route, "policy": a.policy, **report["metrics"]}, indent=2, default=str))
    return 0


COMMANDS: dict[str, tuple[Callable[[Sequence[str] | None], int], str]] = {
    "data": (data_main, "write the programmatic SFT sets and their manifest"),
    "sft": (sft_main, "supervised fine-tuning with provenance (needs the lm extra)"),
    "grpo": (grpo_main, "GRPO from an SFT checkpoint, rewarded by env replay (needs the lm and rl extras)"),
    "evaluate": (evaluate_main, "closed-loop evaluation of a checkpoint in the env (needs the lm extra)"),
}


def build_parser() -> argparse.ArgumentParser:
    """The command list; each command parses its own arguments (``gencoord train COMMAND --help``)."""
    ap = argparse.ArgumentParser(prog=PROG, description="SFT data, training and closed-loop evaluation",
                                 epilog=f"see '{PROG} COMMAND --help' for a command's arguments")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, summary) in COMMANDS.items():
        sub.add_parser(name, help=summary, add_help=False).add_argument("rest", nargs=argparse.REMAINDER)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        build_parser().parse_args(args)  # prints the help, or the usage and what is wrong, and exits
    return COMMANDS[args[0]][0](args[1:])
