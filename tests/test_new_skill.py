"""A new skill is one row of the catalog: added to a copy of the tables (``GENCOORD_DATA_DIR``), it is
parsed, checked, said in English, ordered in a ``node_only`` path, lowered to the world's ops and played
to SUCCESS by the rule agents on the sim backend; a row that some consumer could not handle is refused
when the catalog loads."""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gencoord_env.catalog import CATALOG_PATH, CatalogError, parse_catalog
from gencoord_env.data_files import DATA_DIR_ENV, PACKAGE_DATA_DIR

#: The new skill: put items into a chest, said "stash 3 cobblestone in chest_a".
STASH = {
    "required": {"q": "positive_int", "item": "item", "dst": "reference"},
    "optional": {},
    "location": ["dst"],
    "node_only_rank": 8,
    "say": {"head": "stash {q} {item} in {dst}", "optional": []},
    "lower": [{"ops": [{"op": "goto", "args": {"station": "@location"}},
                       {"op": "deposit", "args": {"station": "@location", "item": "$item", "count": "$q"}}]}],
    "consumes": {"item": "$item", "count": "$q"},
    "stores": {"in": "container", "at": "$dst", "item": "$item", "count": "$q"},
}

PLAY = r"""
import json
import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.freeform import read_task, say_task
from gencoord_env.tasks.pools import pool_episodes

episodes = [e for e in pool_episodes("heldout") if e.cluster.template == "chest_ab"]
out = {}
for view in ("full", "skeleton", "node_only"):
    env = gencoord_env.parallel_env(backend="sim", pool=episodes, view=view)
    policy = make_policy("rule")
    results = []
    for k in range(len(episodes)):
        obs, infos = env.reset(options={"index": k})
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            obs, _, _, _, infos = env.step({turn: policy.act(obs[turn], infos[turn])})
        info = infos[env.possible_agents[0]]
        plan = next(r["plan"] for r in info["trace"] if r["stage"] == "materialize")
        calls = next(r["calls"] for r in info["trace"] if r["stage"] == "compile")
        results.append({"outcome": str(info["outcome"]), "skills": sorted({t.task.skill for t in plan.tasks}),
                        "ops": sorted({c.op for c in calls})})
    out[view] = results
from gencoord_env.types import Task
said = say_task(Task("resource.stash", {"q": 3, "item": "cobblestone", "dst": "chest_a", "bind": "CHEST_A"}))
out["said"] = said
from gencoord_env.tokens import UNK, WordTokenizer
out["unknown_words"] = WordTokenizer.default().encode("SKILL resource.stash q,item,dst").count(UNK)
out["read_back"] = repr(read_task(said))
print(json.dumps(out))
"""


def _tables_with_stash(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(PACKAGE_DATA_DIR, data, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    catalog = json.loads((data / "catalog.json").read_text(encoding="utf-8"))
    catalog["skills"]["resource.stash"] = STASH  # the one row
    (data / "catalog.json").write_text(json.dumps(catalog), encoding="utf-8")
    tasks = json.loads((data / "tasks.json").read_text(encoding="utf-8"))
    for node in tasks["templates"]["chest_ab"]["nodes"]:  # a template that uses it: the receiver stashes
        if node["id"] in ("store_a", "store_b"):
            node["skill"] = "resource.stash"
    (data / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
    return data


def test_a_new_skill_row_plays_in_the_sim_in_every_view(tmp_path: Path) -> None:
    data = _tables_with_stash(tmp_path)
    proc = subprocess.run([sys.executable, "-c", PLAY], capture_output=True, text=True, timeout=600,
                          env={**os.environ, DATA_DIR_ENV: str(data)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for view in ("full", "skeleton", "node_only"):
        assert len(out[view]) == 32 and {r["outcome"] for r in out[view]} == {"SUCCESS"}, (view, out[view][:2])
        assert all("resource.stash" in r["skills"] and "deposit" in r["ops"] for r in out[view])
    assert out["said"] == "stash 3 cobblestone in chest_a for option CHEST_A"
    assert out["unknown_words"] == 0  # the token vocabulary takes the skill's words from the catalog
    assert "resource.stash" in out["read_back"] and "'dst': 'chest_a'" in out["read_back"]


def _catalog_with(mutate) -> dict:  # type: ignore[no-untyped-def]
    raw = json.loads(CATALOG_PATH.read_text(encoding="utf-8"))
    raw["skills"]["resource.stash"] = copy.deepcopy(STASH)
    mutate(raw["skills"]["resource.stash"])
    return raw


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda s: s.pop("node_only_rank"), "catalog.skills.resource.stash: missing field 'node_only_rank' (where a "
                                        "reader of the node_only view puts the skill's tasks in a path)"),
    (lambda s: s.update(node_only_rank=6), "catalog.skills.resource.stash.node_only_rank: 6 is also resource.deliver's"),
    (lambda s: s.pop("say"), "catalog.skills.resource.stash: missing field 'say'"),
    (lambda s: s["say"].update(head="stash {q} {item}"),
     "catalog.skills.resource.stash.say.head: says ['item', 'q']; it must say each required key once: ['dst', 'item', 'q']"),
    (lambda s: s["stores"].update(at="$site"), "catalog.skills.resource.stash.stores.at: '$site' names no argument key"),
])
def test_a_row_some_consumer_cannot_handle_is_refused(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CatalogError, match=re.escape(message)):
        parse_catalog(_catalog_with(mutate))


def test_the_catalog_loads_the_stash_row_as_given() -> None:
    spec = parse_catalog(_catalog_with(lambda s: None)).skills["resource.stash"]
    assert spec.node_only_rank == 8 and spec.stores is not None and spec.stores.kind == "container"
    assert spec.say is not None and spec.say.optional == (("bind", " for option {bind}"), ("loc", " near {loc}"))
