"""Fuzz the env with random and mutated actions: no exception, every episode ends with a ``FailureCode``.

Every route x surface of the two-agent pools (``heldout``; the feedback route on ``goal_capability``) and
every team route on ``teams`` (dsl, json) takes a stream of actions at each decision, drawn from:

- ``valid``: the rule agent's record (so that episodes reach the later stages);
- ``reference``: a reference record of ``gencoord_env.tasks.references`` (any binding, any stage),
  written in the env's surface;
- ``mutated``: a valid or reference record with edits: characters changed, dropped or repeated, numbers
  made huge, negative or of another script's digits, names replaced, lines duplicated or dropped;
- ``random``: random text (any code point, lone surrogates included), decoded random bytes, or ``bytes``;
- ``huge``: numbers of thousands of digits, and strings around and beyond the action space's
  ``max_length`` (4,096 characters);
- ``other``: values that are not strings (None, ints, floats, lists, dicts, objects, numpy scalars).

Each step is checked: ``step`` must not raise, every observation must lie in ``observation_space(agent)``,
and every episode must end with a ``FailureCode`` (``SUCCESS`` included). The table counts episodes by
route x surface x outcome, with the actions, exceptions and observation violations of each row; the
process exits 1 if any exception or violation was seen.

    python benchmarks/fuzz_env.py [--actions 100000] [--seed 0] [--minecraft 500]

``--minecraft N`` runs N more actions on ``backend="minecraft"`` (one sidecar, every row in turn).
"""
from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

import gencoord_env
from gencoord_env import FailureCode
from gencoord_env.agents import make_policy
from gencoord_env.envs.gencoord.interface import MAX_ACTION
from gencoord_env.envs.gencoord.routes import ROUTES, TEAM_ROUTES
from gencoord_env.envs.gencoord.surfaces import SURFACES
from gencoord_env.tasks import references as R

#: (pool, route, surface) of every row
ROWS: list[tuple[str, str, str]] = (
    [("goal_capability" if r == "feedback" else "heldout", r, s) for s in ("dsl", "json") for r in sorted(ROUTES)]
    + [("heldout", "forward", "freeform")]
    + [("teams", r, s) for s in ("dsl", "json") for r in sorted(TEAM_ROUTES) if r != "feedback"]
    + [("team_feedback", "feedback", s) for s in ("dsl", "json")]
)
POLICY = {"dsl": "rule", "json": "rule_json", "freeform": "freeform"}
KINDS: tuple[tuple[str, float], ...] = (("valid", 0.25), ("reference", 0.1), ("mutated", 0.35), ("random", 0.12),
                                        ("huge", 0.08), ("other", 0.1))
ITEMS = ("oak_planks", "stick", "diamond", "air", "OAK_PLANKS", "oak_planks\ud800", "٣", "x" * 300, "")
OTHERS: tuple[Callable[[random.Random], Any], ...] = (
    lambda r: None, lambda r: r.randint(-5, 40), lambda r: 10 ** r.randint(19, 6000), lambda r: r.random() * 1e300,
    lambda r: float("nan"), lambda r: True, lambda r: [r.random()], lambda r: {"SELF": "-"}, lambda r: object(),
    lambda r: np.int64(r.randint(0, 40)), lambda r: np.float32(1.5), lambda r: bytes(r.randrange(256) for _ in range(20)),
    lambda r: b"SELF -\nREQ -", lambda r: ("SELF -",),
)


def references(episode: Any, surface: str) -> list[str]:
    """Reference records of ``episode`` for every stage and binding, written in ``surface``."""
    s = SURFACES[surface]
    peers = max(1, len(episode.agents) - 1)
    out = []
    for binding in episode.template.bindings:
        joint = R.joint(episode, binding)
        out.append(s.write(joint, peers))
        for request in joint.peer_requests:
            out.append(s.write(R.receiver_after_request(request), peers))
    if not episode.is_team:
        for make in (R.sender_initial, R.sender_single_step, R.sender_after_obtain, R.centralized):
            try:
                out.append(s.write(make(episode)))
            except Exception:  # noqa: BLE001 - a stage the template has no reference for
                pass
    return out


def mutate(text: str, rng: random.Random) -> str:
    """``text`` with 1-5 edits of the kinds the module docstring lists."""
    for _ in range(rng.randint(1, 5)):
        k = rng.randrange(len(text) + 1)
        op = rng.randrange(9)
        if op == 0:  # a random code point (surrogates included)
            text = text[:k] + chr(rng.randrange(0x110000)) + text[k + rng.randint(0, 1):]
        elif op == 1:  # drop a stretch
            text = text[:k] + text[k + rng.randint(1, 12):]
        elif op == 2:  # repeat a stretch
            text = text[:k] + text[k:k + rng.randint(1, 30)] * rng.randint(2, 150) + text[k:]
        elif op == 3:  # numbers: huge, negative, zero, other scripts' digits
            digits = [i for i, c in enumerate(text) if c.isdigit()]
            if digits:
                i = rng.choice(digits)
                new = rng.choice(["9" * rng.randint(10, 5000), "-1", "0", "٣", "３", "1e9", "1.5", "00", "+4", "2304", "2305"])
                text = text[:i] + new + text[i + 1:]
        elif op == 4:  # an item or name replaced
            for item in ("oak_planks", "oak_log", "stick", "cobblestone", "agent_b", "agent_a"):
                if item in text:
                    text = text.replace(item, rng.choice(ITEMS), 1)
                    break
        elif op == 5:  # lines duplicated, dropped or swapped
            lines = text.split("\n")
            j = rng.randrange(len(lines))
            choice = rng.randrange(3)
            if choice == 0:
                lines.insert(j, lines[j])
            elif choice == 1 and len(lines) > 1:
                del lines[j]
            else:
                rng.shuffle(lines)
            text = "\n".join(lines)
        elif op == 6:  # a syntax character spliced in
            text = text[:k] + rng.choice(list("(),=\"'{}[]:>\\\n\t\r -.?!")) + text[k:]
        elif op == 7:  # case
            text = text.upper() if rng.random() < 0.5 else text.swapcase()
        else:  # truncated
            text = text[:k]
    return text


def random_text(rng: random.Random) -> Any:
    n = rng.choice([0, 1, 2, 5, 20, 100, 400])
    roll = rng.random()
    if roll < 0.4:
        return "".join(chr(rng.randrange(0x110000)) for _ in range(n))
    if roll < 0.6:
        return "".join(chr(rng.randrange(32, 127)) for _ in range(n))
    raw = bytes(rng.randrange(256) for _ in range(n))
    if roll < 0.8:
        return raw.decode("utf-8", "surrogateescape")
    if roll < 0.9:
        return raw.decode("latin-1")
    return raw


def huge(base: str, rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.3:
        return "9" * rng.randint(4300, 9000)
    if roll < 0.6:
        n = rng.choice([MAX_ACTION - 1, MAX_ACTION, MAX_ACTION + 1, 2 * MAX_ACTION, 50_000])
        return (base + " " * n)[:n] if rng.random() < 0.5 else (base * (n // max(1, len(base)) + 1))[:n]
    if roll < 0.8:
        return ("é\U0001f600\ud800\n" * MAX_ACTION)[:rng.choice([MAX_ACTION, MAX_ACTION + 1])]
    return base.replace("1", "1" + "0" * rng.randint(20, 4000), 1)


def action(kind: str, valid: Any, refs: list[str], rng: random.Random) -> Any:
    if kind == "valid":
        return valid
    if kind == "reference":
        return rng.choice(refs)
    base = valid if isinstance(valid, str) and rng.random() < 0.5 else rng.choice(refs)
    if kind == "mutated":
        return mutate(base, rng)
    if kind == "random":
        return random_text(rng)
    if kind == "huge":
        return huge(base, rng)
    return rng.choice(OTHERS)(rng)


class Row:
    def __init__(self) -> None:
        self.actions = 0
        self.outcomes: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.exceptions: list[str] = []
        self.violations = 0


def play(env: Any, row: Row, budget: int, rng: random.Random, policy: Any) -> None:
    """Play episodes until ``budget`` actions were taken (the last episode is finished with valid actions)."""
    space = env.observation_space
    while row.actions < budget or env.agents:
        try:
            obs, infos = env.reset(options={"index": rng.randrange(1 << 30) % len(env.unwrapped.episodes)})
        except Exception:  # noqa: BLE001 - counted, not hidden
            row.exceptions.append(traceback.format_exc())
            return
        refs = references(env.unwrapped.session.episode, env.unwrapped.surface.name)
        while True:
            row.violations += sum(not space(a).contains(o) for a, o in obs.items())
            if not env.agents:
                outcome = infos[env.possible_agents[0]].get("outcome")
                row.outcomes[str(outcome) if isinstance(outcome, FailureCode) else f"NOT A CODE: {outcome!r}"] += 1
                break
            turn = next(a for a, i in infos.items() if i["deciding"])
            valid = policy.act(obs[turn], infos[turn])
            kind = rng.choices([k for k, _ in KINDS], [w for _, w in KINDS])[0] if row.actions < budget else "valid"
            a = action(kind, valid, refs, rng)
            row.actions += 1
            row.kinds[kind] += 1
            try:
                obs, _, _, _, infos = env.step({turn: a})
            except Exception:  # noqa: BLE001 - counted, not hidden
                row.exceptions.append(f"{kind} {a!r:.200}\n{traceback.format_exc()}")
                row.outcomes["EXCEPTION"] += 1
                break


def run(backend: str, total: int, seed: int, world: Any = None) -> dict[tuple[str, str, str], Row]:
    rows: dict[tuple[str, str, str], Row] = defaultdict(Row)
    rng = random.Random(seed)
    per_row = max(1, -(-total // len(ROWS)))  # at least ``total`` in all
    for pool, route, surface in ROWS:
        env = gencoord_env.parallel_env(backend=backend, pool=pool, route=route, surface=surface, world=world)
        play(env, rows[(pool, route, surface)], per_row, rng, make_policy(POLICY[surface]))
    return rows


def table(rows: dict[tuple[str, str, str], Row], title: str, seconds: float) -> bool:
    codes = [c.value for c in FailureCode]
    extra = sorted({o for r in rows.values() for o in r.outcomes} - set(codes))
    short = {c: "".join(w[0] for w in c.split("_")) for c in codes}  # PARSE_FAILURE -> PF
    head = ["pool", "route", "surface", "actions", "episodes", *[short[c] for c in codes], *extra, "exceptions", "obs_violations"]
    lines = [head]
    total = Row()
    for (pool, route, surface), r in rows.items():
        lines.append([pool, route, surface, r.actions, sum(r.outcomes.values()), *[r.outcomes[c] for c in [*codes, *extra]],
                      len(r.exceptions), r.violations])
        total.actions += r.actions
        total.outcomes.update(r.outcomes)
        total.kinds.update(r.kinds)
        total.exceptions += r.exceptions
        total.violations += r.violations
    lines.append(["all", "", "", total.actions, sum(total.outcomes.values()), *[total.outcomes[c] for c in [*codes, *extra]],
                  len(total.exceptions), total.violations])
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    print(f"\n{title}: {total.actions} actions in {seconds:.1f} s ({total.actions / seconds:,.0f} actions/s)")
    print("codes: " + ", ".join(f"{v}={k}" for k, v in short.items()))
    print("actions by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(total.kinds.items())))
    for line in lines:
        print("  ".join(str(v).rjust(w) if isinstance(v, int) else str(v).ljust(w) for v, w in zip(line, widths)))
    for text in total.exceptions[:5]:
        print("\nEXCEPTION:", text)
    return not total.exceptions and not total.violations and not extra


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--actions", type=int, default=100_000, help="actions on the sim, spread over the rows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--minecraft", type=int, default=0, metavar="N", help="also N actions on the Minecraft backend")
    args = ap.parse_args()
    t0 = time.perf_counter()
    ok = table(run("sim", args.actions, args.seed), "sim", time.perf_counter() - t0)
    if args.minecraft:
        from gencoord_env.world.minecraft import MinecraftWorld

        with MinecraftWorld() as world:
            t0 = time.perf_counter()
            ok &= table(run("minecraft", args.minecraft, args.seed + 1, world), "minecraft", time.perf_counter() - t0)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
