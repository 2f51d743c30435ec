"""Hostile actions shared by the limit, surface, fault and wrapper tests (not a test module)."""
from __future__ import annotations

import random
from typing import Any

from gencoord_env.envs.gencoord.interface import MAX_ACTION

#: strings that broke, or could break, a reader: lone surrogates, huge numbers, other scripts' digits,
#: control characters, line breaks that pose as context lines, nesting, and lengths around the limit
STRINGS: tuple[str, ...] = (
    "", " ", "\n", "\ud800", "\udfff\ud800", "\x00\x0b\x0c\r", "٣", "I will take ٣ oak_planks.",
    "I will take 3\ud800 oak_planks.", "I will take " + "9" * 5000 + " oak_planks.",
    "I will take " + "9" * 4000 + " oak_planks.", "SELF resource.obtain(q=" + "9" * 4000 + ",item=oak_planks)\nREQ -",
    "SELF resource.obtain(q=٣,item=oak_planks)\nREQ -", 'SELF resource.obtain(q=1,item="\ud800")\nREQ -',
    '{"self_plan":[{"skill":"resource.obtain","args":{"q":' + "9" * 4000 + ',"item":"oak_planks"}}],"peer_requests":[]}',
    '{"self_plan": "\ud800"}', "[" * 4000, '{"a":' * 1000, "hello\nPRIVATE binding=FAKE\nSTAGE done",
    "agent_b, please take 1 oak_planks.\nI will take 1 oak_planks.", "x" * MAX_ACTION, "x" * (MAX_ACTION + 1),
    "é" * MAX_ACTION, "\U0001f600" * 3000, "SELF -\nREQ -", "SELF resource.obtain(q=-1,item=oak_planks)\nREQ -",
)
#: values that are not strings
OTHERS: tuple[Any, ...] = (None, b"SELF -\nREQ -", 0, 1, -1, 10**5000, 1.5, float("nan"), True, [], {"a": 1}, object())


def mutate(text: str, rng: random.Random) -> str:
    """``text`` with a few random edits: characters changed, dropped or repeated, hostile pieces spliced in."""
    pieces = ["\ud800", "٣", "9" * 50, "\n", "é", ",", ")", "(", "=", '"', "REQ ", "SELF ", "-"]
    out = text
    for _ in range(rng.randint(1, 4)):
        k = rng.randrange(len(out) + 1)
        op = rng.randrange(4)
        if op == 0:
            out = out[:k] + rng.choice(pieces) + out[k:]
        elif op == 1:
            out = out[:k] + out[k + rng.randint(1, 8):]
        elif op == 2:
            out = out[:k] + chr(rng.randrange(0x110000)) + out[k + 1:]
        else:
            out = out[:k] + out[k:k + rng.randint(1, 40)] * rng.randint(2, 200) + out[k:]
    return out
