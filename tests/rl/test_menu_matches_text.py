"""A menu slot is its record sent as text: the same step, outcome, infos and trace; the menu's observation
is the text one with a ``MENU`` line for each usable slot; token observations are those of the rendered
text, bags those of the text without the menu; what the env memoizes never leaks into what it returns."""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

import gencoord_env
from gencoord_env.tasks.contexts import render_parts

# (pool, route, surface): every route, both structured surfaces, a team pool and Goal x Capability
CASES = [("heldout", "forward", "dsl"), ("heldout", "single_step", "json"), ("heldout", "centralized", "dsl"),
         ("goal_capability", "feedback", "dsl"), ("goal_capability", "requester_only", "json"),
         ("teams", "forward", "dsl"), ("team_feedback", "feedback", "json")]


def _deciding(infos: dict) -> str:
    return next(a for a, i in infos.items() if i["deciding"])


def _without_menu(obs: dict) -> dict:
    """The observations' texts without their MENU lines, after checking that those name the usable slots."""
    out = {}
    for a, o in obs.items():
        lines = o["observation"].split("\n")
        menu = [line for line in lines if line.startswith("MENU ")]
        assert [int(line.split()[1]) for line in menu] == np.flatnonzero(o["action_mask"]).tolist() or not menu
        assert not menu or o["action_mask"][1:].any()  # only the deciding agent has a menu
        out[a] = "\n".join(line for line in lines if not line.startswith("MENU "))
    return out


def _traced_without_menu(trace: list) -> list:
    out = []
    for record in trace:
        seen = getattr(record, "observation", None)
        if isinstance(seen, str):
            assert "\nMENU 0 empty\n" in seen
            record = dataclasses.replace(record, observation="\n".join(x for x in seen.split("\n") if not x.startswith("MENU ")))
        out.append(record)
    return out


@pytest.mark.parametrize("pool,route,surface", CASES, ids=["-".join(c) for c in CASES])
def test_a_menu_slot_steps_as_its_record_sent_as_text(pool: str, route: str, surface: str) -> None:
    kw = dict(backend="sim", pool=pool, route=route, surface=surface)
    menu, text = gencoord_env.parallel_env(actions="menu", **kw), gencoord_env.parallel_env(**kw)
    rng = random.Random(f"{pool}-{route}-{surface}")
    outcomes = set()
    for k in rng.sample(range(len(menu.episodes)), 12) * 2:  # each episode twice: the second meets warm memos
        m_obs, m_infos = menu.reset(options={"index": k})
        t_obs, t_infos = text.reset(options={"index": k})
        while menu.agents:
            assert _without_menu(m_obs) == t_obs
            assert "\nMENU 0 empty\n" in m_obs[_deciding(m_infos)]["observation"]
            assert {a: {key: v for key, v in i.items() if key != "candidates"} for a, i in m_infos.items()} == t_infos
            turn = _deciding(m_infos)
            candidates = m_infos[turn]["candidates"]
            slot = rng.choice([s for s, c in enumerate(candidates) if c is not None])
            m_obs, *m_rest, m_infos = menu.step({turn: slot})
            t_obs, *t_rest, t_infos = text.step({turn: candidates[slot]})
            assert m_rest == t_rest  # rewards, terminations, truncations
        assert _without_menu(m_obs) == t_obs
        # outcome, reason, metrics and the whole trace, whose decision records hold what the agent saw
        assert {a: {**i, "trace": _traced_without_menu(i["trace"])} for a, i in m_infos.items()} == t_infos
        outcomes.add(str(m_infos[menu.possible_agents[0]]["outcome"]))
    assert len(outcomes) > 1  # random slots reach more than one outcome


@pytest.mark.parametrize("route", ["forward", "centralized"])
def test_token_and_bag_observations_are_those_of_the_rendered_text(route: str) -> None:
    kw = dict(backend="sim", pool="heldout", route=route, actions="menu")
    tokens = gencoord_env.parallel_env(observations="tokens", max_tokens=2048, **kw)
    bag = gencoord_env.parallel_env(observations="bag", **kw)
    tok = tokens.interface.tokenizer
    v = tok.vocab_size
    rng = np.random.default_rng(0)
    for k in [0, 5, 0, 5, 17]:
        t_obs, t_infos = tokens.reset(options={"index": k})
        b_obs, b_infos = bag.reset(options={"index": k})
        while tokens.agents:
            for a in tokens.agents:
                seen = tokens.observation_text(a)
                assert seen == bag.observation_text(a)
                ids = tok.encode(seen)
                assert len(ids) < 2048 and t_obs[a]["observation_mask"].sum() == len(ids)
                assert t_obs[a]["observation"][: len(ids)].tolist() == ids and not t_obs[a]["observation"][len(ids):].any()
                context = b_infos[a].get("context")
                if context is not None and context.peer_view is None:  # the prior is counted apart, the menu not at all
                    local, prior = "\n".join(render_parts(context)[:3]), context.prior.text
                    assert seen.startswith(local) and prior in seen
                    assert seen[len(local) + 1: seen.index(prior) - 1].startswith("MENU 0 empty")  # between them
                else:  # a centralized planner's uploads are local words too; the menu is not counted
                    local, prior = "\n".join(x for x in seen.split("\n") if not x.startswith("MENU ")), ""
                expected = np.concatenate([np.bincount(tok.encode(local), minlength=v), np.bincount(tok.encode(prior), minlength=v)])
                assert b_obs[a]["observation"].dtype == np.float32 and (b_obs[a]["observation"] == expected).all()
            turn = _deciding(t_infos)
            slot = int(rng.choice(np.flatnonzero(t_obs[turn]["action_mask"])))
            t_obs, _, _, _, t_infos = tokens.step({turn: slot})
            b_obs, _, _, _, b_infos = bag.step({turn: slot})


@pytest.mark.parametrize("observations", ["text", "tokens", "bag"])
def test_observations_are_fresh_arrays_each_time(observations: str) -> None:
    """Menus, token ids and bags are memoized; a learner that writes into what it got changes nothing later."""
    env = gencoord_env.parallel_env(backend="sim", pool="heldout", actions="menu", observations=observations)
    first, _ = env.reset(options={"index": 3})
    kept = {a: {k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for k, v in o.items()} for a, o in first.items()}
    for o in first.values():
        for value in o.values():
            if isinstance(value, np.ndarray):
                assert value.flags.writeable
                value[:] = 7
    again, _ = env.reset(options={"index": 3})
    for a, o in again.items():
        for key, value in o.items():
            assert np.array_equal(value, kept[a][key]) if isinstance(value, np.ndarray) else value == kept[a][key]


def test_memoized_observations_match_those_built_from_cold_memos() -> None:
    """Envs of different routes, views, private-fact forms and interfaces share the package's memos; what
    each returns at a warm reset is what it returns with every memo empty."""
    from gencoord_env import caches

    combos = [dict(route=r, view=v, private_fact=f, observations=o)
              for r, v, f, o in [("forward", "full", "id", "tokens"), ("single_step", "full", "id", "tokens"),
                                 ("centralized", "skeleton", "id", "bag"), ("forward", "full", "C2", "text"),
                                 ("forward", "full", "C3", "bag"), ("single_step", "skeleton", "train", "text")]]
    envs = [gencoord_env.parallel_env(backend="sim", pool="heldout", actions="menu", **kw) for kw in combos]

    def play(env: gencoord_env.envs.gencoord_v0.raw_env, k: int) -> list:
        obs, infos = env.reset(options={"index": k})
        seen = [(obs, infos)]
        while env.agents:
            turn = _deciding(infos)
            obs, _, _, _, infos = env.step({turn: int(np.flatnonzero(obs[turn]["action_mask"])[-1])})
            seen.append((obs, infos))
        return seen

    warm = [[play(env, k) for k in range(6)] for env in envs for _ in range(2)][1::2]
    for env, runs in zip(envs, warm):
        for k, run in enumerate(runs):
            caches.clear()
            cold = play(env, k)
            assert len(cold) == len(run)
            for (w_obs, w_infos), (c_obs, c_infos) in zip(run, cold):
                assert w_infos == c_infos
                for a in c_obs:
                    assert w_obs[a].keys() == c_obs[a].keys()
                    for key, value in c_obs[a].items():
                        assert np.array_equal(w_obs[a][key], value) if isinstance(value, np.ndarray) else w_obs[a][key] == value
