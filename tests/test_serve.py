"""``gencoord serve`` on the sim, played through openenv's own clients and plain HTTP: each session equals a
local env; idle sessions are closed and their clients told why; a full server refuses or queues newcomers with
a message; every HTTP route answers, or says in a 4xx what was wrong.

Most servers here run in this process (uvicorn in a thread, configured as ``gencoord serve`` configures it),
so that a test may have a server of its own without paying a process's imports; the command itself runs in
``test_a_bad_env_argument_fails_before_the_port_opens`` and in the 2,048-session test.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("openenv")
from openenv.core import GenericEnvClient  # noqa: E402

import gencoord_env  # noqa: E402
from gencoord_env.agents import make_policy  # noqa: E402
from gencoord_env.commands.client import (  # noqa: E402
    GencoordAction,
    GencoordEnvClient,
    GencoordObservation,
    ServerAtCapacity,
    SessionClosed,
    agent_info,
)
from gencoord_env.turns import TurnEnv  # noqa: E402
from gencoord_env.commands.serve import WS_PING_TIMEOUT_S, ServeConfig, make_app, uvicorn_config  # noqa: E402
from gencoord_env.world.minecraft.client import timeout_scale  # noqa: E402

ENV = {"backend": "sim", "pool": "heldout", "route": "forward", "reward": "staged"}
SESSIONS = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def until(condition: Callable[[], Any], what: str, deadline_s: float = 60.0) -> Any:
    """Poll ``condition`` until it is truthy (its value), or fail naming ``what`` after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"{what} did not happen within {deadline_s} s")
        time.sleep(0.02)


@contextlib.contextmanager
def running(env: dict[str, Any] | None = None, **limits: Any) -> Iterator[str]:
    """``gencoord serve``'s app with ``limits`` (``ServeConfig`` fields), under uvicorn in a thread of this process."""
    import uvicorn

    config = ServeConfig(env=env or ENV, **limits)
    server = uvicorn.Server(uvicorn_config(make_app(config), config, port=free_port()))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        until(lambda: server.started or not thread.is_alive(), "the server's start")
        assert server.started, "the server did not start"
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)


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


def http(url: str, path: str, body: Any = None, method: str | None = None) -> tuple[int, Any]:
    """(status, JSON body) of one HTTP request; a 4xx/5xx is returned, not raised."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method or ("POST" if body is not None else "GET"),
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running(max_sessions=SESSIONS + 3) as url:
        yield url


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
        with pytest.raises(RuntimeError, match=r"options\['index'\]=256 is out of range: pool 'heldout' has 256 episodes \(0 to 255\)"):
            client.reset(index=256)
        with pytest.raises(RuntimeError, match=r"options\['index'\]=-1 is out of range"):
            client.reset(index=-1)
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            client.step({"record": "SELF -"})  # no such field
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            client.step({"text": "x", "slot": 0})  # a text server takes no slot
        result = client.reset(index=1)  # the same connection still plays
        assert result.observation["episode_id"] == gencoord_env.parallel_env(**ENV).episodes[1].id


def test_the_typed_client_plays_an_episode_as_the_local_env(server: str) -> None:
    local = play_local(3, "rule")
    with GencoordEnvClient(base_url=server) as env:
        result = env.reset(index=3)
        assert isinstance(result.observation, GencoordObservation) and result.reward is None
        agent, _, stage, text = local["turns"][0]
        assert (result.observation.agent, result.observation.stage, result.observation.text) == (agent, stage, text)
        first, second = local["actions"]
        result = env.step(GencoordAction(text=first))
        assert result.observation.text == local["turns"][1][3] and not result.done
        state = env.state()
        assert (state.step_count, state.agent, state.plays, state.done) == (1, local["turns"][1][0], "both", False)
        result = env.step(second)  # a bare record is a GencoordAction
        assert result.done and result.observation.outcome == local["outcome"] == "SUCCESS"
        assert result.reward == local["reward"] and result.observation.metrics == local["metrics"]
        with pytest.raises(TypeError, match="step\\(\\) takes a GencoordAction"):
            env.step(3.5)


def test_a_session_plays_one_role_beside_the_servers_partner() -> None:
    """``--plays sender --partner rule``: the session decides the sender's turns only; the server's rule agent
    the receiver's, as in a local episode of two rule agents. ``--plays receiver --partner random``: the other way
    round, beside a partner that makes mistakes."""
    for plays, partner in (("sender", "rule"), ("receiver", "random")):
        with running(max_sessions=1, plays=plays, partner=partner) as url, GencoordEnvClient(base_url=url) as env:
            assert env.state().plays == plays
            for index in range(4):  # both role orders
                local = TurnEnv(gencoord_env.parallel_env(**ENV))
                other = "receiver" if plays == "sender" else "sender"
                policies = {plays: make_policy("rule"), other: make_policy(partner)}
                mine, turn = [], local.reset(index=index)
                while not turn.done:
                    action = policies[turn.role].act(turn.text, local.info)
                    if turn.role == plays:
                        mine.append((turn.agent, turn.text, action))
                    turn = local.act(action)
                result, seen = env.reset(index=index), []
                while not result.done:
                    o = result.observation
                    assert o.role == plays
                    seen.append((o.agent, o.text, mine[len(seen)][2]))
                    result = env.step(mine[len(seen) - 1][2])
                assert seen == mine and len(seen) >= 1
                assert (result.observation.outcome, result.reward) == (turn.outcome, turn.reward)


def test_the_rule_agents_act_from_what_the_wire_carries(server: str) -> None:
    """A session that resets with ``context=True`` gets the deciding agent's typed context with each observation;
    the rule agents act on ``agent_info(observation)`` exactly as on the env's own info, so a client plays the
    rule agent (as a baseline, or as a partner of its own) across the wire."""
    with GencoordEnvClient(base_url=server) as env:
        plain = env.reset(index=0)
        assert plain.observation.context is None  # not asked for: not sent
        for index, name in ((0, "rule"), (1, "rule"), (2, "random"), (3, "factor")):
            local = play_local(index, "rule" if name == "factor" else name, seed=0)
            policy = make_policy(name, seed=0) if name == "random" else make_policy(name)
            result, actions = env.reset(index=index, context=True), []
            while not result.done:
                info = agent_info(result.observation)
                assert (info["turn"], info["role"], info["stage"]) == local["turns"][len(actions)][:3]
                actions.append(policy.act(result.observation.text, info))
                result = env.step(actions[-1])
            assert actions == local["actions"]
            assert (result.observation.outcome, result.reward) == (local["outcome"], local["reward"])
            assert result.observation.context is None
            with pytest.raises(ValueError, match="the episode has ended: no agent decides"):
                agent_info(result.observation)
        with pytest.raises(ValueError, match="carries no context: reset the session with context=True"):
            agent_info(env.reset(index=0, context=False).observation)


def test_idle_sessions_are_closed_their_clients_told_why_and_a_newcomer_served() -> None:
    with running(max_sessions=2, queue=1, queue_timeout_s=120, idle_timeout_s=2.0) as url:
        holders = [GencoordEnvClient(base_url=url) for _ in range(2)]
        for k, holder in enumerate(holders):
            holder.reset(index=k)  # both sessions taken, then silent
        newcomer = GencoordEnvClient(base_url=url)
        result = newcomer.reset(index=5)  # queued until an idle holder was closed
        assert result.observation.episode_id == gencoord_env.parallel_env(**ENV).episodes[5].id
        with pytest.raises(SessionClosed, match=re.escape("sent nothing for 2 s (the server's --idle-timeout): it was closed "
                                                          "and its env released; the next call opens a new session")):
            holders[0].step("SELF -\nREQ -")
        assert holders[0].reset(index=0).observation.stage == "sender_initial"  # the next call: a new session
        # an HTTP session idle as long is closed too; its next request says why
        for client in (newcomer, *holders):
            client.close()
        until(lambda: http(url, "/health")[1]["sessions"] == 0, "closing the WebSocket sessions")
        status, body = http(url, "/reset", {"index": 0})
        assert status == 200
        sid = body["session_id"]
        until(lambda: http(url, "/health")[1]["http_sessions"] == 0, "closing the idle HTTP session")
        status, body = http(url, f"/state?session_id={sid}")
        assert status == 410 and "sent nothing for 2 s (the server's --idle-timeout)" in body["detail"], body


def test_a_full_server_refuses_newcomers_at_once_or_queues_them_with_a_message() -> None:
    with running(max_sessions=1, idle_timeout_s=None) as url:
        holder = GencoordEnvClient(base_url=url)
        holder.reset(index=0)
        refused = "all 1 sessions of this server are taken (--max-sessions 1) and it queues no one (--queue 0)"
        with pytest.raises(ServerAtCapacity, match=re.escape(refused)):
            GencoordEnvClient(base_url=url).reset(index=1)
        status, body = http(url, "/reset", {"index": 1})
        assert status == 503 and body["detail"].startswith(refused)
        holder.close()
        until(lambda: http(url, "/health")[1]["sessions"] == 0, "releasing the holder's session")
        with GencoordEnvClient(base_url=url) as env:
            assert env.reset(index=1).observation.stage == "sender_initial"
    with running(max_sessions=1, queue=1, queue_timeout_s=1.0, idle_timeout_s=None) as url:
        holder = GencoordEnvClient(base_url=url)
        holder.reset(index=0)
        with pytest.raises(ServerAtCapacity, match=re.escape("waited 1 s (--queue-timeout) for one of the 1 sessions")):
            GencoordEnvClient(base_url=url).reset(index=1)
        holder.close()
    with running(max_sessions=1, queue=2, queue_timeout_s=120, idle_timeout_s=None) as url:
        holder = GencoordEnvClient(base_url=url)
        holder.reset(index=0)
        admitted: list[tuple[int, float]] = []

        def wait_in_line(k: int) -> None:
            with GencoordEnvClient(base_url=url) as env:  # leaving it closes the session: the next in line comes in
                env.reset(index=k)
                admitted.append((k, time.monotonic()))

        first = threading.Thread(target=wait_in_line, args=(1,))
        first.start()
        until(lambda: http(url, "/health")[1]["waiting"] == 1, "the first newcomer in the queue")
        second = threading.Thread(target=wait_in_line, args=(2,))
        second.start()
        until(lambda: http(url, "/health")[1]["waiting"] == 2, "the second newcomer in the queue")
        with pytest.raises(ServerAtCapacity, match=re.escape("its wait queue of 2 is full (--queue 2)")):
            GencoordEnvClient(base_url=url).reset(index=3)
        holder.close()
        first.join(timeout=120)
        second.join(timeout=120)
        assert [k for k, _ in admitted] == [1, 2]  # first come, first served


def test_http_routes_play_as_the_local_env_and_answer_4xx_with_a_message(server: str) -> None:
    local = play_local(2, "rule")
    status, body = http(server, "/reset", {"index": 2})
    assert status == 200 and body["reward"] is None and not body["done"]
    sid = body["session_id"]
    turns = []
    for action in local["actions"]:
        o = body["observation"]
        turns.append((o["agent"], o["role"], o["stage"], o["text"]))
        status, body = http(server, "/step", {"action": {"text": action}, "session_id": sid})
        assert status == 200
    assert turns == local["turns"] and body["done"] and body["reward"] == local["reward"]
    assert (body["observation"]["outcome"], body["observation"]["metrics"]) == (local["outcome"], local["metrics"])
    status, state = http(server, f"/state?session_id={sid}")
    assert status == 200 and (state["done"], state["step_count"], state["plays"]) == (True, 2, "both")

    def detail(path: str, body: Any = None, method: str | None = None) -> tuple[int, str]:
        status, answer = http(server, path, body, method)
        return status, str(answer["detail"])

    assert detail("/step", {"action": {"text": "x"}}) == (400, "POST /step needs the session_id that POST /reset answered "
                                                                "(HTTP sessions are named; a WebSocket to /ws holds its session "
                                                                "for as long as it is open)")
    assert detail("/step", {"action": {"text": "x"}, "session_id": "nope"}) == (
        404, "no session nope on this server; POST /reset without a session_id opens one")
    status, message = detail("/step", {"action": {"slot": 1}, "session_id": sid})
    assert status == 422 and message.startswith("the action is no GencoordAction") and "'text'" in message
    status, message = detail("/step", {"action": {"text": "SELF -\nREQ -"}, "session_id": sid})
    assert status == 409 and "has ended (SUCCESS); reset the env first" in message
    assert detail("/reset", {"index": 999, "session_id": sid}) == (
        400, "options['index']=999 is out of range: pool 'heldout' has 256 episodes (0 to 255)")
    assert detail("/reset", {"index": "3"})[0] == 422  # no integer: refused before any session opens
    assert detail("/reset", {"index": -1})[0] == 400
    assert http(server, "/health")[1]["http_sessions"] == 1  # a failed first reset leaves no session behind
    assert http(server, "/close", {"session_id": sid}) == (200, {"session_id": sid, "closed": True})
    assert detail(f"/state?session_id={sid}") == (410, f"session {sid} was closed: closed by the client; POST /reset without "
                                                       "a session_id opens a new one")
    assert detail("/state") == (400, "GET /state needs the session_id that POST /reset answered (HTTP sessions are named; "
                                     "a WebSocket to /ws holds its session for as long as it is open)")
    assert detail("/nowhere") == (404, "Not Found")
    assert detail("/step", method="GET")[0] == 405
    health = http(server, "/health")[1]
    assert health["status"] == "healthy" and health["max_sessions"] == SESSIONS + 3 and health["http_sessions"] == 0
    meta = http(server, "/metadata")[1]
    assert meta["name"] == "gencoord_v0" and meta["version"] == gencoord_env.__version__ and meta["description"]
    schema = http(server, "/schema")[1]
    assert schema["action"]["required"] == ["text"]  # exactly one: a plain reply is that field (verifiers' taskset)
    assert {"text", "agent", "outcome", "done", "reward"} <= set(schema["observation"]["properties"])
    assert {"episode_id", "step_count", "plays"} <= set(schema["state"]["properties"])
    status, rpc = http(server, "/mcp", {"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
    assert status == 200 and rpc["jsonrpc"] == "2.0" and rpc["id"] == 7 and "no MCP tools" in rpc["error"]["message"]


def test_2048_sessions_at_once_each_play_as_the_local_env() -> None:
    """OpenEnv's scaling figure (2,048 WebSocket sessions) on the sim: every session open at once on one
    ``gencoord serve``, each playing the rule agent's episode ``s % 256`` through OpenEnv's async client, every
    turn (observation, reward, outcome, metrics) equal to the local env's."""
    from gencoord_env.turns import TurnEnv

    n = 2048
    game, policy = TurnEnv(gencoord_env.parallel_env(**ENV)), make_policy("rule")
    local: list[tuple[list[str], list[Any]]] = []
    for k in range(len(game.env.episodes)):
        turns, actions = [game.reset(index=k)], []
        while not turns[-1].done:
            actions.append(policy.act(turns[-1].text, game.info))
            turns.append(game.act(actions[-1]))
        local.append((actions, [(t.text, t.agent, t.stage, None if i == 0 else t.reward, t.done, t.outcome, t.metrics)
                                for i, t in enumerate(turns)]))
    proc, url = start_server("--backend", "sim", "--pool", "heldout", "--reward", "staged", "--max-sessions", str(n),
                             "--idle-timeout", "0")

    async def play(client: Any, k: int) -> list[Any]:
        results = [await client.reset(index=k)]
        for action in local[k][0]:
            results.append(await client.step({"text": action}))
        o = [r.observation for r in results]
        return [(x["text"], x["agent"], x["stage"], r.reward, r.done, x["outcome"], x["metrics"]) for x, r in zip(o, results)]

    async def sessions() -> tuple[int, list[list[Any]]]:
        # one process's 2,048 clients answer the server's pings late on a loaded machine, and see its pongs late: both
        # deadlines stretch (the server's by GENCOORD_TIMEOUT_SCALE; a message's 600 s bounds the run either way)
        clients = [GenericEnvClient(base_url=url, connect_timeout_s=600, message_timeout_s=600,
                                    websocket_ping_timeout_s=WS_PING_TIMEOUT_S * timeout_scale()) for _ in range(n)]
        await asyncio.gather(*(c.connect() for c in clients))
        try:
            open_at_once = http(url, "/health")[1]["sessions"]
            return open_at_once, list(await asyncio.gather(*(play(c, s % len(local)) for s, c in enumerate(clients))))
        finally:
            await asyncio.gather(*(c.close() for c in clients))

    try:
        open_at_once, got = asyncio.run(sessions())
    finally:
        stop(proc)
    assert open_at_once == n
    assert {t[-1][5] for t in got} >= {"SUCCESS"}
    for s in range(n):
        assert got[s] == local[s % len(local)][1], s


def test_the_wire_types_are_openenvs() -> None:
    """The server's models (held without importing OpenEnv) have OpenEnv's base fields and configuration."""
    from openenv.core.env_server.types import Action, Observation, State

    from gencoord_env.commands.wire import GencoordMenuAction, GencoordState

    for ours, theirs in ((GencoordAction, Action), (GencoordMenuAction, Action), (GencoordObservation, Observation),
                         (GencoordState, State)):
        assert {k: v for k, v in ours.model_config.items() if k in theirs.model_config} == dict(theirs.model_config)
        mine, base = ours.model_json_schema()["properties"], theirs.model_json_schema()["properties"]
        assert {name: mine[name] for name in base} == base, ours


def test_menu_slots_over_the_server_equal_the_local_menu_env() -> None:
    with running(env={"backend": "sim", "pool": "heldout", "actions": "menu"}, max_sessions=1) as url:
        env = gencoord_env.parallel_env(backend="sim", pool="heldout", actions="menu")
        assert http(url, "/schema")[1]["action"]["required"] == ["slot"]
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
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
                client.step({"slot": "1"})  # a slot is an integer, not a numeral


def test_without_its_extra_serve_says_which_extra_installs_it() -> None:
    from gencoord_env.commands.cli import describe_error

    assert describe_error(ModuleNotFoundError("No module named 'fastapi'", name="fastapi"), "serve") == (
        "'gencoord serve' needs fastapi, which is not installed: pip install 'gencoord_env[openenv]'", 1)


@pytest.mark.parametrize("args,message", [
    (("--route", "feedback", "--surface", "freeform"), "error: surface='freeform' runs the forward route only; got route='feedback'"),
    (("--partner", "rule"), "error: --partner rule plays the roles a session does not, but --plays both"),
    (("--plays", "builder"), "error: plays='builder' is no role of pool 'heldout''s episodes (its roles: receiver, sender)"),
    (("--plays", "sender", "--partner", "rul"), "error: unknown policy 'rul'"),
])
def test_a_bad_argument_fails_before_the_port_opens(args: tuple[str, ...], message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "gencoord_env.commands.cli", "serve", "--port", str(free_port()), "--backend", "sim",
                           *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert message in proc.stderr, proc.stderr

