"""Requests per second through ``gencoord serve`` (OpenEnv over WebSocket) beside in-process play, same run.

The rule agent's actions for every episode of ``--pool`` are recorded once on a local env. Then, for each
number of sessions S: S sessions are open at once on one ``gencoord serve`` (started here with
``--max-sessions`` S), each an OpenEnv ``GenericEnvClient`` in one asyncio loop of this process, each playing
``--episodes-per-session`` episodes of recorded actions (a request is a reset or a step); and the same
episodes are played in-process, turn by turn as the server plays them (``TurnEnv``), one after another.
Every session's episodes must equal in-process play (observations, rewards, outcomes, metrics), or the row
fails. Both pay the same env work; the server also pays JSON over a WebSocket, the client's side of it (on
the same machine), and the protocol's bookkeeping.

    python benchmarks/serve_throughput.py [--sessions 1 64 2048] [--episodes-per-session 2] [--pool heldout]

Columns beside the rates: the server process's CPU milliseconds per request while the sessions played, the
in-process wall milliseconds per request, and the server's CPU seconds while the sessions opened (an env
each), which the rates leave out. The load average (``os.getloadavg``) is printed before and after: on a shared machine it says how much of
the CPU others took.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.turns import TurnEnv

Episode = tuple[int, list[str]]


def record(pool: str) -> list[Episode]:
    """The rule agent's actions for each episode of ``pool`` (the sim plays them: actions depend on the observations only)."""
    game = TurnEnv(gencoord_env.parallel_env(backend="sim", pool=pool))
    policy = make_policy("rule")
    out = []
    for k in range(len(game.env.episodes)):
        turn, actions = game.reset(index=k), []
        while not turn.done:
            actions.append(policy.act(turn.text, game.info))
            turn = game.act(actions[-1])
        out.append((k, actions))
    return out


def transcript(turns: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What must match between the server and in-process play: each turn's text, agent, stage, reward, end."""
    return [(t["text"], t["agent"], t["stage"], t["reward"], t["done"], t["outcome"], t["metrics"]) for t in turns]


def local(plan: list[list[Episode]], pool: str) -> tuple[float, int, list[list[Any]]]:
    """Play every session's episodes in-process, one after another; (seconds, requests, transcripts)."""
    games = [TurnEnv(gencoord_env.parallel_env(backend="sim", pool=pool)) for _ in plan]
    out, requests = [], 0
    t0 = time.perf_counter()
    for game, episodes in zip(games, plan):
        mine = []
        for k, actions in episodes:
            turns = [game.reset(index=k)]
            for a in actions:
                turns.append(game.act(a))
            requests += 1 + len(actions)
            mine.append(transcript([{**vars(t), "reward": None if i == 0 else t.reward} for i, t in enumerate(turns)]))
        out.append(mine)
    return time.perf_counter() - t0, requests, out


async def remote(url: str, plan: list[list[Episode]], server_pid: int) -> tuple[float, int, list[list[Any]], float, float]:
    """Every session at once, one OpenEnv client each; (seconds, requests, transcripts, the server's CPU seconds
    while the sessions opened, and while they played)."""
    from openenv.core import GenericEnvClient

    clients = [GenericEnvClient(base_url=url, message_timeout_s=600, connect_timeout_s=600) for _ in plan]
    cpu0 = cpu_seconds(server_pid)
    for i in range(0, len(clients), 64):  # connect (a session each, its env made) before the clock starts
        await asyncio.gather(*(c.connect() for c in clients[i:i + 64]))
    cpu1 = cpu_seconds(server_pid)

    async def session(client: Any, episodes: list[Episode]) -> list[Any]:
        mine = []
        for k, actions in episodes:
            results = [await client.reset(index=k)]
            for a in actions:
                results.append(await client.step({"text": a}))
            mine.append(transcript([{**r.observation, "reward": r.reward, "done": r.done} for r in results]))
        return mine

    t0 = time.perf_counter()
    out = await asyncio.gather(*(session(c, e) for c, e in zip(clients, plan)))
    seconds = time.perf_counter() - t0
    cpu2 = cpu_seconds(server_pid)
    await asyncio.gather(*(c.close() for c in clients))
    return seconds, sum(1 + len(a) for episodes in plan for _, a in episodes), list(out), cpu1 - cpu0, cpu2 - cpu1


def start(pool: str, sessions: int) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "gencoord_env.commands.cli", "serve", "--port", str(port), "--backend", "sim",
                               "--pool", pool, "--max-sessions", str(sessions), "--idle-timeout", "0"], stderr=subprocess.DEVNULL)
    end = time.monotonic() + 300
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=2).close()
            return server, url
        except OSError:
            if time.monotonic() > end or server.poll() is not None:
                server.kill()
                raise SystemExit("gencoord serve did not start") from None
            time.sleep(0.2)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", default="heldout")
    ap.add_argument("--sessions", type=int, nargs="+", default=[1, 64, 2048])
    ap.add_argument("--episodes-per-session", type=int, default=2)
    args = ap.parse_args()
    episodes = record(args.pool)
    load = os.getloadavg()
    print(f"serve_throughput: {args.pool} on the sim, rule actions, {args.episodes_per_session} episodes per session, "
          f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'sessions':>8}  {'requests':>8}  {'server req/s':>12}  {'in-process req/s':>16}  {'server/in-process':>17}  "
          f"{'server CPU ms/request':>21}  {'in-process ms/request':>21}  {'server CPU-s opening':>20}")
    for n in args.sessions:
        plan = [[episodes[(s * args.episodes_per_session + e) % len(episodes)] for e in range(args.episodes_per_session)]
                for s in range(n)]
        server, url = start(args.pool, n)
        try:
            seconds, requests, got, opening, cpu = asyncio.run(remote(url, plan, server.pid))
        finally:
            server.terminate()
            server.wait(timeout=60)
        local_seconds, local_requests, want = local(plan, args.pool)
        assert local_requests == requests
        bad = [s for s in range(n) if got[s] != want[s]]
        if bad:
            raise SystemExit(f"{len(bad)} of {n} sessions played otherwise than in-process (the first: session {bad[0]})")
        r, lr = requests / seconds, local_requests / local_seconds
        print(f"{n:>8}  {requests:>8}  {r:>12.0f}  {lr:>16.0f}  {r / lr:>17.2f}  {1e3 * cpu / requests:>21.2f}  "
              f"{1e3 * local_seconds / local_requests:>21.2f}  {opening:>20.1f}")
    load = os.getloadavg()
    print(f"every session's episodes equal in-process play; load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
