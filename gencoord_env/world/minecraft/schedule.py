"""Which compiled skill calls may start now: the dependency rules both bots follow.

A call starts when every call in its ``after`` list has finished successfully and every earlier call of
the same actor has finished (one bot does one thing at a time). Calls of different actors whose
dependencies are met run concurrently. ``check`` dry-runs these rules so a call list that could never
finish is refused before the world is touched.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Sequence

from ..types import SKILL_OPS, SkillCall

from gencoord_env.errors import UsageError
from gencoord_env.suggest import close_matches


class Schedule:
    """Mutable progress through one call list."""

    def __init__(self, calls: Sequence[SkillCall]) -> None:
        self.queues: dict[str, deque[SkillCall]] = {}
        for call in calls:
            self.queues.setdefault(call.actor, deque()).append(call)
        self.busy: set[str] = set()
        self.done: set[str] = set()

    def startable(self) -> list[SkillCall]:
        """Head calls of idle actors whose dependencies are done; marks their actors busy."""
        ready = []
        for actor, queue in self.queues.items():
            if actor not in self.busy and queue and all(a in self.done for a in queue[0].after):
                ready.append(queue.popleft())
                self.busy.add(actor)
        return ready

    def finish(self, call: SkillCall, ok: bool) -> None:
        self.busy.discard(call.actor)
        if ok:
            self.done.add(call.id)

    @property
    def remaining(self) -> list[SkillCall]:
        return [c for q in self.queues.values() for c in q]


def check(calls: Sequence[SkillCall], agents: Collection[str] = ()) -> None:
    """Raise ValueError if the calls are malformed or could never all start.

    >>> check([SkillCall("c1", "A", "wait", {"ticks": 1}, after=("c9",))])
    Traceback (most recent call last):
    ...
    ValueError: call 'c1' waits for unknown call(s) ['c9']
    """
    ids = [c.id for c in calls]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise UsageError(f"duplicate call ids {dupes}")
    known = set(ids)
    for c in calls:
        if c.op not in SKILL_OPS:
            hint = close_matches(c.op, SKILL_OPS, n=1)
            raise UsageError(
                f"call {c.id!r} has unknown op {c.op!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
                + f" Expected one of {sorted(SKILL_OPS)}"
            )
        missing = [a for a in SKILL_OPS[c.op] if a not in c.args]
        if missing:
            raise UsageError(f"call {c.id!r} ({c.op}) lacks argument(s) {missing}; {c.op} needs {list(SKILL_OPS[c.op])}")
        if agents and c.actor not in agents:
            raise UsageError(f"call {c.id!r} has actor {c.actor!r}, not one of the episode's agents {sorted(agents)}")
        unknown = [a for a in c.after if a not in known]
        if unknown:
            raise UsageError(f"call {c.id!r} waits for unknown call(s) {unknown}")
    dry = Schedule(calls)
    while True:
        started = dry.startable()
        if not started:
            break
        for c in started:
            dry.finish(c, ok=True)
    stuck = dry.remaining
    if stuck:
        raise UsageError(f"calls {_ids(stuck)} can never start: their `after` lists form a cycle with the actors' order")


def _ids(calls: Iterable[SkillCall]) -> list[str]:
    return [c.id for c in calls]
