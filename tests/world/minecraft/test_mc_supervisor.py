"""Supervisor and client logic against the fake sidecar (launched the way the real one is)."""
from __future__ import annotations

import re
from pathlib import Path
import subprocess
import sys
import time

import pytest

from gencoord_env.catalog import DATA_DIR
from gencoord_env.world.minecraft.client import SidecarClient
from gencoord_env.world.minecraft.errors import ProtocolMismatch, SidecarDied, SidecarTimeout
from gencoord_env.world.minecraft.runtime import Runtime
from gencoord_env.world.minecraft.supervisor import Sidecar, SidecarOptions, sidecar_argv


def _log(sc: Sidecar, expect: str = "") -> str:
    """The sidecar's log, once it holds ``expect`` (its stderr reaches the log through a pump thread)."""
    deadline = time.monotonic() + 60.0  # only a failure waits it out; a loaded machine delays the pump
    while expect not in (text := sc.log_path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return text


def test_argv_for_embedded_and_external(fake_runtime: Runtime) -> None:
    rules = ["--rules", str(DATA_DIR)]
    assert sidecar_argv(fake_runtime, "ipc:///x/s.sock", SidecarOptions(agents=("A", "B")), 42)[2:] == [
        "--endpoint", "ipc:///x/s.sock", *rules, "--agents", "A,B", "--parent-pid", "42"]
    ext = SidecarOptions(server="external", mc_host="10.0.0.2", mc_port=25565)
    assert sidecar_argv(fake_runtime, "tcp://127.0.0.1:9", ext)[2:] == [
        "--endpoint", "tcp://127.0.0.1:9", *rules, "--server", "external", "--mc-host", "10.0.0.2", "--mc-port", "25565"]
    with pytest.raises(ValueError, match="needs mc_host and mc_port"):
        SidecarOptions(server="external")


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_start_handshake_ping_and_close(fake_runtime: Runtime, transport: str) -> None:
    sc = Sidecar.start(fake_runtime, SidecarOptions(transport=transport, agents=("A", "B")))
    try:
        assert sc.endpoint.startswith(f"{transport}://") and not sc.endpoint.endswith(":0")
        assert [a["name"] for a in sc.hello["arenas"]] == ["a0"] and sc.hello["arenas"][0]["agents"] == ["A", "B"]
        assert sc.ready_info["endpoint"] == sc.endpoint
        assert sc.client is not None and sc.client.call("ping") == "pong"
    finally:
        sc.close()
    assert sc.process.poll() == 0  # exited on its own after `shutdown`
    assert "recv shutdown #1" in _log(sc)


def test_two_sidecars_coexist(fake_runtime: Runtime) -> None:
    a = Sidecar.start(fake_runtime)
    b = Sidecar.start(fake_runtime)
    try:
        assert a.endpoint != b.endpoint and a.log_path != b.log_path
        assert a.client.call("ping") == b.client.call("ping") == "pong"  # type: ignore[union-attr]
    finally:
        a.close()
        b.close()


def test_exit_before_ready_is_sidecar_died_with_log(fake_runtime: Runtime) -> None:
    with pytest.raises(SidecarDied, match=r"(?s)exited with code 2 before it was ready.*cannot start: exit_early") as e:
        Sidecar.start(fake_runtime, SidecarOptions(env={"FAKE_SIDECAR": "exit_early"}))
    assert e.value.returncode == 2


def test_no_ready_times_out_and_kills(fake_runtime: Runtime) -> None:
    t0 = time.monotonic()
    with pytest.raises(SidecarTimeout, match="did not print READY within 1 s"):
        Sidecar.start(fake_runtime, SidecarOptions(env={"FAKE_SIDECAR": "no_ready"}, ready_timeout_s=1.0, kill_after_s=0.1))
    assert time.monotonic() - t0 < 6


def test_protocol_mismatch_at_hello(fake_runtime: Runtime) -> None:
    with pytest.raises(ProtocolMismatch, match="speaks protocol 1"):
        Sidecar.start(fake_runtime, SidecarOptions(env={"FAKE_SIDECAR": "old_protocol"}))


def test_lazy_pirate_resends_idempotent_op(fake_runtime: Runtime) -> None:
    sc = Sidecar.start(fake_runtime, SidecarOptions(env={"FAKE_SIDECAR": "drop_pings=1"}, timeouts={"ping": 0.3}))
    try:
        assert sc.client.call("ping") == "pong"  # type: ignore[union-attr]
        assert "recv ping #2" in _log(sc, "recv ping #2")
    finally:
        sc.close()


def test_lazy_pirate_gives_up_after_retries(fake_runtime: Runtime) -> None:
    sc = Sidecar.start(fake_runtime, SidecarOptions(env={"FAKE_SIDECAR": "drop_pings=9"}, timeouts={"ping": 0.2}))
    try:
        with pytest.raises(SidecarTimeout, match=re.escape("did not answer ping within 0.2 s")):
            sc.client.call("ping")  # type: ignore[union-attr]
        assert "recv ping #3" in _log(sc, "recv ping #3") and "recv ping #4" not in _log(sc)  # 1 try + 2 retries
    finally:
        sc.kill()


def test_execute_is_never_resent(fake_runtime: Runtime) -> None:
    sc = Sidecar.start(fake_runtime, SidecarOptions(timeouts={"execute": 0.3}))
    try:
        with pytest.raises(SidecarTimeout, match="did not answer execute"):
            sc.client.call("execute", {"arena": "a0", "call": {"id": "c1", "actor": "A", "op": "wait", "args": {"ticks": 998}}})  # type: ignore[union-attr]
        assert sc.client.call("ping") == "pong"  # type: ignore[union-attr]
        assert _log(sc, "recv execute").count("recv execute") == 1
    finally:
        sc.kill()


def test_dead_process_detected_while_waiting() -> None:
    # Nothing listens at the endpoint; the "sidecar" is a process that exits after 0.3 s.
    proc = subprocess.Popen([sys.executable, "-c", "import time, sys; time.sleep(0.3); sys.exit(5)"])
    client = SidecarClient("tcp://127.0.0.1:9", exit_code=proc.poll, describe_log=lambda: "sidecar log: here",
                           timeouts={"ping": 30.0})
    t0 = time.monotonic()
    try:
        with pytest.raises(SidecarDied, match=r"(?s)exited with code 5 while waiting for ping.*sidecar log: here") as e:
            client.call("ping")
    finally:
        client.close()
        proc.wait()
    assert e.value.returncode == 5
    assert time.monotonic() - t0 < 2.0


def test_sidecar_is_stopped_at_interpreter_exit(fake_runtime: Runtime, tmp_path: Path) -> None:
    import os

    script = tmp_path / "leave_running.py"
    script.write_text(
        "import sys\n"
        "from pathlib import Path\n"
        "from gencoord_env.world.minecraft.runtime import Runtime\n"
        "from gencoord_env.world.minecraft.supervisor import Sidecar\n"
        f"rt = Runtime(Path(sys.executable), (22, 0, 0), Path({str(fake_runtime.sidecar_dir)!r}))\n"
        "sc = Sidecar.start(rt)\n"
        "print(sc.process.pid, flush=True)\n"  # exits without close()
    )
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(root)})
    pid = int(out.stdout.split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_forked_child_never_stops_its_parents_sidecar(fake_runtime: Runtime) -> None:
    import os

    from gencoord_env.world.minecraft import supervisor

    sc = Sidecar.start(fake_runtime)
    try:
        child = os.fork()
        if child == 0:  # what a child's collection and exit would run on its copy of the parent's objects
            try:
                sc._finalizer()
                sc._running.stop()  # as its background thread would
                sc.client._finalizer()  # type: ignore[union-attr]
                supervisor._stop_all()
            finally:
                os._exit(0)
        deadline = time.monotonic() + 60
        while os.waitpid(child, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(child, 9)
                os.waitpid(child, 0)
                raise AssertionError("the child hung stopping its parent's sidecar")
            time.sleep(0.02)
        time.sleep(0.3)
        assert sc.alive and sc.client is not None and sc.client.call("ping") == "pong"
        assert Path(sc.endpoint[len("ipc://"):]).exists(), "the child removed the parent's socket"
    finally:
        sc.close()
    assert not sc.alive


def test_a_node_that_cannot_run_is_runtime_missing(fake_runtime: Runtime, tmp_path: Path) -> None:
    from gencoord_env.world.minecraft.errors import RuntimeMissing

    broken = Runtime(node=tmp_path / "no-such-node", node_version=(22, 0, 0), sidecar_dir=fake_runtime.sidecar_dir)
    with pytest.raises(RuntimeMissing, match=r"cannot start the sidecar .*no-such-node.*run `gencoord setup`"):
        Sidecar.start(broken)


def test_a_start_removes_the_folders_of_killed_owners_and_keeps_live_ones(fake_runtime: Runtime, tmp_path: Path) -> None:
    """A parent killed with SIGKILL leaves its sidecar's folder (socket included); the next start removes it,
    and leaves the folder of a sidecar whose owner still runs."""
    import os
    import signal

    from gencoord_env.world.minecraft import supervisor

    script = tmp_path / "killed_owner.py"
    script.write_text(
        "import sys, time\n"
        "from pathlib import Path\n"
        "from gencoord_env.world.minecraft.runtime import Runtime\n"
        "from gencoord_env.world.minecraft.supervisor import Sidecar\n"
        f"rt = Runtime(Path(sys.executable), (22, 0, 0), Path({str(fake_runtime.sidecar_dir)!r}))\n"
        "sc = Sidecar.start(rt)\n"
        "print(sc.process.pid, sc.endpoint, flush=True)\n"
        "time.sleep(120)\n"
    )
    root = Path(__file__).resolve().parents[3]
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(root)})
    assert owner.stdout is not None
    pid, endpoint = owner.stdout.readline().split()
    folder = Path(endpoint[len("ipc://"):]).parent
    live = Sidecar.start(fake_runtime)  # started while the owner runs: its folder is kept
    try:
        assert folder.is_dir() and Path(live.endpoint[len("ipc://"):]).parent.name.startswith(f"gencoord-sidecar-{os.getpid()}-")
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        try:
            os.kill(int(pid), signal.SIGKILL)  # the fake sidecar does not watch its parent as the real one does
        except ProcessLookupError:
            pass
        assert folder.is_dir(), "a SIGKILLed owner cannot remove its folder"
        deadline = time.monotonic() + 60  # until its socket is closed (the sweep keeps a socket that answers)
        while supervisor._listening(folder / "sidecar.sock"):
            assert time.monotonic() < deadline, "the killed fake sidecar's socket still answers"
            time.sleep(0.05)
        again = Sidecar.start(fake_runtime)
        again.close()
        assert not folder.exists(), f"{folder} of a dead owner outlived the next start"
        assert Path(live.endpoint[len("ipc://"):]).exists(), "the start removed a live sidecar's socket"
        assert live.client is not None and live.client.call("ping") == "pong"
    finally:
        owner.kill()
        live.close()
