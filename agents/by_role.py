"""One policy per role: each decision goes to the policy of the deciding agent's role.

Playing a learned model in one role beside a rule partner in the other says which side of a failing
episode fails: a model at 100% as the sender beside the rule receiver and at 0% as the receiver beside the
rule sender fails as the receiver.

    >>> from gencoord_env.agents import make_policy
    >>> mixed = ByRole({"sender": make_policy("rule")}, default=make_policy("random", seed=1))

``infos[agent]["role"]`` names the role (``sender`` / ``receiver`` on the forward route, ``requester`` /
``peer`` on the feedback and centralized routes, a team's own roles). A batch is split by role, each part
answered by its policy's ``act_batch`` (one batched model call for a learned policy); ``last_records``, when
any part's policy keeps them, is aligned with the whole batch (``None`` where a policy without records,
such as a rule agent, answered), as the lockstep evaluation reads it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gencoord_env.agents.base import Policy
from gencoord_env.errors import UsageError
from gencoord_env.suggest import unknown

__all__ = ["ByRole"]


class ByRole:
    """``policies`` by role name; ``default`` answers every other role (without one, another role is an error)."""

    def __init__(self, policies: Mapping[str, Policy], default: Policy | None = None) -> None:
        if not policies:
            raise UsageError("ByRole needs a policy for at least one role")
        self.policies = dict(policies)
        self.default = default
        self.last_records: list[Any] | None = None

    @property
    def model_calls(self) -> int:
        return sum(getattr(p, "model_calls", 0) for p in self._distinct())

    def _distinct(self) -> list[Policy]:
        """Each policy once, however many roles it plays."""
        out: list[Policy] = []
        for p in (*self.policies.values(), *([self.default] if self.default is not None else [])):
            if not any(p is q for q in out):
                out.append(p)
        return out

    def policy_for(self, info: Mapping[str, Any]) -> Policy:
        role = info.get("role")
        if role in self.policies:
            return self.policies[role]
        if self.default is None:
            raise UsageError(unknown("role", role, sorted(self.policies)) + "; give ByRole a default policy for the others")
        return self.default

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return self.act_batch([observation], [info])[0]

    def act_batch(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        groups = [(policy, [k for k, info in enumerate(infos) if self.policy_for(info) is policy]) for policy in self._distinct()]
        actions: list[str] = [""] * len(observations)
        records: list[Any] = [None] * len(observations)
        kept = False
        for policy, ks in groups:
            if not ks:
                continue
            answers = policy.act_batch([observations[k] for k in ks], [infos[k] for k in ks])
            theirs = getattr(policy, "last_records", None) or []
            kept = kept or bool(theirs)
            for j, k in enumerate(ks):
                actions[k] = answers[j]
                records[k] = theirs[j] if j < len(theirs) else None
        self.last_records = records if kept else None
        return actions
