"""The status ping of an external server (``probe.py``) against raw TCP servers that are not Minecraft: what
answers garbage is named as no Minecraft server, one that closes at once (``enable-status=false``) passes to the
login. The scripted Minecraft servers of ``test_driver_contract.py`` cover the rest."""
from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from gencoord_env.world.minecraft import ServerUnreachable
from gencoord_env.world.minecraft.probe import check_server, status_request


@contextmanager
def answering(reply: bytes) -> Iterator[int]:
    """A loopback TCP server that reads the request, answers ``reply`` (nothing: closes) and closes; yields its port."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(10)
            conn.recv(1024)
            if reply:
                conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        thread.join(10)
        listener.close()


def test_what_answers_http_is_named_as_no_minecraft_server() -> None:
    with answering(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n") as port:
        with pytest.raises(ServerUnreachable, match=re.escape(f"what answers at 127.0.0.1:{port} is not a Minecraft server "
                                                              "(its status reply: ") + ".*" + re.escape(
                                                                  "check the host and port of the Minecraft 1.21.4 server")):
            check_server("127.0.0.1", port, timeout_s=10)


def test_a_server_that_closes_without_a_status_passes_to_the_login() -> None:
    with answering(b"") as port:
        assert check_server("127.0.0.1", port, timeout_s=10) is None


def test_the_request_is_a_1_21_4_handshake_then_a_status_request() -> None:
    # length 16, id 0, protocol 769, "127.0.0.1", port 25565, next state 1; then length 1, id 0
    assert status_request("127.0.0.1", 25565).hex() == "1000" + "8106" + "09" + b"127.0.0.1".hex() + "63dd" + "01" + "0100"
