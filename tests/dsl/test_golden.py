"""Golden files: valid records with their expected objects, invalid records with their exact errors.

``golden/valid/NAME.dsl`` holds the input bytes; ``NAME.json`` the expected proposal (GenCoord-JSON
fields; JSON keeps ``1`` and ``1.0`` apart) and the canonical text. ``golden/invalid/NAME.dsl`` holds
the input; ``NAME.error`` the exact ``str(DSLSyntaxError)`` with offset, line and column.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gencoord_env import dsl
from gencoord_env.dsl import Args, DSLSyntaxError, PeerRequest, Proposal, Task

GOLDEN = Path(__file__).parent / "golden"
VALID = sorted((GOLDEN / "valid").glob("*.dsl"))
INVALID = sorted((GOLDEN / "invalid").glob("*.dsl"))


def read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8")  # bytes as stored: no newline translation


def build_proposal(raw: dict[str, Any]) -> Proposal:
    """Expected object built by hand, independent of ``from_json``."""

    def path(tasks: list[dict[str, Any]]) -> tuple[Task, ...]:
        return tuple(Task(task["skill"], Args(task["args"])) for task in tasks)

    return Proposal(
        self_plan=path(raw["self_plan"]),
        peer_requests=tuple(PeerRequest(r["target"], path(r["requested_plan"])) for r in raw["peer_requests"]),
    )


def test_golden_directories_are_populated() -> None:
    assert len(VALID) >= 10 and len(INVALID) >= 30
    for source in VALID:
        assert source.with_suffix(".json").exists(), source
    for source in INVALID:
        assert source.with_suffix(".error").exists(), source


@pytest.mark.parametrize("source", VALID, ids=lambda p: p.stem)
def test_valid_golden(source: Path) -> None:
    expected = json.loads(source.with_suffix(".json").read_text(encoding="utf-8"))
    proposal = dsl.parse(read_text(source))
    assert proposal == build_proposal(expected["proposal"])
    # Type-sensitive equality: compare the typed values, not only ==.
    for got, want in zip(proposal.self_plan, build_proposal(expected["proposal"]).self_plan):
        assert {k: (type(v), v) for k, v in got.args.items()} == {k: (type(v), v) for k, v in want.args.items()}
    canonical = dsl.format(proposal)
    assert canonical == expected["canonical"]
    assert dsl.parse(canonical) == proposal
    assert dsl.format(dsl.parse(canonical)) == canonical
    assert dsl.from_json(dsl.to_json(proposal)) == proposal


@pytest.mark.parametrize("source", INVALID, ids=lambda p: p.stem)
def test_invalid_golden(source: Path) -> None:
    expected = source.with_suffix(".error").read_text(encoding="utf-8").rstrip("\n")
    text = read_text(source)
    with pytest.raises(DSLSyntaxError, match=f"^{re.escape(expected)}$") as caught:
        dsl.parse(text)
    error = caught.value
    location = re.search(r"\(at line (\d+), column (\d+), offset (\d+)\)$", expected)
    assert location is not None
    assert (error.line, error.column, error.offset) == tuple(int(g) for g in location.groups())
    # line/column agree with the offset in the text
    assert error.line == text.count("\n", 0, error.offset) + 1
    assert error.column == error.offset - (text.rfind("\n", 0, error.offset) + 1) + 1


def test_paper_examples_are_fixed_points() -> None:
    examples = [
        "SELF resource.obtain(q=4,item=oak_planks) > resource.deliver(q=4,item=oak_planks,to=agent_b)\n"
        "REQ agent_b craft.item(q=1,input=oak_planks,item=crafting_table) > "
        "resource.deliver(q=1,item=crafting_table,dst=order_chest)",
        "SELF resource.obtain(q=8,item=oak_planks) > resource.deliver(q=8,item=oak_planks,to=agent_a)\n"
        "REQ agent_a craft.item(bind=WORK_BRANCH,q=1,input=oak_planks,item=crafting_table)",
    ]
    for text in examples:
        assert dsl.format(dsl.parse(text)) == text
