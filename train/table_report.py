"""``gencoord train tables``: the specs of :mod:`gencoord_env.train.tables` run through the pipeline, and the outputs:
per table ``results.json``, ``<table>.png`` and ``provenance.json``, and ``TABLES.md`` with every table (ours,
the paper's figure in parentheses).

:func:`run` builds the inputs (every model's set, one scratch tokenizer), plays the seedless rule rows once
through the harness (kept in ``work/rules.json``), runs the lanes (:func:`gencoord_env.train.pipeline.execute`)
and writes the outputs; :func:`summarize` writes them from the work folder alone (``--summarize-only``).

The numbers are the experiment harness's (:func:`gencoord_env.commands.experiments.analysis.analyze`: per condition,
success with its cluster-bootstrap interval, strict clusters with their exact interval, decisions, tokens,
bytes, TTC, ``versus`` minus condition), over every seed's rows of a learned condition. Beside them each
record says which model played it (``model``, ``seeds``, ``success_by_seed``), how many episodes it played
of how many its selection holds (``episodes``, ``pool_episodes``; ``subset`` when fewer), and, in the
timing tables, which pool its costs come from (``cost``).
"""
from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gencoord_env.agents import make_policy
from gencoord_env.commands.experiments.analysis import analyze, matrix
from gencoord_env.commands.experiments.plot import plot
from gencoord_env.commands.experiments.report import fmt, fmt_ci
from gencoord_env.commands.experiments.runner import EpisodeRow, episode_indices, run_condition
from gencoord_env.errors import DataError
from gencoord_env.train.fit import template_of
from gencoord_env.train.lanes import git_commit, versions
from gencoord_env.train.pipeline import Inputs, execute, logger, prepare, rows_of
from gencoord_env.train.sft import tree_sha256
from gencoord_env.train.tables import ALL_SETS, MODELS, TABLES, TIMING, TIMING_CLUSTERS, TablesConfig, corpus, lanes_for

__all__ = ["COST_KEYS", "by_template", "markdown", "run", "summarize", "table_records", "write_all"]

#: Record keys the timing tables take from the batch-1 timing pool instead of the whole pool.
COST_KEYS: tuple[str, ...] = (
    "calls_per_episode", "model_calls_per_episode", "input_tokens_per_episode", "output_tokens_per_episode",
    "request_bytes_mean", "request_bytes_p95", "response_bytes_mean", "response_bytes_p95", "wire_bytes_mean",
    "wire_bytes_p95", "time_to_commitment_p50", "time_to_commitment_p95", "episode_seconds_p50", "episode_seconds_p95",
)


def _rows(raw: Sequence[Mapping[str, Any]]) -> list[EpisodeRow]:
    return rows_of(raw)


def _model_run(lane: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """A tables lane's model and its run entry (a tables lane trains one model)."""
    (model, entry), = lane["runs"].items()
    return model, entry


def table_records(name: str, lanes: Sequence[Mapping[str, Any]], rules: Mapping[str, Any], pool_seed: int = 0) -> list[dict[str, Any]]:
    """One record per condition of table ``name`` that has rows: learned conditions pool every seed's lane."""
    table = TABLES[name]
    quality: dict[str, list[EpisodeRow]] = {}
    timing: dict[str, list[EpisodeRow]] = {}
    names: dict[str, str] = {}
    seeds: dict[str, dict[int, float | None]] = {}
    for c in table.experiment.conditions:
        key = f"{name}/{c.name}"
        model = table.models.get(c.name)
        if model is None:
            if key in rules["conditions"]:
                quality[c.name] = _rows(rules["conditions"][key])
                names[c.name] = c.policy
            continue
        mine = [(lane, plays) for lane in lanes for m, run in [_model_run(lane)] if m == model
                for plays in [run["plays"]] if key in plays]
        if not mine:
            continue
        names[c.name] = f"model:{model}"
        quality[c.name] = [r for _, plays in mine for r in _rows(plays[key]["rows"])]
        if table.timing:
            timing[c.name] = [r for _, plays in mine for r in _rows(plays[key + TIMING]["rows"])]
        seeds[c.name] = {}
        for lane, plays in mine:
            rows = plays[key]["rows"]
            seeds[c.name][lane["seed"]] = sum(r["outcome"] == "SUCCESS" for r in rows) / len(rows) if rows else None
    records = analyze(table.experiment, quality, names)
    for r in records:
        r["by_template"] = by_template(quality[r["condition"]])
    costs = {r["condition"]: r for r in analyze(table.experiment, timing, names)} if timing else {}
    by_name = {c.name: c for c in table.experiment.conditions}
    for r in records:
        c = by_name[r["condition"]]
        model = table.models.get(c.name)
        runs = len(seeds[c.name]) if model else 1
        r["model"] = model
        r["seeds"] = sorted(seeds[c.name]) if model else []
        r["success_by_seed"] = {str(k): v for k, v in sorted(seeds[c.name].items())} if model else {}
        r["pool_episodes"] = len(episode_indices(c, None, pool_seed)) * runs
        r["subset"] = r["episodes"] < r["pool_episodes"]
        if c.name in costs:
            cost = costs[c.name]
            r.update({k: cost.get(k) for k in COST_KEYS})
            r["cost"] = {"pool": f"timing pool: {TIMING_CLUSTERS} clusters x 2 roles at batch 1 (the harness's serial path), "
                                 "after one unrecorded warm-up pass of the lane",
                         "episodes": cost["episodes"], "clusters": cost["clusters"], "success_rate": cost["success_rate"]}
        elif model:
            r["cost"] = {"pool": "the quality pool, played in lockstep batches (no time to commitment)"}
    return records


def by_template(rows: Sequence[EpisodeRow]) -> dict[str, dict[str, int]]:
    """Episodes and successes per template (seeds and roles pooled): where a condition fails."""
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        cell = out.setdefault(template_of(r.episode_id), {"episodes": 0, "successes": 0})
        cell["episodes"] += 1
        cell["successes"] += r.outcome == "SUCCESS"
    return dict(sorted(out.items()))


def _lane_provenance(lane: Mapping[str, Any]) -> dict[str, Any]:
    _, run = _model_run(lane)
    quality = sum(p["seconds"] for n, p in run["plays"].items() if not n.endswith(TIMING))
    timing = sum(p["seconds"] for n, p in run["plays"].items() if n.endswith(TIMING))
    return {**{k: v for k, v in run["summary"].items() if k != "seen_token_ids"}, "device": lane["device"],
            "decode": run["decode"], "static_decode_failure": run["static_decode_failure"],
            "timing_warm_up": run["timing_warm_up"],
            "seconds": {"train": run["seconds"]["train"], "eval_quality": quality, "eval_timing": timing}}


def _provenance(config: TablesConfig, name: str, run_info: Mapping[str, Any], rules: Mapping[str, Any],
                lanes: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    table = TABLES[name]
    models = sorted(set(table.models.values()), key=list(MODELS).index)
    mine = [(_model_run(lane)[0], lane, _lane_provenance(lane)) for lane in lanes if _model_run(lane)[0] in models]
    phases: dict[str, dict[str, float]] = {}
    for _, _, prov in mine:
        for phase, s in prov["seconds"].items():
            p = phases.setdefault(phase, {"sum": 0.0, "max": 0.0})
            p["sum"] += s
            p["max"] = max(p["max"], s)
    files = run_info["manifest"]["files"]
    return {
        "table": name,
        "experiment": table.experiment.name,
        "command": run_info["command"],
        "git_commit": run_info["git_commit"],
        "versions": run_info["versions"],
        "budget": dataclasses.asdict(config.budget),
        "seeds": list(config.seeds),
        "source": {"scratch": config.scratch} if config.scratch else {"init": run_info["init"]},
        "data": {"pool_seed": run_info["manifest"]["pool_seed"],
                 "files": {MODELS[m].data: files[MODELS[m].data] for m in models}},
        "tokenizer": run_info["tokenizer"],
        "models": {m: {"about": MODELS[m].about, "data": MODELS[m].data, "format": MODELS[m].format,
                       "conditions": [c for c, x in table.models.items() if x == m],
                       "seeds": {str(lane["seed"]): prov for model, lane, prov in mine if model == m}}
                   for m in models},
        "lanes": {"expected": len(config.seeds) * len(models), "done": len(mine)},
        "devices": sorted({lane["device"] for _, lane, _ in mine}),
        "seconds": {"phases": phases, "lanes": {f"{lane['seed']}/{model}": prov["seconds"] for model, lane, prov in mine},
                    "rules_all_tables": rules["seconds"], **{k: v for k, v in run_info["seconds"].items() if k != "rules"},
                    "note": "wall seconds per lane on its device (train, eval_quality, eval_timing); lanes share "
                            "devices, so they overlap"},
        "rule_conditions": {r["condition"]: r["episodes"] for r in records if not r["model"]},
        "failures": [f for f in run_info.get("failures", []) if f.split(":", 1)[0].split("/")[-1] in models],
    }


def _results(config: TablesConfig, name: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    table = TABLES[name]
    subset = any(r["subset"] for r in records)
    b = config.budget
    out: dict[str, Any] = {
        "table": name,
        "title": table.experiment.title,
        "paper_source": table.experiment.paper_source,
        "backend": "sim",
        "budget": b.name,
        "seeds": list(config.seeds),
        "columns": [list(c) for c in table.columns],
        "subset": subset,
        "note": ((f"budget {b.name}: each learned condition plays at most {b.eval_episodes} episodes a seed and each "
                  f"rule condition at most {b.rule_episodes}, the harness's deterministic subset (both roles of "
                  "each picked cluster); 'episodes' of 'pool_episodes' says how many")
                 if subset else "every episode of every condition's selection (all clusters, both roles, every seed)"),
        "conditions": records,
    }
    if table.experiment.matrix_rows:
        out["matrix"] = matrix(table.experiment, records)
    return out


def _cell(key: str, record: Mapping[str, Any]) -> str:
    ours, paper = fmt(key, record.get(key), record), fmt(key, record.get("paper", {}).get(key))
    return ours if paper == "\u2014" else f"{ours} ({paper})"


def _paired(record: Mapping[str, Any]) -> str:
    def one(effect: Mapping[str, Any] | None) -> str | None:
        if not effect:
            return None
        ci = effect.get("ci95")
        return f"{100 * effect['versus_minus_condition']:+.1f} pp" + (f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else "")

    ours = one((record.get("paired") or {}).get("success"))
    paper = one((record.get("paper", {}).get("paired") or {}).get("success"))
    if ours is None:
        return "\u2014"
    return ours if paper is None else f"{ours} ({paper})"


def markdown(results: Sequence[Mapping[str, Any]], header: Mapping[str, Any]) -> str:
    """Every table as markdown: each cell ours, then the paper's figure in parentheses."""
    lines = ["# Learned rows of the paper's tables", "",
             f"Budget `{header['budget']}`, seeds {', '.join(map(str, header['seeds']))}, models from "
             f"{header['source']}, sim backend, closed loop. Each cell: ours (the paper's figure). "
             "Intervals: 95% cluster bootstrap (seeds and roles averaged within a cluster).", ""]
    if header.get("command"):
        lines += ["    " + header["command"], ""]
    for res in results:
        lines += [f"## {res['title']} (`{res['table']}`)", "", f"Paper: {res['paper_source']}. {res['note'][0].upper()}{res['note'][1:]}.", ""]
        cols = [tuple(c) for c in res["columns"]]
        head = ["condition", "model", "episodes", *(h for _, h in cols), "95% CI (cluster)", "versus \u2212 this"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in res["conditions"]:
            episodes = f"{r['episodes']}" + (f" of {r['pool_episodes']}" if r["subset"] else "")
            if r.get("cost", {}).get("episodes") is not None:
                episodes += f"; cost {r['cost']['episodes']}"
            cells = [r["condition"], r["model"] or f"rule: {r['policy']}", episodes, *(_cell(k, r) for k, _ in cols),
                     fmt_ci(r.get("success_ci95")), _paired(r)]
            lines.append("| " + " | ".join(cells) + " |")
        if "matrix" in res:
            m = res["matrix"]
            lines += ["", "| method | " + " | ".join(m["columns"]) + " |", "|" + "---|" * (len(m["columns"]) + 1)]
            for i, row in enumerate(m["rows"]):
                cells = []
                for j in range(len(m["columns"])):
                    ours, paper = fmt("success_rate", m["success"][i][j]), fmt("success_rate", m["paper"][i][j])
                    cells.append(ours if paper == "\u2014" else f"{ours} ({paper})")
                lines.append(f"| {row} | " + " | ".join(cells) + " |")
        lines += _template_lines(res["conditions"])
        lines.append("")
    return "\n".join(lines)


def _template_lines(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Successes / episodes of each learned condition per template (every seed and role pooled)."""
    learned = [r for r in records if r.get("model") and r.get("by_template")]
    if not learned:
        return []
    templates = sorted({t for r in learned for t in r["by_template"]})
    lines = ["", "Learned conditions per template (successes / episodes, every seed and role):", "",
             "| condition | " + " | ".join(templates) + " |", "|" + "---|" * (len(templates) + 1)]
    for r in learned:
        cells = [f"{c['successes']}/{c['episodes']}" if (c := r["by_template"].get(t)) else "\u2014" for t in templates]
        lines.append(f"| {r['condition']} | " + " | ".join(cells) + " |")
    return lines


def write_all(config: TablesConfig, run_info: Mapping[str, Any], rules: Mapping[str, Any],
              lanes: Sequence[Mapping[str, Any]], quiet: bool = False) -> dict[str, Any]:
    """Write every asked table's folder and ``TABLES.md``; returns ``{"tables": {name: results}, ...}``."""
    out = Path(config.out)
    everything = []
    for name in config.tables:
        records = table_records(name, lanes, rules, config.data_seed)
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        results = _results(config, name, records)
        (folder / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        prov = _provenance(config, name, run_info, rules, lanes, records)
        (folder / "provenance.json").write_text(json.dumps(prov, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        if records:
            plot(TABLES[name].experiment, records, "sim", folder / f"{name}.png")
        everything.append(results)
    header = {"budget": config.budget.name, "seeds": list(config.seeds), "command": run_info["command"],
              "source": f"scratch ({config.scratch})" if config.scratch else f"the checkpoint {run_info['init']['dir']}"}
    (out / "TABLES.md").write_text(markdown(everything, header), encoding="utf-8")
    return {"tables": {r["table"]: r for r in everything}, "failures": list(run_info.get("failures", [])), "out": str(out)}


# --------------------------------------------------------------------------- the command


def _rule_rows(config: TablesConfig, log: Callable[[str], None], previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every rule condition of the asked tables, played once (seedless) through the harness's serial path; the
    rows of ``previous`` (the work folder's earlier ``rules.json``) are kept, and reused, when they were played
    with the same episodes and pool seed, so tables asked for in separate commands summarize together."""
    t0 = time.perf_counter()
    settings = {"episodes": config.budget.rule_episodes, "pool_seed": config.data_seed}
    out: dict[str, Any] = dict(previous["conditions"]) if previous and previous.get("settings") == settings else {}
    played = 0
    for name in config.tables:
        table = TABLES[name]
        for c in table.experiment.conditions:
            if c.name in table.models or c.only_with_policy or f"{name}/{c.name}" in out:
                continue
            rows = run_condition(c, make_policy(c.policy), backend="sim", episodes=config.budget.rule_episodes,
                                 pool_seed=config.data_seed)
            out[f"{name}/{c.name}"] = [r.to_json() for r in rows]
            played += 1
    seconds = time.perf_counter() - t0
    log(f"rule rows: {played} conditions played, {len(out) - played} kept ({seconds:.1f} s)")
    return {"seconds": seconds, "settings": settings, "conditions": out}


def _describe(result: Mapping[str, Any]) -> str:
    model, run = _model_run(result)
    quality = {n: p["rows"] for n, p in run["plays"].items() if not n.endswith(TIMING)}
    cells = [f"{n} {sum(r['outcome'] == 'SUCCESS' for r in rows)}/{len(rows)}" for n, rows in quality.items()]
    return f"loss {run['summary']['loss_final']:.3f}, " + ", ".join(cells[:6]) + (" ..." if len(cells) > 6 else "")


def run(config: TablesConfig, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Every asked table: data, tokenizer, rule rows, lanes, then the outputs (see the module docstring).

    Returns what :func:`summarize` returns.
    """
    start = time.perf_counter()
    log = logger(config.progress, start)
    out, work = Path(config.out), config.work_dir
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    inputs = prepare(work, ALL_SETS, corpus(config) if config.scratch else None, pool_seed=config.data_seed, log=log)
    init = {"dir": Path(config.init).name, "tree_sha256": tree_sha256(config.init)[0]} if config.init else None
    rules_path = work / "rules.json"
    rules = _rule_rows(config, log, json.loads(rules_path.read_text(encoding="utf-8")) if rules_path.is_file() else None)
    rules_path.write_text(json.dumps(rules) + "\n", encoding="utf-8")
    manifest = json.loads((Path(inputs.data) / "manifest.json").read_text(encoding="utf-8"))
    tokenizer = None
    if inputs.tokenizer:
        tokenizer = {"sha256": inputs.tokenizer_sha256,
                     "corpus": json.loads((Path(inputs.tokenizer) / "corpus.json").read_text(encoding="utf-8"))}
    run_info = {"command": " ".join(["gencoord", "train", "tables", *argv]) if argv is not None else None,
                "git_commit": git_commit(), "versions": versions(), "manifest": manifest, "tokenizer": tokenizer,
                "init": init, "inputs": dataclasses.asdict(inputs), "seconds": {"rules": rules["seconds"]}}
    (work / "run.json").write_text(json.dumps(run_info, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    lanes = lanes_for(config, inputs)
    log(f"{len(lanes)} lanes ({len(config.seeds)} seeds x {len(config.models())} models), {config.jobs} at a time, "
        f"{lanes[0].threads} threads each, device {config.device or 'auto'}")
    t0 = time.perf_counter()
    failures = execute(lanes, config.jobs, log, _describe, lambda: summarize(config, quiet=True))
    run_info["seconds"].update(lanes_wall=time.perf_counter() - t0, driver_wall=time.perf_counter() - start)
    run_info["failures"] = failures
    (work / "run.json").write_text(json.dumps(run_info, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    summary = summarize(config)
    log(f"wrote {out / 'TABLES.md'} and {len(config.tables)} table folders ({time.perf_counter() - start:.1f} s)")
    return summary


def summarize(config: TablesConfig, quiet: bool = False) -> dict[str, Any]:
    """Write every table's outputs and ``TABLES.md`` from ``work``'s lane files, rule rows and run record
    (the lanes that exist: a run cut short gives the rows that finished)."""
    work = config.work_dir
    if not (work / "run.json").is_file():
        raise FileNotFoundError(f"{work / 'run.json'} does not exist; run `gencoord train tables --out {config.out}` first")
    run_info = json.loads((work / "run.json").read_text(encoding="utf-8"))
    if not isinstance(run_info.get("inputs"), Mapping) or "sets" not in run_info["inputs"]:
        raise DataError(f"{work / 'run.json'} was written by an earlier version of the command; run the tables again")
    rules = json.loads((work / "rules.json").read_text(encoding="utf-8"))
    results = []
    for lane in lanes_for(config, Inputs(**run_info["inputs"])):
        if lane.result_path.is_file():
            result = json.loads(lane.result_path.read_text(encoding="utf-8"))
            if result.get("key") == lane.key():  # not a lane of other settings left in the same work folder
                results.append(result)
    return write_all(config, run_info, rules, results, quiet=quiet)
