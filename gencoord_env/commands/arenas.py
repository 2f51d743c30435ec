"""Play many episodes at once: K arenas of one Minecraft sidecar (or K sim worlds), one env on each.

``ArenaRunner(backend, arenas=K)`` holds the worlds; ``run(indices, build, play)`` builds one env (a
``Slot``) per world with ``build(world)`` and plays ``play(slot, index)`` for every index, K at a time,
each on whichever slot is free. Results come back in the order of ``indices``, whatever order the episodes
finished in, so a run with arenas equals the serial run with the same seeds: arenas are disjoint regions
of the world with their own bots, and an episode's outcome depends on its index alone.

An infrastructure fault of one episode (``MinecraftBackendError``: an ``ArenaFault``, a dead sidecar)
ends that episode only; it is played once more (its world rebuilds its arena, or restarts the sidecar, at
the next reset) and the retry is reported in ``Played.retries``. A second fault raises ``EpisodeLost``.
Anything else is a bug and propagates.

    >>> from functools import partial
    >>> spec = RolloutSpec({"pool": "heldout", "backend": "minecraft"}, policy="rule")
    >>> with ArenaRunner("minecraft", arenas=4) as runner:                      # doctest: +SKIP
    ...     played = runner.run(range(16), partial(rollout_slot, spec), play_rollout)

``gencoord_env.commands.distributed`` runs the same ``build``/``play`` pairs on Ray actors, each with its own
``ArenaRunner``. ``comparable(info)`` is what must be equal between two runs of one episode.
"""
from __future__ import annotations

import io
import queue
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gencoord_env.errors import Fault, UsageError
from gencoord_env.world.types import World

R = TypeVar("R")


@dataclass
class Slot:
    """One env on one world, the policy that plays it, and where its trace records go."""

    env: Any
    policy: Any
    trace: io.StringIO | None = None

    def take_trace(self) -> str:
        """The trace records written since the last call (one JSONL line per finished episode)."""
        if self.trace is None:
            return ""
        text = self.trace.getvalue()
        self.trace.seek(0)
        self.trace.truncate()
        return text


Build = Callable[[World | None], Slot]
Play = Callable[[Slot, int], Any]


@dataclass(frozen=True)
class Retry:
    """An episode that met an infrastructure fault and was played again."""

    index: int
    where: str
    error: str

    def describe(self) -> str:
        return f"episode {self.index} retried after a fault on {self.where}: {self.error}"


@dataclass(frozen=True)
class Played(Generic[R]):
    """What ``play`` returned for each index, in the order asked for, and the retries it took."""

    results: tuple[R, ...]
    retries: tuple[Retry, ...] = ()


class EpisodeLost(Fault):
    """An episode met an infrastructure fault twice; the run stops (results so far are in ``played``)."""

    def __init__(self, message: str, played: Mapping[int, Any] | None = None) -> None:
        super().__init__(message)
        self.played = dict(played or {})


def _is_fault(exc: BaseException) -> bool:
    from gencoord_env.world.minecraft.errors import MinecraftBackendError

    return isinstance(exc, MinecraftBackendError)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


class ArenaRunner:
    """``arenas`` worlds: arenas of one sidecar for ``backend="minecraft"``, or sim worlds for ``"sim"``.

    ``backend_options`` go to the ``SidecarPool`` (e.g. ``server``, ``host``, ``port``, ``endpoint``).
    Slots are built per ``key`` on first use, so one runner serves several kinds of episode (an
    experiment's conditions) on the same worlds.
    """

    def __init__(self, backend: str, arenas: int = 1, backend_options: Mapping[str, Any] | None = None) -> None:
        if arenas < 1:
            raise UsageError(f"arenas must be at least 1, got {arenas}")
        if backend not in ("sim", "minecraft"):
            raise UsageError(f"unknown backend {backend!r}; expected 'sim' or 'minecraft'")
        self.backend = backend
        self.arenas = arenas
        self.pool: Any = None
        self.worlds: list[World | None]
        if backend == "minecraft":
            from gencoord_env.world.minecraft import MinecraftWorld, SidecarPool

            self.pool = SidecarPool(arenas=arenas, max_arenas=max(16, arenas), **dict(backend_options or {}))
            self.worlds = [MinecraftWorld(pool=self.pool) for _ in range(arenas)]
        else:
            self.worlds = [None] * arenas
        self._slots: dict[str, queue.Queue[Slot]] = {}
        self._built: dict[str, list[Slot]] = {}
        self._lock = threading.Lock()

    def _free(self, key: str, build: Build) -> queue.Queue[Slot]:
        with self._lock:
            if key not in self._slots:
                slots = [build(w) for w in self.worlds]
                free: queue.Queue[Slot] = queue.Queue()
                for s in slots:
                    free.put(s)
                self._built[key], self._slots[key] = slots, free
            return self._slots[key]

    def play_one(self, index: int, build: Build, play: Play, key: str = "default") -> Any:
        """Play one episode on the next free slot of ``key`` (waits for one); faults propagate."""
        free = self._free(key, build)
        slot = free.get()
        try:
            return play(slot, index)
        finally:
            free.put(slot)

    def run(self, indices: Iterable[int], build: Build, play: Play, key: str = "default",
            on_result: Callable[[int, Any], None] | None = None) -> Played[Any]:
        """Play every index, ``arenas`` at a time; results in the order of ``indices``."""
        order = list(indices)
        todo: queue.Queue[int] = queue.Queue()
        for k in order:
            todo.put(k)
        results: dict[int, Any] = {}
        retries: list[Retry] = []
        errors: list[BaseException] = []
        lock = threading.Lock()
        self._free(key, build)  # build the slots once, before the threads race for them

        def worker(n: int) -> None:
            while not errors:
                try:
                    k = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    try:
                        result = self.play_one(k, build, play, key)
                    except Exception as e:
                        if not _is_fault(e):
                            raise
                        with lock:
                            retries.append(Retry(k, f"arena slot {n}", _first_line(e)))
                        try:
                            result = self.play_one(k, build, play, key)
                        except Exception as again:
                            if not _is_fault(again):
                                raise
                            raise EpisodeLost(f"episode {k} failed twice: {_first_line(e)}; then {_first_line(again)}") from again
                    with lock:
                        results[k] = result
                    if on_result is not None:
                        on_result(k, result)
                except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                    with lock:
                        errors.append(e)
                    return

        threads = [threading.Thread(target=worker, args=(n,), name=f"arena-{n}", daemon=True)
                   for n in range(min(self.arenas, len(order)) or 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            err = errors[0]
            if isinstance(err, EpisodeLost):
                err.played = dict(results)
            raise err
        return Played(tuple(results[k] for k in order), tuple(sorted(retries, key=lambda r: r.index)))

    def close(self) -> None:
        """Close every env built here and the worlds (and the sidecar) behind them."""
        with ExitStack() as stack:
            for slots in self._built.values():
                for s in slots:
                    stack.callback(_close_quietly, s.env)
            for w in self.worlds:
                if w is not None:
                    stack.callback(w.close)
            if self.pool is not None:
                stack.callback(self.pool.close)
        self._built.clear()
        self._slots.clear()

    def __enter__(self) -> ArenaRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close_quietly(env: Any) -> None:
    # an env given a world by the runner closes that world too; the runner closes it again, harmlessly
    try:
        env.close()
    except Exception:  # noqa: BLE001 - closing is best effort
        pass


class SharedPolicy:
    """One slot's handle on a policy that every slot shares (a loaded model is loaded once).

    ``act`` calls take turns; the model calls and call records each call adds are counted on this handle,
    so per-episode model metrics (``model_calls``, ``records``) stay those of this slot's episode.
    """

    def __init__(self, policy: Any, lock: threading.Lock) -> None:
        self.inner = policy
        self._lock = lock
        self.name = getattr(policy, "name", type(policy).__name__)
        self.model_calls = 0
        if hasattr(policy, "records"):
            self.records: list[Any] = []

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        with self._lock:
            calls = int(getattr(self.inner, "model_calls", 0))
            seen = len(getattr(self.inner, "records", ()))
            action = self.inner.act(observation, info)
            self.model_calls += int(getattr(self.inner, "model_calls", 0)) - calls
            if hasattr(self, "records"):
                self.records.extend(self.inner.records[seen:])
        return action

    def act_batch(self, observations: Sequence[Any], infos: Sequence[dict[str, Any]]) -> list[Any]:
        return [self.act(o, i) for o, i in zip(observations, infos)]


#: One lock for every shared (learned) policy of this process: their calls take turns.
_SHARED_LOCK = threading.Lock()


def slot_policy(policy: Any) -> Any:
    """The policy a slot plays with: a rule agent as it is (each slot makes its own, and they keep no
    state), anything else (a loaded model, made once and given to every slot) behind a ``SharedPolicy``."""
    from gencoord_env.agents.base import RulePolicy

    return policy if isinstance(policy, RulePolicy) else SharedPolicy(policy, _SHARED_LOCK)


# ---- gencoord rollout -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutSpec:
    """How ``gencoord rollout`` builds each slot: ``parallel_env`` keyword arguments, a policy name (a rule
    agent or ``model:PATH``) and whether to record traces. Plain values, so Ray workers get it too."""

    env: Mapping[str, Any]
    policy: str
    trace: bool = False


_LOADED: dict[str, Any] = {}
_LOADED_LOCK = threading.Lock()


def make_named_policy(name: str) -> Any:
    """A rule agent by name, or the learned checkpoint of ``model:PATH`` (loaded once per process)."""
    from gencoord_env.agents.registry import learned_checkpoint, make_policy

    if learned_checkpoint(name) is not None:
        with _LOADED_LOCK:
            if name not in _LOADED:
                _LOADED[name] = make_policy(name)
            return _LOADED[name]
    return make_policy(name)


def rollout_slot(spec: RolloutSpec, world: World | None) -> Slot:
    """One rollout env on ``world`` (None: the env makes its own, e.g. a sim world)."""
    import gencoord_env

    env = gencoord_env.parallel_env(**dict(spec.env), world=world)
    buffer = None
    if spec.trace:
        from gencoord_env.wrappers import TraceRecorder

        buffer = io.StringIO()
        env = TraceRecorder(env, buffer)
    return Slot(env, slot_policy(make_named_policy(spec.policy)), buffer)


def play_rollout(slot: Slot, index: int) -> dict[str, Any]:
    """Play episode ``index``; returns ``{"index", "info", "trace"}`` (the first agent's final info and the
    episode's trace record, empty without tracing)."""
    from gencoord_env.agents.rollout import run_episode

    slot.take_trace()  # a record left by an episode that failed midway belongs to nobody
    info = run_episode(slot.env, slot.policy, index=index)
    return {"index": index, "info": info, "trace": slot.take_trace()}


# ---- what must be equal between two runs of one episode ---------------------------------------------

def comparable(info: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of an episode's final info that must be equal between two runs of it: outcome, reason,
    metrics and every trace stage (the final ground truth included), less what measures time or motion
    rather than the world (``gencoord_env.trace.what_happened``: event timings, executor action counts, the
    order in which two bots' calls finished)."""
    from gencoord_env.trace import what_happened

    kept: dict[str, Any] = what_happened({
        "outcome": str(info.get("outcome")),
        "reason": info.get("reason"),
        "episode_id": info.get("episode_id"),
        "metrics": dict(info.get("metrics") or {}),
        "trace": list(info.get("trace") or ()),
    })
    return kept


__all__ = ["ArenaRunner", "EpisodeLost", "Played", "Retry", "RolloutSpec", "SharedPolicy", "Slot", "comparable",
           "make_named_policy", "play_rollout", "rollout_slot", "slot_policy"]
