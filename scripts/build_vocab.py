"""Build ``gencoord_env/data/vocab.json``: the word vocabulary of the package's token observations.

Every word the environment writes into an observation - played through every pool and route (the team
pools on every team route) with the rule agents, on the sim - plus every outcome name, every Minecraft
item name and every catalog skill path. Append-only: the words already in the file keep their ids (a
model trained on token or bag observations keeps its meaning), new words follow in sorted order, so the
file is deterministic. Run from the repository root after changing templates, the catalog or contexts:

    python scripts/build_vocab.py
"""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.catalog import CATALOG
from gencoord_env.envs.gencoord.routes import TEAM_ROUTES, unsolvable
from gencoord_env.outcomes import FailureCode
from gencoord_env.tasks import POOL_SIZES, TEAM_POOLS
from gencoord_env.tasks.pools import pool_episodes
from gencoord_env.tokens import SPECIALS, WORD_RE


def runs() -> list[tuple[str, str, str]]:
    """(pool, route, surface) of every observation the vocabulary covers."""
    out = []
    for pool in POOL_SIZES:
        routes = ("feedback", "requester_only", "centralized") if pool == "goal_capability" else ("forward", "single_step")
        for route in routes:
            out += [(pool, route, s) for s in (("dsl", "json", "freeform") if route == "forward" else ("dsl",))]
    out += [(pool, route, s) for pool in TEAM_POOLS for route in TEAM_ROUTES for s in ("dsl", "json")
            if not any(unsolvable(route, e.template) for e in pool_episodes(pool))]  # refused by the env
    return out


def played_words(env: Any, policy: Any, episodes: range) -> set[str]:
    """Every word of every observation, the last ones included, of ``episodes`` played by ``policy``."""
    words: set[str] = set()
    for k in episodes:
        obs, infos = env.reset(options={"index": k})
        while True:
            for a in obs:
                words.update(WORD_RE.findall(env.observation_text(a)))
            if not env.agents:
                break
            turn = next(a for a, i in infos.items() if i["deciding"])
            obs, _, _, _, infos = env.step({turn: policy.act(obs[turn], infos[turn])})
    return words


def observed_words() -> set[str]:
    words: set[str] = set()
    for pool, route, surface in runs():
        env = gencoord_env.parallel_env(pool=pool, backend="sim", route=route, surface=surface)
        policy = make_policy({"json": "rule_json", "freeform": "freeform"}.get(surface, "rule"))
        words |= played_words(env, policy, range(len(env.episodes)))
    return words


def menu_words(episodes: int = 24) -> set[str]:
    """Words of the menu actions' observations (each slot's ``MENU`` label): the first ``episodes`` episodes
    of every pool on the routes of ``runs`` with a structured surface, under both menus."""
    from gencoord_env.envs.gencoord.menu import MENUS

    words: set[str] = set()
    for pool, route in {(p, r) for p, r, s in runs() if s == "dsl"}:
        for menu in MENUS:
            env = gencoord_env.parallel_env(pool=pool, backend="sim", route=route, actions="menu", menu=menu)
            words |= played_words(env, make_policy("rule"), range(min(episodes, len(env.episodes))))
    return words


def procedural_words(pairs: int = 3000, seed: int = 0) -> set[str]:
    """Words of generated tasks (their template ids, binding ids, node ids and order texts), by playing
    the first ``pairs`` matched pairs of the procedural pool with the rule agents."""
    env = gencoord_env.parallel_env(pool="procedural", pool_seed=seed, backend="sim")
    return played_words(env, make_policy("rule"), range(4 * pairs))


def main() -> None:
    items = json.loads(resources.files("gencoord_env.data").joinpath("minecraft_items.json").read_text())
    names = items["items"] if isinstance(items, dict) else items
    outcomes = {w for code in FailureCode for w in WORD_RE.findall(code.value)}
    words = observed_words() | menu_words() | procedural_words() | outcomes | set(names) | {w for s in CATALOG.skills for w in WORD_RE.findall(s)}
    out = Path("gencoord_env/data/vocab.json")
    shipped = json.loads(out.read_text())["words"] if out.exists() else list(SPECIALS)
    vocab = shipped + sorted(words - set(shipped))
    about = ("Word vocabulary of the token observations (gencoord_env.tokens); built by scripts/build_vocab.py. "
             "Append-only: a word's id never changes.")
    out.write_text(json.dumps({"about": about, "words": vocab}, indent=0) + "\n")
    print(f"{out}: {len(vocab)} words ({len(vocab) - len(shipped)} new)")


if __name__ == "__main__":
    main()
