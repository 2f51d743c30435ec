"""Rollouts spread over machines with Ray: N actors, each with its own worlds (its own sidecar and arenas).

``RayRunner(workers=N, backend=..., arenas=K)`` starts N Ray actors; each holds an ``ArenaRunner`` (K
arenas of a sidecar of its own, or K sim worlds) and plays one episode per call, up to K at once. The
driver hands out episode indices as actors have room and gathers the results by index, so the results
come back in the order asked for and equal the serial run's. Only ``--workers`` imports this module, and
it needs the ``ray`` extra (``pip install 'gencoord_env[ray]'``).

Faults: an actor that dies (its process killed, its machine gone) loses only the episodes it was playing;
each of them is played once more on another actor (Ray also restarts the dead actor once) and the retry
is reported in ``Played.retries``. An infrastructure fault inside an actor (``MinecraftBackendError``) is
retried the same way. A second failure of one episode raises ``EpisodeLost`` with the results so far.

    >>> with RayRunner(workers=2, backend="minecraft", arenas=4) as runner:      # doctest: +SKIP
    ...     played = runner.run(range(64), partial(rollout_slot, spec), play_rollout)

``address``: a running cluster (``ray start --head`` on one machine, ``ray start --address HEAD:6379`` on
the others; every machine needs gencoord_env with the ``ray`` extra and, for Minecraft, ``gencoord setup``).
Without it a local cluster is started for the run.
"""
from __future__ import annotations

import logging
import os
import socket
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gencoord_env.commands.arenas import ArenaRunner, Build, EpisodeLost, Play, Played, Retry, _first_line, _is_fault
from gencoord_env.errors import UsageError


def _ray() -> Any:
    try:
        import ray
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError("--workers runs on Ray, which is not installed: pip install 'gencoord_env[ray]'",
                                  name="ray") from e
    return ray


class _Worker:
    """One Ray actor: its own ArenaRunner; ``play`` runs on a free slot (the actor runs K calls at once)."""

    def __init__(self, backend: str, arenas: int, backend_options: Mapping[str, Any] | None) -> None:
        self.runner = ArenaRunner(backend, arenas, backend_options)
        self.where = f"{socket.gethostname()} pid {os.getpid()}"

    def ready(self) -> str:
        return self.where

    def play(self, index: int, build: Build, play: Play, key: str) -> Any:
        return self.runner.play_one(index, build, play, key)

    def close(self) -> None:
        self.runner.close()


class RayRunner:
    """``workers`` Ray actors, each with ``arenas`` worlds of its own; the same ``run`` as ``ArenaRunner``."""

    def __init__(self, workers: int, backend: str, arenas: int = 1, backend_options: Mapping[str, Any] | None = None,
                 address: str | None = None, cpus_per_worker: float = 1.0) -> None:
        if workers < 1:
            raise UsageError(f"workers must be at least 1, got {workers}")
        if arenas < 1:
            raise UsageError(f"arenas must be at least 1, got {arenas}")
        if not address:
            # a cluster of this machine alone talks over loopback only: Ray's own switch for that, read when
            # ray is imported and inherited by its processes
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
            # Ray runs its workers at nice 15, and so the sidecars and Minecraft servers they start: beside four
            # busy loops a worker's bots did not spawn within two minutes while the same sidecars elsewhere did.
            # The workers run at the caller's priority (read by the raylet this process starts)
            os.environ.setdefault("RAY_worker_niceness", "0")
        ray = _ray()
        self.ray = ray
        self.workers = workers
        self.arenas = arenas
        self._started_ray = False
        if not ray.is_initialized():
            if address:
                ray.init(address=address, logging_level=logging.WARNING)
            else:
                ray.init(num_cpus=max(os.cpu_count() or 1, int(workers * cpus_per_worker + 0.999)),
                         include_dashboard=False, logging_level=logging.WARNING)
            self._started_ray = True
        actor = ray.remote(_Worker).options(
            max_concurrency=arenas, max_restarts=1, num_cpus=cpus_per_worker, scheduling_strategy="SPREAD",
        )
        self.actors = [actor.remote(backend, arenas, dict(backend_options or {})) for _ in range(workers)]
        #: Where each actor runs ("host pid N"), once it has started.
        self.where = ray.get([a.ready.remote() for a in self.actors])

    def run(self, indices: Iterable[int], build: Build, play: Play, key: str = "default",
            on_result: Callable[[int, Any], None] | None = None) -> Played[Any]:
        """Play every index on the actors, each actor ``arenas`` at a time; results in the order of ``indices``."""
        ray = self.ray
        order = list(indices)
        build_ref, play_ref = self.ray.put(build), self.ray.put(play)
        todo = deque(order)
        results: dict[int, Any] = {}
        retries: list[Retry] = []
        pending: dict[Any, tuple[int, int]] = {}
        load = [0] * len(self.actors)
        failures = [0] * len(self.actors)
        probes: dict[Any, int] = {}  # a restarting actor's ready() call -> its worker number

        def usable() -> list[int]:
            alive = [w for w in range(len(self.actors)) if failures[w] < 2 and w not in probes.values()]
            return alive or [w for w in range(len(self.actors)) if failures[w] < 2] or list(range(len(self.actors)))

        def submit(k: int, avoid: int | None = None) -> None:
            choices = [w for w in usable() if w != avoid] or usable()
            w = min(choices, key=lambda n: (load[n], n))
            pending[self.actors[w].play.remote(k, build_ref, play_ref, key)] = (k, w)
            load[w] += 1

        def fill() -> None:
            while todo and any(load[w] < self.arenas for w in usable()):
                submit(todo.popleft())

        fill()
        while pending or probes:
            [ref], _ = ray.wait([*pending, *probes], num_returns=1)
            if ref in probes:
                w = probes.pop(ref)
                try:
                    self.where[w] = ray.get(ref)  # restarted: usable again, in a new process
                except Exception:  # noqa: BLE001 - an actor that cannot come back gets no more episodes
                    failures[w] = 2
                fill()
                continue
            k, w = pending.pop(ref)
            load[w] -= 1
            try:
                result = ray.get(ref)
            except Exception as e:  # noqa: BLE001 - sorted below: a lost worker or fault is retried, a bug raised
                cause = _cause(ray, e)
                if cause is None:
                    raise
                if any(r.index == k for r in retries):
                    raise EpisodeLost(f"episode {k} failed twice; the second time on worker {w} "
                                      f"({self.where[w]}): {cause}", results) from e
                retries.append(Retry(k, f"worker {w} ({self.where[w]})", cause))
                if isinstance(e, ray.exceptions.RayActorError) and w not in probes.values():
                    # the actor died: nothing more goes to it until Ray has restarted it (an episode sent
                    # while it restarts would be lost with it)
                    failures[w] += 1
                    probes[self.actors[w].ready.remote()] = w
                submit(k, avoid=w)
                continue
            results[k] = result
            if on_result is not None:
                on_result(k, result)
            fill()
        return Played(tuple(results[k] for k in order), tuple(sorted(retries, key=lambda r: r.index)))

    def close(self) -> None:
        """Close the actors' worlds and stop them; a local Ray started here is shut down."""
        ray = self.ray
        for a in self.actors:
            try:
                ray.get(a.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a dead actor has nothing left to close
                pass
            ray.kill(a)
        self.actors = []
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    def __enter__(self) -> RayRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cause(ray: Any, error: BaseException) -> str | None:
    """What to report when ``error`` is a lost worker or an infrastructure fault (worth one retry); None
    for anything else, which is a bug."""
    ex = ray.exceptions
    if isinstance(error, (ex.RayActorError, ex.WorkerCrashedError, ex.NodeDiedError, ex.ObjectLostError)):
        return f"the worker was lost ({type(error).__name__})"
    if isinstance(error, ex.RayTaskError):
        inner = getattr(error, "cause", None)
        if inner is not None and _is_fault(inner):
            return _first_line(inner)
    return None


__all__ = ["RayRunner"]
