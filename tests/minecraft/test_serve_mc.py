"""``gencoord serve --backend minecraft``: two sessions at once on two arenas of one sidecar, HTTP sessions
held to ``--max-sessions`` (an arena each, never more), and a session that plays one role beside the server's
rule partner."""
from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("openenv")
from openenv.core import GenericEnvClient  # noqa: E402

from test_serve import http, play_local, play_remote, start_server, stop, until  # noqa: E402  (tests/ is on the path)

from sidecar_installed import needs_sidecar  # noqa: E402


@needs_sidecar
def test_two_sessions_play_on_two_arenas_as_the_sim_does_and_http_sessions_hold_the_limit() -> None:
    # the sim is held equal to Minecraft by the parity tests: the same observations, outcomes and metrics
    plan = [[play_local(0, "rule"), play_local(3, "random", seed=1)], [play_local(1, "rule"), play_local(2, "rule")]]
    proc, url = start_server("--backend", "minecraft", "--pool", "heldout", "--reward", "staged", "--max-sessions", "2",
                             deadline_s=180)
    got: dict[int, list[dict[str, Any]]] = {}
    arenas: dict[int, Any] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def session(s: int) -> None:
        try:
            with GenericEnvClient(base_url=url, message_timeout_s=300).sync() as client:
                start.wait(timeout=60)
                got[s] = [play_remote(client, e) for e in plan[s]]
                arenas[s] = client.state()["arena"]
        except BaseException as e:  # noqa: BLE001 - raised in the test's thread below
            errors.append(e)

    try:
        threads = [threading.Thread(target=session, args=(s,)) for s in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=900)
        assert not errors, errors
        assert arenas[0] is not None and arenas[1] is not None and arenas[0] != arenas[1], arenas
        for s in range(2):
            assert got[s] == plan[s]
        # HTTP sessions hold arenas of the same two: a third is refused, not given a third arena
        until(lambda: http(url, "/health")[1]["sessions"] == 0, "closing the WebSocket sessions")
        first, second = (http(url, "/reset", {"index": k}) for k in (0, 1))
        assert first[0] == second[0] == 200
        held = {http(url, f"/state?session_id={r[1]['session_id']}")[1]["arena"] for r in (first, second)}
        assert held == {arenas[0], arenas[1]}
        status, body = http(url, "/reset", {"index": 2})
        assert status == 503 and "all 2 sessions of this server are taken (--max-sessions 2)" in body["detail"]
        assert http(url, "/close", {"session_id": first[1]["session_id"]})[0] == 200
        status, body = http(url, "/reset", {"index": 2})
        assert status == 200
        assert http(url, f"/state?session_id={body['session_id']}")[1]["arena"] in held
    finally:
        stop(proc)


@needs_sidecar
def test_a_session_plays_the_receiver_beside_the_servers_rule_sender() -> None:
    from gencoord_env.commands.client import GencoordEnvClient

    proc, url = start_server("--backend", "minecraft", "--pool", "heldout", "--reward", "staged", "--max-sessions", "1",
                             "--plays", "receiver", "--partner", "rule", deadline_s=180)
    try:
        with GencoordEnvClient(base_url=url, message_timeout_s=300) as env:
            for index in (0, 1):  # both role orders
                local = play_local(index, "rule")
                receiver = [(agent, text, action) for (agent, role, _, text), action in zip(local["turns"], local["actions"])
                            if role == "receiver"]
                result, seen = env.reset(index=index), []
                while not result.done:
                    o = result.observation
                    assert o.role == "receiver"
                    seen.append((o.agent, o.text, receiver[len(seen)][2]))
                    result = env.step(seen[-1][2])
                assert seen == receiver
                assert (result.observation.outcome, result.reward, result.observation.metrics) == (
                    local["outcome"], local["reward"], local["metrics"])
    finally:
        stop(proc)
