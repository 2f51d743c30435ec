"""The generated chain family: the hand-written three-agent ``chain`` template grown to n agents.

The sender's private order decides what the crafter makes and where the courier stores it; between the
crafter and the courier, n - 3 carriers pass the product along, one handoff each. The sender addresses
every other agent directly (one ``REQ`` line per peer), so a chain of n agents has n - 1 message edges
and n - 1 handoffs. ``chain_raw(chain, 3)`` is ``chain`` itself (a test holds the two equal), so the family
is one template structure at every size.

This module works on the template's JSON form (``data/tasks.json``); the prior loader reads its output
like any hand-written template.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from gencoord_env.errors import UsageError


def carriers(n: int) -> list[str]:
    """The carrier roles of an n-agent chain, in handoff order."""
    return [f"carrier_{k}" for k in range(1, n - 2)]


def chain_raw(chain: Mapping[str, Any], n: int) -> dict[str, Any]:
    """The n-agent member of the chain family, from the three-agent ``chain`` template's JSON form.

    >>> from gencoord_env.tasks.prior import raw_tasks
    >>> chain_raw(raw_tasks()["teams"]["chain"], 5)["roles"]
    ['sender', 'crafter', 'carrier_1', 'carrier_2', 'courier']
    """
    if n < 3:
        raise UsageError(f"a chain has at least three agents (sender, crafter, courier); got {n}")
    out = copy.deepcopy(dict(chain))
    sender, crafter, courier = out["roles"]
    middle = carriers(n)
    out["roles"] = [sender, crafter, *middle, courier]
    out["channels"] = [[sender, role] for role in out["roles"][1:]]
    if n > 3:
        out["title"] = f"{chain['title']} ({n} agents)"
    nodes: list[dict[str, Any]] = []
    for node in out["nodes"]:
        if node["actor"] == crafter and node["args"].get("to") == f"${courier}" and middle:
            # the crafter's product goes down the line of carriers before it reaches the courier
            node["args"]["to"] = f"${middle[0]}"
            nodes.append(node)
            previous = node
            suffix = node["id"].split("_", 1)[1]
            for k, role in enumerate(middle):
                after = middle[k + 1] if k + 1 < len(middle) else courier
                args = {"bind": node["branch"], "q": node["args"]["q"], "item": node["args"]["item"], "to": f"${after}"}
                previous = {"id": f"carry{k + 1}_{suffix}", "branch": node["branch"], "actor": role,
                            "skill": "resource.deliver", "args": args, "stage": "handoff", "preds": [previous["id"]]}
                nodes.append(previous)
            continue
        if node["actor"] == courier and middle:
            last = f"carry{len(middle)}_{node['preds'][0].split('_', 1)[1]}"
            node["preds"] = [last]
        nodes.append(node)
    out["nodes"] = nodes
    return out


__all__ = ["carriers", "chain_raw"]
