"""Rendering: ``ansi`` (the episode as text) and ``rgb_array`` (a top-down picture from world truth) with
PettingZoo's render test, Gymnasium's checker and the handoff's items visible in the frames (sim here;
Minecraft in tests/minecraft/test_render_mc.py)."""
from __future__ import annotations

from functools import partial

import gymnasium
import numpy as np
import pytest
from pettingzoo.test import render_test

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.envs.gencoord.picture import BANNER, centre, item_colour

MENU_BAG = dict(backend="sim", pool="heldout", actions="menu", observations="bag")


def handed_in_frames(env, index: int) -> tuple[str, list[np.ndarray], dict]:  # type: ignore[no-untyped-def]
    """Play episode ``index`` with the rule agent, rendering after reset and every step: (handed item,
    frames, final infos). Shared with the Minecraft test."""
    rule = make_policy("rule")
    obs, infos = env.reset(options={"index": index})
    frames = [env.render()]
    while env.agents:
        turn = next(a for a, i in infos.items() if i["deciding"])
        obs, _, _, _, infos = env.step({turn: rule.act(env.observation_text(turn), infos[turn])})
        frames.append(env.render())
    handoff = next(e for e in env.session.events if e.kind == "handoff" and e.ok)
    return handoff.data["item"], frames, infos


def flight_pixels(env, frame: np.ndarray, item: str) -> int:  # type: ignore[no-untyped-def]
    """Pixels of ``item``'s colour on the line between the episode's giver and receiver."""
    episode = env.session.episode
    spec = episode.world
    (r0, c0), (r1, c1) = centre(spec, episode.first), centre(spec, episode.second)
    r0, r1 = r0 + BANNER, r1 + BANNER  # the arena sits under the banner
    points = {(int(round(r0 + t * (r1 - r0))), int(round(c0 + t * (c1 - c0)))) for t in np.linspace(0.2, 0.8, 50)}
    return sum(bool((frame[r, c] == item_colour(item)).all()) for r, c in points)


def test_pettingzoos_render_test_passes() -> None:
    render_test(partial(gencoord_env.env, **MENU_BAG))


def test_the_gym_view_passes_gymnasiums_checker_with_rgb_array() -> None:
    from gymnasium.utils.env_checker import check_env

    env = gencoord_env.gym_env(render_mode="rgb_array", **MENU_BAG)
    check_env(env)
    frames = gymnasium.wrappers.RenderCollection(env)
    frames.reset(seed=0)
    frames.step(int(np.flatnonzero(env.action_masks())[1]))
    assert len(frames.render()) == 2 and all(f.dtype == np.uint8 and f.ndim == 3 for f in frames.render())


@pytest.mark.parametrize("index", [0, 1, 17, 40])
def test_the_handed_items_fly_in_the_frames_once_handed(index: int) -> None:
    env = gencoord_env.parallel_env(render_mode="rgb_array", **MENU_BAG)
    item, frames, infos = handed_in_frames(env, index)
    assert infos["agent_a"]["outcome"].value == "SUCCESS"
    assert flight_pixels(env, frames[0], item) == 0 and flight_pixels(env, frames[-1], item) > 20
    assert frames[0].shape == frames[-1].shape and not np.array_equal(frames[0], frames[-1])


def test_the_ansi_text_tells_the_episode() -> None:
    env = gencoord_env.parallel_env(render_mode="ansi", **MENU_BAG)
    item, texts, _ = handed_in_frames(env, 0)
    assert texts[0].startswith("EPISODE ") and "STAGE sender_initial" in texts[0]
    assert any(line.startswith("HANDOFF ") and line.endswith(item) for line in texts[-1].splitlines())
    assert texts[-1].splitlines()[-1] == "STAGE done OUTCOME SUCCESS"
    with pytest.raises(ValueError, match="unknown render_mode 'rgb'"):
        gencoord_env.parallel_env(backend="sim", render_mode="rgb")


def _banner(frame: np.ndarray) -> tuple[int, ...]:
    return tuple(int(v) for v in frame[2, 2])


def test_the_frames_tell_the_episode_roles_fact_plan_message_handoff_outcome() -> None:
    from gencoord_env.envs.gencoord import picture

    env = gencoord_env.parallel_env(render_mode="rgb_array", **MENU_BAG)
    _, frames, infos = handed_in_frames(env, 0)
    tale = picture.story(env.session)
    assert [kind for kind, _ in tale.lines] == ["PLAN", "MESSAGE", "PLAN", "HANDOFF", "OUTCOME"]
    assert tale.facts == ((env.session.episode.first, f"active_binding_id={env.session.episode.binding}"),)
    assert _banner(frames[0]) == picture.RUNNING_BANNER and _banner(frames[-1]) == picture.SUCCESS_BANNER
    arena_width = picture.shape(env.session.episode.world)[1]
    panels = [f[:, arena_width:] for f in frames]
    # the sender's decision changes the picture (its plan and message are written), so does the receiver's
    assert not np.array_equal(panels[0], panels[1]) and not np.array_equal(panels[1], panels[2])
    fact = np.all(frames[0] == picture.FACT, axis=-1)
    assert fact[:, :arena_width].sum() > 50 and fact[:, arena_width:].sum() > 50  # marked station; the FACT line
    roles = [role for role, _ in tale.roles]
    assert roles == ["sender", "receiver"]
    for role, agent in tale.roles:  # the role's name is written above its disc
        r, c = centre(env.session.episode.world, agent)
        above = frames[0][BANNER + r - 26:BANNER + r - 8, c - 30:c + 30]
        assert np.all(above == picture.WHITE, axis=-1).sum() > 10, role


def test_a_failed_episode_ends_on_a_red_banner_naming_its_outcome() -> None:
    from gencoord_env.envs.gencoord import picture

    env = gencoord_env.parallel_env(backend="sim", pool="heldout", render_mode="rgb_array")
    env.reset(options={"index": 0})
    first = env.render()
    env.step({"agent_a": "SELF nonsense"})
    last = env.render()
    assert first.shape == last.shape and _banner(last) == picture.FAILURE_BANNER
    assert picture.story(env.session).lines[-1][1].startswith("PARSE_FAILURE")
    assert ("HANDOFF", "none") in picture.story(env.session).lines
