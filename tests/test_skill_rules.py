"""The skill rules of ``data/catalog.json`` as their generic interpreters read them.

``golden/skill_rules.jsonl`` holds, for every grounded node of every pool (both actors), what the
interpreters make of it: its location (``Episode.location``), its skill calls (``compile.lower``), what it
consumes of each item the episode names (``merge._consumes``), the references a request for it needs
(``response._needs``) and whether it is a transformation. A change to any of these must be deliberate:
regenerate the file with ``python tests/test_skill_rules.py`` and review the diff.
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gencoord_env.catalog import CATALOG
from gencoord_env.dsl import PeerRequest, Task
from gencoord_env.pipeline import merge, response
from gencoord_env.pipeline.compile import lower
from gencoord_env.pipeline.materialize import materialize
from gencoord_env.pipeline.merge import MergeConflict, handoff
from gencoord_env.pipeline.types import DispatchTask
from gencoord_env.tasks.compose import role_paths
from gencoord_env.tasks.episode import Episode
from gencoord_env.tasks.pools import POOL_SIZES, pool

GOLDEN = Path(__file__).parent / "golden" / "skill_rules.jsonl"
ROWS: list[dict[str, Any]] = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]
#: Any episode grounds a task the same way: ``@source_chest`` depends only on the shared layout.
EPISODE = Episode(pool("heldout")[0], 0)


def interpret(task: Task, actor: str, items: list[str]) -> dict[str, Any]:
    """What every interpreter of the skill rules makes of ``task`` done by ``actor``."""
    loc = EPISODE.location(task, actor)
    request = PeerRequest(actor, (task,))
    consumes = {item: merge._consumes(task, item) for item in items}
    return {
        "skill": task.skill, "args": dict(task.args), "actor": actor, "loc": loc,
        "lower": [[a, op, args] for a, op, args in lower(DispatchTask("t1", "n1", actor, task, loc, ()))],
        "consumes": {item: n for item, n in consumes.items() if n is not None},
        "needs": sorted(response._needs(request)),
        "transform": bool(response._transforms(request)),
    }


def _case(row: dict[str, Any]) -> int:
    """Which case of its skill's ``lower`` rule a golden row takes."""
    cases = CATALOG.skills[row["skill"]].lowering
    return next(i for i, c in enumerate(cases) if c.when is None or row["args"].get(c.when))


def test_golden_file_covers_every_skill_and_lowering_case() -> None:
    used = {(row["skill"], _case(row)) for row in ROWS}
    # control.wait is in no template; its rule is checked on its own below
    expected = {(s.name, i) for s in CATALOG.skills.values() for i in range(len(s.lowering)) if s.name != "control.wait"}
    assert expected - used == set()
    assert len(ROWS) > 800


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['actor']}-{r['skill']}-{json.dumps(r['args'], sort_keys=True)}")
def test_interpreters_match_the_golden_file(row: dict[str, Any]) -> None:
    task = Task(row["skill"], row["args"])
    items = sorted({*row["consumes"], *(str(v) for k, v in row["args"].items() if k in ("item", "input"))})
    assert interpret(task, row["actor"], items) == row


def test_wait_lowers_with_its_default_ticks() -> None:
    def calls(task: Task) -> list[tuple[str, str, dict[str, Any]]]:
        return lower(DispatchTask("t1", "n1", "agent_a", task, EPISODE.location(task, "agent_a"), ()))

    assert calls(Task("control.wait", {})) == [("agent_a", "wait", {"ticks": 20})]
    assert calls(Task("control.wait", {"ticks": 5, "loc": "chest_a"})) == [("agent_a", "wait", {"ticks": 5})]
    assert EPISODE.location(Task("control.wait", {"loc": "chest_a"}), "agent_a") == "chest_a"
    assert EPISODE.location(Task("no.such_skill", {"loc": "chest_a"}), "agent_a") == "chest_a"  # every_skill.location
    with pytest.raises(ValueError, match=r"no lowering for skill 'no.such_skill'"):
        calls(Task("no.such_skill", {}))


def test_location_keys_in_priority_order() -> None:
    obtain = Task("resource.obtain", {"q": 1, "item": "oak_log"})
    assert EPISODE.location(obtain, "agent_a") == EPISODE.source_chest("agent_a")
    assert EPISODE.location(obtain, "agent_b") == EPISODE.source_chest("agent_b")
    assert EPISODE.location(Task("resource.obtain", {"q": 1, "item": "oak_log", "loc": "x"}), "agent_a") == "x"
    assert EPISODE.location(Task("resource.deliver", {"q": 1, "item": "oak_log", "to": "agent_b"}), "agent_a") == "agent_b"
    assert EPISODE.location(Task("resource.deliver", {"q": 1, "item": "oak_log", "dst": "c"}), "agent_a") == "c"
    assert EPISODE.location(Task("craft.item", {"q": 1, "item": "stick"}), "agent_a") == ""


def test_craft_without_a_station_uses_the_inventory_grid() -> None:
    task = Task("craft.item", {"q": 5, "item": "stick", "input": "oak_planks"})
    assert lower(DispatchTask("t1", "n1", "agent_a", task, "", ())) == [
        ("agent_a", "craft", {"item": "stick", "count": 5, "station": ""})]
    assert merge._consumes(task, "oak_planks") == 4  # two batches of the 4-stick recipe
    assert merge._consumes(task, "stick") is None


def test_handoff_is_the_task_whose_handoff_rule_names_the_peer() -> None:
    give = Task("resource.deliver", {"q": 4, "item": "oak_planks", "to": "agent_b"})
    store = Task("resource.deliver", {"q": 4, "item": "oak_planks", "dst": "order_chest"})
    craft = Task("craft.item", {"q": 1, "item": "crafting_table", "input": "oak_planks"})
    assert handoff([Task("resource.obtain", {"q": 4, "item": "oak_planks"}), give], [craft], "agent_a", "agent_b") == (
        1, 0, "oak_planks", 4)
    with pytest.raises(MergeConflict, match="must hand items to agent_b exactly once; found 0 handoffs"):
        handoff([store], [craft], "agent_a", "agent_b")
    with pytest.raises(MergeConflict, match="agent_b needs 8 oak_planks for"):
        handoff([give], [Task("craft.item", {"q": 1, "item": "chest", "input": "oak_planks"})], "agent_a", "agent_b")


def test_declared_item_flows_make_every_reference_plan_feasible() -> None:
    """Along every reference plan of every pool, in dispatch order, each task consumes only items its actor
    holds: held at the start, or put there by an earlier task's ``produces`` or ``handoff`` rule."""
    plans = 0
    for name in POOL_SIZES:
        for cluster in pool(name):
            for perm in (0, 1):
                episode = Episode(cluster, perm)
                for binding in episode.template.bindings:
                    plan = materialize(merge.merge(*role_paths(episode, binding), episode), episode)
                    held = {agent: Counter(inv) for agent, inv in episode.world.inventories.items()}
                    for t in plan.tasks:
                        spec, args = CATALOG.skills[t.task.skill], t.task.args
                        if spec.consumes is not None:
                            item = spec.consumes.item.fill(args)
                            need = merge._consumes(t.task, item) or 0
                            assert held[t.actor][item] >= need, f"{episode.id} {binding} {t.id}: {t.actor} lacks {item}"
                            held[t.actor][item] -= need
                        for flow, to in ((spec.handoff, spec.handoff and spec.handoff.to.fill(args)), (spec.produces, t.actor)):
                            if flow is not None and to:
                                held[to][flow.item.fill(args)] += flow.count.fill(args)  # type: ignore[union-attr]
                    plans += 1
    assert plans > 4000


def _regenerate() -> None:
    rows: dict[str, dict[str, Any]] = {}
    for name in POOL_SIZES:
        for cluster in pool(name):
            for perm in (0, 1):
                episode = Episode(cluster, perm)
                items = sorted({str(v) for n in episode.nodes for k, v in n.task.args.items() if k in ("item", "input")})
                for n in episode.nodes:
                    key = json.dumps([n.task.skill, dict(n.task.args), n.actor], sort_keys=True)
                    if key not in rows:
                        rows[key] = interpret(n.task, n.actor, items)
    GOLDEN.write_text("".join(json.dumps(rows[k], separators=(",", ":")) + "\n" for k in sorted(rows)), encoding="utf-8")
    print(f"wrote {len(rows)} rows to {GOLDEN}", file=sys.stderr)


if __name__ == "__main__":
    _regenerate()
