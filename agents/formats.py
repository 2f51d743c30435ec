"""Learned output formats: what a model is trained to write, and how what it writes becomes an action.

One :class:`OutputFormat` per format, in :data:`FORMATS`; everything that depends on the format reads it
from here: the SFT targets (``gencoord_env.train.data``), the policy's decoder (``gencoord_env.agents.lm.policy``),
code renaming (``gencoord_env.train.renaming``), the fit's decision token (``gencoord_env.train.fit``), the
``--format`` option of the commands, and the name a checkpoint records (:func:`checkpoint_format`).

================  ========================  =========  ==========================================================
name              title                     surface    the model writes -> the action the env receives
================  ========================  =========  ==========================================================
``direct``        Direct Short DSL          dsl        the Short DSL record -> itself
``factor_code``   Factor-Code + Rule        dsl        ``active_binding_id=<code>`` (sender) or
                                                       ``accepted_binding_id=<code>`` (receiver) -> the public
                                                       composer's Short DSL for that branch (:func:`expand_code`)
``json``          GenCoord-JSON             json       the record as GenCoord-JSON -> itself
``freeform``      controlled free-form      freeform   the utterance -> itself
``commit_tool``   commit tool call          dsl        ``<tool_call>{"name": "commit", ...}</tool_call>`` (or
                                                       Qwen3.5's ``<function=commit>`` call) -> the Short DSL
                                                       record of its first commit call
================  ========================  =========  ==========================================================

A completion a decoder cannot read reaches the env unchanged, so the env records the mistake (a parse failure)
instead of the policy hiding it. Adding a format is one entry here and its tests.

A checkpoint records the format it was trained in (``training_record.json``, ``"format"``); playing it in
another raises :class:`FormatMismatchError` naming both (:func:`resolve_format`).

>>> output_format("factor_code").target("receiver_after_request", "SITE_B", "SELF ...")
'accepted_binding_id=SITE_B'
>>> output_format("direct").code_span("SELF -\\nREQ agent_b build.component(bind=SITE_B,q=5)", "SITE_B")
(40, 46)
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gencoord_env import dsl
from gencoord_env.errors import UnknownName, UsageError
from gencoord_env.lifecycle import DecisionStage
from gencoord_env.tasks.context_view import compose, roles
from gencoord_env.tasks.contexts import Context
from gencoord_env.types import PeerRequest, Proposal

__all__ = [
    "CODE_FIELDS", "DEFAULT_FORMAT", "FORMATS", "RECORD", "FormatMismatchError", "OutputFormat", "checkpoint_format",
    "commit_record", "expand_code", "output_format", "rename_words", "resolve_format",
]

#: The file in a saved checkpoint that records how it was trained (its lineage, its format).
RECORD = "training_record.json"
#: The format of a checkpoint that records none (a downloaded model, or one saved before formats were recorded).
DEFAULT_FORMAT = "direct"

#: The binding-code field the Factor-Code model writes at each learned stage.
CODE_FIELDS: dict[str, str] = {DecisionStage.SENDER_INITIAL: "active_binding_id",
                               DecisionStage.RECEIVER_AFTER_REQUEST: "accepted_binding_id"}
_CODE = re.compile(r"^\s*(?:(active_binding_id|accepted_binding_id)\s*=\s*)?([A-Za-z0-9_]+)\s*$")
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_XML_FUNCTION = re.compile(r"^<function=([^\n>]+)>\s*(.*?)\s*</function>$", re.S)
_XML_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", re.S)


class FormatMismatchError(UsageError):
    """A checkpoint asked to play in another output format than the one it was trained in."""


def rename_words(text: str, names: Mapping[str, str]) -> str:
    """``text`` with every whole-word occurrence of a key of ``names`` replaced at once (swaps work).

    >>> rename_words("bind=BUILD; codebook=BUILD,DEPOSIT", {"BUILD": "DEPOSIT", "DEPOSIT": "BUILD"})
    'bind=DEPOSIT; codebook=DEPOSIT,BUILD'
    """
    if not names:
        return text
    words = sorted(names, key=len, reverse=True)
    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, words)) + r")(?![A-Za-z0-9_])")
    return pattern.sub(lambda m: names[m.group(1)], text)


def expand_code(completion: str, context: Context) -> str | None:
    """The Short DSL action a binding code stands for in ``context``; None when it names no admissible branch.

    Sender (``active_binding_id``): its own path plus the REQ with the peer's path. Receiver
    (``accepted_binding_id``): its own path of that branch and ``REQ -``. A bare code is read as the
    stage's field; the other stage's field is refused.
    """
    m = _CODE.match(completion)
    if not m or m.group(2) not in context.prior.codebook:
        return None
    field, code = m.groups()
    stage = context.stage
    expected = CODE_FIELDS.get(stage)
    if field is not None and expected is not None and field != expected:
        return None
    first, second = roles(context)
    mine, theirs = compose(context, code, first, second)
    if stage == DecisionStage.RECEIVER_AFTER_REQUEST:
        return dsl.format(Proposal(theirs, ()))
    return dsl.format(Proposal(mine, (PeerRequest(context.peer, theirs),)))


def _as_written(completion: str, info: Mapping[str, Any]) -> str:
    return completion


def _factor_code(completion: str, info: Mapping[str, Any]) -> str:
    context = info.get("context")
    if context is None:
        return completion
    return expand_code(completion, context) or completion


def commit_record(completion: str, tool: str = "commit") -> str | None:
    """The ``record`` argument of the first tool call in ``completion`` when that call is ``tool``; None when it
    makes no such call.

    Reads both formats Qwen checkpoints write: Qwen3's JSON call and Qwen3.5's XML call (whatever the chat
    template around it: the package's offline tool template writes the first)::

        <tool_call>\n{"name": "commit", "arguments": {"record": "SELF ...\\nREQ ..."}}\n</tool_call>
        <tool_call>\n<function=commit>\n<parameter=record>\nSELF ...\nREQ ...\n</parameter>\n</function>\n</tool_call>

    >>> commit_record('<tool_call>{"name": "commit", "arguments": {"record": "SELF -"}}</tool_call>')
    'SELF -'
    >>> commit_record('<tool_call>\\n<function=commit>\\n<parameter=record>\\nSELF -\\n</parameter>\\n</function>\\n</tool_call>')
    'SELF -'
    """
    m = _CALL.search(completion)
    if m is None:
        return None
    body = m.group(1)
    xml = _XML_FUNCTION.match(body)
    if xml is not None:
        if xml.group(1).strip() != tool:
            return None
        return {k.strip(): v for k, v in _XML_PARAMETER.findall(xml.group(2))}.get("record")
    try:
        call = json.loads(body)
    except json.JSONDecodeError:
        return None
    args = call.get("arguments") if isinstance(call, dict) else None
    if not isinstance(call, dict) or call.get("name") != tool or not isinstance(args, dict) \
            or not isinstance(args.get("record"), str):
        return None
    return str(args["record"])


def _commit_call(completion: str, info: Mapping[str, Any]) -> str:
    record = commit_record(completion)
    return completion if record is None else record


def _played(stage: str, binding: str, action: str) -> str:
    return action


def _field_and_code(stage: str, binding: str, action: str) -> str:
    if stage not in CODE_FIELDS:
        raise UsageError(f"Factor-Code has no field for stage {stage!r}; it writes {dict(CODE_FIELDS)}")
    return f"{CODE_FIELDS[stage]}={binding}"


@dataclass(frozen=True)
class OutputFormat:
    """One learned output format: how its training target is written, how a completion is read back, how
    code renaming touches it, where its decision token sits, and its name on the command line."""

    #: the name on the command line (``--format``) and in a checkpoint's record
    name: str
    title: str
    #: the env surface its actions are written in (``parallel_env(surface=...)``)
    surface: str
    #: ``(stage label, binding, the reference action played there) -> the training target``; None where
    #: the target needs more than the record (the commit call is rendered by the tokenizer's chat template:
    #: ``gencoord_env.commands.llm_rl.tool_rows``)
    target: Callable[[str, str, str], str] | None
    #: ``(completion, the deciding agent's info) -> the action``
    decode: Callable[[str, Mapping[str, Any]], str]
    #: where a target names its binding code: a regular expression whose group 1 is the code (``{code}``
    #: stands for it); the fit's decision token is the code's first token. None: the twin's parting tokens only
    code_pattern: str | None
    #: the renaming rule: its targets name codes as whole words that ``code_renaming`` may swap (free-form
    #: says them in English, so it is not renamed)
    renames: bool
    #: greedy decoding may stop once the completion has written a two-line Short DSL record (its second
    #: newline); a format whose completion goes on after the record (a tool call's closing tag) decodes to EOS
    stops_at_record_end: bool = True

    def code_span(self, target: str, binding: str) -> tuple[int, int] | None:
        """The characters of ``target`` that name ``binding`` (the fit's decision token starts there)."""
        if self.code_pattern is None:
            return None
        m = re.search(self.code_pattern.replace("{code}", re.escape(binding)), target)
        return m.span(1) if m else None

    def rename(self, text: str, names: Mapping[str, str]) -> str:
        """``text`` (a prompt or target of this format) with its codes renamed by ``names``."""
        if not self.renames:
            raise UsageError(f"the {self.name} format ({self.title}) names no code renaming can swap")
        return rename_words(text, names)


_AFTER_EQUALS = r"=({code})(?![A-Za-z0-9_])"

FORMATS: dict[str, OutputFormat] = {f.name: f for f in (
    OutputFormat("direct", "Direct Short DSL", "dsl", _played, _as_written, _AFTER_EQUALS, renames=True),
    OutputFormat("factor_code", "Factor-Code + Rule", "dsl", _field_and_code, _factor_code, _AFTER_EQUALS, renames=True),
    OutputFormat("json", "GenCoord-JSON", "json", _played, _as_written, r'"bind":\s*"({code})"', renames=True),
    OutputFormat("freeform", "controlled free-form", "freeform", _played, _as_written, None, renames=False),
    OutputFormat("commit_tool", "commit tool call", "dsl", None, _commit_call, _AFTER_EQUALS, renames=True,
                 stops_at_record_end=False),
)}


def output_format(name: str | OutputFormat) -> OutputFormat:
    """The format of that name (a format passes through); an unknown name raises with the closest one."""
    if isinstance(name, OutputFormat):
        return name
    if name not in FORMATS:
        raise UnknownName("output format", name, FORMATS)
    return FORMATS[name]


def checkpoint_format(checkpoint: str | os.PathLike[str]) -> str | None:
    """The format a checkpoint directory records (``training_record.json``); None for a hub id or a
    checkpoint that records none."""
    path = Path(checkpoint) / RECORD
    if not path.is_file():
        return None
    name = json.loads(path.read_text(encoding="utf-8")).get("format")
    return None if name is None else str(name)


def resolve_format(checkpoint: str | os.PathLike[str], asked: str | OutputFormat | None = None) -> OutputFormat:
    """The format to play ``checkpoint`` in: the one it records, or ``asked`` (default :data:`DEFAULT_FORMAT`)
    where it records none; :class:`FormatMismatchError` when both are given and differ."""
    recorded = checkpoint_format(checkpoint)
    wanted = None if asked is None else output_format(asked)
    if recorded is not None and wanted is not None and recorded != wanted.name:
        have = output_format(recorded)
        raise FormatMismatchError(
            f"{checkpoint} was trained in the {have.name} format ({have.title}), not {wanted.name} ({wanted.title}); "
            f"play it as {have.name}, or leave the format out and the checkpoint's own is used")
    return wanted or output_format(recorded or DEFAULT_FORMAT)
