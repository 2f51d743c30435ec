"""Shared Minecraft env for the end-to-end tests: one sidecar (server + two bots) for the whole module."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from sidecar_installed import MISSING


@pytest.fixture(scope="package")
def mc_world() -> Iterator[object]:
    if MISSING:
        pytest.skip(f"the Minecraft sidecar is not ready here: {MISSING}")
    from gencoord_env.world.minecraft import MinecraftWorld

    world = MinecraftWorld()
    yield world
    world.close()
