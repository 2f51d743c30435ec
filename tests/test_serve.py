"""``gencoord serve`` on the sim, played through openenv-core's own client: each session equals a local env."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("openenv")
from openenv.core import GenericEnvClient  # noqa: E402

import gencoord_env  # noqa: E402
from gencoord_env.agents import make_policy  # noqa: E402

ENV = {"backend": "sim", "pool": "heldout", "route": "forward", "reward": "staged"}
SESSIONS = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(*args: str, deadline_s: float = 120.0) -> tuple[subprocess.Popen[bytes], str]:
    """``gencoord serve`` in a subprocess, once its /health answers."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gencoord_env.commands.cli", "serve", "--port", str(port), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    end = time.monotonic() + deadline_s
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"gencoord serve exited with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            pass
        if time.monotonic() > end:
            proc.kill()
            raise AssertionError(f"gencoord serve did not answer /health within {deadline_s} s")
        time.sleep(0.2)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    proc, url = start_server("--backend", "sim", "--pool", "heldout", "--reward", "staged", "--max-sessions", str(SESSIONS))
    yield url
    stop(proc)


def play_local(index: int, policy_name: str, seed: int = 0) -> dict[str, Any]:
    """One episode on a local env: every turn the deciding agent's (agent, role, stage, text), its action,
    and the end's reward, outcome, reason and metrics, read from the env's own outputs."""
    env = gencoord_env.parallel_env(**ENV)
    policy = make_policy(policy_name) if policy_name == "rule" else make_policy("random", seed=seed, garbage=policy_name == "garbage")
    obs, infos = env.reset(options={"index": index})
    turns, actions = [], []
    while env.agents:
        agent = next(a for a, i in infos.items() if i["deciding"])
        turns.append((agent, infos[agent]["role"], infos[agent]["stage"], obs[agent]))
        action = policy.act(obs[agent], infos[agent])
        actions.append(action)
        obs, rewards, _, _, infos = env.step({**{a: "" for a in env.agents}, agent: action})
    final = infos[env.possible_agents[0]]
    return {"index": index, "turns": turns, "actions": actions, "reward": rewards[agent],
            "outcome": final["outcome"].value, "reason": final["reason"], "metrics": final["metrics"]}


def play_remote(client: Any, recorded: dict[str, Any]) -> dict[str, Any]:
    """The recorded actions over the server; the same fields, read from OpenEnv's StepResults."""
    result = client.reset(index=recorded["index"])
    assert result.done is False and result.reward is None
    turns = []
    for action in recorded["actions"]:
        o = result.observation
        turns.append((o["agent"], o["role"], o["stage"], o["text"]))
        result = client.step({"text": action})
    assert result.done is True
    o = result.observation
    assert (o["agent"], o["stage"], o["text"]) == (None, "done", "")
    return {"index": recorded["index"], "turns": turns, "actions": recorded["actions"], "reward": result.reward,
            "outcome": o["outcome"], "reason": o["reason"], "metrics": o["metrics"]}


def test_sessions_at_once_equal_local_envs(server: str) -> None:
    # rule episodes (mostly successes) and random ones (parse failures, contract rejects, ...), both role orders
    kinds = ("rule", "random", "rule", "garbage")
    plan = [[play_local(4 * s + k, kinds[(s + k) % 4], seed=s) for k in range(4)] for s in range(SESSIONS)]
    outcomes = {e["outcome"] for episodes in plan for e in episodes}
    assert "SUCCESS" in outcomes and len(outcomes) >= 3, outcomes
    assert len({e["reward"] for episodes in plan for e in episodes}) >= 3  # staged: partial credit travels
    got: dict[int, list[dict[str, Any]]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(SESSIONS)

    def session(s: int) -> None:
        try:
            with GenericEnvClient(base_url=server).sync() as client:
                start.wait(timeout=60)  # every session open at once
                got[s] = [play_remote(client, e) for e in plan[s]]
        except BaseException as e:  # noqa: BLE001 - raised in the test's thread below
            errors.append(e)

    threads = [threading.Thread(target=session, args=(s,)) for s in range(SESSIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    for s in range(SESSIONS):
        assert got[s] == plan[s]


def test_seeded_reset_draws_the_local_envs_episode(server: str) -> None:
    env = gencoord_env.parallel_env(**ENV)
    with GenericEnvClient(base_url=server).sync() as client:
        for seed in (0, 7, 123):
            _, infos = env.reset(seed=seed)
            o = client.reset(seed=seed).observation
            assert o["episode_id"] == infos["agent_a"]["episode_id"]
            agent = next(a for a, i in infos.items() if i["deciding"])
            assert (o["agent"], o["text"]) == (agent, env.observation_text(agent))


def test_errors_are_openenv_errors_with_the_envs_message_and_the_session_survives(server: str) -> None:
    with GenericEnvClient(base_url=server).sync() as client:
        with pytest.raises(RuntimeError, match="act\\(\\) before reset\\(\\)"):
            client.step({"text": "SELF -\nREQ -"})
        client.reset(index=0)
        result = client.step({"text": "not a record"})  # an agent's mistake: a failure code, not an error
        assert result.done and result.reward == 0.0 and result.observation["outcome"] == "PARSE_FAILURE"
        with pytest.raises(RuntimeError, match="has ended \\(PARSE_FAILURE\\); reset the env first.*EXECUTION_ERROR"):
            client.step({"text": "SELF -\nREQ -"})
        with pytest.raises(RuntimeError, match="unknown argument\\(s\\) \\['pool'\\]"):
            client.reset(pool="train")
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            client.step({"record": "SELF -"})
        result = client.reset(index=1)  # the same connection still plays
        result = client.step({"text": "x", "slot": 0})
        assert result.observation["outcome"] == "PARSE_FAILURE"
        assert "got dict" in result.observation["reason"]


def test_menu_slots_over_the_server_equal_the_local_menu_env() -> None:
    proc, url = start_server("--backend", "sim", "--pool", "heldout", "--actions", "menu", "--max-sessions", "1")
    try:
        env = gencoord_env.parallel_env(backend="sim", pool="heldout", actions="menu")
        with GenericEnvClient(base_url=url).sync() as client:
            for index, slot in ((0, 0), (1, 1), (2, 0)):
                _, infos = env.reset(options={"index": index})
                o = client.reset(index=index).observation
                agent = next(a for a, i in infos.items() if i["deciding"])
                assert o["candidates"] == infos[agent]["candidates"]
                _, rewards, _, _, infos = env.step({a: slot if a == agent else 0 for a in env.agents})
                result = client.step({"slot": slot})
                while not result.done:
                    agent = next(a for a, i in infos.items() if i["deciding"])
                    assert result.observation["candidates"] == infos[agent]["candidates"]
                    _, rewards, _, _, infos = env.step({a: 0 for a in env.agents})
                    result = client.step({"slot": 0})
                assert result.observation["outcome"] == infos["agent_a"]["outcome"].value
                assert result.reward == rewards["agent_a"]
    finally:
        stop(proc)


def test_without_openenv_serve_says_which_extra_installs_it() -> None:
    from gencoord_env.commands.cli import describe_error

    assert describe_error(ModuleNotFoundError("No module named 'openenv'", name="openenv"), "serve") == (
        "'gencoord serve' needs openenv, which is not installed: pip install 'gencoord_env[openenv]'", 1)


def test_a_bad_env_argument_fails_before_the_port_opens() -> None:
    proc = subprocess.run([sys.executable, "-m", "gencoord_env.commands.cli", "serve", "--port", str(free_port()), "--backend", "sim",
                           "--route", "feedback", "--surface", "freeform"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "error: surface='freeform' runs the forward route only; got route='feedback'" in proc.stderr
