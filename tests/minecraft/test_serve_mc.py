"""``gencoord serve --backend minecraft``: two sessions at once on two arenas of one sidecar."""
from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("openenv")
from openenv.core import GenericEnvClient  # noqa: E402

from test_serve import play_local, play_remote, start_server, stop  # noqa: E402  (tests/ is on the path)

from sidecar_installed import needs_sidecar  # noqa: E402


@needs_sidecar
def test_two_sessions_play_on_two_arenas_as_the_sim_does() -> None:
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
    finally:
        stop(proc)
    assert not errors, errors
    assert arenas[0] is not None and arenas[1] is not None and arenas[0] != arenas[1], arenas
    for s in range(2):
        assert got[s] == plan[s]
