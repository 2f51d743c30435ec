"""Time per misspelled item name of the contract's "did you mean", before and after the name index.

Before: ``difflib.get_close_matches`` over all 1,385 Minecraft item names (the contract's old path, kept here
for the comparison). After: ``gencoord_env.suggest.close_match``, difflib over the names that share the most
character pairs with the word. Both run over the same misspellings in one process; agreement is the share
of misspellings for which both suggest the same name (or both none). Run:

    python benchmarks/did_you_mean.py [--words 2000] [--seed 0]

The misspellings are ordinary typos of random item names: one letter dropped, added, changed, or two
neighbours swapped; plus a few words far from every name (no suggestion).
"""
from __future__ import annotations

import argparse
import difflib
import random
import string
import time
from collections.abc import Callable

from gencoord_env.catalog import minecraft_items
from gencoord_env.contract import PublicScope, check
from gencoord_env.dsl import parse
from gencoord_env.suggest import close_match


def old_suggest(word: str, names: frozenset[str]) -> str | None:
    """The contract's "did you mean" before the index: difflib over every name."""
    close = difflib.get_close_matches(word, sorted(names), n=1, cutoff=0.6)
    return close[0] if close else None


def typo(name: str, rng: random.Random) -> str:
    letters = string.ascii_lowercase + "_"
    i = rng.randrange(len(name))
    kind = rng.choice(("drop", "add", "change", "swap"))
    if kind == "drop" and len(name) > 2:
        return name[:i] + name[i + 1 :]
    if kind == "add":
        return name[:i] + rng.choice(letters) + name[i:]
    if kind == "swap" and i + 1 < len(name):
        return name[:i] + name[i + 1] + name[i] + name[i + 2 :]
    return name[:i] + rng.choice(letters.replace(name[i], "")) + name[i + 1 :]


def misspellings(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    names = sorted(minecraft_items())
    words = [typo(rng.choice(names), rng) for _ in range(n)]
    words += ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 30))) for _ in range(n // 20)]
    return [w for w in words if w not in minecraft_items()]


def per_word_ms(fn: Callable[[str, frozenset[str]], str | None], words: list[str]) -> tuple[float, list[str | None]]:
    names = minecraft_items()
    fn(words[0], names)  # builds the index once (memoized), as the first misspelling of a run does
    start = time.perf_counter()
    out = [fn(w, names) for w in words]
    return (time.perf_counter() - start) / len(words) * 1e3, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    words = misspellings(args.words, args.seed)
    old_ms, old = per_word_ms(old_suggest, words)
    new_ms, new = per_word_ms(close_match, words)
    same = sum(a == b for a, b in zip(old, new))
    print(f"{len(words)} misspellings of {len(minecraft_items())} item names")
    print(f"{'path':<34} {'ms / misspelling':>17}")
    print(f"{'difflib over every name (before)':<34} {old_ms:>17.3f}")
    print(f"{'name index + difflib (after)':<34} {new_ms:>17.3f}")
    print(f"speedup {old_ms / new_ms:.1f}x; same suggestion for {same}/{len(words)} ({same / len(words):.2%})")
    differ = [(w, a, b) for w, a, b in zip(words, old, new) if a != b]
    for w, a, b in differ[:5]:
        print(f"  differs: {w!r}: before {a!r}, after {b!r}")
    # the whole contract check of a record with a misspelled item, as an env step runs it
    scope = PublicScope(("agent_a", "agent_b"), "agent_a", frozenset(), frozenset())
    records = [parse(f"SELF resource.obtain(q=1,item={w})\nREQ -") for w in words[:200]]
    start = time.perf_counter()
    for record in records:
        check(record, scope)
    print(f"contract.check of a record with a misspelled item: {(time.perf_counter() - start) / len(records) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
