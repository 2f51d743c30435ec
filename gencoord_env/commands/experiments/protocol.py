"""``gencoord evaluate``: any policy pair on a pool, with intervals over clusters and seeds; cross-play over a
partner zoo.

    gencoord evaluate --first rule --second random --pool heldout
    gencoord evaluate --first 'rl:runs/slots_seed{seed}.pt' --second 'rl:runs/slots_seed{seed}.pt' --seeds 0 1 2
    gencoord evaluate --first rule --second 'rl:runs/slots_seed{seed}.pt' --seeds 0 1 2 --episodes 64
    gencoord evaluate --zoo 'slots=rl:runs/slots_seed{seed}.pt' rule=rule random=random --seeds 0 1 2 --out xp/

A policy is named as everywhere else (``gencoord_env.agents.registry``): a rule agent (``rule``, ``tfidf``,
``random``, ``frozen_parser``, ...), ``model:PATH`` (an LM checkpoint in the format it records) or
``rl:PATH[#ACTOR]`` (a menu learner's checkpoint). ``{seed}`` in a name is replaced by each of ``--seeds``:
one training run per seed (a name without it is the same policy at every seed; ``random`` draws with the
seed). Episodes are played on text actions, which every policy speaks (a menu learner builds its own menu
from the deciding agent's context), on the sim unless ``--backend minecraft``.

**A pair.** The first policy plays the template's first role (sender, requester), the second every other
role; at seed s the runs of seed s meet. The score is the success rate over every selected episode (every
cluster of the pool under both role permutations; ``--episodes N``: ``ceil(N / 2)`` clusters, picked as
``gencoord experiment`` picks them). Its 95% interval resamples the clusters (the independent unit) and, with
several seeds, the seeds too, independently (``stats.two_way_bootstrap_ci``): with three runs of a learner
the interval holds the spread between runs, which a cluster bootstrap of the pooled episodes hides. Where
every cluster succeeds (or fails) at every seed, the interval is the exact binomial one over the clusters.

**Cross-play.** ``--zoo NAME=POLICY ...`` (with ``{seed}``: one member ``NAME/s`` per seed) plays every
ordered pair of members: ``M[i][j]`` is the success of i in the first role beside j in the others (the
diagonal is self-play). Zero-shot coordination scores, per group of members (the seeds of one learner;
a member without seeds is a group of one), each with a two-way interval over member pairs and clusters:

- ``self_play``: the diagonal of the group's members;
- ``cross_play``: the group's members with each other, i != j (the zero-shot coordination score of
  independently trained seeds: a learner whose runs each found their own convention scores low here);
- ``with_others``: the group's members with every member outside the group, in both role orders.

Output (``--out DIR``): ``pair.json`` or ``crossplay.json`` (every cell's per-cluster success, so nothing needs
a re-run), ``crossplay.md`` and ``crossplay.png`` (the matrix as a picture; needs matplotlib).
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gencoord_env.commands.experiments.specs import Condition
from gencoord_env.commands.experiments.stats import exact_ci, two_way_bootstrap_ci
from gencoord_env.errors import UsageError

SEED_FIELD = "{seed}"


@dataclass(frozen=True)
class Setting:
    """Where a pair plays: the env's arguments and which episodes."""

    pool: str = "heldout"
    route: str = "forward"
    view: str = "full"
    surface: str = "dsl"
    private_fact: str = "id"
    intervention: str | None = None  # a gencoord_env.wrappers.INTERVENTIONS name, e.g. RequestRemoval
    episodes: int | None = None
    pool_seed: int = 0
    backend: str = "sim"

    def condition(self, name: str = "pair") -> Condition:
        return Condition(name, self.pool, "", route=self.route, view=self.view, surface=self.surface,
                         private_fact=self.private_fact, intervention=self.intervention)


class Pair:
    """One policy for the first role, another for every other role (a policy interface itself)."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second

    @property
    def model_calls(self) -> int:
        sides = (self.first,) if self.first is self.second else (self.first, self.second)
        return sum(int(getattr(p, "model_calls", 0)) for p in sides)

    def side(self, info: Mapping[str, Any]) -> Any:
        context = info.get("context")
        if context is None:
            raise UsageError("a pair reads the deciding agent's role from its context: pass the full infos")
        return self.first if context.role == context.prior.roles[0] else self.second

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return str(self.side(info).act(observation, info))

    def act_batch(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        return [self.act(o, i) for o, i in zip(observations, infos)]


def make_named(name: str, seed: int | None = None) -> Any:
    """The policy ``name`` names (``{seed}`` replaced by ``seed``); a rule agent that draws gets the seed."""
    from gencoord_env.agents.registry import POLICIES, make_policy, policy_class

    if SEED_FIELD in name:
        if seed is None:
            raise UsageError(f"{name!r} has {SEED_FIELD} but no seed was given (--seeds)")
        name = name.replace(SEED_FIELD, str(seed))
    if name in POLICIES and seed is not None and "seed" in inspect.signature(policy_class(name)).parameters:
        return make_policy(name, seed=seed)
    return make_policy(name)


@dataclass
class Score:
    """A success rate with its interval: ``table`` is units (seeds, or member pairs) x clusters."""

    table: np.ndarray
    clusters: list[str]
    units: list[str]
    interval: tuple[float, float] | None = field(init=False)

    def __post_init__(self) -> None:
        if self.table.size and np.all(self.table == self.table.flat[0]) and self.table.flat[0] in (0.0, 1.0):
            # every cluster succeeded (or failed) in every unit: a resampling interval of constant data says
            # nothing, so the exact binomial interval over the clusters (the independent unit), as stats does
            n = self.table.shape[1]
            self.interval = exact_ci(int(round(self.table.flat[0] * n)), n)
        else:
            self.interval = two_way_bootstrap_ci(self.table)

    @classmethod
    def of(cls, per_unit: Mapping[str, Mapping[str, float]]) -> Score:
        """From each unit's per-cluster success (every unit has the same clusters)."""
        units = list(per_unit)
        clusters = list(next(iter(per_unit.values())))
        return cls(np.array([[per_unit[u][c] for c in clusters] for u in units], dtype=float), clusters, units)

    @property
    def success(self) -> float:
        return float(self.table.mean()) if self.table.size else float("nan")

    def per_cluster(self, unit: str) -> dict[str, float]:
        """One unit's success of each cluster."""
        return dict(zip(self.clusters, self.table[self.units.index(unit)].tolist()))

    def to_json(self) -> dict[str, Any]:
        return {"success": self.success, "ci95": list(self.interval) if self.interval else None,
                "units": self.units, "clusters": len(self.clusters),
                "per_unit": {u: float(r.mean()) for u, r in zip(self.units, self.table)}}

    def cell(self) -> str:
        lo, hi = self.interval or (float("nan"), float("nan"))
        return f"{self.success:.3f} [{lo:.3f}, {hi:.3f}]"


def play(first: Any, second: Any, setting: Setting, world: Any = None) -> dict[str, float]:
    """Success of each cluster (mean over its role permutations) with ``first`` and ``second``."""
    from gencoord_env.commands.experiments.runner import run_condition

    rows = run_condition(setting.condition(), Pair(first, second), backend=setting.backend, world=world,
                         episodes=setting.episodes, pool_seed=setting.pool_seed)
    out: dict[str, list[float]] = {}
    for r in rows:
        out.setdefault(r.cluster, []).append(float(r.success))
    return {c: sum(v) / len(v) for c, v in out.items()}


def evaluate_pair(first: str, second: str, setting: Setting, seeds: Sequence[int | None] = (None,)) -> Score:
    """The pair's success over ``seeds`` (the runs of seed s meet at seed s) with its interval."""
    return Score.of({str(s): play(make_named(first, s), make_named(second, s), setting) for s in seeds})


def zoo_members(zoo: Sequence[str], seeds: Sequence[int]) -> dict[str, tuple[str, str, int | None]]:
    """member name -> (group, policy name, seed) from ``NAME=POLICY`` entries (``{seed}``: one member per seed)."""
    out: dict[str, tuple[str, str, int | None]] = {}
    for entry in zoo:
        group, sep, name = entry.partition("=")
        if not sep or not group or not name:
            raise UsageError(f"a zoo member is NAME=POLICY (e.g. rule=rule, 'slots=rl:runs/s{SEED_FIELD}.pt'); got {entry!r}")
        if SEED_FIELD in name:
            if not seeds:
                raise UsageError(f"zoo member {entry!r} has {SEED_FIELD}: give --seeds")
            out.update({f"{group}/{s}": (group, name, s) for s in seeds})
        else:
            out[group] = (group, name, None)
    return out


@dataclass
class CrossPlay:
    """Every ordered pair of a zoo: ``cells[(i, j)]`` the per-cluster success of i first, j second."""

    members: dict[str, tuple[str, str, int | None]]
    cells: dict[tuple[str, str], dict[str, float]]
    setting: Setting

    @property
    def names(self) -> list[str]:
        return list(self.members)

    def matrix(self) -> np.ndarray:
        return np.array([[np.mean(list(self.cells[i, j].values())) for j in self.names] for i in self.names])

    def groups(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for name, (group, _, _) in self.members.items():
            out.setdefault(group, []).append(name)
        return out

    def scores(self) -> dict[str, dict[str, Score | None]]:
        """Per group: ``self_play``, ``cross_play`` (None for a group of one), ``with_others`` (see the module docstring)."""
        out: dict[str, dict[str, Score | None]] = {}
        for group, mine in self.groups().items():
            others = [n for n in self.names if n not in mine]
            pick = {
                "self_play": [(i, i) for i in mine],
                "cross_play": [(i, j) for i in mine for j in mine if i != j],
                "with_others": [p for i in mine for j in others for p in ((i, j), (j, i))],
            }
            out[group] = {k: Score.of({f"{i}|{j}": self.cells[i, j] for i, j in pairs}) if pairs else None
                          for k, pairs in pick.items()}
        return out

    def to_json(self) -> dict[str, Any]:
        return {"setting": self.setting.__dict__, "members": {n: {"group": g, "policy": p, "seed": s}
                                                             for n, (g, p, s) in self.members.items()},
                "matrix": self.matrix().tolist(),
                "cells": [{"first": i, "second": j, "clusters": c} for (i, j), c in self.cells.items()],
                "scores": {g: {k: v.to_json() if v else None for k, v in s.items()} for g, s in self.scores().items()}}

    def table(self) -> str:
        """The zero-shot coordination scores as a Markdown table."""
        lines = ["| group | members | self-play | cross-play (its seeds with each other) | with the rest of the zoo |",
                 "| --- | --- | --- | --- | --- |"]
        groups = self.groups()
        for group, s in self.scores().items():
            cells = [v.cell() if v is not None else "-" for v in (s["self_play"], s["cross_play"], s["with_others"])]
            lines.append(f"| {group} | {len(groups[group])} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def plot(self, path: Path, title: str = "") -> Path:
        """The matrix as a heatmap, each cell's success written in it, groups fenced by lines."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        m, names = self.matrix(), self.names
        size = max(4.0, 0.55 * len(names) + 2.5)
        fig, ax = plt.subplots(figsize=(size + 1.0, size))
        image = ax.imshow(m, vmin=0.0, vmax=1.0, cmap="viridis")
        for i in range(len(names)):
            for j in range(len(names)):
                ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if m[i, j] > 0.6 else "white")
        edges = np.cumsum([len(v) for v in self.groups().values()])[:-1] - 0.5
        for e in edges:
            ax.axhline(e, color="white", linewidth=1.5)
            ax.axvline(e, color="white", linewidth=1.5)
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.set_xlabel("second role (receiver)")
        ax.set_ylabel("first role (sender)")
        ax.set_title(title or f"cross-play success, {self.setting.pool} pool")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="success")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path


def cross_play(zoo: Sequence[str], setting: Setting, seeds: Sequence[int] = (),
               progress: Callable[[str, str], None] | None = None) -> CrossPlay:
    """Play every ordered pair of the zoo's members (each policy made once)."""
    members = zoo_members(zoo, seeds)
    policies = {n: make_named(p, s) for n, (_, p, s) in members.items()}
    cells = {}
    for i in members:
        for j in members:
            if progress is not None:
                progress(i, j)
            cells[i, j] = play(policies[i], policies[j], setting)
    return CrossPlay(members, cells, setting)


def build_parser() -> argparse.ArgumentParser:
    from gencoord_env.commands.cli import Parser, policy_help

    ap = Parser(prog="gencoord evaluate", description=__doc__.splitlines()[0])
    ap.add_argument("--first", help=f"the first role's policy: {policy_help()}; {SEED_FIELD} takes each seed")
    ap.add_argument("--second", help="every other role's policy (default: the same as --first)")
    ap.add_argument("--zoo", nargs="+", metavar="NAME=POLICY", help="cross-play every ordered pair of these")
    ap.add_argument("--seeds", type=int, nargs="+", default=[], help=f"the seeds {SEED_FIELD} takes")
    ap.add_argument("--pool", default="heldout")
    ap.add_argument("--route", default="forward")
    ap.add_argument("--view", default="full")
    ap.add_argument("--surface", default="dsl")
    ap.add_argument("--private-fact", default="id")
    ap.add_argument("--intervention", default=None, help="e.g. RequestRemoval")
    ap.add_argument("--episodes", type=int, default=None, help="at most this many episodes (ceil(N/2) clusters, both roles)")
    ap.add_argument("--pool-seed", type=int, default=0)
    ap.add_argument("--backend", default="sim")
    ap.add_argument("--out", default=None, help="folder for pair.json, or crossplay.json, .md and .png")
    return ap


def provenance(command: str, argv: Sequence[str], seconds: float) -> dict[str, Any]:
    """What produced a result and where: the command line, the machine and its load average at the end."""
    return {"command": " ".join([command, *(shlex.quote(a) for a in argv)]), "seconds": round(seconds),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "python": platform.python_version(),
            "load": [round(x, 1) for x in os.getloadavg()]}


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(given)
    start = time.perf_counter()
    if (args.zoo is None) == (args.first is None):
        print("error: give --first [--second] for one pair, or --zoo for cross-play", file=sys.stderr)
        return 2
    setting = Setting(args.pool, args.route, args.view, args.surface, args.private_fact, args.intervention,
                      args.episodes, args.pool_seed, args.backend)
    out = Path(args.out) if args.out else None
    try:
        if args.first is not None:
            seeds: list[int | None] = list(args.seeds) or [None]
            score = evaluate_pair(args.first, args.second or args.first, setting, seeds)
            print(f"{args.first} | {args.second or args.first} on {setting.pool}: {score.cell()} "
                  f"({len(score.clusters)} clusters x {len(score.units)} seeds)")
            if out is not None:
                out.mkdir(parents=True, exist_ok=True)
                (out / "pair.json").write_text(json.dumps({"first": args.first, "second": args.second or args.first,
                                                           "setting": setting.__dict__, **score.to_json(),
                                                           "provenance": provenance("gencoord evaluate", given, time.perf_counter() - start)},
                                                          indent=1) + "\n")
            return 0
        names = list(zoo_members(args.zoo, args.seeds))
        xp = cross_play(args.zoo, setting, args.seeds, progress=lambda i, j: print(  # a line per row of the matrix
            f"row {names.index(i) + 1}/{len(names)}: {i} first", file=sys.stderr, flush=True) if j == names[0] else None)
        print(xp.table())
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / "crossplay.json").write_text(json.dumps({**xp.to_json(), "provenance": provenance(
                "gencoord evaluate", given, time.perf_counter() - start)}, indent=1) + "\n")
            (out / "crossplay.md").write_text(xp.table() + "\n")
            xp.plot(out / "crossplay.png")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


__all__ = ["CrossPlay", "Pair", "Score", "Setting", "cross_play", "evaluate_pair", "main", "make_named", "play", "provenance", "zoo_members"]
