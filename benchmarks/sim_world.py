"""Episodes per second of the pure-Python world alone: reset + run + observe of a representative episode.

The episode is the paper's running example with a furnace detour: agent_a withdraws a log, crafts
planks, hands 4 planks to agent_b, agent_b crafts a crafting table at the table station and deposits it
in the order chest; agent_a smelts cobblestone and places the stone at a build site (10 calls).

    python benchmarks/sim_world.py [--seconds 0.25] [--rounds 12]
"""
from __future__ import annotations

import argparse
import time


from gencoord_env.world.sim import SimWorld
from gencoord_env.world.types import SkillCall, Station, WorldSpec

SPEC = WorldSpec(
    agents=("agent_a", "agent_b"),
    stations=(
        Station("supply_chest", "chest", (0, 0, 0)),
        Station("order_chest", "chest", (6, 0, 0)),
        Station("crafting_table", "crafting_table", (3, 0, 3)),
        Station("furnace", "furnace", (0, 0, 6)),
        Station("site_a", "site", (8, 0, 8), cells=((8, 0, 8), (9, 0, 8), (8, 1, 8), (9, 1, 8))),
    ),
    positions={"agent_a": (1, 0, 1), "agent_b": (5, 0, 1)},
    inventories={"agent_a": {"cobblestone": 2, "coal": 1}, "agent_b": {}},
    containers={"supply_chest": {"oak_log": 2}},
)

CALLS = [
    SkillCall("a1", "agent_a", "withdraw", {"station": "supply_chest", "item": "oak_log", "count": 1}),
    SkillCall("a2", "agent_a", "craft", {"item": "oak_planks", "count": 4, "station": ""}, after=("a1",)),
    SkillCall("a3", "agent_a", "give", {"to": "agent_b", "item": "oak_planks", "count": 4}, after=("a2",)),
    SkillCall("b1", "agent_b", "await_handoff", {"from": "agent_a", "item": "oak_planks", "count": 4},
              after=("a3",)),
    SkillCall("b2", "agent_b", "craft", {"item": "crafting_table", "count": 1, "station": "crafting_table"},
              after=("b1",)),
    SkillCall("b3", "agent_b", "deposit", {"station": "order_chest", "item": "crafting_table", "count": 1},
              after=("b2",)),
    SkillCall("a4", "agent_a", "furnace_input", {"station": "furnace", "item": "cobblestone", "count": 2}),
    SkillCall("a5", "agent_a", "furnace_fuel", {"station": "furnace", "item": "coal", "count": 1}, after=("a4",)),
    SkillCall("a6", "agent_a", "furnace_output", {"station": "furnace", "item": "stone", "count": 2},
              after=("a5",)),
    SkillCall("a7", "agent_a", "place", {"site": "site_a", "item": "stone", "count": 2}, after=("a6",)),
]


def episode(world: SimWorld) -> bool:
    world.reset(SPEC)
    events = world.run(CALLS)
    world.observe()
    return events[-1].ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.25, help="measuring time per round")
    parser.add_argument("--rounds", type=int, default=12, help="report the best of this many rounds (short rounds dodge noise from other processes)")
    opts = parser.parse_args()
    world = SimWorld()
    if not episode(world):
        raise SystemExit("the benchmark episode failed: " + repr(world.run([])))
    best = 0.0
    for _ in range(opts.rounds):
        n, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < opts.seconds:
            for _ in range(1000):
                episode(world)
            n += 1000
        best = max(best, n / elapsed)
    print(f"sim world: {len(CALLS)} calls/episode, {best:,.0f} episodes/s "
          f"({1e6 / best:.1f} us per reset+run+observe), best of {opts.rounds} x {opts.seconds:g} s")


if __name__ == "__main__":
    main()
