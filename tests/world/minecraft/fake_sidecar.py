"""A stand-in sidecar speaking the sidecar protocol, for testing the Python side's own logic.

It is launched exactly like the real one (``<interpreter> src/sidecar.js --endpoint EP ...``; the tests
copy this file to that name and use the Python interpreter as "node"). It does not simulate Minecraft:
``execute`` replies after ``ticks`` * 5 ms (``wait``) or at once, and reports when it started and ended
so tests can see which calls overlapped. Behaviour switches come from ``FAKE_SIDECAR`` (comma list):

- ``exit_early``: exit with code 2 before READY; ``no_ready``: never print READY
- ``old_protocol``: ``hello`` claims protocol 1
- ``drop_pings=N``: leave the first N pings unanswered
Arenas: ``open_arena`` holds the named arena, else the first free one (``a0``, ``a1``, ...; ``--arenas``
exist from the start); a held one is ``ArenaBusy``. Each arena keeps its own spec; ``reset`` reports
``rebuilt`` when asked to rebuild or after an arena fault.
Special calls: ``wait`` with ticks 999 kills the process (exit 7); ticks 998 never replies; ticks 997
is an ``ArenaFault`` of its arena; any call whose args name item ``missing_item`` fails as a skill.
"""
from __future__ import annotations

import heapq
import json
import os
import sys
import time
from typing import Any

import msgpack
import zmq


class _OnlyKey:
    """ZAP credentials check admitting one CURVE public key."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def callback(self, domain: str, z85_key: bytes) -> bool:
        from zmq.utils import z85

        return z85.decode(z85_key) == self.key


def main() -> None:
    argv = sys.argv[1:]
    endpoint = argv[argv.index("--endpoint") + 1]
    flags = {f.partition("=")[0]: f.partition("=")[2] or "1" for f in os.environ.get("FAKE_SIDECAR", "").split(",") if f}
    log = sys.stderr
    print(f"fake sidecar argv {argv}", file=log, flush=True)
    if "exit_early" in flags:
        print("cannot start: exit_early", file=log, flush=True)
        sys.exit(2)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.ROUTER_HANDOVER, 1)  # as the real one: a client resending on a fresh socket keeps its routing id
    ready: dict[str, Any] = {}
    if "--client-key" in argv:  # as the real one on tcp: CURVE, admitting only the client key it was given
        from zmq.auth.thread import ThreadAuthenticator

        client_key = bytes.fromhex(argv[argv.index("--client-key") + 1])
        auth = ThreadAuthenticator(ctx)
        auth.start()
        auth.configure_curve_callback("*", credentials_provider=_OnlyKey(client_key))
        public, secret = zmq.curve_keypair()
        sock.curve_secretkey = secret
        sock.curve_publickey = public
        sock.curve_server = True
        ready["curve_server_key"] = public.decode()
    sock.bind(endpoint.replace(":0", ":*") if endpoint.startswith("tcp://") else endpoint)
    endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
    agents = argv[argv.index("--agents") + 1].split(",") if "--agents" in argv else ["agent_a", "agent_b"]
    if "no_ready" in flags:
        time.sleep(3600)
    first = int(argv[argv.index("--arenas") + 1]) if "--arenas" in argv else 1
    arenas: dict[str, dict[str, Any]] = {f"a{k}": {"held": False, "spec": {}, "broken": False} for k in range(first)}
    print("READY " + json.dumps({"endpoint": endpoint, "protocol": 2, "arenas": list(arenas), **ready}), flush=True)
    drop_pings = int(flags.get("drop_pings", 0))
    busy: set[str] = set()
    due: list[tuple[float, int, bytes, bytes, str]] = []
    seq = 0
    counts: dict[str, int] = {}

    def reply(rid: int, result: object = None, error: tuple[str, str] | None = None) -> bytes:
        msg: dict[str, Any] = {"v": 2, "id": rid, "ok": error is None}
        if error:
            msg["error"] = {"type": error[0], "message": error[1]}
        else:
            msg["result"] = result
        return msgpack.packb(msg)

    while True:
        timeout = max(0, int((due[0][0] - time.monotonic()) * 1000)) if due else 1000
        if sock.poll(timeout):
            ident, payload = sock.recv_multipart()
            msg = msgpack.unpackb(payload)
            op, rid, args = msg["op"], msg["id"], msg.get("args", {})
            counts[op] = counts.get(op, 0) + 1
            shown = f" arena={args.get('arena')} rebuild={bool(args.get('rebuild'))}" if op == "reset" else ""
            print(f"recv {op} #{counts[op]} id={rid}{shown}", file=log, flush=True)
            arena = arenas.get(args.get("arena", "")) if isinstance(args, dict) else None
            if op in ("reset", "execute", "observe", "barrier", "close_arena") and arena is None:
                out = reply(rid, error=("BadRequest", f"no arena named {args.get('arena')!r}"))
            elif op == "hello":
                out = reply(rid, {"protocol": 1 if "old_protocol" in flags else 2, "minecraft": "1.21.4",
                                  "sidecar": "fake", "arenas": [{"name": n, "held": a["held"], "agents": agents}
                                                                for n, a in arenas.items()]})
            elif op == "ping":
                if counts[op] <= drop_pings:
                    continue
                out = reply(rid, "pong")
            elif op == "open_arena":
                name = args.get("arena") or next((n for n, a in arenas.items() if not a["held"]), f"a{len(arenas)}")
                entry = arenas.setdefault(name, {"held": False, "spec": {}, "broken": False})
                if entry["held"]:
                    out = reply(rid, error=("ArenaBusy", f"arena {name} is held by another client"))
                else:
                    entry["held"] = True
                    out = reply(rid, {"arena": name, "origin": [64 * list(arenas).index(name), 0, 0], "agents": agents})
            elif op == "close_arena":
                arena["held"] = False
                out = reply(rid, True)
            elif op == "reset":
                rebuilt = bool(args.get("rebuild")) or arena["broken"]
                if rebuilt:  # as the real rebuild does: the arena's unfinished calls end, their bots are fresh
                    mine = f"{args['arena']}/"
                    busy -= {k for k in busy if k.startswith(mine)}
                    due = [d for d in due if not d[4].startswith(mine)]
                    heapq.heapify(due)
                arena.update(spec=args["spec"], broken=False)
                out = reply(rid, {"ms": 1, "rejoined": [], "rebuilt": rebuilt})
            elif op == "execute":
                call = args["call"]
                actor, call_op, cargs = call["actor"], call["op"], call["args"]
                key = f"{args['arena']}/{actor}"
                if key in busy:
                    out = reply(rid, error=("BadRequest", f"{actor} already runs a call"))
                else:
                    ticks = int(cargs.get("ticks", 0)) if call_op == "wait" else 0
                    if ticks == 999:
                        print("dying on request", file=log, flush=True)
                        os._exit(7)
                    if ticks == 998:
                        continue
                    if ticks == 997:
                        arena["broken"] = True
                        sock.send_multipart([ident, reply(rid, error=("ArenaFault", f"arena {args['arena']}: "
                                                                      f"{actor}'s bot is disconnected"))])
                        continue
                    busy.add(key)
                    ok = cargs.get("item") != "missing_item"
                    seq += 1
                    heapq.heappush(due, (time.monotonic() + ticks * 0.005, seq, ident, msgpack.packb(
                        {"rid": rid, "call_id": call["id"], "actor": actor, "op": call_op, "ok": ok,
                         "start": time.monotonic()}), key))
                    continue
            elif op == "observe":
                spec = arena["spec"]
                out = reply(rid, {"inventories": spec.get("inventories", {}), "containers": spec.get("containers", {}),
                                  "sites": {"site": [[1, 0, 2, "oak_planks"], [0, 0, 0, "oak_planks"]]},
                                  "furnaces": {}})
            elif op == "barrier":
                out = reply(rid, True)
            elif op == "shutdown":
                sock.send_multipart([ident, reply(rid, True)])
                time.sleep(0.05)
                sys.exit(0)
            else:
                out = reply(rid, error=("BadRequest", f"unknown op {op}"))
            sock.send_multipart([ident, out])
        while due and due[0][0] <= time.monotonic():
            _, _, ident, packed, actor = heapq.heappop(due)
            d = msgpack.unpackb(packed)
            busy.discard(actor)
            event = {"call_id": d["call_id"], "actor": d["actor"], "op": d["op"], "ok": d["ok"], "kind": "skill",
                     "reason": "" if d["ok"] else "not enough missing_item", "data": {"start": d["start"], "end": time.monotonic()}}
            sock.send_multipart([ident, reply(d["rid"], {"events": [event]})])


if __name__ == "__main__":
    main()
