"""Learning-ready interfaces with the real clients: PettingZoo's API and seed tests, Gymnasium's and SB3's
env checkers, vector envs, menu actions, token and bag observations, staged rewards, numeric infos."""
from __future__ import annotations

import json

import gymnasium
import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

import gencoord_env
from gencoord_env import FailureCode
from gencoord_env.agents import make_policy
from gencoord_env.agents.rollout import run_episode
from gencoord_env.envs.gencoord.menu import menu_size
from gencoord_env.outcomes import STAGED_REWARD
from gencoord_env.wrappers import RequestRemoval

VIEWS = [dict(actions="menu"), dict(observations="tokens"), dict(observations="bag"),
         dict(actions="menu", observations="tokens"), dict(actions="menu", observations="bag")]


def _env(**kw):  # type: ignore[no-untyped-def]
    return gencoord_env.parallel_env(backend="sim", pool="heldout", **kw)


@pytest.mark.parametrize("kw", VIEWS, ids=lambda kw: "-".join(kw.values()))
def test_parallel_api_test(kw: dict) -> None:
    parallel_api_test(_env(**kw), num_cycles=40)


@pytest.mark.parametrize("kw", [v for v in VIEWS if v.get("observations") in ("tokens", "bag")],
                         ids=lambda kw: "-".join(kw.values()))
def test_aec_api_test_on_numeric_views(kw: dict) -> None:
    api_test(gencoord_env.env(backend="sim", pool="heldout", **kw), num_cycles=40)


@pytest.mark.parametrize("kw", [{}, dict(actions="menu", observations="tokens")], ids=["text", "menu-tokens"])
def test_seed_tests_pass_on_the_parallel_and_aec_forms(kw: dict) -> None:
    parallel_seed_test(lambda: _env(**kw))
    if kw:
        seed_test(lambda: gencoord_env.env(backend="sim", pool="heldout", **kw), num_cycles=30)


def test_the_aec_form_selects_only_the_deciding_agent() -> None:
    aec = gencoord_env.env(backend="sim", pool="goal_capability", route="feedback")
    policy = make_policy("rule")
    aec.reset(seed=3)
    selected = []
    for agent in aec.agent_iter():
        obs, reward, term, trunc, info = aec.last()
        if term or trunc:
            aec.step(None)
            continue
        assert info["deciding"] and info["turn"] == agent
        selected.append(agent)
        aec.step(policy.act(obs, info))
    assert len(selected) == 2 and selected[0] == selected[1]  # the requester decides twice in a row


def test_spaces_are_built_once_and_sized_from_the_prior() -> None:
    env = _env(actions="menu", observations="tokens", max_tokens=512)
    assert env.observation_space("agent_a") is env.observation_space("agent_b") is env.observation_space("agent_a")
    assert env.action_space("agent_a") == gymnasium.spaces.Discrete(menu_size())
    space = env.observation_space("agent_a")
    assert space["observation"].shape == (512,) and space["action_mask"].shape == (menu_size(),)


def test_the_menu_holds_the_canonical_record_and_goes_through_the_pipeline() -> None:
    env = _env(actions="menu")
    rule = make_policy("rule")
    for k in range(0, 256, 9):
        obs, infos = env.reset(options={"index": k})
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            wanted = rule.act(env.observation_text(turn), infos[turn])
            slots = [i for i, c in enumerate(infos[turn]["candidates"]) if c == wanted]
            assert slots and all(obs[turn]["action_mask"][i] == 1 for i in slots)
            obs, _, _, _, infos = env.step({turn: slots[0]})
        assert infos["agent_a"]["outcome"] is FailureCode.SUCCESS


def test_a_masked_or_bad_slot_is_a_parse_failure_not_an_exception() -> None:
    env = _env(actions="menu")
    obs, infos = env.reset(options={"index": 0})
    turn = next(a for a, i in infos.items() if i["deciding"])
    masked = int(np.flatnonzero(obs[turn]["action_mask"] == 0)[0])
    _, rewards, terms, _, infos = env.step({turn: masked})
    assert all(terms.values()) and infos[turn]["outcome"] is FailureCode.PARSE_FAILURE
    assert f"menu slot {masked} is masked" in infos[turn]["reason"]
    for bad in (-1, 10_000, 2.5, "x" * 0):
        env.reset(options={"index": 0})
        _, _, terms, _, infos = env.step({turn: bad})
        assert all(terms.values()) and infos[turn]["outcome"] in (FailureCode.PARSE_FAILURE, FailureCode.CONTRACT_REJECT)


def test_the_receivers_menu_is_the_same_under_both_bindings_of_a_pair() -> None:
    """Built from what the receiver sees: without the request, nothing in its menu names the binding."""
    env = RequestRemoval(_env(actions="menu"))
    rule = make_policy("rule")
    menus: dict[str, set[str]] = {}
    for k in range(len(env.unwrapped.episodes)):
        obs, infos = env.reset(options={"index": k})
        episode = env.unwrapped.session.episode
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            if turn == episode.second:
                key = env.unwrapped.observation_text(turn)
                menus.setdefault(key, set()).add(json.dumps(infos[turn]["candidates"]))
                break
            obs, _, _, _, infos = env.step({turn: rule.act(env.unwrapped.observation_text(turn), infos[turn])})
    assert all(len(m) == 1 for m in menus.values())


def test_staged_rewards_follow_the_pipeline() -> None:
    env = _env(reward="staged")
    rule = make_policy("rule")
    assert run_episode(env, rule, index=0)["outcome"] is FailureCode.SUCCESS
    obs, infos = env.reset(options={"index": 1})
    turn = next(a for a, i in infos.items() if i["deciding"])
    _, rewards, _, _, infos = env.step({turn: "SELF -\nREQ -"})
    assert rewards[turn] == STAGED_REWARD[FailureCode.CONTRACT_REJECT] == 0.2
    wrong = RequestRemoval(_env(reward="staged"))
    outcomes = {run_episode(wrong, rule, index=k)["outcome"] for k in range(40)}
    assert FailureCode.TERMINAL_FAILURE in outcomes or FailureCode.RESOLUTION_CONFLICT in outcomes


def test_numeric_infos_hold_only_numbers() -> None:
    env = _env(infos="numbers", actions="menu", observations="tokens")
    obs, infos = env.reset(seed=0)
    done = False
    while not done:
        for info in infos.values():
            assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in info.values()), info
        turn = next(a for a, i in infos.items() if i["deciding"])
        obs, rewards, terms, _, infos = env.step({turn: 1})
        done = all(terms.values())
    assert set(infos["agent_a"]) >= {"done", "success", "reward", "decisions"}


@pytest.mark.parametrize("obs", ["tokens", "bag"])
def test_gym_view_passes_gymnasium_checker(obs: str) -> None:
    from gymnasium.utils.env_checker import check_env

    check_env(gencoord_env.gym_env(role="first", backend="sim", pool="heldout", actions="menu", observations=obs),
              skip_render_check=True)


@pytest.mark.parametrize("obs", ["tokens", "bag"])
def test_gym_view_passes_sb3_checker(obs: str) -> None:
    """SB3's checker is stricter than Gymnasium's (numpy observations); SB3 comes with the ``rl`` extra."""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_checker import check_env

    check_env(gencoord_env.gym_env(role="first", backend="sim", pool="heldout", actions="menu", observations=obs))


def test_gym_view_is_registered_and_vectorizes() -> None:
    env = gymnasium.make("gencoord_env/GenCoord-v0", role="second", backend="sim", pool="heldout",
                         actions="menu", observations="tokens")
    obs, info = env.reset(seed=1)
    assert info["stage"] == "receiver_after_request" and info["deciding"]
    make = lambda: gencoord_env.gym_env(backend="sim", pool="heldout", actions="menu", observations="bag")  # noqa: E731
    for vec in (gymnasium.vector.SyncVectorEnv([make, make]), gymnasium.vector.AsyncVectorEnv([make, make])):
        obs, _ = vec.reset(seed=0)
        assert obs["observation"].shape[0] == 2
        _, rewards, terms, _, _ = vec.step(np.array([0, 0]))
        assert terms.all() and (rewards == 0).all()  # slot 0 is the empty record: no plan, no reward
        vec.close()


def test_gym_view_action_masks_are_the_observation_mask_and_maskable_ppo_reads_them() -> None:
    """``action_masks()`` is what sb3-contrib's MaskablePPO asks the env for; it must be the current
    decision's mask (the role-swapped second permutation included), and a text-action env has none."""
    env = gencoord_env.gym_env(backend="sim", pool="heldout", actions="menu", observations="bag")
    rule = make_policy("rule")
    for k in (0, 1, 2, 3):
        obs, info = env.reset(options={"index": k})
        mask = env.action_masks()
        assert mask.dtype == bool and mask.tolist() == obs["action_mask"].astype(bool).tolist()
        wanted = info["candidates"].index(rule.act(env.unwrapped.env.observation_text(info["context"].agent), info))
        assert mask[wanted] and 1 < mask.sum() < len(mask)
    with pytest.raises(ValueError, match="action_masks\\(\\) needs actions='menu'"):
        gencoord_env.gym_env(backend="sim", pool="heldout").action_masks()
    sb3_contrib = pytest.importorskip("sb3_contrib")
    from sb3_contrib.common.maskable.utils import get_action_masks
    from stable_baselines3.common.env_util import make_vec_env

    vec = make_vec_env(lambda: gencoord_env.gym_env(backend="sim", pool="heldout", actions="menu", observations="bag"), n_envs=2)
    vec.reset()
    assert get_action_masks(vec).shape == (2, menu_size())
    model = sb3_contrib.MaskablePPO("MultiInputPolicy", vec, n_steps=16, batch_size=16, seed=0).learn(32)
    vec.close()
    outcomes = []  # an unmasked slot holds no record: choosing one is a parse failure
    for k in range(32):
        obs, _ = env.reset(options={"index": k})
        action, _ = model.predict(obs, deterministic=False, action_masks=env.action_masks())
        outcomes.append(str(env.step(int(action))[4]["outcome"]))
    assert "PARSE_FAILURE" not in outcomes and len(set(outcomes)) > 1, outcomes


def test_gym_view_refuses_a_role_that_never_decides() -> None:
    with pytest.raises(ValueError, match="the second role never decides"):
        gencoord_env.gym_env(role="second", backend="sim", pool="goal_capability", route="feedback")


def test_procedural_pool_has_the_same_spaces_and_no_unknown_words() -> None:
    """One action space for every pool (a policy pretrained on generated tasks acts on the core pools),
    and the shipped vocabulary covers generated tasks of an unseen seed."""
    from gencoord_env.tokens import UNK

    core = _env(actions="menu", observations="tokens")
    generated = gencoord_env.parallel_env(backend="sim", pool="procedural", pool_seed=11, actions="menu", observations="tokens")
    assert core.action_space("agent_a") == generated.action_space("agent_a")
    assert core.observation_space("agent_a") == generated.observation_space("agent_a")
    rule = make_policy("rule")
    for k in range(40):
        obs, infos = generated.reset(options={"index": k})
        while generated.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            assert UNK not in obs[turn]["observation"]
            wanted = rule.act(generated.observation_text(turn), infos[turn])
            assert len(infos[turn]["candidates"]) == menu_size()
            obs, _, _, _, infos = generated.step({turn: infos[turn]["candidates"].index(wanted)})
        assert infos["agent_a"]["outcome"] is FailureCode.SUCCESS


@pytest.mark.parametrize("pool", ["teams", "team_feedback", "chain5"])
def test_team_pools_write_no_unknown_words(pool: str) -> None:
    """Every word a team pool writes into an observation, on every team route and surface, under rule and
    random play (which reaches the failure outcomes), has its own id in the shipped vocabulary."""
    from gencoord_env.envs.gencoord.routes import TEAM_ROUTES
    from gencoord_env.tokens import WORD_RE, WordTokenizer

    known = WordTokenizer.default().ids
    unknown: set[str] = set()
    for route in TEAM_ROUTES:
        for surface in ("dsl", "json"):
            try:
                env = gencoord_env.parallel_env(backend="sim", pool=pool, route=route, surface=surface)
            except ValueError as refused:  # team_feedback on the forward route: no record can solve it
                assert "cannot be solved" in str(refused)
                continue
            for name in ({"json": "rule_json"}.get(surface, "rule"), "random"):
                policy = make_policy(name)
                for k in range(0, len(env.episodes), 7):
                    obs, infos = env.reset(seed=k, options={"index": k})
                    texts = list(obs.values())
                    while env.agents:
                        turn = next(a for a, i in infos.items() if i["deciding"])
                        obs, _, _, _, infos = env.step({turn: policy.act(obs[turn], infos[turn])})
                        texts += obs.values()
                    unknown.update(w for text in texts for w in WORD_RE.findall(text) if w not in known)
    assert not unknown, sorted(unknown)
