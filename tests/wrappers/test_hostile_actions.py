"""Every wrapper takes any action the bare env takes, with the bare env's outcome: no exception for a
non-str action, None, bytes, a huge int or string, lone surrogates; TraceRecorder writes and replays them."""
from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import pytest

import gencoord_env
from gencoord_env import FailureCode, dsl
from gencoord_env.envs.gencoord.interface import MAX_ACTION
from gencoord_env.envs.gencoord.session import traced
from gencoord_env.commands.replay import replay
from gencoord_env.tasks import references as R
from gencoord_env.wrappers import (
    CounterfactualFeedback,
    RequestRemoval,
    RequestReplacement,
    TraceRecorder,
    UnreliableChannel,
)

_spec = importlib.util.spec_from_file_location("hostile", Path(__file__).parents[1] / "envs" / "hostile.py")
assert _spec is not None and _spec.loader is not None
hostile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hostile)
ACTIONS: list[Any] = [*hostile.STRINGS, *hostile.OTHERS]

#: (wrapper, env arguments): every wrapper on a route where it acts
WRAPPERS = {
    "TraceRecorder": (lambda env: TraceRecorder(env, io.StringIO()), {"pool": "heldout"}),
    "RequestRemoval": (RequestRemoval, {"pool": "request"}),
    "RequestReplacement": (RequestReplacement, {"pool": "request"}),
    "UnreliableChannel": (lambda env: UnreliableChannel(env, drop=0.3, duplicate=0.3, seed=1), {"pool": "request"}),
    "CounterfactualFeedback": (CounterfactualFeedback, {"pool": "goal_capability", "route": "feedback"}),
}


def _first(env: Any, episode: Any) -> str:
    return dsl.format(R.requester_initial(episode) if env.unwrapped.route == "feedback" else R.sender_initial(episode))


def _outcome(env: Any, action: Any, second: bool) -> tuple[Any, str, bool]:
    """(outcome, reason, truncated) of ``action`` at the first decision, or at the second after a valid first."""
    obs, infos = env.reset(options={"index": 0})
    turn = next(a for a, i in infos.items() if i["deciding"])
    if second:
        obs, _, _, _, infos = env.step({turn: _first(env, env.unwrapped.session.episode)})
        turn = next(a for a, i in infos.items() if i["deciding"])
    _, _, _, truncs, infos = env.step({turn: action})
    return infos[turn].get("outcome"), infos[turn].get("reason", ""), any(truncs.values())


@pytest.mark.parametrize("name", sorted(WRAPPERS))
@pytest.mark.parametrize("second", [False, True], ids=["first", "second"])
def test_a_wrapper_handles_any_action_like_the_bare_env(name: str, second: bool) -> None:
    wrap, kwargs = WRAPPERS[name]
    bare = gencoord_env.parallel_env(backend="sim", **kwargs)
    wrapped = wrap(gencoord_env.parallel_env(backend="sim", **kwargs))
    codes = set()
    for action in ACTIONS:
        expected = _outcome(bare, action, second)
        assert _outcome(wrapped, action, second) == expected, (name, hostile_id(action))
        codes.add(expected[0])
    assert FailureCode.PARSE_FAILURE in codes


def hostile_id(action: Any) -> str:
    """A test id that is the same in every process (no addresses: test runners compare ids across workers)."""
    if isinstance(action, int) and abs(action) >= 10**100:
        return "<huge int>"
    if type(action) is object:
        return "<object>"
    return repr(action)[:60]


@pytest.mark.parametrize("action", ACTIONS, ids=[hostile_id(a) for a in ACTIONS])
def test_trace_recorder_writes_any_action_and_the_record_replays(action: Any) -> None:
    buf = io.StringIO()
    env = TraceRecorder(gencoord_env.parallel_env(backend="sim", pool="heldout", surface="freeform"
                                                  if isinstance(action, str) and action.startswith("I will") else "dsl"), buf)
    obs, infos = env.reset(options={"index": 0})
    turn = next(a for a, i in infos.items() if i["deciding"])
    obs, _, _, _, infos = env.step({turn: action})
    if env.agents:  # an utterance: the dialogue goes on; a second bad utterance ends it
        turn = next(a for a, i in infos.items() if i["deciding"])
        env.step({turn: None})
    [line] = buf.getvalue().splitlines()
    record = json.loads(line)
    assert line.isascii() and record["outcome"] in ("PARSE_FAILURE", "CONTRACT_REJECT")
    assert record["actions"][0]["agent"] == "agent_a"
    recorded = record["actions"][0]["action"]
    if isinstance(action, str) and len(action) > MAX_ACTION:  # refused unread: kept as prefix, length and hash
        assert recorded == traced(action) and recorded["characters"] == len(action)
        result = replay(record)
        assert result.ok, result.mismatches
    elif action is None or isinstance(action, str) or (isinstance(action, (int, float)) and abs(action) < 2**63):
        assert recorded == action
        result = replay(record)
        assert result.ok, result.mismatches
    else:  # bytes, objects, NaN, a huge int: a short repr
        assert isinstance(recorded, str) and len(recorded) < 200


def test_numpy_actions_are_recorded_as_numbers() -> None:
    np = pytest.importorskip("numpy")
    buf = io.StringIO()
    env = TraceRecorder(gencoord_env.parallel_env(backend="sim", pool="heldout", actions="menu"), buf)
    env.reset(options={"index": 0})
    env.step({"agent_a": np.int64(999)})
    record = json.loads(buf.getvalue())
    assert record["actions"][0]["action"] == 999 and record["outcome"] == "PARSE_FAILURE"
    assert replay(record).ok


def test_trace_recorder_writes_a_truncated_episode_with_its_fault() -> None:
    from gencoord_env.world.minecraft.errors import SidecarDied
    from gencoord_env.world.sim import SimWorld

    class DyingWorld(SimWorld):
        def run(self, calls: Any) -> Any:
            raise SidecarDied("the sidecar exited with code -9; call reset() to start a fresh sidecar", returncode=-9)

    buf = io.StringIO()
    env = TraceRecorder(gencoord_env.parallel_env(backend="sim", pool="heldout", world=DyingWorld(), on_fault="truncate"), buf)
    obs, infos = env.reset(options={"index": 0})
    episode = env.unwrapped.session.episode
    q = R.sender_initial(episode)
    env.step({"agent_a": dsl.format(q)})
    _, _, terms, truncs, _ = env.step({"agent_b": dsl.format(R.receiver_after_request(q.peer_requests[0]))})
    assert all(truncs.values()) and not any(terms.values())
    record = json.loads(buf.getvalue())
    assert record["outcome"] is None and record["fault"]["type"] == "SidecarDied"
    assert record["trace"][-1]["stage"] == "fault" and len(record["actions"]) == 2
