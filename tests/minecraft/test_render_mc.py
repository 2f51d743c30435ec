"""The top-down picture from Minecraft's world truth: the handed items appear in the frames (the helpers are
the sim test's, tests/rl/test_render.py)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import gencoord_env

_spec = importlib.util.spec_from_file_location("gencoord_render_tests", Path(__file__).parents[1] / "rl" / "test_render.py")
assert _spec is not None and _spec.loader is not None
render_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render_tests)


def test_a_minecraft_episode_renders_its_handoff(mc_world) -> None:  # type: ignore[no-untyped-def]
    env = gencoord_env.parallel_env(pool="heldout", world=mc_world, render_mode="rgb_array")
    item, frames, infos = render_tests.handed_in_frames(env, 0)
    assert infos["agent_a"]["outcome"].value == "SUCCESS"
    assert render_tests.flight_pixels(env, frames[0], item) == 0
    assert render_tests.flight_pixels(env, frames[-1], item) > 20
    assert all(f.shape == frames[0].shape for f in frames) and len(frames) == 3
