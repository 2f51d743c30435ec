"""The driver's contract with a Minecraft server that misbehaves (``server="external"``).

Each test points the real driver (``MinecraftWorld``, its sidecar and two Mineflayer bots) at
``scripted_server.js`` playing one misbehaviour, and checks that it ends as a typed fault whose message says what
happened and what to do, within a deadline, and that nothing is left behind: no sidecar process, no sidecar
folder. A kick mid-episode ends the episode as an infrastructure fault, never as an agent's failure code.
Skipped only when the sidecar's Node packages are not installed (``gencoord setup`` installs them).
"""
from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from gencoord_env.world.minecraft import (
    ArenaFault,
    MinecraftWorld,
    ServerRefused,
    ServerTimeout,
    ServerVersionMismatch,
    SidecarPool,
)
from gencoord_env.world.minecraft.probe import STATUS_TIMEOUT_S
from gencoord_env.world.minecraft.supervisor import WORKDIR_PREFIX
from gencoord_env.world.types import SkillCall, WorldSpec
from sidecar_installed import RUNTIME, needs_sidecar

pytestmark = needs_sidecar

SCRIPT = Path(__file__).with_name("scripted_server.js")
AGENTS = ("agent_a", "agent_b")
#: An external world's first arena is a0: its bots join as a0_agent_a and a0_agent_b.
BOTS = tuple(f"a0_{a}" for a in AGENTS)
SPEC = WorldSpec(agents=AGENTS, stations=(), positions={"agent_a": (10, 0, 10), "agent_b": (12, 0, 10)},
                 inventories={"agent_a": {"oak_log": 1}, "agent_b": {}}, containers={})
CRAFT = SkillCall("c1", "agent_a", "craft", {"item": "oak_planks", "count": 4, "station": ""})
KICK_REASON = "Kicked by an operator: server maintenance"
#: How long a scripted server may take to start, and to answer one stdin command.
SERVER_START_S, COMMAND_S = 60.0, 20.0


@dataclass
class Scripted:
    """A running scripted server: its port, and its stdin commands (``kick``, ``refuse [NAME]``, ``admit``,
    ``delay S``)."""

    proc: subprocess.Popen[str]
    port: int

    def line(self, deadline_s: float) -> str:
        """The server's next stdout line, waited for up to ``deadline_s``."""
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(deadline_s):
                raise AssertionError(f"the scripted server said nothing within {deadline_s:.0f} s")
        return self.proc.stdout.readline()

    def command(self, name: str, expect: str) -> str:
        """Send one command and wait for its reply line, which must start with ``expect``."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        reply = self.line(COMMAND_S)
        assert reply.startswith(expect), f"{name}: the scripted server answered {reply!r}"
        return reply


@contextmanager
def scripted_server(behaviour: str, *args: str) -> Iterator[Scripted]:
    """Run ``scripted_server.js --behaviour behaviour`` with the sidecar's Node and packages; stops it after."""
    argv = [str(RUNTIME.node), str(SCRIPT), "--behaviour", behaviour, "--sidecar", str(RUNTIME.sidecar_dir),
            "--rules", str(RUNTIME.rules_dir), *args]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            bufsize=1, env={**os.environ, **RUNTIME.env()})
    try:
        server = Scripted(proc, 0)
        ready = server.line(SERVER_START_S)
        assert ready.startswith("READY "), f"the scripted server did not start: {ready!r}"
        server.port = int(json.loads(ready[len("READY "):])["port"])
        yield server
    finally:
        proc.terminate()
        proc.wait(10)


def left_behind() -> list[str]:
    """Sidecar processes (children running sidecar.js) and sidecar folders of this process that still exist."""
    found = [str(p) for p in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}{os.getpid()}-*")]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # exited meanwhile
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and "sidecar.js" in cmdline:
            found.append(f"pid {stat.parent.name}: {cmdline.strip()}")
    return found


@contextmanager
def external_world(port: int, **kwargs: object) -> Iterator[MinecraftWorld]:
    """A world of its own sidecar pointed at the server at ``port``; on the way out, checks that closing it left
    no sidecar process and no sidecar folder behind."""
    world = MinecraftWorld(server="external", host="127.0.0.1", port=port, **kwargs)  # type: ignore[arg-type]
    try:
        yield world
    finally:
        world.close()
    assert left_behind() == [], "closing the world left these behind"


def reset_raises(world: MinecraftWorld, fault: type[Exception], pattern: str, within_s: float) -> Exception:
    """``world.reset(SPEC)`` raises ``fault`` matching ``pattern`` within ``within_s``; returns it."""
    t0 = time.monotonic()
    with pytest.raises(fault, match=pattern) as raised:
        world.reset(SPEC)
    took = time.monotonic() - t0
    assert took < within_s, f"{fault.__name__} came after {took:.0f} s, not within {within_s:.0f} s"
    assert not isinstance(raised.value, ArenaFault) or fault is ArenaFault
    return raised.value


def test_a_refused_login_is_server_refused_with_the_servers_reason_and_what_to_check() -> None:
    reason = "You are not white-listed on this server!"
    with scripted_server("refuse-login", "--reason", reason) as server, external_world(server.port) as world:
        pattern = (re.escape(f"open_arena: the server at 127.0.0.1:{server.port} refused ") + "a0_agent_[ab]: "
                   + re.escape(f"{reason}; check that it runs with online-mode=false and admits the bots (whitelist, "
                               "bans, max-players)"))
        reset_raises(world, ServerRefused, pattern, within_s=30)
        sidecar = world.sidecar
        # the sidecar is fine: the next reset asks the server again and says the same, without a restart
        reset_raises(world, ServerRefused, pattern, within_s=30)
        assert world.sidecar is sidecar and world.restarts == 0


def test_a_sidecar_whose_first_arena_is_refused_raises_the_servers_refusal_not_its_own_death() -> None:
    # a pool with arenas made at the start connects their bots before the sidecar is ready
    with scripted_server("refuse-login", "--reason", "Server is full") as server:
        pool = SidecarPool(arenas=1, server="external", host="127.0.0.1", port=server.port)
        try:
            with pytest.raises(ServerRefused, match=re.escape("the sidecar could not start its first arenas: the server "
                                                              f"at 127.0.0.1:{server.port} refused ") + "a0_agent_[ab]: "
                               + re.escape("Server is full; check that it runs with online-mode=false")):
                pool.start()
            assert pool.sidecar is None and left_behind() == []
        finally:
            pool.close()


def test_a_server_of_another_version_is_refused_by_its_status_before_any_node_starts() -> None:
    with scripted_server("wrong-version", "--version-name", "1.20.4", "--version-protocol", "765") as server, \
            external_world(server.port) as world:
        reset_raises(world, ServerVersionMismatch, re.escape(
            f"the server at 127.0.0.1:{server.port} speaks Minecraft 1.20.4 (protocol 765); the bots speak 1.21.4 "
            "(protocol 769): run a 1.21.4 server there"), within_s=15)
        assert world.sidecar is None, "a sidecar was started for a server of another version"


def test_a_server_of_another_version_without_status_is_refused_at_login_as_a_version_mismatch() -> None:
    # enable-status=false: the ping learns nothing, so the bots' login meets the server's refusal
    with scripted_server("wrong-version", "--version-name", "1.20.4", "--status", "close") as server, \
            external_world(server.port) as world:
        reset_raises(world, ServerVersionMismatch, re.escape(f"the server at 127.0.0.1:{server.port} refused ")
                     + "a0_agent_[ab]" + re.escape(" as a client of another version: multiplayer.disconnect.incompatible "
                                                   "(1.20.4); the bots speak Minecraft 1.21.4 (protocol 769): run a "
                                                   "1.21.4 server there"), within_s=30)


def test_a_silent_server_is_a_server_timeout_before_any_node_starts() -> None:
    with scripted_server("silent") as server, external_world(server.port) as world:
        reset_raises(world, ServerTimeout, re.escape(
            f"the server at 127.0.0.1:{server.port} accepted a connection but answered no status ping within "
            f"{STATUS_TIMEOUT_S:.0f} s: it is not a Minecraft server, or it is hung"), within_s=STATUS_TIMEOUT_S + 15)
        assert world.sidecar is None


def test_a_server_that_never_spawns_the_bots_is_a_server_timeout_at_the_spawn_deadline() -> None:
    with scripted_server("slow") as server, \
            external_world(server.port, sidecar_args=("--spawn-timeout-ms", "5000")) as world:
        reset_raises(world, ServerTimeout, "a0_agent_[ab]" + re.escape(
            f" did not spawn on loaded ground within 5 s at 127.0.0.1:{server.port}: the server is slow, hung, or not a "
            "Minecraft server"), within_s=40)


@pytest.fixture(scope="module")
def game() -> Iterator[Scripted]:
    """A server the bots can play on (admitting them as operators), which kicks or refuses them on command."""
    with scripted_server("kick-mid-episode", "--operators", ",".join(BOTS), "--reason", KICK_REASON) as server:
        yield server


def kick(game: Scripted) -> None:
    kicked = json.loads(game.command("kick", "KICKED ")[len("KICKED "):])["players"]
    assert sorted(kicked) == sorted(BOTS)


def test_a_kick_mid_episode_is_an_arena_fault_naming_it_and_the_next_reset_recovers(game: Scripted) -> None:
    with external_world(game.port) as world:
        world.reset(SPEC)
        kick(game)
        with pytest.raises(ArenaFault, match="agent_[ab]'s bot " + r"(is disconnected|disconnected during \w+) \("
                           + re.escape(f"kicked by the server: {KICK_REASON})")):
            # skills long enough (10 s) that the kick reaches the sidecar before they end, whichever comes first
            world.run([SkillCall("a1", "agent_a", "wait", {"ticks": 200}), SkillCall("b1", "agent_b", "wait", {"ticks": 200})])
        world.reset(SPEC)
        assert world.rebuilt and sorted(world.rejoined) == list(AGENTS) and world.restarts == 0
        assert [e.ok for e in world.run([CRAFT])] == [True]
        assert world.observe().inventories == {"agent_a": {"oak_planks": 4}, "agent_b": {}}


def test_a_kick_after_the_skills_fails_the_read_back_instead_of_reading_stale_truth(game: Scripted) -> None:
    with external_world(game.port) as world:
        world.reset(SPEC)
        assert [e.ok for e in world.run([CRAFT])] == [True]
        kick(game)
        # the kicked bots' last view still shows 4 planks: reading it would pass a lost episode off as ground truth
        with pytest.raises(ArenaFault, match=r"agent_[ab]'s bot is disconnected \("
                           + re.escape(f"kicked by the server: {KICK_REASON}); this episode is lost")):
            world.observe()


def test_a_server_that_refuses_the_rejoin_after_a_kick_says_so_at_every_reset(game: Scripted) -> None:
    with external_world(game.port) as world:
        world.reset(SPEC)
        kick(game)
        with pytest.raises(ArenaFault, match=re.escape(f"kicked by the server: {KICK_REASON}")):
            world.observe()  # the sidecar has seen the kick: the next reset rejoins the bots
        game.command("refuse", "REFUSING")
        try:
            pattern = "refused a0_agent_[ab]: " + re.escape(f"{KICK_REASON}; check that it runs with online-mode=false")
            reset_raises(world, ServerRefused, pattern, within_s=30)
            reset_raises(world, ServerRefused, pattern, within_s=30)
        finally:
            game.command("admit", "ADMITTING")
        world.reset(SPEC)
        assert world.rebuilt and [e.ok for e in world.run([CRAFT])] == [True]


def test_a_join_refused_for_one_bot_leaves_no_other_bot_joining_behind_the_next_reset(game: Scripted) -> None:
    # a0_agent_a is refused at once while a0_agent_b's login is answered 3 s late: the refused reset must not leave
    # a0_agent_b's join under way, to land later as a second a0_agent_b beside the one the next reset connects
    game.command("refuse a0_agent_a", "REFUSING")
    game.command("delay 3", "DELAYING")
    try:
        with external_world(game.port) as world:
            reset_raises(world, ServerRefused, re.escape("refused a0_agent_a: " + KICK_REASON), within_s=40)
            game.command("admit", "ADMITTING")
            world.reset(SPEC)
            assert [e.ok for e in world.run([CRAFT])] == [True]
            assert world.observe().inventories == {"agent_a": {"oak_planks": 4}, "agent_b": {}}
    finally:
        game.command("admit", "ADMITTING")
        game.command("delay 0", "DELAYING")


def test_a_kick_mid_episode_truncates_the_env_episode_as_a_fault_never_an_agent_failure(game: Scripted) -> None:
    import gencoord_env
    from gencoord_env import dsl
    from gencoord_env.tasks import references as R

    with external_world(game.port) as world:
        env = gencoord_env.parallel_env(backend="minecraft", pool="heldout", world=world, on_fault="truncate")
        env.reset(options={"index": 0})
        sender = R.sender_initial(env.session.episode)
        _, _, _, _, infos = env.step({env.session.turn: dsl.format(sender)})
        receiver = next(a for a, i in infos.items() if i["deciding"])
        kick(game)
        # the receiver's step compiles and executes the plan on bots the server has kicked
        _, rewards, terms, truncs, infos = env.step({receiver: dsl.format(R.receiver_after_request(sender.peer_requests[0]))})
        info = infos["agent_a"]
        assert truncs == {"agent_a": True, "agent_b": True} and terms == {"agent_a": False, "agent_b": False}
        assert rewards == {"agent_a": 0.0, "agent_b": 0.0} and info["outcome"] is None
        assert info["fault"]["type"] == "ArenaFault" and f"kicked by the server: {KICK_REASON}" in info["fault"]["message"]


def _doctor_against(port: int) -> dict[str, dict[str, object]]:
    """``gencoord doctor --json --server external`` against the server at ``port``: its checks by name."""
    proc = subprocess.run([sys.executable, "-m", "gencoord_env.commands.cli", "doctor", "--json", "--server", "external",
                           "--host", "127.0.0.1", "--port", str(port)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, f"the doctor passed a misbehaving server:\n{proc.stdout}\n{proc.stderr}"
    return {c["name"]: c for c in json.loads(proc.stdout)["checks"]}


def test_the_doctor_reports_each_server_fault_with_its_fix() -> None:
    with scripted_server("refuse-login", "--reason", "You are banned from this server.") as server:
        checks = _doctor_against(server.port)
    assert checks["server start"]["status"] == "ok" and checks["bots spawn"]["status"] == "FAIL", checks
    # the line names what the external server says it speaks, beside what the bots speak
    assert f"the server at 127.0.0.1:{server.port} answers as Minecraft 1.21.4 (protocol 769)" in str(checks["server start"]["detail"])
    assert re.fullmatch(re.escape(f"open_arena: the server at 127.0.0.1:{server.port} refused ") + "a0_agent_[ab]: "
                        + re.escape("You are banned from this server."), str(checks["bots spawn"]["detail"]))
    assert checks["bots spawn"]["fix"] == "check that it runs with online-mode=false and admits the bots (whitelist, bans, max-players)"
    assert checks["minecraft episode"]["status"] == "skip"
    with scripted_server("wrong-version", "--version-name", "1.21.1", "--version-protocol", "767") as server:
        checks = _doctor_against(server.port)
    assert checks["server start"] == {**checks["server start"], "status": "FAIL",
                                      "detail": f"the server at 127.0.0.1:{server.port} speaks Minecraft 1.21.1 (protocol 767)",
                                      "fix": "the bots speak 1.21.4 (protocol 769): run a 1.21.4 server there"}
    assert checks["bots spawn"]["status"] == "skip"
