"""A DEALER-socket client for the sidecar: request ids, timeouts, Lazy Pirate retries, death detection.

Several requests may be in flight at once (one ``execute`` per bot); replies are matched by id. An
idempotent op (``hello``, ``ping``, ``observe``, ``barrier``) that times out is resent on a fresh socket
("Lazy Pirate", ZeroMQ guide ch. 4); an op that changes the world (``execute``, ``reset``) is never
resent, because doing it twice would corrupt the episode. While waiting, the client polls the sidecar
process every ``poll_s`` so a crash surfaces as SidecarDied within a fraction of a second instead of
after the request timeout.

Lifetime: every client of this process shares one ZeroMQ context, which is never terminated (terminating a
context blocks until all its sockets are closed, which is how a dropped client used to hang the garbage
collector). A client's socket is closed with linger 0 by ``close()`` or, for a client dropped without
``close()``, by a ``weakref.finalize`` that holds only the socket, so collecting a client never blocks.

On tcp the sidecar admits only CURVE clients holding the per-launch key pair it was started for
(``CurveKeys``); on ipc the socket lies in a private folder and needs no key. An arena belongs to the
connection that opened it, known to the sidecar by its routing id (``Identity``): a client's resends on a
fresh socket, and a world's successive clients, present the same one and so keep their arena.
"""
from __future__ import annotations

import itertools
import os
import stat
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import zmq

from .errors import (
    SERVER_FAULTS,
    ArenaBusy,
    ArenaFault,
    EpisodeLost,
    MinecraftBackendError,
    ProtocolMismatch,
    RequestTooLarge,
    SidecarDied,
    SidecarError,
    SidecarStalled,
    SidecarTimeout,
    SpecRefused,
)
from .protocol import IDEMPOTENT_OPS, Reply, decode_reply, encode_request

from gencoord_env.errors import UsageError

#: Seconds to wait for one reply, per op. ``execute`` covers pathfinding and the sidecar's own skill
#: timeouts, so it is generous: it only catches a hung sidecar.
DEFAULT_TIMEOUTS: Mapping[str, float] = {
    "hello": 10.0, "ping": 2.0, "observe": 10.0, "barrier": 10.0, "open_arena": 60.0, "close_arena": 5.0,
    "reset": 60.0, "execute": 120.0, "shutdown": 3.0, "drop_bot": 10.0,
}
_REFUSALS = frozenset({"BadRequest", "TooLarge", "VersionMismatch"})
#: The variable that stretches the startup deadlines (bots joining, arenas opening, resets that rejoin bots, the
#: sidecar's READY) for a machine known to be loaded; the sidecar reads it too (``bots.js``).
TIMEOUT_SCALE_ENV = "GENCOORD_TIMEOUT_SCALE"
STARTUP_OPS: tuple[str, ...] = ("open_arena", "reset")


def timeout_scale() -> float:
    """``$GENCOORD_TIMEOUT_SCALE`` as a number >= 1 (1 when unset); anything else is refused, naming the variable."""
    text = os.environ.get(TIMEOUT_SCALE_ENV, "").strip()
    if not text:
        return 1.0
    try:
        scale = float(text)
    except ValueError:
        scale = float("nan")
    if not scale >= 1.0 or scale == float("inf"):
        raise UsageError(f"{TIMEOUT_SCALE_ENV} must be a number >= 1 (how much longer the startup deadlines are), got {text!r}")
    return scale


def startup_timeouts() -> dict[str, float]:
    """``DEFAULT_TIMEOUTS`` with the startup ops' deadlines multiplied by ``timeout_scale()``."""
    scale = timeout_scale()
    return {op: t * scale if op in STARTUP_OPS else t for op, t in DEFAULT_TIMEOUTS.items()}


_CONTEXTS: dict[int, zmq.Context[zmq.Socket[bytes]]] = {}
_CONTEXT_LOCK = threading.Lock()


def shared_context() -> zmq.Context[zmq.Socket[bytes]]:
    """This process's ZeroMQ context for sidecar sockets (a forked child gets its own; the parent's is left alone)."""
    pid = os.getpid()
    with _CONTEXT_LOCK:
        ctx = _CONTEXTS.get(pid)
        if ctx is None:
            ctx = _CONTEXTS[pid] = zmq.Context()
        return ctx


@dataclass(frozen=True)
class CurveKeys:
    """The CURVE keys of one tcp sidecar launch (z85 text): the sidecar's public key and this side's key pair.

    ``token`` packs what another process needs to attach (``SidecarPool(endpoint=..., secret=token)``); the
    repr never shows the secret key.

    >>> keys = CurveKeys.generate(server_public="0" * 40)
    >>> CurveKeys.from_token(keys.token) == keys
    True
    """

    server_public: str
    public: str
    secret: str = field(repr=False)

    @classmethod
    def generate(cls, server_public: str = "") -> CurveKeys:
        """A fresh client key pair (``server_public`` is filled in once the sidecar reports its key)."""
        public, secret = zmq.curve_keypair()
        return cls(server_public, public.decode("ascii"), secret.decode("ascii"))

    def with_server(self, server_public: str) -> CurveKeys:
        return CurveKeys(server_public, self.public, self.secret)

    @property
    def public_hex(self) -> str:
        """The client's public key as 64 hex digits (how the sidecar's ``--client-key`` takes it)."""
        from zmq.utils import z85

        return z85.decode(self.public.encode("ascii")).hex()

    @property
    def token(self) -> str:
        """``<sidecar public key><client secret key>``, 80 characters of z85."""
        return self.server_public + self.secret

    @classmethod
    def from_token(cls, token: str) -> CurveKeys:
        """The keys of a ``token``; ValueError naming what is expected if it is not one."""
        if not isinstance(token, str) or len(token) != 80:
            raise UsageError("secret must be the 80-character `secret` of the SidecarPool that started the sidecar "
                             f"(pool.secret), got {type(token).__name__} of length {len(token) if isinstance(token, str) else '?'}")
        server, secret = token[:40], token[40:]
        try:
            public = zmq.curve_public(secret.encode("ascii")).decode("ascii")
        except Exception:  # noqa: BLE001 - libzmq reports a bad key in several ways
            raise UsageError("secret is not a sidecar secret (its key part is not a z85 CURVE secret key); "
                             "pass the `secret` of the SidecarPool that started the sidecar") from None
        return cls(server, public, secret)


class Identity:
    """Who a client is to the sidecar: the ZeroMQ routing id its sockets present (the sidecar binds the arenas a
    connection opens to it; 16 random bytes, so no other process can guess it) and the request ids sent under it,
    never reused, so a late reply to an abandoned request never matches a newer one. Share one between clients
    (``SidecarClient(identity=...)``) to hand an arena from one to the next."""

    def __init__(self) -> None:
        # libzmq reserves routing ids that start with a zero byte for its own
        self.routing_id = b"g" + os.urandom(15)
        self._ids = itertools.count(1)

    def next_id(self) -> int:
        return next(self._ids)


def unreachable(endpoint: str) -> str | None:
    """Why no new connection can reach ``endpoint``, or None: an ipc endpoint whose socket file is gone (deleted,
    or its folder cleaned up) can no longer be connected to, though the connections made before go on.

    >>> unreachable("ipc:///nonexistent/sidecar.sock")
    'its socket file /nonexistent/sidecar.sock is gone (deleted?): no new connection can reach it'
    """
    if not endpoint.startswith("ipc://"):
        return None
    path = endpoint[len("ipc://"):]
    try:
        if stat.S_ISSOCK(os.stat(path).st_mode):
            return None
        return f"{path} is no longer a socket: no new connection can reach it"
    except OSError:
        return f"its socket file {path} is gone (deleted?): no new connection can reach it"


def _close_sockets(box: list[zmq.Socket[bytes]], pid: int) -> None:
    """Close every socket in ``box`` at once (linger 0); the finalizer of a client dropped without ``close()``.

    In a forked child (``pid`` is the creator's) the sockets belong to the parent's context: left alone.
    """
    if os.getpid() != pid:
        box.clear()
        return
    while box:
        box.pop().close(linger=0)


def _no_exit() -> int | None:
    return None


def _no_log() -> str:
    return ""


class SidecarClient:
    """Talks to one sidecar endpoint.

    ``exit_code`` returns the sidecar process's exit code, or None while it runs; ``describe_log`` returns
    text (e.g. the log path and its last lines) appended to fault messages; ``curve``: the keys a tcp
    sidecar requires (None for ipc); ``identity``: the routing id and request ids to use (a fresh one if None).
    """

    def __init__(
        self,
        endpoint: str,
        *,
        exit_code: Callable[[], int | None] = _no_exit,
        describe_log: Callable[[], str] = _no_log,
        timeouts: Mapping[str, float] | None = None,
        retries: int = 2,
        poll_s: float = 0.1,
        curve: CurveKeys | None = None,
        identity: Identity | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.identity = identity if identity is not None else Identity()
        self._exit_code = exit_code
        self._describe_log = describe_log
        self.timeouts = {**startup_timeouts(), **(timeouts or {})}
        self.retries = retries
        self.poll_s = poll_s
        self._curve = curve
        self._sock: zmq.Socket[bytes] | None = None
        self._socks: list[zmq.Socket[bytes]] = []  # the open socket, for the finalizer (which must not hold self)
        self._pid = os.getpid()
        self._finalizer = weakref.finalize(self, _close_sockets, self._socks, self._pid)
        self._ops: dict[int, str] = {}       # in-flight id -> op
        self._early: dict[int, Reply] = {}   # replies that arrived while waiting for another id
        self._connect()

    # ---- socket ---------------------------------------------------------------------------------

    def _connect(self) -> None:
        _close_sockets(self._socks, self._pid)
        self._sock = None
        sock: zmq.Socket[bytes] = shared_context().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTING_ID, self.identity.routing_id)
        if self._curve is not None:
            sock.curve_secretkey = self._curve.secret.encode("ascii")
            sock.curve_publickey = self._curve.public.encode("ascii")
            sock.curve_serverkey = self._curve.server_public.encode("ascii")
        sock.connect(self.endpoint)
        self._socks.append(sock)
        self._sock = sock

    def close(self) -> None:
        """Close the socket (linger 0); pending requests are forgotten. Never blocks."""
        self._finalizer()
        self._sock = None
        self._ops.clear()
        self._early.clear()

    def close_sending(self, op: str, args: Mapping[str, Any] | None = None, linger_s: float = 1.0) -> None:
        """Send one last request without waiting for its reply, and close. Never blocks: the socket lingers up
        to ``linger_s`` in the background to deliver it (the shared context is never terminated)."""
        sock = self._sock
        if sock is not None and sock in self._socks and os.getpid() == self._pid:
            self._socks.remove(sock)  # closed here, lingering, rather than at once by close()
            try:
                sock.send(encode_request(self.identity.next_id(), op, args), zmq.NOBLOCK)
                sock.setsockopt(zmq.LINGER, int(linger_s * 1000))
            except (zmq.ZMQError, MinecraftBackendError):
                pass  # best effort: the sidecar may be gone
            sock.close()
        self.close()

    @property
    def closed(self) -> bool:
        return self._sock is None

    # ---- requests -------------------------------------------------------------------------------

    def submit(self, op: str, args: Mapping[str, Any] | None = None) -> int:
        """Send one request without waiting; returns its id for ``wait``."""
        if self._sock is None:
            raise EpisodeLost(f"the connection to the sidecar at {self.endpoint} was closed; call reset(spec) to open a new one")
        rid = self.identity.next_id()
        self._sock.send(encode_request(rid, op, args))
        self._ops[rid] = op
        return rid

    def wait(self, ids: Collection[int], timeout: float | None = None) -> Reply:
        """The first reply among ``ids``; SidecarTimeout after ``timeout`` s, SidecarDied if the process exits.

        Replies for other in-flight ids are kept for a later ``wait``; replies for forgotten ids (a
        request that already timed out) are dropped.
        """
        for rid in ids:
            if rid in self._early:
                self._ops.pop(rid, None)
                return self._early.pop(rid)
        if self._sock is None:
            raise EpisodeLost(f"the connection to the sidecar at {self.endpoint} was closed; call reset(spec) to open a new one")
        ops = sorted({self._ops.get(i, "?") for i in ids})
        if timeout is None:
            timeout = max(self.timeouts.get(op, 30.0) for op in ops)
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive(ops)
            left = deadline - time.monotonic()
            if left <= 0:
                for rid in ids:
                    self._ops.pop(rid, None)
                raise SidecarTimeout(
                    f"the sidecar did not answer {'/'.join(ops)} within {timeout:.1f} s at {self.endpoint}; "
                    f"it may be hung: close the env and create a new one (or call reset(), which restarts it)"
                    + self._log_suffix()
                )
            if not self._sock.poll(int(min(left, self.poll_s) * 1000) + 1, zmq.POLLIN):
                continue
            frames = self._sock.recv_multipart(zmq.NOBLOCK)
            reply = decode_reply(frames[-1])
            if reply.id in ids:
                self._ops.pop(reply.id, None)
                return reply
            if reply.id in self._ops:
                self._early[reply.id] = reply
            # else: a late reply to a request we gave up on

    def call(self, op: str, args: Mapping[str, Any] | None = None, timeout: float | None = None) -> Any:
        """Send one request and return its result; error replies raise typed exceptions.

        Idempotent ops are retried on a fresh socket after a timeout (``retries`` times); others are not.
        """
        attempts = 1 + (self.retries if op in IDEMPOTENT_OPS else 0)
        for attempt in range(attempts):
            rid = self.submit(op, args)
            try:
                reply = self.wait([rid], timeout)
            except SidecarTimeout:
                if attempt + 1 == attempts:
                    raise
                self._reconnect_keeping_pending()
                continue
            return self.result_or_raise(op, reply)
        raise AssertionError("unreachable")

    def result_or_raise(self, op: str, reply: Reply) -> Any:
        """The result of a reply, or the typed exception for its error."""
        if reply.ok:
            return reply.result
        text = f"sidecar refused {op}: {reply.error_type}: {reply.error_message}"
        if reply.error_type == "ArenaFault":
            raise ArenaFault(f"{op} failed: {reply.error_message}" + self._log_suffix())
        if reply.error_type == "Stalled":
            raise SidecarStalled(f"{op}: {reply.error_message}" + self._log_suffix())
        if reply.error_type in SERVER_FAULTS:  # the sidecar's message says what the server did and what to do
            raise SERVER_FAULTS[reply.error_type](f"{op}: {reply.error_message}")
        if reply.error_type == "ArenaBusy":
            raise ArenaBusy(f"{op} refused: {reply.error_message}")
        if reply.error_type == "TooLarge":
            raise RequestTooLarge(text + " (the sidecar goes on; the limits are gencoord_env/data/limits.json, "
                                  "read by both sides)")
        if op == "reset" and reply.error_type == "BadRequest":  # the spec, not the installation, is wrong
            raise SpecRefused(text + "; nothing was done and the sidecar goes on: fix the reset spec (WorldSpec)")
        if reply.error_type in _REFUSALS:
            raise ProtocolMismatch(
                text + "; the request did not match what the sidecar expects: the Python package and "
                "mineflayer_server/ may come from different versions (reinstall both from one checkout and "
                "run `gencoord setup`)" + self._log_suffix()
            )
        raise SidecarError(text + self._log_suffix(), error_type=reply.error_type)

    # ---- helpers --------------------------------------------------------------------------------

    def _reconnect_keeping_pending(self) -> None:
        # Lazy Pirate: a fresh socket (under the same routing id, which the sidecar hands over to it, so the
        # arena stays ours) so the next send does not queue behind a stuck connection. Other
        # in-flight requests lose their replies, so they are forgotten too (only idempotent calls
        # run alone through call(); execute batches never reach here).
        self._ops.clear()
        self._early.clear()
        self._connect()

    def _check_alive(self, ops: list[str]) -> None:
        code = self._exit_code()
        if code is not None:
            raise SidecarDied(
                f"the sidecar process exited with code {code} while waiting for {'/'.join(ops)}; "
                "the episode is lost: call reset() to start a fresh sidecar" + self._log_suffix(),
                returncode=code,
            )

    def _log_suffix(self) -> str:
        text = self._describe_log()
        return f"\n{text}" if text else ""
