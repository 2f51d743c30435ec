"""A template is data: a ninth core template added to a copy of ``tasks.json`` (``GENCOORD_DATA_DIR``) builds every
data set, each with the rows its episodes and route make (no row count is written down anywhere but the data)."""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from gencoord_env.data_files import DATA_DIR_ENV, PACKAGE_DATA_DIR

#: Chest A/B again, with another source item and a ninth order quantity, the one it keeps out of train
#: (every quantity 1-8 is already some core template's crossproduct_q).
NINTH = "chest_ab_oak"

BUILD = r"""
import json, sys
from gencoord_env.train.data import DATASETS, build_all, expected_rows

manifest = build_all(sys.argv[1], [*DATASETS, "procedural"], rows=16)
print(json.dumps({name: [f["rows"], f["stages"], expected_rows(name) if name in DATASETS else None]
                  for name, f in manifest["files"].items()}))
"""


def test_a_ninth_template_builds_every_data_set(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(PACKAGE_DATA_DIR, data, ignore=shutil.ignore_patterns("__init__.py", "__pycache__"))
    tasks = json.loads((data / "tasks.json").read_text(encoding="utf-8"))
    ninth = copy.deepcopy(tasks["templates"]["chest_ab"])
    ninth.update(title="Chest A/B, oak logs", source="oak_log", quantities=list(range(1, 10)), crossproduct_q=9,
                 order="store {q} oak_log in the active chest")
    tasks["templates"][NINTH] = ninth
    core = [t for t in tasks["templates"].values() if t.get("split") == "core"]
    for name in ("train", "heldout", "request"):  # the core pools, smaller (two pairs a template) to build fast
        tasks["pools"][name].update(pairs_per_template=2, clusters=2 * 2 * len(core))
    (data / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")

    proc = subprocess.run([sys.executable, "-c", BUILD, str(tmp_path / "sets")], capture_output=True, text=True,
                          env={**os.environ, DATA_DIR_ENV: str(data)}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = json.loads(proc.stdout.splitlines()[-1])
    train_episodes = 2 * tasks["pools"]["train"]["clusters"]
    assert len(core) == 9 and train_episodes == 9 * 2 * 2 * 2  # templates x pairs x bindings x role permutations
    for name, (rows, _, expected) in built.items():
        assert expected is None or rows == expected, name
    assert built["forward"][0] == built["factor_code"][0] == built["forward_json"][0] == 2 * train_episodes
    assert built["single_step"][0] == 3 * train_episodes
    recipe = sum(t["family"] == "recipe" for t in core)  # the receiver asks first on a recipe template
    assert built["freeform"][1]["receiver_question"] == recipe * 2 * 2 * 2
    assert built["freeform"][0] == 2 * train_episodes + 2 * recipe * 2 * 2 * 2
    assert built["gc_requester"][0] == 640 and built["gc_centralized"][0] == 320  # Goal x Capability has no templates
    assert built["procedural"][0] == 16
    forward = [json.loads(line) for line in (tmp_path / "sets" / "forward.jsonl").read_text().splitlines()]
    assert sum(f"-{NINTH}-" in r["episode"] for r in forward) == 2 * 2 * 2 * 2  # pairs x bindings x roles x stages
