"""What a Minecraft server says it is before any bot joins: the status ping every client sends for its server list.

A sidecar pointed at a server (``server="external"`` or ``"vanilla"``) is started only after the server answers
this ping as Minecraft 1.21.4, so a server of another version, or something at that port that never answers, is
a typed fault at once, with no Node process started:

    >>> status = check_server("127.0.0.1", 25565)          # doctest: +SKIP
    >>> status.version_name, status.protocol                # doctest: +SKIP
    ('1.21.4', 769)

A server that closes the connection without answering (``enable-status=false`` in server.properties) passes:
its bots' login says whether it admits them (``ServerRefused``, ``ServerVersionMismatch``, ``ServerTimeout`` from
the sidecar).
"""
from __future__ import annotations

import io
import json
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from .errors import ServerTimeout, ServerUnreachable, ServerVersionMismatch
from .protocol import MINECRAFT_PROTOCOL, MINECRAFT_VERSION

#: How long a server may take to answer the status ping; a healthy one answers in milliseconds.
STATUS_TIMEOUT_S = 10.0
#: The largest status reply read (its JSON holds the description and a favicon of a few kB).
MAX_REPLY_BYTES = 1 << 20


@dataclass(frozen=True)
class ServerStatus:
    """A server's answer to the status ping: the version it speaks and its description."""

    version_name: str
    protocol: int
    description: str = ""


def _varint(n: int) -> bytes:
    """``n`` as a protocol VarInt (7 bits a byte, low first; negatives as 32-bit two's complement).

    >>> _varint(769).hex(), _varint(-1).hex()
    ('8106', 'ffffffff0f')
    """
    n &= 0xFFFFFFFF
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _packet(packet_id: int, payload: bytes = b"") -> bytes:
    body = _varint(packet_id) + payload
    return _varint(len(body)) + body


def status_request(host: str, port: int) -> bytes:
    """The bytes a 1.21.4 client sends to ask for the status: a handshake (next state 1) and a status request."""
    name = host.encode("utf-8")
    handshake = _varint(MINECRAFT_PROTOCOL) + _varint(len(name)) + name + struct.pack(">H", port) + _varint(1)
    return _packet(0x00, handshake) + _packet(0x00)


def _read_varint(read: Callable[[int], bytes | None]) -> int | None:
    """One VarInt from ``read``; None when the bytes end before it starts or inside it."""
    value = 0
    for shift in range(0, 35, 7):
        byte = read(1)
        if not byte:
            return None
        value |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return value
    raise _Malformed("a VarInt longer than 5 bytes")


class _Malformed(ValueError):
    """Bytes that are not a Minecraft status reply; ``ping`` reports them as ``ServerUnreachable``."""


class _Reader:
    """Reads a reply off ``sock`` until ``deadline``; ``None`` from ``read`` means the server closed the connection."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline, self.buffer = sock, deadline, b""

    def read(self, n: int) -> bytes | None:
        while len(self.buffer) < n:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out


def status_ping(host: str, port: int, timeout_s: float = STATUS_TIMEOUT_S) -> ServerStatus | None:
    """The server's status, or None when it closes the connection without one (status disabled).

    ServerUnreachable when nothing accepts connections at ``host:port`` or what answers is not Minecraft;
    ServerTimeout when it accepts the connection but answers nothing within ``timeout_s``.
    """
    where = f"{host}:{port}"
    deadline = time.monotonic() + timeout_s
    try:
        sock = socket.create_connection((host, port), timeout=min(timeout_s, 3.0))
    except OSError as e:
        raise ServerUnreachable(f"no Minecraft server accepts connections at {where} ({e.strerror or e}); start a "
                                f"Minecraft {MINECRAFT_VERSION} server there with online-mode=false, or use "
                                "server='embedded'") from None
    with sock:
        try:
            sock.sendall(status_request(host, port))
            reader = _Reader(sock, deadline)
            length = _read_varint(reader.read)
            if length is None:
                return None
            if not 0 < length <= MAX_REPLY_BYTES:
                raise _Malformed(f"a reply frame of {length} bytes")
            frame = reader.read(length)
            if frame is None:
                raise _Malformed("the connection closed inside a reply")
        except (TimeoutError, socket.timeout):
            raise ServerTimeout(f"the server at {where} accepted a connection but answered no status ping within "
                                f"{timeout_s:.0f} s: it is not a Minecraft server, or it is hung; check the host and "
                                "port (a Minecraft server answers the ping at once)") from None
        except ConnectionError:
            return None  # reset instead of closed: a server refusing status requests all the same
        except ValueError as e:
            raise _not_minecraft(where, str(e)) from None
    return _parse_status(where, frame)


def _not_minecraft(where: str, what: str) -> ServerUnreachable:
    return ServerUnreachable(f"what answers at {where} is not a Minecraft server (its status reply: {what}); check "
                             f"the host and port of the Minecraft {MINECRAFT_VERSION} server")


def _parse_status(where: str, frame: bytes) -> ServerStatus:
    """The status of one reply frame: packet 0x00 holding a JSON string."""
    if frame[:1] != b"\x00":
        raise _not_minecraft(where, f"packet {frame[:1].hex() or 'none'}, not 00")
    body = io.BytesIO(frame[1:])
    try:
        size = _read_varint(body.read)
        reply = json.loads(body.read(size if size is not None else 0).decode("utf-8"))
        version = reply["version"]
        name, protocol = str(version["name"]), version["protocol"]
    except (ValueError, KeyError, TypeError):
        raise _not_minecraft(where, f"{frame[:80]!r}") from None
    if type(protocol) is not int:
        raise _not_minecraft(where, f"version.protocol {protocol!r}")
    description = reply.get("description", "")
    if isinstance(description, dict):
        description = description.get("text", "")
    return ServerStatus(name, protocol, str(description))


def check_server(host: str, port: int, timeout_s: float = STATUS_TIMEOUT_S) -> ServerStatus | None:
    """``status_ping``, and ServerVersionMismatch unless the server speaks the bots' Minecraft version."""
    status = status_ping(host, port, timeout_s)
    if status is not None and status.protocol != MINECRAFT_PROTOCOL:
        raise ServerVersionMismatch(
            f"the server at {host}:{port} speaks Minecraft {status.version_name} (protocol {status.protocol}); the bots "
            f"speak {MINECRAFT_VERSION} (protocol {MINECRAFT_PROTOCOL}): run a {MINECRAFT_VERSION} server there")
    return status
