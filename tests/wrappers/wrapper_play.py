"""Functions shared by the wrapper tests (not a test module)."""
from __future__ import annotations

from typing import Any

from gencoord_env.agents import make_policy


def play(env: Any, index: int, policy: Any = None) -> dict[str, Any]:
    """One episode (rule agent by default); every observation both agents saw, the actions, the final info."""
    policy = policy or make_policy("rule")
    obs, infos = env.reset(options={"index": index})
    steps = []
    while env.agents:
        turn = next(a for a, i in infos.items() if i.get("deciding"))
        action = policy.act(obs[turn], infos[turn])
        steps.append({"turn": turn, "obs": dict(obs), "action": action, "info": infos[turn]})
        obs, _, _, _, infos = env.step({a: (action if a == turn else "") for a in env.agents})
    return {"steps": steps, "info": infos[env.possible_agents[0]]}


def interventions_in(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in trace if r["stage"] == "intervention"]
