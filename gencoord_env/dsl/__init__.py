"""The Short DSL: the peer-facing commitment language of the paper (``SELF`` then ``REQ``).

    SELF resource.obtain(q=4,item=oak_planks) > resource.deliver(q=4,item=oak_planks,to=agent_b)
    REQ agent_b craft.item(q=1,input=oak_planks,item=crafting_table) > resource.deliver(q=1,item=crafting_table,dst=order_chest)

A record of a team of n agents may address several peers, one ``REQ <agent> <path>`` line each
(``parse(text, max_requests=n - 1)``); the paper's two-line record is the case ``max_requests=1``, the
default of every function here.

``parse`` reads it into a ``Proposal``, ``format`` writes the canonical form back, ``to_json`` /
``from_json`` are the GenCoord-JSON surface over the same fields. Syntax only: whether the arguments
make sense for the skill and the episode is the contract checker's job (``gencoord_env.contract``).
The codec uses nothing beyond the standard library.
"""
from __future__ import annotations

from gencoord_env.dsl.errors import DSLSyntaxError
from gencoord_env.dsl.json_surface import from_json, to_json
from gencoord_env.types import Args, PeerRequest, Proposal, Task, Value
from gencoord_env.dsl.parser import parse
from gencoord_env.dsl.serializer import format

__all__ = [
    "Args",
    "DSLSyntaxError",
    "PeerRequest",
    "Proposal",
    "Task",
    "Value",
    "format",
    "from_json",
    "parse",
    "to_json",
]
