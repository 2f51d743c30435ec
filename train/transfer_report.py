"""``gencoord train transfer``: the specs of :mod:`gencoord_env.train.transfer` run through the pipeline, the
checks of the shared inputs, and the analysis and outputs.

:func:`run` builds the inputs (:func:`build_inputs`: both backends' sets, the shared tokenizer, the code and
length checks, each pool's prompt tokens), runs the lanes (:func:`gencoord_env.train.pipeline.execute`) and
writes the summary; :func:`summarize` writes it from ``inputs.json`` and the lane files alone (``--summarize-only``).
Each lane result holds, per run, its training summary and per play one row per episode; :func:`arms` reads them
as per arm the runs that trained it and, per pool, the outcome bits, by-role bits and the decoding check that
the analysis pools over seeds (:func:`analyze`: cluster-bootstrap intervals, strict clusters, targets; paired
differences of the arms).
"""
from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from gencoord_env.agents.lm.prompt import prompt_text
from gencoord_env.caches import cache
from gencoord_env.commands.experiments import stats
from gencoord_env.errors import DataError, UsageError
from gencoord_env.tasks import Episode, pool as load_pool
from gencoord_env.tasks.episode import parse_episode_id
from gencoord_env.train.data import _play, load_rows
from gencoord_env.train.fit import play_cells, shout, template_of, verdict
from gencoord_env.train.lanes import git_commit, versions
from gencoord_env.train.pipeline import Inputs, execute, logger, outcomes, prepare
from gencoord_env.train.transfer import (
    ARMS, BACKENDS, COVERAGE_POOLS, PAPER_ARMS, ROLES, TARGETS, TransferConfig, corpus, lanes_for,
)

__all__ = [
    "analyze", "arms", "build_inputs", "code_coverage", "coverage", "fit_summary", "plot", "pool_prompts",
    "report_lines", "run", "summarize",
]


# --------------------------------------------------------------------------- shared inputs


def build_inputs(config: TransferConfig, log: Callable[[str], None]) -> tuple[Inputs, dict[str, Any]]:
    """The data sets and the shared tokenizer (:func:`gencoord_env.train.pipeline.prepare`), and the checks they
    must pass before anything trains: every binding code the evaluated pools use is named in pretraining, every
    row and pool prompt fits ``max_length``; with each pool's prompt tokens for the coverage analysis."""
    b = config.budget
    sets = tuple(sorted({s for pair in BACKENDS.values() for s in pair}))
    t0 = time.perf_counter()
    inputs = prepare(config.work_dir, sets, corpus(config), pool_seed=config.data_seed, procedural_rows=b.pretrain_rows,
                     data_workers=config.data_workers, log=log)
    prepared = time.perf_counter() - t0
    manifest = json.loads((Path(inputs.data) / "manifest.json").read_text(encoding="utf-8"))
    rows = {s: load_rows(Path(inputs.data) / f"{s}.jsonl") for s in sets}
    codes = code_coverage(rows, config.pools, config.data_seed)
    log(f"codes: pretraining names {len(codes['pretraining'])}, the evaluated pools use {len(codes['evaluated'])}, none missing")
    assert inputs.tokenizer is not None
    tokenizer = AutoTokenizer.from_pretrained(inputs.tokenizer, local_files_only=True)
    t0 = time.perf_counter()
    lengths, pool_tokens = _lengths(tokenizer, rows, pool_prompts(COVERAGE_POOLS, config.data_seed), b.max_length)
    checks = time.perf_counter() - t0
    longest_row = max(v["max_tokens"] for v in lengths["sets"].values())
    longest_prompt = max(v["max_prompt_tokens"] for v in lengths["pools"].values())
    log(f"tokenizer: vocabulary {len(tokenizer)}, longest row {longest_row} tokens, longest pool prompt "
        f"{longest_prompt} (max_length {b.max_length})")
    ids = sorted({t for counts in pool_tokens.values() for t in counts})
    return inputs, {
        "manifest": {"pool_seed": manifest["pool_seed"], "files": {s: manifest["files"][s] for s in sets}},
        "codes": codes,
        "tokenizer": {"vocabulary": len(tokenizer), "sha256": inputs.tokenizer_sha256,
                      "trained_on": {"paper_rows": sum(len(rows[s]) for s in sets if not s.startswith("procedural")),
                                     "procedural_rows": min(b.tokenizer_rows, len(rows.get("procedural", rows.get("procedural_factor_code", []))))}},
        "lengths": lengths,
        "pool_tokens": {name: {str(t): n for t, n in sorted(counts.items())} for name, counts in pool_tokens.items()},
        "token_strings": dict(zip(map(str, ids), tokenizer.convert_ids_to_tokens(ids))),
        "seconds": {"data_and_tokenizer": prepared, "checks": checks},
        "inputs": dataclasses.asdict(inputs),
    }


def code_coverage(rows: Mapping[str, Sequence[Any]], pools: Sequence[str], seed: int = 0) -> dict[str, Any]:
    """The binding codes that pretraining rows name in their targets, against those the evaluated pools use.

    Only pretraining (procedural) rows count: a code that first appears in fine-tuning starts from a random
    embedding there. Raises when an evaluated pool uses a code pretraining never names.
    """
    named = sorted({r.binding for name, rs in rows.items() if name.startswith("procedural") for r in rs})
    used = {name: sorted({c.binding for c in load_pool(name, seed)}) for name in pools}
    if not any(name.startswith("procedural") for name in rows):
        return {"pretraining": [], "evaluated": sorted({c for cs in used.values() for c in cs}), "by_pool": used}
    missing = {name: [c for c in cs if c not in named] for name, cs in used.items()}
    missing = {k: v for k, v in missing.items() if v}
    if missing:
        raise UsageError(f"pretraining rows never name binding codes the evaluated pools use: {missing}; "
                         "generate more procedural rows (--pretrain-rows) so that every public code appears")
    return {"pretraining": named, "evaluated": sorted({c for cs in used.values() for c in cs}), "by_pool": used}


def pool_prompts(pools: Sequence[str], seed: int = 0) -> dict[str, tuple[str, ...]]:
    """Every observation a deciding agent sees when ``pools`` are played on the forward route with the
    reference records (what a model that plays correctly reads)."""
    return {name: _pool_prompts(name, seed) for name in pools}


@cache(maxsize=8)
def _pool_prompts(name: str, seed: int) -> tuple[str, ...]:
    episodes = [Episode(c, perm) for c in load_pool(name, seed) for perm in (0, 1)]
    return tuple(prompt for _, prompt, _, _, _ in _play(episodes, "forward"))


def _lengths(tokenizer: Any, rows: Mapping[str, Sequence[Any]], prompts: Mapping[str, Sequence[str]],
             max_length: int) -> tuple[dict[str, Any], dict[str, Counter[int]]]:
    """Token counts of every row and pool prompt (raises past ``max_length``), and each pool's token ids."""

    def encode(texts: Sequence[str]) -> dict[str, list[int]]:
        unique = list(dict.fromkeys(texts))
        return dict(zip(unique, tokenizer(unique, add_special_tokens=False)["input_ids"])) if unique else {}

    prompt_ids = encode([prompt_text(tokenizer, r.prompt) for rs in rows.values() for r in rs]
                        + [prompt_text(tokenizer, x) for texts in prompts.values() for x in texts])
    target_ids = encode([r.target for rs in rows.values() for r in rs])
    sets = {}
    for name, rs in rows.items():
        p = [len(prompt_ids[prompt_text(tokenizer, r.prompt)]) for r in rs]
        t = [len(target_ids[r.target]) for r in rs]
        sets[name] = {"max_tokens": max(a + c + 1 for a, c in zip(p, t)), "mean_prompt_tokens": sum(p) / len(p),
                      "mean_target_tokens": sum(t) / len(t)}
    pools, pool_tokens = {}, {}
    for name, texts in prompts.items():
        ids = [prompt_ids[prompt_text(tokenizer, x)] for x in texts]
        pools[name] = {"max_prompt_tokens": max(map(len, ids)), "mean_prompt_tokens": sum(map(len, ids)) / len(ids),
                       "prompts": len(texts)}
        pool_tokens[name] = Counter(t for x in ids for t in x)
    longest = max([v["max_tokens"] for v in sets.values()] + [v["max_prompt_tokens"] for v in pools.values()])
    if longest > max_length:
        raise UsageError(f"a row or pool prompt has {longest} tokens, over max_length={max_length}; raise max_length")
    return {"max_length": max_length, "sets": sets, "pools": pools}, pool_tokens


# --------------------------------------------------------------------------- the lane results, per arm


def arms(result: Mapping[str, Any]) -> dict[str, Any]:
    """A lane result as per arm: ``runs`` (the training summary of each run that made its checkpoint: ``pretrain``,
    ``finetune``) and per pool ``eval`` (episodes, their ids and outcome bits in play order, outcomes, mean output
    tokens and calls, the decoder, seconds, ``by_role`` bits and the heldout ``decode_check``)."""
    out: dict[str, Any] = {}
    entries = result["runs"]
    for arm, entry in entries.items():
        plays = entry["plays"]
        evals: dict[str, Any] = {}
        for name, play in plays.items():
            if "/" in name:
                continue
            rows = play["rows"]
            n = max(1, len(rows))
            ev: dict[str, Any] = {
                "episodes": len(rows), "episode_ids": [r["episode_id"] for r in rows], "success_bits": outcomes(rows),
                "outcomes": dict(sorted(Counter(str(r["outcome"]) for r in rows).items())),
                "output_tokens": sum(r["metrics"].get("model_output_tokens", 0) for r in rows) / n,
                "calls": sum(r["metrics"].get("model_calls", 0) for r in rows) / n,
                "decode": entry["decode"], "static_decode_failure": entry["static_decode_failure"], "seconds": play["seconds"],
            }
            by_role = {role: plays[f"{name}/{role}"]["rows"] for role in ROLES if f"{name}/{role}" in plays}
            if by_role:
                ev["by_role"] = {role: {"successes": outcomes(rs).count("1"), "episodes": len(rs), "success_bits": outcomes(rs)}
                                 for role, rs in by_role.items()}
            if f"{name}/generate" in plays and entry["decode"] != "generate":
                ev["decode_check"] = _compare_decisions(rows, plays[f"{name}/generate"]["rows"])
            evals[name] = ev
        trained = {"finetune": entry["summary"]} if arm in PAPER_ARMS else {"pretrain": entry["summary"]}
        if arm == "pretrained_protocol":
            trained = {"pretrain": entries["procedural_only"]["summary"], **trained}
        out[arm] = {"runs": trained, "eval": evals}
        if arm in PAPER_ARMS:
            out[arm]["fit"] = _fit(out[arm])
    return out


def _fit(arm: Mapping[str, Any]) -> dict[str, Any]:
    """The fit verdict of an arm trained on the paper's rows: its decision tokens on those rows, and its
    closed-loop play of the train pool per template x binding x role (when it played the whole pool)."""
    train = arm["eval"].get("train")
    play = play_cells("train", train["episode_ids"], train["success_bits"]) if train else None
    if play is not None and train["episodes"] < 2 * len(load_pool("train", 0)):
        play = None  # a subset of the pool cannot show that every cell fits
    return {**verdict(arm["runs"]["finetune"]["fit"], play), "train_pool": play}


def _compare_decisions(ours: Sequence[Mapping[str, Any]], reference: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Decisions (actions) of two closed-loop passes over the same episodes: how many, how many differ."""
    decisions = differ = 0
    examples: list[dict[str, Any]] = []
    for a, b in zip(ours, reference):
        for x, y in zip(a["actions"], b["actions"]):
            decisions += 1
            if x["action"] != y["action"]:
                differ += 1
                if len(examples) < 3:
                    examples.append({"episode": a["episode_id"], "stage": x["stage"], "ours": x["action"], "generate": y["action"]})
        if len(a["actions"]) != len(b["actions"]):
            differ += abs(len(a["actions"]) - len(b["actions"]))
    return {"decisions": decisions, "differing": differ, "examples": examples}


def _lane_results(config: TransferConfig, inputs: Inputs) -> list[dict[str, Any]]:
    """The lane results of ``config``'s lanes that exist with their lane's key, each with its arms."""
    out = []
    for lane in lanes_for(config, inputs):
        if lane.result_path.is_file():
            result = json.loads(lane.result_path.read_text(encoding="utf-8"))
            if result.get("key") == lane.key():
                seed, backend, chain = lane.name.split("/")
                out.append({**result, "backend": backend, "chain": chain, "arms": arms(result),
                            "seconds": {f"{phase}_{run}": s for run, e in result["runs"].items() for phase, s in
                                        (("train", e["seconds"]["train"]), ("eval", e["seconds"]["play"]))}})
    return out


def _describe(result: Mapping[str, Any]) -> str:
    return ", ".join(f"{run} " + " ".join(f"{n} {outcomes(p['rows']).count('1')}/{len(p['rows'])}"
                                          for n, p in e["plays"].items() if "/" not in n)
                     for run, e in result["runs"].items())


# --------------------------------------------------------------------------- analysis


def _cluster_means(evals: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    obs = [(parse_episode_id(e).cluster, 1.0 if bit == "1" else 0.0) for ev in evals for e, bit in zip(ev["episode_ids"], ev["success_bits"])]
    return stats.cluster_means(obs)


def _condition(evals: Sequence[Mapping[str, Any]], pool: str, ci_seed: int) -> dict[str, Any]:
    means = _cluster_means(evals)
    strict = sum(1 for v in means.values() if v == 1.0)
    episodes = sum(ev["episodes"] for ev in evals)
    successes = sum(ev["success_bits"].count("1") for ev in evals)
    ci = stats.bootstrap_ci(means.values(), ci_seed)
    exact = stats.exact_ci(strict, len(means))
    out = {
        "success_rate": successes / episodes if episodes else None,
        "ci95": list(ci) if ci else None,
        "episodes": episodes,
        "clusters": len(means),
        "strict_clusters": strict,
        "strict_exact_ci95": list(exact) if exact else None,
        "outcomes": dict(sorted(sum((Counter(ev["outcomes"]) for ev in evals), Counter()).items())),
    }
    templates: dict[str, list[int]] = {}
    for ev in evals:
        for e, bit in zip(ev["episode_ids"], ev["success_bits"]):
            t = templates.setdefault(template_of(e), [0, 0])
            t[0] += bit == "1"
            t[1] += 1
    out["by_template"] = {t: {"success_rate": s / n, "episodes": n} for t, (s, n) in sorted(templates.items())}
    roles = [ev["by_role"] for ev in evals if "by_role" in ev]
    if roles:  # the model in one role beside the rule agent in the other
        out["by_role"] = {role: {"success_rate": sum(r[role]["successes"] for r in roles) / sum(r[role]["episodes"] for r in roles),
                                 "seeds": len(roles)} for role in roles[0]}
    target = TARGETS.get(pool)
    if target is not None and means:
        key, bar = next(iter(target.items()))
        value = strict / len(means) if key == "strict_fraction" else out["success_rate"]
        out["target"] = {key: bar, "met": bool(value is not None and value >= bar - 1e-12)}
    return out


def analyze(lane_results: Sequence[Mapping[str, Any]], config: TransferConfig) -> dict[str, Any]:
    """Per backend, arm and pool: pooled over seeds and per seed, with intervals and targets."""
    by: dict[tuple[str, str, int], Mapping[str, Any]] = {}
    for r in lane_results:
        for arm, a in r["arms"].items():
            by[(r["backend"], arm, r["seed"])] = a
    results: dict[str, Any] = {}
    for backend in config.backends:
        results[backend] = {}
        for i, arm in enumerate(ARMS):
            seeds = [s for s in config.seeds if (backend, arm, s) in by]
            if not seeds:
                continue
            pools = {}
            for pool in config.pools:
                evals = [by[(backend, arm, s)]["eval"][pool] for s in seeds]
                pools[pool] = {
                    "pooled": _condition(evals, pool, stats.CONDITION_SEED + i),
                    "per_seed": {str(s): _condition([ev], pool, stats.CONDITION_SEED + i) for s, ev in zip(seeds, evals)},
                }
                per_seed = pools[pool]["per_seed"]
                if "target" in pools[pool]["pooled"]:
                    pools[pool]["seeds_meeting_target"] = sum(v["target"]["met"] for v in per_seed.values())
            results[backend][arm] = {"seeds": seeds, "pools": pools}
        if "protocol_only" in results[backend] and "pretrained_protocol" in results[backend]:
            diffs = {}
            for j, pool in enumerate(config.pools):
                mine = _cluster_means([by[(backend, "pretrained_protocol", s)]["eval"][pool] for s in results[backend]["pretrained_protocol"]["seeds"]])
                theirs = _cluster_means([by[(backend, "protocol_only", s)]["eval"][pool] for s in results[backend]["protocol_only"]["seeds"]])
                diffs[pool] = stats.paired_bootstrap_ci(mine, theirs, stats.PAIRED_SEED + j)
            results[backend]["pretrained_minus_protocol_only"] = diffs
    return results


def coverage(lane_results: Sequence[Mapping[str, Any]], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Per backend and arm (worst seed): tokens of each pool's prompts that the model never trained on
    (its checkpoint's ``seen_token_ids``: every input token of every row its lineage sampled)."""
    pool_tokens: Mapping[str, Mapping[str, int]] = inputs["pool_tokens"]
    names: Mapping[str, str] = inputs["token_strings"]
    out: dict[str, Any] = {}
    for r in lane_results:
        for arm, a in r["arms"].items():
            run = a["runs"].get("finetune") or a["runs"]["pretrain"]
            if run.get("seen_token_ids") is None:
                continue
            seen = {str(t) for t in run["seen_token_ids"]}
            entry = out.setdefault(r["backend"], {}).setdefault(arm, {name: {} for name in pool_tokens})
            for name, counts in pool_tokens.items():
                for t, n in counts.items():
                    if t not in seen:
                        entry[name][names[t]] = max(entry[name].get(names[t], 0), n)
    for arms in out.values():
        for arm, pools in arms.items():
            arms[arm] = {"unseen": pools, "unseen_occurrences": {k: sum(v.values()) for k, v in pools.items()},
                         "none_unseen": not any(pools.values())}
    return out


# --------------------------------------------------------------------------- outputs


def _tokens_and_time(lane_results: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    tokens: dict[str, Any] = {}
    for r in lane_results:
        for arm, a in r["arms"].items():
            entry = tokens.setdefault(r["backend"], {}).setdefault(arm, {})
            for phase in ("pretrain", "finetune"):
                run = a["runs"].get(phase)
                if run is not None:
                    e = entry.setdefault(phase, {"total_tokens": {}, "target_tokens": {}, "optimizer_steps": {}, "rows": {}})
                    e["total_tokens"][str(r["seed"])] = run["token_exposure"]["total_tokens"]
                    e["target_tokens"][str(r["seed"])] = run["token_exposure"]["target_tokens"]
                    e["optimizer_steps"][str(r["seed"])] = run["optimizer_steps"]
                    e["rows"][str(r["seed"])] = sum(f["rows"] for f in run["data_files"])
    phases: dict[str, Any] = {}
    for r in lane_results:
        for phase, s in r["seconds"].items():
            p = phases.setdefault(phase, {"lanes": {}, "sum": 0.0, "max": 0.0})
            p["lanes"][f"{r['seed']}/{r['backend']}"] = s
            p["sum"] += s
            p["max"] = max(p["max"], s)
    return tokens, phases


def _csv(results: Mapping[str, Any], path: Path) -> None:
    lines = ["backend,arm,pool,seed,success_rate,ci_low,ci_high,strict_clusters,clusters,episodes,target_met,"
             "as_sender,as_receiver"]
    for backend, arms in results.items():
        for arm, a in arms.items():
            if arm not in ARMS:
                continue
            for pool, p in a["pools"].items():
                for seed, c in [("all", p["pooled"]), *p["per_seed"].items()]:
                    ci = c["ci95"] or [None, None]
                    met = c.get("target", {}).get("met")
                    roles = c.get("by_role", {})
                    lines.append(",".join(str(x) if x is not None else "" for x in (
                        backend, arm, pool, seed, c["success_rate"], ci[0], ci[1], c["strict_clusters"], c["clusters"],
                        c["episodes"], met, roles.get("sender", {}).get("success_rate"),
                        roles.get("receiver", {}).get("success_rate"))))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def plot(summary: Mapping[str, Any], path: Path) -> None:
    """One panel per backend: per pool, the arms side by side (pooled success, 95% cluster-bootstrap
    interval, each seed as a dot) and the target as a dashed mark."""
    import matplotlib  # the experiments extra, as in the harness's own plots

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    results = summary["results"]
    backends = list(results)
    colors = {"protocol_only": "#a9c4de", "procedural_only": "#7f7f7f", "pretrained_protocol": "#1f4e79"}
    labels = {"protocol_only": "paper protocol only", "procedural_only": "procedural pretraining only",
              "pretrained_protocol": "pretrained + protocol"}
    fig, axes = plt.subplots(1, len(backends), figsize=(max(8.0, 5.2 * len(backends)), 3.8), squeeze=False)
    for ax, backend in zip(axes[0], backends):
        arms = [a for a in ARMS if a in results[backend]]
        pools = list(summary["pools"])
        x = np.arange(len(pools))
        width = 0.8 / max(1, len(arms))
        for k, arm in enumerate(arms):
            pos = x - 0.4 + width * (k + 0.5)
            p = results[backend][arm]["pools"]
            ys = [100 * (p[q]["pooled"]["success_rate"] or 0.0) for q in pools]
            lo = [y - 100 * (p[q]["pooled"]["ci95"] or [y / 100, y / 100])[0] for y, q in zip(ys, pools)]
            hi = [100 * (p[q]["pooled"]["ci95"] or [y / 100, y / 100])[1] - y for y, q in zip(ys, pools)]
            ax.bar(pos, ys, width=width * 0.95, color=colors[arm], label=labels[arm])
            ax.errorbar(pos, ys, yerr=[lo, hi], fmt="none", ecolor="black", capsize=2, lw=0.8)
            for xi, q in zip(pos, pools):
                seeds = [100 * (v["success_rate"] or 0.0) for v in p[q]["per_seed"].values()]
                ax.plot([xi] * len(seeds), seeds, "o", ms=2.5, color="black", alpha=0.6)
            for xi, y in zip(pos, ys):
                ax.text(xi, min(y, 99) + 1.5, f"{y:.0f}", ha="center", fontsize=6)
        for xi, q in zip(x, pools):
            target = TARGETS.get(q)
            if target:
                bar = 100 * next(iter(target.values()))
                ax.hlines(bar, xi - 0.45, xi + 0.45, colors="#c0392b", linestyles="dashed", lw=1)
        ax.set_xticks(x, pools, fontsize=8)
        ax.set_ylim(0, 110)
        ax.set_ylabel("closed-loop success (%)", fontsize=8)
        parameters = summary["model"]["parameters"]
        size = f"{parameters / 1e6:.1f}M" if parameters >= 1e6 else f"{parameters / 1e3:.0f}k"
        n_seeds = len(summary["seeds"])
        ax.set_title(f"{backend} ({size} parameters, {n_seeds} seed{'s' if n_seeds != 1 else ''})", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        ax.spines[["top", "right"]].set_visible(False)
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"Transfer without downloaded weights (budget {summary['budget']['name']}; dashed: target)", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    fig.savefig(path, dpi=150)
    plt.close(fig)


# --------------------------------------------------------------------------- the command


def run(config: TransferConfig, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The whole transfer experiment; writes ``inputs.json``, ``lanes/``, ``summary.json``, ``summary.png``,
    ``summary.csv`` and ``seeds/<seed>.json`` under ``config.out`` and returns the summary."""
    start = time.perf_counter()
    log = logger(config.progress, start)
    out = config.out_dir
    out.mkdir(parents=True, exist_ok=True)
    config.work_dir.mkdir(parents=True, exist_ok=True)
    inputs, record = build_inputs(config, log)
    record.update(versions=versions(), git_commit=git_commit(),
                  command=" ".join(["gencoord", "train", "transfer", *argv]) if argv is not None else None)
    (out / "inputs.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    lanes = lanes_for(config, inputs)
    log(f"{len(lanes)} lanes, {config.jobs} at a time, {lanes[0].threads} threads each, device {config.device or 'auto'}")
    t0 = time.perf_counter()
    failures = execute(lanes, config.jobs, log, _describe,
                       lambda: summarize(config, timing={"driver_wall": time.perf_counter() - start}, quiet=True))
    timing = {"lanes_wall": time.perf_counter() - t0, "driver_wall": time.perf_counter() - start}
    summary = summarize(config, failures=failures, timing=timing)
    log(f"wrote {out / 'summary.json'} ({summary['seconds']['driver_wall']:.1f} s)")
    return summary


def summarize(config: TransferConfig, failures: Sequence[str] = (), timing: Mapping[str, float] | None = None,
              quiet: bool = False) -> dict[str, Any]:
    """Build ``summary.json``, ``summary.png``, ``summary.csv`` and ``seeds/<seed>.json`` from ``inputs.json``
    and the lane files in ``config.out`` (those of ``config``'s seeds and backends that exist)."""
    t0 = time.perf_counter()
    out = Path(config.out)
    if not (out / "inputs.json").is_file():
        raise FileNotFoundError(f"{out / 'inputs.json'} does not exist; run `gencoord train transfer --out {out}` first")
    inputs = json.loads((out / "inputs.json").read_text(encoding="utf-8"))
    if "inputs" not in inputs:
        raise DataError(f"{out / 'inputs.json'} was written by an earlier version of the command; run the transfer again")
    lane_results = _lane_results(config, Inputs(**inputs["inputs"]))
    if not quiet:  # a model that does not fit its rows is said loudly, once, at the end
        for r in lane_results:
            for arm, a in r["arms"].items():
                if "fit" in a:
                    shout(a["fit"], f"{r['lane']} {arm}")
    results = analyze(lane_results, config)
    tokens, phases = _tokens_and_time(lane_results)
    parameters = next((run["parameters"] for r in lane_results for a in r["arms"].values() for run in a["runs"].values()), None)
    b = config.budget
    summary: dict[str, Any] = {
        "experiment": "transfer without downloaded weights: procedural pretraining, then the paper's rows",
        "seeds": list(config.seeds),
        "backends": list(config.backends),
        "pools": list(config.pools),
        "route": "forward",
        "lanes_done": len(lane_results),
        "lanes_expected": len(config.chains) * len(config.seeds) * len(config.backends),
        "arms": {"protocol_only": "random weights, the paper's rows only",
                 "procedural_only": "random weights, procedural rows only (the pretraining checkpoint)",
                 "pretrained_protocol": "the procedural checkpoint continued on the paper's rows (paper schedule)"},
        "targets": {k: dict(v) for k, v in TARGETS.items()},
        "budget": dataclasses.asdict(b),
        "model": {"arch": b.arch, "hidden_size": b.hidden_size, "layers": b.num_layers,
                  "vocabulary": inputs["tokenizer"]["vocabulary"], "parameters": parameters},
        "results": results,
        "coverage": coverage(lane_results, inputs),
        "codes": inputs.get("codes"),
        "fit": fit_summary(lane_results),
        "tokens": tokens,
        "seconds": {**{k: None for k in ("driver_wall", "lanes_wall")}, **(timing or {}), **inputs["seconds"],
                    "phases": phases,
                    "note": "phase seconds are per lane; lanes run concurrently on one device, so they overlap"},
        "devices": sorted({r["device"] for r in lane_results}),
        "jobs": config.jobs,
        "data": {"pool_seed": config.data_seed, "files": inputs["manifest"]["files"], "tokenizer": inputs["tokenizer"],
                 "lengths": inputs["lengths"]},
        "versions": inputs["versions"],
        "git_commit": inputs["git_commit"],
        "command": inputs["command"],
        "failures": list(failures),
    }
    seeds_dir = out / "seeds"
    seeds_dir.mkdir(exist_ok=True)
    for seed in config.seeds:
        # Small: no episode rows, token id lists or episode ids (played whole, episode k of a pool is cluster k // 2,
        # role k % 2; a subset is the harness's selection, the lane file names its episodes).
        mine = [{**{k: v for k, v in r.items() if k != "runs"}, "arms": {arm: {"runs": {k: {x: y for x, y in run.items() if x != "seen_token_ids"}
                                              for k, run in a["runs"].items()},
                                     "eval": {pool: {x: y for x, y in ev.items() if x != "episode_ids"}
                                              for pool, ev in a["eval"].items()}}
                               for arm, a in r["arms"].items()}}
                for r in lane_results if r["seed"] == seed]
        (seeds_dir / f"{seed}.json").write_text(json.dumps({"seed": seed, "lanes": mine}, indent=1, sort_keys=True) + "\n",
                                                encoding="utf-8")
    summary["seconds"]["analysis"] = time.perf_counter() - t0
    if lane_results and parameters is not None:
        plot(summary, out / "summary.png")
    _csv(results, out / "summary.csv")
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return summary


def fit_summary(lane_results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per backend, arm and seed: does the model fit its training rows (teacher-forced decision token, and
    the train pool closed-loop), with the decoding check's figure."""
    out: dict[str, Any] = {}
    for r in lane_results:
        for arm, a in r["arms"].items():
            if "fit" not in a:
                continue
            fit = a["runs"]["finetune"]["fit"] or {}
            play = a["fit"].get("train_pool") or {}
            check = a["eval"].get("heldout", {}).get("decode_check")
            out.setdefault(r["backend"], {}).setdefault(arm, {})[str(r["seed"])] = {
                "fits": a["fit"]["fits"],
                "reasons": a["fit"]["reasons"],
                "decision_accuracy": fit.get("decision_accuracy"),
                "decision_loss": fit.get("decision_loss"),
                "near_ties": fit.get("near_ties"),
                "row_exact": fit.get("row_exact"),
                "failing_cells": fit.get("failing_cells"),
                "train_pool": {k: play.get(k) for k in ("successes", "episodes", "failing_cells")} if play else None,
                "decode_check": check,
            }
    return out


def report_lines(summary: Mapping[str, Any]) -> list[str]:
    """A short text table of the pooled results (printed by the CLI)."""
    lines = []
    for backend, arms in summary.get("fit", {}).items():
        for arm, seeds in arms.items():
            for seed, f in seeds.items():
                tp = f["train_pool"]
                acc = f["decision_accuracy"]
                lines.append(f"fit {backend:11s} {arm:19s} {seed}: decision token {'-' if acc is None else f'{acc:.3f}'}"
                             + (f", train pool {tp['successes']}/{tp['episodes']}" if tp else "")
                             + ("  FITS" if f["fits"] else "  DOES NOT FIT"))
    for backend, arms in summary["results"].items():
        for arm in ARMS:
            if arm not in arms:
                continue
            cells = []
            for pool, p in arms[arm]["pools"].items():
                c = p["pooled"]
                met = c.get("target", {}).get("met")
                cells.append(f"{pool} {100 * (c['success_rate'] or 0):5.1f}% ({c['strict_clusters']}/{c['clusters']})"
                             + ("" if met is None else (" ok" if met else " --")))
            lines.append(f"{backend:11s} {arm:19s} " + "  ".join(cells))
            roles = [pool + " " + " / ".join(f"{100 * r['success_rate']:.0f}%" for r in p["pooled"]["by_role"].values())
                     for pool, p in arms[arm]["pools"].items() if "by_role" in p["pooled"]]
            if roles:
                lines.append(f"{'':31s} as sender / as receiver beside the rule agent: " + "  ".join(roles))
    return lines
