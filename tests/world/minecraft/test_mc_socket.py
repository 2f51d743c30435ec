"""The real sidecar's socket: on tcp only the per-launch client key gets in; a message far over the cap is
dropped before it is received whole (the sidecar's memory stays flat); a reset spec over ``limits.spec`` is
refused at once; an ipc socket lies in a folder only this user may enter.

Skipped only when the sidecar's Node packages are not installed (``gencoord setup``).
"""
from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
import zmq

from gencoord_env.world.minecraft import (
    MinecraftWorld,
    RequestTooLarge,
    RuntimeMissing,
    SidecarPool,
    SidecarTimeout,
    locate,
)
from gencoord_env.world.minecraft.client import CurveKeys, SidecarClient, shared_context
from gencoord_env.world.minecraft.protocol import MAX_MESSAGE_BYTES, SPEC_LIMITS, encode_request
from gencoord_env.world.minecraft.supervisor import Sidecar, SidecarOptions

try:
    locate()
    _MISSING = ""
except RuntimeMissing as e:
    _MISSING = str(e)

pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"sidecar runtime not installed: {_MISSING}")


@pytest.fixture(scope="module")
def sidecar() -> Iterator[Sidecar]:
    sc = Sidecar.start(locate(), SidecarOptions(transport="tcp", arenas=0))
    yield sc
    sc.close()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def _raw(sidecar: Sidecar, curve: CurveKeys | None) -> zmq.Socket[bytes]:
    """A DEALER that speaks the protocol by hand, with ``curve`` keys or none."""
    sock: zmq.Socket[bytes] = shared_context().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if curve is not None:
        sock.curve_secretkey = curve.secret.encode()
        sock.curve_publickey = curve.public.encode()
        sock.curve_serverkey = curve.server_public.encode()
    sock.connect(sidecar.endpoint)
    return sock


def test_on_tcp_only_the_launch_key_gets_an_answer(sidecar: Sidecar) -> None:
    assert sidecar.curve is not None and sidecar.client is not None
    assert sidecar.client.call("ping") == "pong"
    assert sidecar.curve.secret not in repr(sidecar.curve)
    strangers = [None, CurveKeys.generate(sidecar.curve.server_public)]  # no CURVE; CURVE with another key pair
    for curve in strangers:
        sock = _raw(sidecar, curve)
        try:
            sock.send(encode_request(1, "ping"))
            assert not sock.poll(1000), f"a client with {'no keys' if curve is None else 'other keys'} was answered"
        finally:
            sock.close(linger=0)
    wrong = SidecarClient(sidecar.endpoint, curve=strangers[1], timeouts={"ping": 0.5}, retries=0)
    try:
        with pytest.raises(SidecarTimeout):
            wrong.call("ping")
    finally:
        wrong.close()
    deadline = time.monotonic() + 60
    while "not the client key this sidecar was started for" not in sidecar.log_path.read_text():
        assert time.monotonic() < deadline, "the sidecar did not log the refused key"
        time.sleep(0.05)


def test_another_process_attaches_to_a_tcp_sidecar_only_with_its_secret(sidecar: Sidecar) -> None:
    with pytest.raises(ValueError, match="a tcp sidecar admits only clients holding its per-launch keys; pass secret="):
        MinecraftWorld(endpoint=sidecar.endpoint)
    assert sidecar.curve is not None
    with SidecarPool(endpoint=sidecar.endpoint, secret=sidecar.curve.token) as attached:
        assert attached.hello()["protocol"] == 2
        assert attached.secret == sidecar.curve.token
    other = CurveKeys.generate(sidecar.curve.server_public)
    with SidecarPool(endpoint=sidecar.endpoint, secret=other.token, timeouts={"hello": 0.5}) as stranger:
        with pytest.raises(SidecarTimeout, match="with the secret given"):
            stranger.hello()


def test_a_spec_over_the_limits_is_refused_at_once(sidecar: Sidecar) -> None:
    client = sidecar.client
    assert client is not None
    arena = client.call("open_arena", {})["arena"]
    cells = [[x % 40 - 20, 0, x // 40 % 40 - 20] for x in range(30_000)]  # ~200 KB: under the message cap
    spec = {"agents": ["agent_a"], "stations": [{"name": "s", "kind": "site", "pos": [0, 0, 0], "cells": cells}],
            "positions": {"agent_a": [0, 0, 0]}}
    assert len(msgpack.packb(spec)) < MAX_MESSAGE_BYTES
    t0 = time.monotonic()
    with pytest.raises(RequestTooLarge, match=f"30000 site cells \\(limits.spec.site_cells: at most {SPEC_LIMITS['site_cells'].max}\\)"):
        client.call("reset", {"arena": arena, "spec": spec})  # straight to the sidecar: no check on this side
    assert time.monotonic() - t0 < 1.0
    assert client.call("ping") == "pong"
    client.call("close_arena", {"arena": arena})


def test_on_ipc_a_private_folder_and_a_message_far_over_the_cap_leaves_the_sidecars_memory_flat() -> None:
    # ipc, the default transport, and no CURVE: sending 256 MiB over CURVE would time the sender's encryption
    with Sidecar.start(locate(), SidecarOptions(transport="ipc", arenas=0)) as sc:
        folder = Path(sc.endpoint[len("ipc://"):]).parent
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.getuid()
        assert sc.curve is None and sc.client is not None and sc.client.call("ping") == "pong"
        pid = sc.process.pid
        before = _rss_kib(pid)
        sock = _raw(sc, None)
        try:
            sock.send(b"\x00" * (256 << 20), copy=False)
            assert not sock.poll(1500), "a 256 MiB message was answered"
        finally:
            sock.close(linger=0)
        after = _rss_kib(pid)
        assert after - before < 32 * 1024, f"the sidecar's RSS grew from {before} KiB to {after} KiB"
        assert sc.client.call("ping") == "pong"
    assert not folder.exists()


def test_a_deleted_socket_file_restarts_the_sidecar_instead_of_waiting_on_it() -> None:
    from gencoord_env.world.minecraft import SidecarDied
    from gencoord_env.world.minecraft.client import timeout_scale
    from gencoord_env.world.types import SkillCall, Station, WorldSpec

    spec = WorldSpec(agents=("agent_a", "agent_b"), stations=(Station("chest1", "chest", (3, 0, 2)),),
                     positions={"agent_a": (0, 0, 0), "agent_b": (2, 0, 0)}, inventories={"agent_a": {"oak_log": 1}},
                     containers={})
    calls = [SkillCall("a1", "agent_a", "craft", {"item": "oak_planks", "count": 4, "station": ""}),
             SkillCall("a2", "agent_a", "deposit", {"station": "chest1", "item": "oak_planks", "count": 4}, after=("a1",))]
    started = time.monotonic()
    with SidecarPool(arenas=1, transport="ipc", timeouts={"open_arena": 20.0 * timeout_scale()}) as pool:
        first = MinecraftWorld(pool=pool)
        first.reset(spec)
        start_s = time.monotonic() - started  # a sidecar's start and first arena on this machine, at its load now
        old_endpoint, old_process = pool.endpoint, pool.sidecar.process
        os.unlink(old_endpoint[len("ipc://"):])  # the connections made go on; no new one can be made
        assert all(e.ok for e in first.run(calls))
        # another process attaching by the old endpoint is told at once what is wrong
        with pytest.raises(SidecarDied, match="its socket file .* is gone \\(deleted\\?\\)"):
            SidecarPool(endpoint=old_endpoint).hello()
        # a new world of the pool does not wait on the dead endpoint: the pool restarts the sidecar
        second = MinecraftWorld(pool=pool)
        t0 = time.monotonic()
        second.reset(spec)
        # a restart, not a wait on the dead endpoint: about one start's time (not the open_arena deadline)
        assert time.monotonic() - t0 < start_s + 15.0 and pool.restarts == 1 and pool.sidecar.process is not old_process
        assert old_process.poll() is not None
        assert all(e.ok for e in second.run(calls)) and second.observe().containers == {"chest1": {"oak_planks": 4}}
        # the first world's next reset opens an arena of the new sidecar
        first.reset(spec)
        assert all(e.ok for e in first.run(calls)) and first.observe().containers == {"chest1": {"oak_planks": 4}}
        first.close()
        second.close()
