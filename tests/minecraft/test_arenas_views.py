"""The vector and single-agent views on arenas: sub-envs in other processes attach to one sidecar by endpoint."""
from __future__ import annotations

from typing import Any

import gymnasium

import gencoord_env
from gencoord_env.agents import make_policy
from sidecar_installed import needs_sidecar


pytestmark = needs_sidecar


def _one(infos: dict[str, Any], i: int) -> dict[str, Any]:
    """Sub-env ``i``'s info out of a vector env's batched infos (nested dicts are batched key by key)."""
    out = {}
    for k, v in infos.items():
        mask = infos.get(f"_{k}")
        if k.startswith("_") or (mask is not None and not mask[i]):
            continue
        out[k] = _one(v, i) if isinstance(v, dict) else v[i]
    return out


def test_async_vector_env_sub_envs_each_hold_an_arena_of_one_sidecar() -> None:
    from gencoord_env.world.minecraft import SidecarPool

    with SidecarPool(arenas=2) as pool:
        endpoint = pool.endpoint

        def make() -> gymnasium.Env:
            return gencoord_env.gym_env(role="first", partner="rule", backend="minecraft", pool="heldout",
                                        backend_options={"endpoint": endpoint})

        envs = gymnasium.vector.AsyncVectorEnv([make, make])
        try:
            obs, infos = envs.reset(seed=[3, 4])
            held = [a["name"] for a in pool.hello()["arenas"] if a["held"]]
            assert sorted(held) == ["a0", "a1"]  # each subprocess holds its own arena
            rule = make_policy("rule")
            outcomes: dict[int, str] = {}
            for _ in range(8):
                actions = [rule.act(obs[i], _one(infos, i)) for i in range(2)]
                obs, rewards, terminated, truncated, infos = envs.step(actions)
                for i in range(2):
                    if terminated[i] and i not in outcomes:
                        outcomes[i] = str(_one(infos, i).get("outcome"))
                if len(outcomes) == 2:
                    break
            assert outcomes == {0: "SUCCESS", 1: "SUCCESS"}
        finally:
            envs.close()
