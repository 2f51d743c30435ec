"""Rule agents by name (``gencoord rollout --policy NAME``, ``gencoord experiment --policy NAME``).

Modules whose dependencies are optional (TF-IDF needs scikit-learn) are imported only when their agent
is made, so the registry itself imports nothing beyond the core package.
"""
from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from gencoord_env.agents.base import RulePolicy
from gencoord_env.suggest import unknown

#: name -> (module, class, fixed keyword arguments)
POLICIES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "rule": ("rules", "RuleMinimalRequest", {}),
    "factor": ("rules", "ExplicitFactorComposer", {}),
    "table": ("rules", "CompleteCaseTable", {}),
    "requester_local": ("rules", "RequesterLocal", {}),
    "random": ("rules", "RandomAgent", {}),
    "rule_json": ("rules", "RuleMinimalRequest", {"surface": "json"}),
    "tfidf": ("tfidf", "TfidfNearestNeighbour", {}),
    "freeform": ("freeform", "FreeformRule", {}),
    "frozen_parser": ("naturalized", "FrozenFactorParser", {}),
    "surface_table": ("naturalized", "CompleteSurfaceTable", {}),
}


def policy_class(name: str) -> Callable[..., RulePolicy]:
    if name not in POLICIES:
        raise ValueError(unknown("policy", name, sorted(POLICIES)))
    module, cls, _ = POLICIES[name]
    try:
        return getattr(import_module(f"gencoord_env.agents.{module}"), cls)  # type: ignore[no-any-return]
    except ImportError as e:
        raise ImportError(f"policy {name!r} needs {e.name!r}: pip install 'gencoord_env[experiments]'") from e


def make_policy(name: str, **kwargs: Any) -> RulePolicy:
    """A rule agent by name, e.g. ``make_policy("rule")``."""
    return policy_class(name)(**{**POLICIES[name][2], **kwargs})


__all__ = ["POLICIES", "make_policy", "policy_class"]
