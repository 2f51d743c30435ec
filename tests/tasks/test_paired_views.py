"""Paired local ambiguity over the pools the env actually serves.

For every pool, the agent without the deciding fact (forward route: the receiver before any request;
Goal x Capability: the requester) must see byte-identical observations - text, dict context and infos -
under the two bindings of each matched pair, so that nothing it reads predicts the binding. With menu
actions too: the ``branches`` menu's slot labels (``MENU`` lines, ``menu_labels`` token ids), the token
view and the action mask.
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.tasks import POOL_SIZES
from gencoord_env.wrappers import RequestRemoval

FORWARD_POOLS = [p for p in sorted(POOL_SIZES) if p != "goal_capability"]


#: the observation interfaces the views are taken under
INTERFACES = {"text": {}, "menu": {"actions": "menu", "menu": "branches", "observations": "tokens"}}


def _seen(observation: Any) -> str:
    """An observation as one string (a dict's arrays as lists)."""
    if isinstance(observation, str):
        return observation
    return json.dumps({k: v.tolist() if hasattr(v, "tolist") else v for k, v in sorted(observation.items())})


def _uninformed_views(pool: str, interface: str = "text") -> list[tuple[str, str, str]]:
    """(binding, observation text, infos JSON) of the uninformed agent at its decision, every episode.

    Forward pools: the receiver's decision with the request removed (what it sees before any message).
    Goal x Capability: the requester's first decision (its peer's workcell mode is the hidden fact).
    """
    kw = INTERFACES[interface]
    if pool == "goal_capability":
        env: Any = gencoord_env.parallel_env(pool=pool, backend="sim", route="feedback", **kw)
    else:
        env = RequestRemoval(gencoord_env.parallel_env(pool=pool, backend="sim", **kw))
    policy = make_policy("rule")
    out = []
    for k in range(len(env.unwrapped.episodes)):
        obs, infos = env.reset(options={"index": k})
        episode = env.unwrapped.session.episode
        uninformed = episode.first if pool == "goal_capability" else episode.second
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            if turn == uninformed:
                info = {key: v for key, v in infos[turn].items() if key != "episode_id"}
                text = env.unwrapped.observation_text(turn)
                out.append((episode.binding, text + "\n" + _seen(obs[turn]), json.dumps(info, sort_keys=True, default=str)))
                break
            obs, _, _, _, infos = env.step({turn: policy.act(env.unwrapped.observation_text(turn), infos[turn])})
    return out


@pytest.mark.parametrize("interface", sorted(INTERFACES))
@pytest.mark.parametrize("pool", sorted(POOL_SIZES))
def test_each_uninformed_view_occurs_equally_under_both_bindings(pool: str, interface: str) -> None:
    views = _uninformed_views(pool, interface)
    groups: dict[str, list[str]] = defaultdict(list)
    for binding, text, info in views:
        groups[text + "\n" + info].append(binding)
        assert ("\nMENU 1 branch=" in text) == (interface == "menu")  # the menu's labels are in the view
    assert len(views) == 2 * POOL_SIZES[pool]
    for bindings in groups.values():
        counts = {b: bindings.count(b) for b in set(bindings)}
        assert len(counts) == 2 and len(set(counts.values())) == 1, counts


@pytest.mark.parametrize("pool", FORWARD_POOLS)
def test_the_sender_does_see_its_binding(pool: str) -> None:
    env = gencoord_env.parallel_env(pool=pool, backend="sim")
    seen: dict[str, set[str]] = defaultdict(set)
    for k in range(0, len(env.episodes), 7):
        obs, infos = env.reset(options={"index": k})
        sender = env.session.episode.first
        seen[obs[sender]].add(env.session.episode.binding)
    assert all(len(b) == 1 for b in seen.values())


@pytest.mark.parametrize("pool", ["heldout", "request", "crossproduct", "horizon", "visibility"])
def test_a_classifier_of_receiver_views_is_at_chance(pool: str) -> None:
    """Trained on the train pool's receiver views to name the binding slot, it cannot beat a coin."""
    from gencoord_env.commands.experiments.leakage import classifier_accuracy, uninformed_views

    accuracy = classifier_accuracy(_train_views(), uninformed_views(pool))
    assert accuracy <= 0.6, accuracy


_TRAIN: list = []


def _train_views() -> list:
    from gencoord_env.commands.experiments.leakage import uninformed_views

    if not _TRAIN:
        _TRAIN.extend(uninformed_views("train"))
    return _TRAIN
