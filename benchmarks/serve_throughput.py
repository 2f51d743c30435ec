"""Episodes per second through ``gencoord serve`` (OpenEnv over WebSocket) and in-process, same run.

The rule agent's actions for each episode of ``heldout`` are recorded once on a local env; then, for each
number of sessions S, S threads play them: over the server (one ``GenericEnvClient(...).sync()`` session
each, the server started here with ``--max-sessions`` = the largest S) and in-process (one env each,
played turn by turn as the server plays it). Both pay the same env work; the difference is the
protocol (JSON over a WebSocket, a thread hop per message) and the server's process.

    python benchmarks/serve_throughput.py [--backend sim] [--sessions 1 4 8] [--episodes 64]
"""
from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.turns import TurnEnv


def record(indices: list[int], backend_kwargs: dict[str, Any]) -> list[tuple[int, list[str]]]:
    """The rule agent's actions for each episode (the sim plays them: actions depend on the observations only)."""
    env = gencoord_env.parallel_env(**{**backend_kwargs, "backend": "sim"})
    policy = make_policy("rule")
    out = []
    for k in indices:
        obs, infos = env.reset(options={"index": k})
        actions = []
        while env.agents:
            agent = next(a for a, i in infos.items() if i["deciding"])
            actions.append(policy.act(obs[agent], infos[agent]))
            obs, _, _, _, infos = env.step({**{a: "" for a in env.agents}, agent: actions[-1]})
        out.append((k, actions))
    return out


def rate(sessions: int, episodes: list[tuple[int, list[str]]], play: Any) -> float:
    """Episodes per second with ``sessions`` threads, each playing every ``sessions``-th episode."""
    errors: list[BaseException] = []

    def worker(s: int) -> None:
        try:
            play(episodes[s::sessions])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(sessions)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return len(episodes) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="sim", choices=("sim", "minecraft"))
    ap.add_argument("--pool", default="heldout")
    ap.add_argument("--sessions", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--episodes", type=int, default=64, help="episodes per measurement (default: 64)")
    args = ap.parse_args()
    env_kwargs = {"backend": args.backend, "pool": args.pool}
    episodes = record(list(range(args.episodes)), env_kwargs)
    from openenv.core import GenericEnvClient

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "gencoord_env.commands.cli", "serve", "--port", str(port), "--backend", args.backend,
                               "--pool", args.pool, "--max-sessions", str(max(args.sessions))], stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > end or server.poll() is not None:
                    raise SystemExit("gencoord serve did not start")
                time.sleep(0.2)

        def remote(mine: list[tuple[int, list[str]]]) -> None:
            with GenericEnvClient(base_url=url, message_timeout_s=600).sync() as client:
                for k, actions in mine:
                    result = client.reset(index=k)
                    for a in actions:
                        result = client.step({"text": a})
                    assert result.observation["outcome"] == "SUCCESS", result.observation

        pool = None
        if args.backend == "minecraft":
            from gencoord_env.world.minecraft import SidecarPool

            pool = SidecarPool(arenas=max(args.sessions), max_arenas=max(16, max(args.sessions)))

        def local(mine: list[tuple[int, list[str]]]) -> None:
            world = None
            if pool is not None:
                from gencoord_env.world.minecraft import MinecraftWorld

                world = MinecraftWorld(pool=pool)
            game = TurnEnv(gencoord_env.parallel_env(**env_kwargs, world=world))
            for k, actions in mine:
                game.reset(index=k)
                for a in actions:
                    turn = game.act(a)
                assert turn.outcome == "SUCCESS", turn
            game.close()

        rate(1, episodes[:4], remote)  # warm-up: imports, first sessions
        rate(1, episodes[:4], local)
        print(f"serve_throughput: {args.pool} on {args.backend}, rule actions, {args.episodes} episodes per row")
        print(f"{'sessions':>8}  {'server ep/s':>11}  {'in-process ep/s':>15}  {'server/in-process':>17}")
        for n in args.sessions:
            r, l = rate(n, episodes, remote), rate(n, episodes, local)
            print(f"{n:>8}  {r:>11.1f}  {l:>15.1f}  {r / l:>17.2f}")
        if pool is not None:
            pool.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
