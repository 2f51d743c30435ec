"""A stand-in sidecar speaking the sidecar protocol, for testing the Python side's own logic.

It is launched exactly like the real one (``<interpreter> src/sidecar.js --endpoint EP ...``; the tests
copy this file to that name and use the Python interpreter as "node"). It does not simulate Minecraft:
``execute`` replies after ``ticks`` * 5 ms (``wait``) or at once, and reports when it started and ended
so tests can see which calls overlapped. Behaviour switches come from ``FAKE_SIDECAR`` (comma list):

- ``exit_early``: exit with code 2 before READY; ``no_ready``: never print READY
- ``protocol2``: ``hello`` claims protocol 2
- ``drop_pings=N``: leave the first N pings unanswered
Special calls: ``wait`` with ticks 999 kills the process (exit 7); ticks 998 never replies;
any call whose args name item ``missing_item`` fails as a skill.
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
    sock.bind(endpoint.replace(":0", ":*") if endpoint.startswith("tcp://") else endpoint)
    endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
    agents = argv[argv.index("--agents") + 1].split(",") if "--agents" in argv else ["agent_a", "agent_b"]
    if "no_ready" in flags:
        time.sleep(3600)
    print("READY " + json.dumps({"endpoint": endpoint, "protocol": 1}), flush=True)
    drop_pings = int(flags.get("drop_pings", 0))
    busy: set[str] = set()
    spec: dict = {}
    due: list[tuple[float, int, bytes, bytes, str]] = []
    seq = 0
    counts: dict[str, int] = {}

    def reply(rid: int, result: object = None, error: tuple[str, str] | None = None) -> bytes:
        msg: dict[str, Any] = {"v": 1, "id": rid, "ok": error is None}
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
            print(f"recv {op} #{counts[op]} id={rid}", file=log, flush=True)
            if op == "hello":
                out = reply(rid, {"protocol": 2 if "protocol2" in flags else 1, "minecraft": "1.21.4",
                                  "sidecar": "fake", "agents": agents})
            elif op == "ping":
                if counts[op] <= drop_pings:
                    continue
                out = reply(rid, "pong")
            elif op == "reset":
                spec = args
                out = reply(rid, {"ms": 1})
            elif op == "execute":
                actor, call_op, cargs = args["actor"], args["op"], args["args"]
                if actor in busy:
                    out = reply(rid, error=("BadRequest", f"{actor} already runs a call"))
                else:
                    ticks = int(cargs.get("ticks", 0)) if call_op == "wait" else 0
                    if ticks == 999:
                        print("dying on request", file=log, flush=True)
                        os._exit(7)
                    if ticks == 998:
                        continue
                    busy.add(actor)
                    ok = cargs.get("item") != "missing_item"
                    seq += 1
                    heapq.heappush(due, (time.monotonic() + ticks * 0.005, seq, ident, msgpack.packb(
                        {"rid": rid, "call_id": args["id"], "actor": actor, "op": call_op, "ok": ok,
                         "start": time.monotonic()}), actor))
                    continue
            elif op == "observe":
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
