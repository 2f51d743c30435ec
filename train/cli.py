"""``gencoord train data|tokenizer|sft|grpo|selfplay|evaluate|transfer|tables``: SFT data, training and closed-loop evaluation
(also ``python -m gencoord_env.train <command>``).

Each command is also a function taking ``argv`` (:func:`data_main`, :func:`tokenizer_main`, :func:`sft_main`,
:func:`grpo_main`, :func:`evaluate_main`, :func:`transfer_main`, :func:`tables_main`). ``tokenizer``, ``sft`` and
``evaluate`` need the ``lm`` extra, ``grpo`` the ``lm`` and ``rl`` extras, ``transfer`` and ``tables`` the ``lm`` and
``experiments`` extras.

Examples::

    gencoord train data --out runs/data
    gencoord train data --out runs/pre --sets procedural --rows 32000 --workers 8
    gencoord train tokenizer --data runs/data/forward.jsonl runs/pre/procedural.jsonl --out runs/tokenizer
    gencoord train sft --data runs/pre/procedural.jsonl --out runs/pre --scratch qwen3 --tokenizer runs/tokenizer --epochs 1
    gencoord train sft --data runs/data/forward.jsonl --out runs/ft --base-model runs/pre/final
    gencoord train sft --data runs/data/forward.jsonl --out runs/scratch --scratch qwen3 --lr 1e-3 --epochs 12
    gencoord train grpo --model runs/scratch/final --pool train --route forward --out runs/grpo --steps 200
    gencoord train selfplay --out runs/selfplay --seeds 0 1 2 --jobs 3 --device cuda
    gencoord train evaluate --model runs/scratch/final --pool heldout --route forward --out runs/heldout.json
    gencoord train transfer --out runs/transfer --budget tiny
    gencoord train tables --out runs/tables --budget tiny --seeds 2026073101
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gencoord_env.commands.cli import Parser, add_env_arguments, env_choices, one_of, positive_int

PROG = "gencoord train"


def data_main(argv: Sequence[str] | None = None) -> int:
    from gencoord_env.train.data import DATASETS, PROCEDURAL, PROCEDURAL_ROWS, build_all

    p = Parser(prog=f"{PROG} data", description="Write the programmatic SFT sets and their manifest.")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--sets", nargs="*", choices=sorted([*DATASETS, *PROCEDURAL]),
                   help="sets to build (default: the paper's sets; procedural ones only when named)")
    p.add_argument("--seed", type=int, default=0, help="pool seed (of the procedural pool too)")
    p.add_argument("--rows", type=positive_int, help=f"rows of each procedural set, a multiple of 8 (default {PROCEDURAL_ROWS})")
    p.add_argument("--workers", type=positive_int, default=1, help="processes that play the procedural episodes (default 1)")
    a = p.parse_args(argv)
    manifest = build_all(a.out, a.sets, a.seed, rows=a.rows, workers=a.workers)
    for name, f in manifest["files"].items():
        print(f"{name:15s} {f['rows']:5d} rows  sha256 {f['sha256'][:16]}  {f['stages']}")
    return 0


def tokenizer_main(argv: Sequence[str] | None = None) -> int:
    from gencoord_env.agents.lm.loading import train_tokenizer
    from gencoord_env.train.data import load_rows

    p = Parser(prog=f"{PROG} tokenizer", description="Train one offline byte-level BPE tokenizer on "
                                "the rows of several sets, for scratch runs that must share it (sft --tokenizer).")
    p.add_argument("--data", nargs="+", required=True, help="JSONL files written by `train data`")
    p.add_argument("--out", required=True, help="directory to save the tokenizer in")
    p.add_argument("--vocab-size", type=positive_int, default=2048)
    p.add_argument("--max-rows", type=positive_int, help="at most this many rows of each file (default: all)")
    a = p.parse_args(argv)
    prompts: dict[str, None] = {}
    targets: list[str] = []
    for path in a.data:
        rows = load_rows(path)
        prompts.update((r.prompt, None) for r in rows[: a.max_rows])
        targets += [r.target for r in rows]
    tokenizer = train_tokenizer([*prompts, *targets], vocab_size=a.vocab_size)
    tokenizer.save_pretrained(a.out)
    print(json.dumps({"out": a.out, "vocabulary": len(tokenizer), "prompts": len(prompts), "targets": len(targets)}))
    return 0


def sft_main(argv: Sequence[str] | None = None) -> int:
    from gencoord_env.train.sft import CONTINUE_LR, PAPER_LR, SCRATCH_LR, ScratchConfig, SFTConfig, train

    p = Parser(prog=f"{PROG} sft", description="Supervised fine-tuning (target + EOS loss) with provenance.")
    p.add_argument("--data", nargs="+", required=True, help="JSONL files written by `train data`")
    p.add_argument("--out", required=True, help="run directory (final/ and provenance.json)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--base-model", help="checkpoint directory or hub id to fine-tune")
    src.add_argument("--scratch", choices=["qwen3", "qwen3_5", "qwen3_5_08b"], help="train from random weights")
    p.add_argument("--hidden-size", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab-size", type=int, default=2048)
    p.add_argument("--tokenizer", help="with --scratch: a saved tokenizer directory (`train tokenizer`) instead of one trained on --data")
    p.add_argument("--lr", type=float, help=f"default {SCRATCH_LR} with --scratch, {CONTINUE_LR} for a checkpoint whose "
                   f"training began from scratch here (its training_record.json says so), else {PAPER_LR}")
    p.add_argument("--subword-dropout", type=float, default=0.0, metavar="P",
                   help="BPE-dropout: skip each merge with probability P in the prompts of --subword-dropout-rows of the rows")
    p.add_argument("--subword-dropout-rows", type=float, default=0.0, metavar="FRACTION")
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--max-steps", type=int)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--grad-accum", type=int, default=4)
    p.add_argument("--max-length", type=int, default=2048)
    p.add_argument("--seed", type=int, default=2026073101)
    p.add_argument("--no-save", action="store_true", help="skip writing the checkpoint (timing runs)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    fit = p.add_argument_group("what decides success (gencoord_env.train.fit)")
    fit.add_argument("--decision-weight", type=float, default=1.0,
                     help="loss weight of each row's decision token (default 1: a token like any other)")
    fit.add_argument("--code-renaming", type=float, default=0.0, metavar="SHARE",
                     help="rename the binding codes of this share of the drawn samples, prompt and target alike (default 0)")
    fit.add_argument("--request-removal", type=float, default=0.0, metavar="SHARE",
                     help="show this share of the drawn receiver samples without their request, answering with the "
                          "first branch (what a receiver does from its own context when no request arrives; default 0)")
    fit.add_argument("--monitor-every", type=int, default=0, metavar="STEPS",
                     help="decision-token accuracy on a fixed sample of the rows every STEPS updates (default: only at the end)")
    fit.add_argument("--fit-rows", type=int, default=4096, help="rows the teacher-forced fit reads after training (0: skip)")
    p.add_argument("--resume-every", type=int, default=0, metavar="STEPS",
                   help="save the run's whole state to OUT/resume.pt every STEPS updates; the same command run again "
                        "continues from it to the same weights (0: never)")
    p.add_argument("--nondeterministic", action="store_true",
                   help="let the GPU reduce in any order (fused attention kernels; faster, but a rerun of the same "
                        "seed can end elsewhere); default: deterministic kernels")
    fit.add_argument("--play", choices=["auto", "yes", "none"], default="auto",
                     help="after training, play the train pool closed-loop in the checkpoint's output format and report "
                          "each template x binding x role cell (auto: for sets of the train pool's forward route on the "
                          "Short DSL surface, forward and factor_code)")
    a = p.parse_args(argv)
    if a.tokenizer and not a.scratch:
        p.error("--tokenizer applies to --scratch runs; a --base-model run uses the checkpoint's own tokenizer")
    scratch = ScratchConfig(a.scratch, a.vocab_size, a.hidden_size, a.layers, tokenizer=a.tokenizer) if a.scratch else None
    config = SFTConfig(
        data=tuple(a.data), out_dir=a.out, base_model=a.base_model, scratch=scratch, lr=a.lr, epochs=a.epochs,
        max_steps=a.max_steps, micro_batch=a.micro_batch, grad_accum=a.grad_accum, max_length=a.max_length,
        seed=a.seed, save=not a.no_save, progress=not a.quiet, subword_dropout=a.subword_dropout,
        subword_dropout_rows=a.subword_dropout_rows, decision_weight=a.decision_weight, code_renaming=a.code_renaming,
        monitor_every=a.monitor_every, fit_rows=a.fit_rows, resume_every=a.resume_every,
        deterministic=not a.nondeterministic, request_removal=a.request_removal,
    )
    result = train(config)
    prov = result.provenance
    if _plays_train(a.play, a.data) and result.checkpoint is not None:
        _play_train(result, Path(a.out))
    fit_record = prov.get("fit") or {}
    print(json.dumps({k: prov[k] for k in ("optimizer_steps", "train_seconds", "loss_first", "loss_final", "token_exposure")}
                     | {"lr": prov["config"]["lr"], "parameters": prov["base_model"]["parameters"], "device": prov["libraries"]["device_name"],
                        "checkpoint": str(result.checkpoint) if result.checkpoint else None,
                        "fits": fit_record.get("fits"), "fit_reasons": fit_record.get("reasons"),
                        "decision_accuracy": (fit_record.get("teacher_forced") or {}).get("decision_accuracy")}, indent=2))
    return 0


def _plays_train(choice: str, data: Sequence[str]) -> bool:
    """Whether the train pool is played after an SFT run (auto: its rows are the train pool's forward decisions,
    in a format whose actions are Short DSL)."""
    if choice != "auto":
        return choice == "yes"
    from gencoord_env.train.data import data_set, load_rows

    sets = [data_set(r.set) for path in data for r in load_rows(path)[:1]]
    return bool(sets) and all(s.episodes == "train" and s.route == "forward" and s.output_format.surface == "dsl"
                              for s in sets)


def _play_train(result: Any, out: Path) -> None:
    """Play the train pool closed-loop with the new checkpoint in its format; the verdict joins the provenance."""
    from gencoord_env.agents.lm.policy import load_policy
    from gencoord_env.train.fit import closed_loop, shout, verdict

    play = closed_loop(load_policy(str(result.checkpoint)), "train")
    prov = result.provenance
    report = verdict((prov.get("fit") or {}).get("teacher_forced"), play)
    prov["fit"] = {**(prov.get("fit") or {}), **report, "train_pool": play}
    shout(report, str(out))
    (out / "provenance.json").write_text(json.dumps(prov, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def grpo_main(argv: Sequence[str] | None = None) -> int:
    from gencoord_env.agents.registry import POLICIES

    p = Parser(prog=f"{PROG} grpo", description="GRPO (TRL) from an SFT checkpoint on a pool's decisions, "
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
    brief = {k: prov[k] for k in ("optimizer_steps", "train_seconds", "reward_first", "reward_final", "completions_scored",
                                  "eval_before", "eval_after", "eval_change")}
    for key in ("eval_before", "eval_after"):  # the per-episode table stays in provenance.json
        if brief[key]:
            brief[key] = {k: v for k, v in brief[key].items() if k != "success_by_episode"}
    print(json.dumps(brief
                     | {"checkpoint": str(result.checkpoint) if result.checkpoint else None}, indent=2))
    return 0


def evaluate_main(argv: Sequence[str] | None = None) -> int:
    from rich.console import Console

    from gencoord_env.agents.by_role import ByRole
    from gencoord_env.agents.formats import FORMATS
    from gencoord_env.agents.lm.generate import GenerationConfig
    from gencoord_env.agents.lm.policy import load_policy
    from gencoord_env.agents.registry import POLICIES, make_policy
    from gencoord_env.commands.experiments.report import table
    from gencoord_env.commands.experiments.specs import Condition
    from gencoord_env.train.pipeline import evaluation

    p = Parser(prog=f"{PROG} evaluate", description="A checkpoint played closed-loop on one or more pools through the "
                                                     "experiment harness: a table of success with 95% cluster-bootstrap "
                                                     "intervals, decisions, tokens and bytes, one row per pool.")
    p.add_argument("--model", required=True, help="checkpoint directory or hub id")
    p.add_argument("--format", choices=list(FORMATS), metavar="FORMAT",
                   help=f"the output format the model answers in: {' | '.join(FORMATS)} (default: the one the checkpoint "
                        "records; direct for a checkpoint that records none)")
    add_env_arguments(p, {"pool": "heldout", "route": "forward", "view": "full", "surface": None, "backend": "sim"},
                      notes={"surface": "default: the format's surface"})
    p.add_argument("--pools", nargs="+", type=one_of("pool", env_choices()["pool"]), metavar="POOL",
                   help="several pools, one row each (instead of --pool)")
    p.add_argument("--episodes", type=positive_int, help="at most this many episodes a pool, the harness's selection "
                                                         "(both roles of each picked cluster; default: the whole pool)")
    p.add_argument("--pool-seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=64, help="envs in lockstep on the sim (0: one episode at a time, timed)")
    p.add_argument("--decode", choices=["auto", "static", "generate"], default="auto", help="generation backend")
    p.add_argument("--device")
    p.add_argument("--out", help="write the report (each pool's record and every episode with its actions) as JSON here")
    p.add_argument("--roles", nargs="+", metavar="ROLE",
                   help="the roles the model plays (e.g. sender; infos' 'role'); --partner plays the others "
                        "(default: the model plays every role)")
    p.add_argument("--partner", default="rule", type=one_of("policy", tuple(POLICIES)), metavar="POLICY",
                   help=f"with --roles, the agent of the other roles: {' | '.join(POLICIES)} (default: rule)")
    a = p.parse_args(argv)
    model = load_policy(a.model, a.format, device=a.device, config=GenerationConfig(backend=a.decode))
    policy: Any = model
    if a.roles:
        policy = ByRole({role: model for role in a.roles}, default=make_policy(a.partner))
    surface = a.surface or model.format.surface
    conditions = [Condition(pool, pool, f"model:{a.model}", route=a.route, view=a.view, surface=surface)
                  for pool in (a.pools or [a.pool])]
    experiment, records, rows = evaluation(policy, "evaluate", conditions, episodes=a.episodes, batch=a.batch_size,
                                           backend=a.backend, pool_seed=a.pool_seed, actions=True)
    roles = {"model": a.roles or "every role", "partner": a.partner if a.roles else None}
    report = {"model": a.model, "format": model.format.name, "route": a.route, "view": a.view, "surface": surface,
              "backend": a.backend, "roles": roles, "records": records, "episodes": rows}
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    console = Console() if Console().is_terminal else Console(width=240)
    console.print(table(experiment, records, a.backend))
    print(f"model {a.model} in the {model.format.name} format, playing {roles['model']}"
          + (f" beside {a.partner}" if a.roles else ""))
    return 0


def add_budget_overrides(p: argparse.ArgumentParser, flags: Sequence[tuple[str, type]]) -> None:
    """``--FLAG VALUE`` options that replace the chosen budget's field of that name (dashes for underscores)."""
    overrides = p.add_argument_group("budget overrides")
    for flag, kind in flags:
        overrides.add_argument(f"--{flag}", type=kind)


def with_overrides(budget: Any, a: argparse.Namespace) -> Any:
    """``budget`` (a dataclass) with every field that ``a`` holds a value for replaced, its name excepted."""
    import dataclasses

    changes = {f.name: getattr(a, f.name) for f in dataclasses.fields(budget)
               if hasattr(a, f.name) and f.name != "name" and getattr(a, f.name) is not None}
    return dataclasses.replace(budget, **changes)


def transfer_main(argv: Sequence[str] | None = None) -> int:
    from gencoord_env.train.transfer import BACKENDS, BUDGETS, PAPER_SEEDS, POOLS, TransferConfig
    from gencoord_env.train.transfer_report import report_lines, run, summarize

    p = Parser(
        prog=f"{PROG} transfer",
        description="Transfer without downloaded weights: for each seed and backend, a scratch model on the paper's rows "
                    "only, one pretrained on procedural rows, and that one fine-tuned on the paper's rows; all evaluated "
                    "closed-loop; writes summary.json, summary.png, summary.csv and seeds/<seed>.json.")
    p.add_argument("--out", required=True, help="results directory")
    p.add_argument("--work", help="checkpoints, data and lane files (default: OUT/work)")
    p.add_argument("--seeds", nargs="+", type=int, default=list(PAPER_SEEDS), help="training seeds (default: the paper's three)")
    p.add_argument("--budget", choices=sorted(BUDGETS), default="tiny",
                   help="tiny: the whole pipeline on a CPU in about a minute; full: the real run, sized for one H100 (default: tiny)")
    p.add_argument("--backends", nargs="+", choices=list(BACKENDS), default=list(BACKENDS))
    p.add_argument("--pools", nargs="+", choices=list(POOLS), default=list(POOLS))
    p.add_argument("--device", help="torch device of every lane (default: cuda when available)")
    p.add_argument("--jobs", type=positive_int, default=1, help="lanes (seed x backend x chain) run at once, one process each (default 1)")
    p.add_argument("--data-workers", type=positive_int, default=1, help="processes that play the procedural episodes (default 1)")
    p.add_argument("--chains", nargs="+", choices=["pretrained", "protocol"], default=["pretrained", "protocol"],
                   help="which lanes run (default both; a run split over several calls runs each with the same --out)")
    add_budget_overrides(p, (("hidden-size", int), ("num-layers", int), ("pretrain-rows", int), ("pretrain-epochs", float),
                             ("protocol-epochs", float), ("finetune-epochs", float), ("finetune-lr", float),
                             ("micro-batch", int), ("grad-accum", int), ("pretrain-micro-batch", int), ("eval-episodes", int),
                             ("eval-batch", int), ("subword-dropout", float), ("subword-dropout-rows", float),
                             ("tokenizer-rows", int), ("pretrain-steps", int), ("protocol-steps", int), ("finetune-steps", int),
                             ("decision-weight", float), ("code-renaming", float), ("pretrain-code-renaming", float),
                             ("monitor-every", int)))
    p.add_argument("--nondeterministic", action="store_true",
                   help="train on the fused (nondeterministic) kernels: faster on a GPU, a rerun of a seed can end "
                        "elsewhere; default: deterministic kernels")
    p.add_argument("--summarize-only", action="store_true",
                   help="rebuild the summary from OUT/inputs.json and OUT/lanes/ (e.g. of a run cut short); trains nothing")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    budget = with_overrides(BUDGETS[a.budget], a)
    if a.nondeterministic:
        budget = dataclasses.replace(budget, deterministic=False)
    config = TransferConfig(out=a.out, seeds=tuple(a.seeds), budget=budget, backends=tuple(a.backends), pools=tuple(a.pools),
                            work=a.work, device=a.device, jobs=a.jobs, data_workers=a.data_workers, progress=not a.quiet,
                            chains=tuple(a.chains))
    if a.summarize_only:
        summary = summarize(config)
    else:
        summary = run(config, list(argv) if argv is not None else sys.argv[1:])
    for line in report_lines(summary):
        print(line)
    if summary["failures"]:
        print(f"error: {len(summary['failures'])} lane(s) failed; see summary.json 'failures'", file=sys.stderr)
        return 1
    return 0


def tables_main(argv: Sequence[str] | None = None) -> int:
    from gencoord_env.train.table_report import run, summarize
    from gencoord_env.train.tables import BUDGETS, PAPER_SEEDS, TABLES, TablesConfig

    p = Parser(
        prog=f"{PROG} tables",
        description="Learned rows of the paper's tables: per table, train the model of each learned condition for "
                    "every seed, play every condition closed-loop on the sim with the experiment harness, and write "
                    "OUT/<table>/results.json, <table>.png, provenance.json and OUT/TABLES.md.")
    p.add_argument("--out", required=True, help="results directory")
    p.add_argument("--work", help="checkpoints, data and lane files (default: OUT/work)")
    p.add_argument("--tables", nargs="+", default=list(TABLES), metavar="NAME",
                   help=f"tables to produce: {' | '.join(TABLES)} (default: all)")
    p.add_argument("--seeds", nargs="+", type=int, default=list(PAPER_SEEDS), help="training seeds (default: the paper's three)")
    p.add_argument("--budget", choices=sorted(BUDGETS), default="tiny",
                   help="tiny: every table on a CPU in well under a minute, a subset of each pool; full: every episode, "
                        "sized for one machine of 4 H100s with --jobs 21 (default: tiny)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--scratch", choices=["qwen3", "qwen3_5"], help="build every model from random weights (default: qwen3)")
    src.add_argument("--init", metavar="CHECKPOINT_DIR", help="start every model from this checkpoint (e.g. a procedural-pretrained one)")
    p.add_argument("--device", help="torch device of every lane; cuda on a machine of several GPUs spreads the lanes over them")
    p.add_argument("--jobs", type=positive_int, default=1, help="lanes (seed x model) run at once, one process each (default 1)")
    add_budget_overrides(p, (("hidden-size", int), ("num-layers", int), ("epoch-scale", float), ("init-epoch-scale", float),
                             ("steps", int), ("micro-batch", int), ("grad-accum", int), ("lr", float), ("eval-episodes", int),
                             ("eval-batch", int), ("timing-episodes", int), ("rule-episodes", int), ("max-new-tokens", int),
                             ("threads", int), ("code-renaming", float), ("decision-weight", float),
                             ("request-removal", float)))
    p.add_argument("--summarize-only", action="store_true",
                   help="rewrite the tables from WORK's lane files (of a run cut short, or of the separate "
                        "commands that shared WORK); trains nothing")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    budget = with_overrides(BUDGETS[a.budget], a)
    try:
        config = TablesConfig(out=a.out, tables=tuple(a.tables), seeds=tuple(a.seeds), budget=budget,
                              scratch=None if a.init else (a.scratch or "qwen3"), init=a.init, work=a.work,
                              device=a.device, jobs=a.jobs, progress=not a.quiet)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary = summarize(config) if a.summarize_only else run(config, list(argv) if argv is not None else sys.argv[1:])
    for name, res in summary["tables"].items():
        cells = [f"{r['condition']} {100 * (r['success_rate'] or 0):.1f}%" for r in res["conditions"] if r["model"]]
        print(f"{name:15s} " + ", ".join(cells))
    if summary["failures"]:
        print(f"error: {len(summary['failures'])} lane(s) failed; see provenance.json 'failures'", file=sys.stderr)
        return 1
    return 0


def _selfplay_main(argv: Sequence[str] | None) -> int:
    from gencoord_env.train.selfplay import main as selfplay_main

    return selfplay_main(argv)


COMMANDS: dict[str, tuple[Callable[[Sequence[str] | None], int], str]] = {
    "data": (data_main, "write the programmatic SFT sets and their manifest"),
    "tokenizer": (tokenizer_main, "train one offline BPE tokenizer for scratch runs to share (needs the lm extra)"),
    "sft": (sft_main, "supervised fine-tuning with provenance (needs the lm extra)"),
    "grpo": (grpo_main, "GRPO from an SFT checkpoint, rewarded by env replay (needs the lm and rl extras)"),
    "selfplay": (_selfplay_main, "self-play GRPO on whole episodes, one policy or two, held-out success before and after (lm + rl extras)"),
    "evaluate": (evaluate_main, "closed-loop evaluation of a checkpoint in the env (needs the lm extra)"),
    "transfer": (transfer_main, "procedural pretraining vs the paper's rows only, every seed and backend (lm + experiments extras)"),
    "tables": (tables_main, "learned rows of every paper table: train each condition's model per seed, evaluate (lm + experiments extras)"),
}


def build_parser() -> argparse.ArgumentParser:
    """The command list; each command parses its own arguments (``gencoord train COMMAND --help``)."""
    ap = Parser(prog=PROG, description="SFT data, training and closed-loop evaluation",
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
