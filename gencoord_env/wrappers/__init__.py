"""Interventions on the gencoord env: each swaps one named stage and records what it changed.

| wrapper | stage | routes | effect |
| --- | --- | --- | --- |
| ``RequestRemoval`` | ``deliver`` | forward, single_step | the receiver gets no REQ; the sender's SELF is kept |
| ``RequestReplacement`` | ``deliver`` | forward, single_step | the REQ of the paired binding is delivered instead |
| ``CounterfactualFeedback`` | ``respond`` | feedback | the paired workcell mode's bounded response is injected |
| ``UnreliableChannel`` | ``deliver`` | forward, single_step | seeded drop / delay / duplicate of the REQ |
| ``TraceRecorder`` | (none) | all | one JSONL record per finished episode (see ``gencoord_env.commands.replay``) |
| ``EpisodeStatistics`` | (none) | all | return, length and success of each finished episode in its final infos |
| ``OrderSequence`` | (none) | all | K orders in one episode, paid at its end (every order succeeded, or the share): credit over 2K decisions |

Every intervention writes ``{"stage": "intervention", "intervention": <name>, ...}`` into the trace.
Interventions stack, two on the same stage included: the outer one rewrites what the inner one left. A new
one subclasses ``StageIntervention``, sets ``stage`` to any stage of ``envs.gencoord.stages.REWRITABLE``
(``check`` .. ``verify``) and implements ``rewrite``; a stage outside that table, or one that no episode
of the env runs (its route, its pool or its surface never reach it: ``deliver`` in the free-form dialogue,
``resolve_edges`` outside the team pools), raises ``ValueError`` when the wrapper is built, naming where the
stage runs. The routes column is derived from ``routes.ROUTES`` (``StageIntervention.routes()``).
"""
from __future__ import annotations

from typing import Any

from gencoord_env.errors import UnknownName
from gencoord_env.wrappers.base import StageIntervention, interventions
from gencoord_env.wrappers.counterfactual_feedback import CounterfactualFeedback
from gencoord_env.wrappers.episode_statistics import EpisodeStatistics
from gencoord_env.wrappers.order_sequence import OrderSequence
from gencoord_env.wrappers.request_removal import RequestRemoval
from gencoord_env.wrappers.request_replacement import RequestReplacement
from gencoord_env.wrappers.trace_recorder import TraceRecorder
from gencoord_env.wrappers.unreliable_channel import UnreliableChannel

#: Interventions by name, as ``StageIntervention.spec()`` writes them.
INTERVENTIONS: dict[str, type[StageIntervention]] = {
    cls.__name__: cls for cls in (RequestRemoval, RequestReplacement, CounterfactualFeedback, UnreliableChannel)
}


def apply(env: Any, specs: list[dict[str, Any]]) -> Any:
    """Wrap ``env`` in the interventions ``specs`` names (innermost first), e.g. from a trace record."""
    for spec in specs:
        name = spec.get("name")
        if name not in INTERVENTIONS:
            raise UnknownName("intervention", name, sorted(INTERVENTIONS))
        env = INTERVENTIONS[name](env, **spec.get("args", {}))
    return env


__all__ = [
    "INTERVENTIONS", "CounterfactualFeedback", "EpisodeStatistics", "OrderSequence", "RequestRemoval", "RequestReplacement", "StageIntervention",
    "TraceRecorder", "UnreliableChannel", "apply", "interventions",
]
