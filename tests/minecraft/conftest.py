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
