"""UnreliableChannel: drop, delay or duplicate the peer REQ with given probabilities (beyond the paper).

The paper's messaging is reliable. This wrapper swaps the ``deliver`` stage for a lossy channel so that
robustness to message faults can be measured under the same protocol. In the two-call forward protocol
(and the single-step route) exactly one peer message crosses the boundary, the sender's REQ, and the
receiver decides exactly once, right after delivery. The three faults therefore mean:

- ``drop``: the REQ is lost. The receiver decides without it (as under ``RequestRemoval``); nothing
  crosses the wire.
- ``delay``: the REQ arrives after the receiver's only decision, i.e. after the commitment is formed. The
  receiver decides without it; the trace marks the message as late rather than lost. Wire bytes count
  traffic before commitment (paper, "Metrics and Statistics"), so a late REQ adds none. In this protocol
  a delay is as harmful as a drop; the distinction is kept so that analyses can tell the two apart.
- ``duplicate``: the REQ arrives twice. The receiver's context lists both copies and each copy counts as
  wire bytes; an idempotent receiver is unaffected.

Which fault hits an episode is a pure function of ``(seed, episode id)``: the same episode always meets
the same channel, whatever order the episodes run in, so recorded traces replay exactly. Vary ``seed``
for independent channels. In a team each edge draws its own fault (``(seed, episode id, sender, target)``),
and ``edge=(sender role, receiver role)`` makes only that channel unreliable; a delayed request reaches
its receiver after that receiver decided, as on the two-agent route. The bounded response of the feedback route is not routed through this
channel (it is a schema-bounded reply formed by the environment, not an agent message).

Trace record: ``{"stage": "intervention", "intervention": "UnreliableChannel", "fault": "drop" | "delay"
| "duplicate" | "none", "draw": float, "request": PeerRequest}``.
"""
from __future__ import annotations

import random
from typing import Any

from gencoord_env.errors import UsageError
from gencoord_env.pipeline.types import Delivery
from gencoord_env.tasks.episode import Episode
from gencoord_env.lifecycle import PipelineStage
from gencoord_env.wrappers.base import StageIntervention

FAULTS: tuple[str, ...] = ("drop", "delay", "duplicate")


class UnreliableChannel(StageIntervention):
    """Swap ``deliver`` for a seeded lossy channel.

    >>> import gencoord_env
    >>> env = UnreliableChannel(gencoord_env.parallel_env(backend="sim"), drop=0.1, duplicate=0.1, seed=7)
    """

    stage = PipelineStage.DELIVER

    def __init__(self, env: Any, drop: float = 0.0, delay: float = 0.0, duplicate: float = 0.0, seed: int = 0,
                 edge: Any = None) -> None:
        probabilities = {"drop": drop, "delay": delay, "duplicate": duplicate}
        for name, p in probabilities.items():
            if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
                raise UsageError(f"{name} must be a probability in [0, 1], got {p!r}")
        if sum(probabilities.values()) > 1.0 + 1e-12:
            raise UsageError(f"drop + delay + duplicate must be at most 1, got {sum(probabilities.values())}")
        self.probabilities = probabilities
        self.seed = int(seed)
        super().__init__(env, edge)

    def spec(self) -> dict[str, Any]:
        return {"name": "UnreliableChannel", "args": {**self.probabilities, "seed": self.seed, **self.edge_args()}}

    def fault(self, episode: Episode, edge: tuple[str, str] | None = None) -> tuple[str, float]:
        """(fault, uniform draw) for ``episode`` (in a team: for its ``edge``): cumulative thresholds drop,
        delay, duplicate."""
        key = f"{self.seed}:{episode.id}" if edge is None or not episode.is_team else f"{self.seed}:{episode.id}:{edge[0]}>{edge[1]}"
        draw = random.Random(key).random()
        threshold = 0.0
        for name in FAULTS:
            threshold += self.probabilities[name]
            if draw < threshold:
                return name, draw
        return "none", draw

    def rewrite(self, value: Delivery, episode: Episode, **inputs: Any) -> tuple[Delivery, dict[str, Any] | None]:
        edge = inputs.get("edge")
        if not self.applies(episode, edge):
            return value, None
        fault, draw = self.fault(episode, edge)
        received = {"drop": (), "delay": (), "duplicate": value.received * 2}.get(fault, value.received)
        return Delivery(value.sent, received, value.sender_plan), {"fault": fault, "draw": draw, "request": value.sent,
                                                                   **self.edge_fields(episode, edge)}


__all__ = ["FAULTS", "UnreliableChannel"]
