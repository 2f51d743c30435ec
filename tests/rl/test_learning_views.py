"""The learning views as a follow-up study uses them: numeric infos behind the single-agent view and the
trace recorder, pools refused on routes that cannot solve them, PettingZoo's conversions and cycle limit,
copies of a live env, Gymnasium's registered entry point, every role of a team pool."""
from __future__ import annotations

import copy
import io
import json
import pickle
import re
from functools import partial
from types import SimpleNamespace

import gymnasium
import numpy as np
import pytest
from pettingzoo.test import max_cycles_test
from pettingzoo.utils.conversions import aec_to_parallel, parallel_to_aec

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.envs.gencoord.gencoord import raw_env
from gencoord_env.envs.gencoord.interface import Interface
from gencoord_env.envs.gencoord.routes import ROUTES, TEAM_ROUTES
from gencoord_env.envs.gencoord.session import EpisodeSession
from gencoord_env.envs.gencoord.stages import Stages
from gencoord_env.envs.gencoord.surfaces import SURFACES
from gencoord_env.tasks.pools import POOL_SIZES, TEAM_POOLS, pool_episodes
from gencoord_env.world.sim import SimWorld
from gencoord_env.wrappers import TraceRecorder

MENU_BAG = dict(backend="sim", actions="menu", observations="bag")


def _random_sender_success(infos: str, episodes: int = 200) -> float:
    env = gencoord_env.gym_env(role="first", pool="heldout", infos=infos, seed=0, **MENU_BAG)
    rng = np.random.default_rng(0)
    total = 0.0
    for _ in range(episodes):
        env.reset()
        _, reward, terminated, _, _ = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
        assert terminated
        total += reward
    return total / episodes


def test_numeric_infos_leave_the_partner_its_context_and_the_sender_its_reward() -> None:
    """On the old code the rule receiver got no context under infos="numbers": every reward was 0."""
    numbers, full = _random_sender_success("numbers"), _random_sender_success("full")
    assert numbers == full > 0.1


def test_the_receiver_view_resets_under_numeric_infos() -> None:
    """On the old code the rule sender played the empty record and reset() gave up after 100 episodes."""
    env = gencoord_env.gym_env(role="second", pool="heldout", infos="numbers", seed=0, **MENU_BAG)
    rule = make_policy("rule")
    wins = 0.0
    for k in range(16):
        _, info = env.reset(options={"index": k})
        assert info["deciding"] == 1 and all(isinstance(v, (int, float)) for v in info.values())
        full = env.unwrapped.env.full_infos()[env.unwrapped._me]
        slot = full["candidates"].index(rule.act(env.unwrapped.env.observation_text(env.unwrapped._me), full))
        _, reward, terminated, _, info = env.step(slot)
        assert terminated and info["success"] == reward
        wins += reward
    assert wins == 16


def test_torchrl_gym_wrapper_trains_on_the_real_reward() -> None:
    """TorchRL needs numeric infos; its rollouts of the receiver view carried a constant 0 reward before."""
    pytest.importorskip("torchrl")
    from torchrl.envs.libs.gym import GymWrapper

    env = GymWrapper(gencoord_env.gym_env(role="first", pool="heldout", infos="numbers", seed=0, **MENU_BAG))
    data = env.rollout(200, break_when_any_done=False)
    assert data["next", "reward"].sum() > 0


def test_trace_recorder_writes_records_under_numeric_infos() -> None:
    buffer = io.StringIO()
    env = TraceRecorder(gencoord_env.parallel_env(backend="sim", pool="heldout", infos="numbers", actions="menu"), buffer)
    for k in range(3):
        _, infos = env.reset(options={"index": k})
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            _, _, _, _, infos = env.step({turn: 1})
    records = [json.loads(line) for line in buffer.getvalue().splitlines()]
    assert env.records_written == len(records) == 3
    assert all(r["actions"] and r["trace"] and r["outcome"] for r in records)


def test_a_pool_no_record_can_solve_on_a_route_is_refused_naming_the_routes_to_use() -> None:
    msg = "pool 'team_feedback' cannot be solved on route 'forward': on the forward route the 'requester' role"
    with pytest.raises(ValueError, match=re.escape(msg)) as caught:
        gencoord_env.parallel_env(backend="sim", pool="team_feedback")
    assert "use route='feedback'" in str(caught.value)
    with pytest.raises(ValueError, match="cannot be solved on route 'forward'"):
        gencoord_env.parallel_env(backend="sim", pool=pool_episodes("team_feedback")[:3])


def _first_choices_that_succeed(episode, route: str, limit: int = 40) -> int:  # type: ignore[no-untyped-def]
    """How many of the first decision's menu records, the rule playing on, end in SUCCESS (the refused
    pairs cannot be built as envs, so the session runs directly)."""
    surface, rule, wins = SURFACES["dsl"], make_policy("rule"), 0
    setup = raw_env(backend="sim", pool="heldout", route="centralized").setup
    setup = type(setup)(route, setup.view, surface)
    interface = Interface("menu", "text", surface)
    first = EpisodeSession(episode, setup, Stages(), SimWorld())
    for text in [t for t in interface.menu(first.context(first.turn)).texts if t is not None][:limit]:
        s = EpisodeSession(episode, setup, Stages(), SimWorld())
        s.act(text)
        while not s.done:
            ctx = s.context(s.turn)
            s.act(rule.act("", {"context": ctx}))
        wins += s.outcome is not None and s.outcome.value == "SUCCESS"
    return wins


def test_refusal_follows_solvability_on_every_pool_and_route() -> None:
    """Accepted pool/route pairs are solved by the rule agent or some first record; the refused ones by none."""
    rule = make_policy("rule")
    for pool in [*POOL_SIZES, *TEAM_POOLS]:
        for route in (TEAM_ROUTES if pool in TEAM_POOLS else sorted(ROUTES)):
            try:
                env = gencoord_env.parallel_env(backend="sim", pool=pool, route=route)
            except ValueError as refused:
                assert "cannot be solved" in str(refused)
                episodes = pool_episodes(pool)
                assert all(_first_choices_that_succeed(e, route) == 0 for e in episodes[:: max(1, len(episodes) // 6)])
                continue
            wins = 0
            for k in range(0, len(env.episodes), max(1, len(env.episodes) // 12)):
                _, infos = env.reset(options={"index": k})
                while env.agents:
                    turn = next(a for a, i in infos.items() if i["deciding"])
                    _, _, _, _, infos = env.step({turn: rule.act(env.observation_text(turn), infos[turn])})
                wins += infos[turn]["outcome"].value == "SUCCESS"
            assert wins > 0, (pool, route)


def test_max_cycles_truncates_and_passes_pettingzoos_test() -> None:
    """A dialogue of random utterances runs to max_cycles and is truncated (refused as an argument before)."""
    mod = SimpleNamespace(parallel_env=partial(gencoord_env.parallel_env, backend="sim", surface="freeform"))
    mod.env = lambda **kw: parallel_to_aec(mod.parallel_env(**kw))
    max_cycles_test(mod)
    env = gencoord_env.parallel_env(backend="sim", surface="freeform", max_cycles=2)
    env.reset(seed=0)
    for _ in range(2):
        _, rewards, terms, truncs, infos = env.step({a: "hello" for a in env.agents})
    assert all(truncs.values()) and not any(terms.values()) and not env.agents
    assert infos["agent_a"]["outcome"] is None and infos["agent_a"]["trace"][-1]["stage"] == "max_cycles"
    with pytest.raises(ValueError, match=re.escape("max_cycles must be a positive int or None, got 0")):
        gencoord_env.parallel_env(backend="sim", max_cycles=0)


def test_aec_to_parallel_gives_back_the_parallel_env() -> None:
    aec = gencoord_env.env(backend="sim", pool="heldout", actions="menu")
    par = aec_to_parallel(aec)
    assert isinstance(par, raw_env)
    rule = make_policy("rule")
    _, infos = par.reset(seed=0)
    while par.agents:
        turn = next(a for a, i in infos.items() if i["deciding"])
        _, _, _, _, infos = par.step({turn: rule.act(par.observation_text(turn), infos[turn])})
    assert infos["agent_a"]["outcome"].value == "SUCCESS"


def _play(env, rule, episodes: int) -> list[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    out = []
    infos = env.full_infos()
    for _ in range(episodes):
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            _, _, _, _, infos = env.step({turn: rule.act(env.observation_text(turn), infos[turn])})
        out.append((infos["agent_a"]["episode_id"], str(infos["agent_a"]["outcome"]), json.dumps(infos["agent_a"]["metrics"])))
        _, infos = env.reset()
    return out


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_stepped_env_copies_and_continues_identically(how: str) -> None:
    env = gencoord_env.parallel_env(backend="sim", pool="heldout", route="single_step", seed=5)
    _, infos = env.reset(seed=5)
    turn = next(a for a, i in infos.items() if i["deciding"])
    env.step({turn: make_policy("rule").act(env.observation_text(turn), infos[turn])})  # mid-episode
    twin = copy.deepcopy(env) if how == "deepcopy" else pickle.loads(pickle.dumps(env))
    rule = make_policy("rule")
    assert _play(twin, rule, 6) == _play(env, rule, 6)


def test_action_masks_reach_through_gymnasium_make() -> None:
    env = gymnasium.make("gencoord_env/GenCoord-v0", pool="heldout", **MENU_BAG)
    obs, _ = env.reset(seed=0)
    assert env.action_masks().tolist() == obs["action_mask"].astype(bool).tolist()


@pytest.mark.parametrize("pool", ["chain3", "teams"])
def test_the_single_agent_view_plays_every_role_of_a_team_pool(pool: str) -> None:
    n = len(gencoord_env.parallel_env(backend="sim", pool=pool).possible_agents)
    rule = make_policy("rule")
    for role in range(n):
        env = gencoord_env.gym_env(role=role, pool=pool, seed=0, **MENU_BAG)
        for k in range(0, 3 * n, 2):
            _, info = env.reset(options={"index": k})
            episode = env.unwrapped.env.session.episode
            assert info["deciding"] and info["role"] == episode.roles[role]
            terminated = False
            while not terminated:
                slot = info["candidates"].index(rule.act(env.unwrapped.env.observation_text(info["context"].agent), info))
                _, reward, terminated, _, info = env.step(slot)
            assert reward == 1.0
    with pytest.raises(ValueError, match=re.escape("unknown role 3; expected one of ['first', 'second'] or a role index 0 .. 2")):
        gencoord_env.gym_env(role=3, pool="chain3", **MENU_BAG)
def test_sb3_make_vec_env_builds_the_registered_id() -> None:
    """SB3 asks for render_mode="rgb_array" first; the view refused it with a ValueError before."""
    pytest.importorskip("stable_baselines3")
    from sb3_contrib.common.maskable.utils import get_action_masks
    from stable_baselines3.common.env_util import make_vec_env

    vec = make_vec_env("gencoord_env/GenCoord-v0", n_envs=2, env_kwargs=dict(pool="heldout", **MENU_BAG))
    obs = vec.reset()
    assert obs["observation"].shape[0] == 2 and get_action_masks(vec).shape == (2, vec.action_space.n)
    assert vec.get_attr("render_mode") == ["rgb_array", "rgb_array"]
    vec.close()


