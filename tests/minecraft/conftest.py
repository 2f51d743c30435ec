"""Shared Minecraft env for the end-to-end tests: one sidecar (server + two bots) for the whole module."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from gencoord_env.world.minecraft.runtime import find_sidecar_dir, missing_packages


def _missing() -> list[str]:
    try:
        return missing_packages(find_sidecar_dir())
    except Exception as e:  # noqa: BLE001 - any lookup failure means: not installed here
        return [str(e)]


MISSING = _missing()
needs_sidecar = pytest.mark.skipif(bool(MISSING), reason=f"run 'gencoord setup' first: {MISSING}")


@pytest.fixture(scope="package")
def mc_world() -> Iterator[object]:
    if MISSING:
        pytest.skip(f"run 'gencoord setup' first: {MISSING}")
    from gencoord_env.world.minecraft import MinecraftWorld

    world = MinecraftWorld()
    yield world
    world.close()


def play_sender(env: object) -> tuple[str, str]:
    """Reset ``env`` to heldout episode 0 and play the sender's reference record; returns the receiver and its
    reference record, whose step compiles and executes the episode."""
    from gencoord_env import dsl
    from gencoord_env.tasks import references as R

    env.reset(options={"index": 0})  # type: ignore[attr-defined]
    q = R.sender_initial(env.session.episode)  # type: ignore[attr-defined]
    _, _, _, _, infos = env.step({env.session.turn: dsl.format(q)})  # type: ignore[attr-defined]
    receiver = next(a for a, i in infos.items() if i["deciding"])
    return receiver, dsl.format(R.receiver_after_request(q.peer_requests[0]))
