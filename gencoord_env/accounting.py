"""Runtime accounting of one episode, read from its trace alone (the paper's "Representative live episode
accounting" table).

The trace already holds everything: the resolve stage's commitment (the selected binding), the compiled
and single-step skill calls, every world event with the executor actions it took
(:attr:`~gencoord_env.world.types.WorldEvent.actions`), the handoff event with both agents' inventories
just before and after the handoff, and the verify stage's verdict (one check per clause) with the
terminal ground truth. So an episode is accounted for without re-running it, on either backend.

>>> from gencoord_env.accounting import account
>>> for label, value in account(record).rows():     # doctest: +SKIP
...     print(f"{label:48} {value}")
Selected binding                                 WORK_BRANCH
Decision calls                                   2
...

``record`` is a :class:`~gencoord_env.wrappers.TraceRecorder` record or a final ``infos`` entry of the env
(both have ``episode_id``, ``outcome``, ``metrics`` and ``trace``); live trace values are made JSON-safe
first, so both read the same.

"Decision calls" counts the agents' decisions (``metrics["decisions"]``); with learned agents each is one
model call, the paper's "Learned model / decision calls" row. The trace does not say which policy decided,
so the row does not claim a model for rule agents.
"Executor actions" sums every category of every event, failed calls' included; the sender and receiver
rows give the handed-over item's count in each inventory from the handoff event's snapshots (a team: one
pair of rows per handoff edge).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gencoord_env.errors import DataError
from gencoord_env.world.types import EXECUTOR_ACTIONS
from gencoord_env.trace import jsonable

#: Row labels that every accounting table has, in order (the sender, receiver and terminal rows, which
#: name the item, agent and place, come between "Executor actions by kind" and "Terminal inventories").
LABELS: tuple[str, ...] = (
    "Selected binding",
    "Decision calls",
    "Issued skill calls",
    "Executor actions",
    "Executor actions by kind",
    "Terminal inventories",
    "Wall-clock episode time",
    "Handoff / terminal verification",
    "Outcome",
)


@dataclass(frozen=True)
class Handoff:
    """The committed handoff and, when its items arrived, the item's count in each inventory around it
    (``None`` when no handoff event was recorded: the items never arrived, or the trace predates the
    snapshots)."""

    sender: str
    receiver: str
    item: str
    count: int
    sender_before: int | None = None
    sender_after: int | None = None
    receiver_before: int | None = None
    receiver_after: int | None = None


@dataclass(frozen=True)
class Clause:
    """One clause of the terminal predicate as the verifier checked it in ground truth."""

    kind: str  # "inventory" | "container" | "site"
    where: str
    item: str
    expected: int
    observed: int
    ok: bool


@dataclass(frozen=True)
class EpisodeAccount:
    """What one episode cost and did. ``None`` marks what the episode never reached (no commitment, no
    verification) or a trace that does not record it (``actions`` of a trace without action counts)."""

    episode_id: str
    outcome: str
    binding: str | None
    decisions: int
    skill_calls: int
    actions: Mapping[str, int] | None
    handoff: Handoff | None
    terminal: tuple[Clause, ...]
    terminal_inventories: Mapping[str, Mapping[str, int]] | None
    episode_seconds: float | None
    handoff_verified: bool | None
    terminal_ok: bool | None
    handoffs: tuple[Handoff, ...] = ()  # every committed handoff (a team has one per handoff edge)

    @property
    def executor_actions(self) -> int | None:
        """All low-level executor actions of the episode, every category together."""
        return None if self.actions is None else sum(self.actions.values())

    def rows(self) -> tuple[tuple[str, str], ...]:
        """The accounting table as ``(label, value)`` rows (``LABELS``, plus the handoff and terminal rows)."""
        rows = [
            ("Selected binding", self.binding or "none (no commitment)"),
            ("Decision calls", str(self.decisions)),
            ("Issued skill calls", str(self.skill_calls)),
            ("Executor actions", "not recorded" if self.actions is None else str(self.executor_actions)),
            ("Executor actions by kind", "not recorded" if self.actions is None else ", ".join(
                f"{c.replace('_', ' ')} {self.actions[c]}" for c in EXECUTOR_ACTIONS)),
        ]
        for h in self.handoffs or ((self.handoff,) if self.handoff is not None else ()):
            rows += [
                (f"Sender {h.item} ({h.sender}), before -> after", _arrow(h.sender_before, h.sender_after)),
                (f"Receiver {h.item} ({h.receiver}), before -> after", _arrow(h.receiver_before, h.receiver_after)),
            ]
        for c in self.terminal:
            value = str(c.observed) if c.ok else f"{c.observed} (expected {c.expected})"
            rows.append((f"Terminal {c.item} in {c.where}", value))
        rows += [
            ("Terminal inventories", "not reached" if self.terminal_inventories is None else "; ".join(
                f"{agent}: {_items(items)}" for agent, items in sorted(self.terminal_inventories.items()))),
            ("Wall-clock episode time", "not recorded" if self.episode_seconds is None else f"{self.episode_seconds:.2f} s"),
            ("Handoff / terminal verification", f"{_verdict(self.handoff_verified)} / {_verdict(self.terminal_ok)}"),
            ("Outcome", self.outcome),
        ]
        return tuple(rows)


def account(record: Mapping[str, Any]) -> EpisodeAccount:
    """The accounting of the episode a trace record (or final ``infos`` entry) describes."""
    try:
        trace: list[dict[str, Any]] = jsonable(record["trace"])
        metrics: Mapping[str, Any] = record["metrics"]
    except KeyError:
        raise DataError(f"expected a trace record or a final infos entry with 'trace' and 'metrics', "
                        f"got keys {sorted(record)}") from None
    commitment = _last(trace, "resolve", {}).get("resolution", {}).get("commitment")
    verify = _last(trace, "verify", {})
    verdict = verify.get("verdict")
    events = [e for entry in trace if entry.get("stage") == "execute" for e in entry.get("events", [])]
    calls = sum(len(entry.get("calls", [])) for entry in trace if entry.get("stage") in ("compile", "execute"))
    seconds = (record.get("timings") or {}).get("episode_seconds", metrics.get("episode_seconds"))
    handoffs = _handoffs(verdict, commitment, events)
    return EpisodeAccount(
        episode_id=str(record.get("episode_id", "")),
        outcome=str(jsonable(record.get("outcome", ""))),
        binding=commitment["binding"] if commitment else None,
        decisions=int(metrics.get("decisions", 0)),
        skill_calls=calls,
        actions=_actions(events),
        handoff=handoffs[0] if handoffs else None,
        terminal=tuple(Clause(c["kind"], c["where"], c["item"], int(c["expected"]), int(c["observed"]), bool(c["ok"]))
                       for c in verdict["checks"].get("terminal", ())) if verdict else (),
        terminal_inventories=verify["ground_truth"]["inventories"] if verify.get("ground_truth") else None,
        episode_seconds=None if seconds is None else float(seconds),
        handoff_verified=bool(verdict["handoff_verified"]) if verdict else None,
        terminal_ok=bool(verdict["terminal_ok"]) if verdict else None,
        handoffs=handoffs,
    )


def _last(trace: Sequence[Mapping[str, Any]], stage: str, default: Any) -> Any:
    return next((entry for entry in reversed(trace) if entry.get("stage") == stage), default)


def _actions(events: Sequence[Mapping[str, Any]]) -> dict[str, int] | None:
    """Executor actions summed over every event; ``None`` when no event counts them (or nothing ran, in
    which case there is nothing to count)."""
    counted = [e["actions"] for e in events if e.get("actions")]
    if not counted:
        return None if events else {c: 0 for c in EXECUTOR_ACTIONS}
    return {c: sum(int(a.get(c, 0)) for a in counted) for c in EXECUTOR_ACTIONS}


def _handoffs(verdict: Mapping[str, Any] | None, commitment: Mapping[str, Any] | None,
              events: Sequence[Mapping[str, Any]]) -> tuple[Handoff, ...]:
    """Every committed handoff, from the verdict's checks (one, or a team's per edge) or the commitment."""
    if verdict:
        checks = verdict["checks"]
        edges = checks["handoffs"] if "handoffs" in checks else [checks["handoff"]]
        committed = [(h["producer"], h["receiver"], h["item"], h["count"]) for h in edges]
    elif commitment:
        committed = [tuple(h) for h in commitment["handoffs"]] if "handoffs" in commitment else [commitment["handoff"]]
    else:
        return ()
    return tuple(_handoff(*h, events) for h in committed)


def _handoff(sender: str, receiver: str, item: str, count: int, events: Sequence[Mapping[str, Any]]) -> Handoff:
    handoffs = (e.get("data", {}) for e in events if e.get("kind") == "handoff" and e.get("ok"))
    data: Mapping[str, Any] = next((d for d in handoffs if (d.get("from"), d.get("to"), d.get("item")) == (sender, receiver, item)), {})
    before, after = data.get("inventories_before"), data.get("inventories_after")
    if not before or not after:
        return Handoff(sender, receiver, item, int(count))
    return Handoff(sender, receiver, item, int(count),
                   before.get(sender, {}).get(item, 0), after.get(sender, {}).get(item, 0),
                   before.get(receiver, {}).get(item, 0), after.get(receiver, {}).get(item, 0))


def _arrow(before: int | None, after: int | None) -> str:
    return "not reached" if before is None or after is None else f"{before} -> {after}"


def _verdict(ok: bool | None) -> str:
    return "not run" if ok is None else ("pass" if ok else "fail")


def _items(items: Mapping[str, int]) -> str:
    return ", ".join(f"{item} {n}" for item, n in sorted(items.items())) or "nothing"


def table(acc: EpisodeAccount) -> Any:
    """The accounting as a ``rich`` table, titled with the episode."""
    from rich.table import Table

    t = Table(title=f"Episode accounting: {acc.episode_id}")
    t.add_column("Event or state", no_wrap=True)
    t.add_column("Observed value", justify="right", overflow="fold")
    for label, value in acc.rows():
        t.add_row(label, value)
    return t


__all__ = ["LABELS", "Clause", "EpisodeAccount", "Handoff", "account", "table"]
