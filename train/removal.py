"""Receiver rows without their request: what a receiver does when the request never arrives.

With the request removed (``RequestRemoval``) a receiver decides from its own local context: the task, its
view of the world and the prior's DAG, which names both branches but not which one is active. The rule
receiver then takes the first admissible branch (``RuleMinimalRequest.guess``: the first code of the prior's
codebook), right for one binding of every matched pair: 50%, the paper's figure for its learned receiver.

The paper's rows never show a receiver without a request, so a model trained on them alone meets an
observation unlike any it trained on and writes a record that does not execute (0% in the request table).
:func:`without_request` builds the row that teaches the local default: the receiver's own prompt with its
message line empty (``MESSAGE -``, exactly as the env shows it under ``RequestRemoval``), and as target the
receiver's path on the first branch (the target of the same instance's receiver row whose binding is the
codebook's first code). ``gencoord train sft --request-removal P`` draws such a row in place of a seeded
share ``P`` of the receiver samples; the rows on disk and the rows the fit is measured on keep their requests.

>>> from gencoord_env.train.data import Row
>>> r = Row("id", "forward", "receiver_after_request", "forward", "dsl", "ep", "agent_b", "B",
...         "MESSAGE REQ from agent_a: REQ agent_b x(bind=B)\\nPRIOR codebook=A,B", "SELF x(bind=B)\\nREQ -")
>>> without_request(r, "SELF y(bind=A)\\nREQ -").prompt
'MESSAGE -\\nPRIOR codebook=A,B'
"""
from __future__ import annotations

import dataclasses
import re

from gencoord_env.errors import DataError
from gencoord_env.train.data import Row
from gencoord_env.train.renaming import row_codes

__all__ = ["MESSAGE_LINE", "default_code", "without_request"]

#: the receiver's message line, whatever it delivered
MESSAGE_LINE = re.compile(r"^MESSAGE .*$", re.MULTILINE)


def default_code(row: Row) -> str:
    """The branch a receiver without a request takes: the first code of the row's codebook."""
    codes = row_codes(row.prompt)
    if not codes:
        raise DataError(f"row {row.id} lists no codebook: no branch to default to")
    return codes[0]


def without_request(row: Row, default_target: str) -> Row:
    """``row`` (a receiver row) as the receiver sees it with the request removed, answering with
    ``default_target``: the target of the same instance's receiver row on the :func:`default_code` branch."""
    if not MESSAGE_LINE.search(row.prompt):
        raise DataError(f"row {row.id} has no MESSAGE line: not a receiver row of the forward route")
    return dataclasses.replace(row, id=f"{row.id}#removed", prompt=MESSAGE_LINE.sub("MESSAGE -", row.prompt, count=1),
                               target=default_target, binding=default_code(row))
