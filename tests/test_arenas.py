"""ArenaRunner's own logic on sim worlds: order, retries of faulted episodes, shared policies."""
from __future__ import annotations

import re
import threading
from functools import partial

import pytest

from gencoord_env.commands.arenas import (
    ArenaRunner,
    EpisodeLost,
    RolloutSpec,
    SharedPolicy,
    Slot,
    comparable,
    play_rollout,
    rollout_slot,
    slot_policy,
)
from gencoord_env.world.minecraft.errors import ArenaFault

SPEC = RolloutSpec({"pool": "heldout", "backend": "sim"}, policy="rule", trace=True)
BUILD = partial(rollout_slot, SPEC)


def test_results_come_in_the_order_asked_and_equal_the_serial_run() -> None:
    order = [7, 3, 0, 12, 5, 9, 1]
    with ArenaRunner("sim", 1) as serial_runner:
        serial = serial_runner.run(order, BUILD, play_rollout)
    with ArenaRunner("sim", 3) as runner:
        played = runner.run(order, BUILD, play_rollout)
    assert [r["index"] for r in played.results] == order and played.retries == ()
    assert [comparable(r["info"]) for r in played.results] == [comparable(r["info"]) for r in serial.results]
    assert all(r["trace"].count("\n") == 1 for r in played.results)  # one trace record per episode


def test_a_random_policy_gives_the_serial_results_on_several_arenas() -> None:
    # each slot has its own RandomAgent; which episodes it plays, and in which order, depends on the slots' timing
    spec = RolloutSpec({"pool": "heldout", "backend": "sim"}, policy="random", trace=True)
    build = partial(rollout_slot, spec)
    order = list(range(24))
    with ArenaRunner("sim", 1) as serial_runner:
        serial = serial_runner.run(order, build, play_rollout)
    with ArenaRunner("sim", 3) as runner:
        played = runner.run(order, build, play_rollout)
    assert [comparable(r["info"]) for r in played.results] == [comparable(r["info"]) for r in serial.results]
    assert [r["trace"] for r in played.results] == [r["trace"] for r in serial.results]
    # the random draws show in the outcomes: not one episode played alike by chance
    assert len({str(r["info"]["outcome"]) for r in serial.results}) > 1


def _flaky(fail: dict[int, int], slot: Slot, index: int) -> dict:
    with _LOCK:
        left = fail.get(index, 0)
        fail[index] = left - 1
    if left > 0:
        raise ArenaFault(f"arena a0: agent_b's bot is disconnected (episode {index})")
    return play_rollout(slot, index)


_LOCK = threading.Lock()


def test_a_faulted_episode_is_played_once_more_and_reported() -> None:
    with ArenaRunner("sim", 2) as runner:
        played = runner.run(range(6), BUILD, partial(_flaky, {4: 1}))
    assert [r["index"] for r in played.results] == list(range(6))
    [retry] = played.retries
    assert retry.index == 4 and retry.where.startswith("arena slot ")
    assert retry.describe().startswith("episode 4 retried after a fault on arena slot")
    assert "ArenaFault: arena a0: agent_b's bot is disconnected" in retry.error


def test_an_episode_that_faults_twice_is_lost() -> None:
    with ArenaRunner("sim", 2) as runner, pytest.raises(EpisodeLost, match=re.escape("episode 2 failed twice")) as e:
        runner.run(range(4), BUILD, partial(_flaky, {2: 2}))
    assert 2 not in e.value.played


def test_a_bug_is_not_retried() -> None:
    def broken(slot: Slot, index: int) -> dict:
        raise KeyError("bug")

    with ArenaRunner("sim", 2) as runner, pytest.raises(KeyError, match="bug"):
        runner.run(range(3), BUILD, broken)


class _Model:
    """A stand-in for a loaded model: counts calls and keeps call records."""

    def __init__(self) -> None:
        self.model_calls = 0
        self.records: list[str] = []

    def act(self, observation: str, info: dict) -> str:
        self.model_calls += 1
        self.records.append(f"call {self.model_calls}")
        return ""


def test_a_shared_policy_counts_each_slots_own_calls() -> None:
    model = _Model()
    lock = threading.Lock()
    a, b = SharedPolicy(model, lock), SharedPolicy(model, lock)
    a.act("", {})
    b.act("", {})
    a.act("", {})
    assert (a.model_calls, b.model_calls, model.model_calls) == (2, 1, 3)
    assert (a.records, b.records) == (["call 1", "call 3"], ["call 2"])
    from gencoord_env.agents import make_policy

    rule = make_policy("rule")
    assert slot_policy(rule) is rule and isinstance(slot_policy(model), SharedPolicy)


def test_arena_count_and_backend_are_checked() -> None:
    with pytest.raises(ValueError, match="arenas must be at least 1"):
        ArenaRunner("sim", 0)
    with pytest.raises(ValueError, match="unknown backend 'mc'"):
        ArenaRunner("mc", 2)
