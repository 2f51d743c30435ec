"""Policies by name (``gencoord rollout --policy NAME``, ``gencoord experiment --policy NAME``): a rule agent of
:data:`POLICIES`, ``model:PATH``, a learned checkpoint played in the output format it records, or
``rl:PATH[#ACTOR]``, a menu learner's checkpoint (``gencoord_env.agents.slots.MenuPolicy``: the actors a
run such as ``examples/marl_ppo.py --save PATH`` trained; ``#agent_b``: that actor in every role).

``model:PATH`` is read here and nowhere else (:func:`learned_checkpoint`). Modules whose dependencies are
optional (TF-IDF needs scikit-learn, a checkpoint the ``lm`` extra) are imported only when their agent is made,
so the registry itself imports nothing beyond the core package.
"""
from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from gencoord_env.agents.base import RulePolicy
from gencoord_env.errors import UnknownName, UsageError

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
        raise UnknownName("policy", name, sorted(POLICIES))
    module, cls, _ = POLICIES[name]
    try:
        return getattr(import_module(f"gencoord_env.agents.{module}"), cls)  # type: ignore[no-any-return]
    except ImportError as e:
        raise ImportError(f"policy {name!r} needs {e.name!r}: pip install 'gencoord_env[experiments]'") from e


#: The prefix of a learned policy's name: ``model:PATH`` (a checkpoint directory or hub id).
LEARNED = "model:"


def learned_checkpoint(name: str) -> str | None:
    """The checkpoint ``model:PATH`` names; None for a rule agent's name.

    >>> learned_checkpoint("model:runs/sft/final"), learned_checkpoint("rule")
    ('runs/sft/final', None)
    """
    if not name.startswith(LEARNED):
        return None
    path = name[len(LEARNED):]
    if not path:
        raise UsageError(f"{name!r} names no checkpoint; expected {LEARNED}PATH, a checkpoint directory or hub id")
    return path


#: The prefix of a menu learner's checkpoint: ``rl:PATH`` or ``rl:PATH#ACTOR``.
MENU_LEARNER = "rl:"


def make_policy(name: str, **kwargs: Any) -> Any:
    """A rule agent by name, e.g. ``make_policy("rule")``, or ``make_policy("model:runs/sft/final")``: the
    checkpoint as a learned policy in the format it records (keyword arguments go to
    ``gencoord_env.agents.lm.policy.load_policy``: ``output_format``, ``device``, ``config``)."""
    checkpoint = learned_checkpoint(name)
    if checkpoint is not None:
        from gencoord_env.agents.lm.policy import (
            load_policy,  # the lm extra: its absence is named by the CLI
        )

        return load_policy(checkpoint, **kwargs)
    if name.startswith(MENU_LEARNER):
        path, _, actor = name[len(MENU_LEARNER):].partition("#")
        if not path:
            raise UsageError(f"{name!r} names no checkpoint; expected {MENU_LEARNER}PATH or {MENU_LEARNER}PATH#ACTOR")
        from gencoord_env.agents.slots import MenuPolicy  # torch: the rl extra

        return MenuPolicy.load(path, actor or None, **kwargs)
    return policy_class(name)(**{**POLICIES[name][2], **kwargs})


__all__ = ["LEARNED", "MENU_LEARNER", "POLICIES", "learned_checkpoint", "make_policy", "policy_class"]
