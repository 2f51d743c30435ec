"""``gencoord_v0_env/``, the env as an OpenEnv package: ``openenv validate`` passes on the folder and on the
running server, the Dockerfile's entrypoint serves as the container would (no Docker engine runs here: its
command runs with the image's environment, working folder and health check), and the lock pins what
``setup.cfg`` asks for."""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("openenv")

from test_serve import free_port, until  # noqa: E402  (tests/ is on the path)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gencoord_v0_env"
DOCKERFILE = PACKAGE / "server" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's (instruction, arguments), continuation lines joined, comments left out."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text(encoding="utf-8"))
    out = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            op, _, args = line.strip().partition(" ")
            out.append((op.upper(), args.strip()))
    return out


def image_env(venv_bin: str) -> dict[str, str]:
    """The ENV lines' variables (``KEY=VALUE`` pairs, shell-quoted), ``/app/.venv/bin`` being this venv's bin."""
    env: dict[str, str] = {}
    for op, args in instructions():
        if op == "ENV":
            for pair in shlex.split(args):
                key, _, value = pair.partition("=")
                env[key] = value.replace("/app/.venv/bin", venv_bin).replace("$PATH", os.environ["PATH"])
    return env


def openenv_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openenv.cli", *args], capture_output=True, text=True, timeout=600, cwd=ROOT)


def test_the_folder_passes_openenv_validate() -> None:
    proc = openenv_cli("validate", "--json", "gencoord_v0_env")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["passed"] and report["environment"] == "gencoord_v0" and report["issues"] == []
    manifest = (PACKAGE / "openenv.yaml").read_text(encoding="utf-8")
    assert "name: gencoord_v0" in manifest and "app: server.app:app" in manifest


def test_the_lock_pins_what_setup_cfg_asks_for() -> None:
    """uv.lock's gencoord-env is this repository with setup.cfg's requirements (core and the openenv extra), and
    it pins the OpenEnv version the openenv extra names: a requirement changed in one place and not the other
    fails here (``uv lock`` in gencoord_v0_env renews the lock)."""
    import configparser

    lock = tomllib.loads((PACKAGE / "uv.lock").read_text(encoding="utf-8"))
    packages = {p["name"]: p for p in lock["package"]}
    ours = packages["gencoord-env"]
    assert ours["source"] == {"directory": "../"}
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg", encoding="utf-8")

    def lines(text: str) -> set[str]:
        return {re.sub(r"\s+", "", line) for line in text.splitlines() if line.strip() and not line.strip().startswith("#")}

    wanted = lines(cfg["options"]["install_requires"]) | {f"{r};extra=='openenv'" for r in lines(cfg["options.extras_require"]["openenv"])}
    locked = {re.sub(r"\s+", "", (r["name"] + r.get("specifier", "") + (f";{r['marker']}" if "marker" in r else "")).replace('"', "'"))
              for r in ours["metadata"]["requires-dist"] if "marker" not in r or "extra == 'openenv'" in r["marker"].replace('"', "'")}
    normalize = lambda r: re.sub(r"[-_.]+", "-", r.split(";")[0].split("=")[0].split(">")[0].split("<")[0]).lower()  # noqa: E731
    assert {normalize(r) for r in locked} == {normalize(r) for r in wanted}
    openenv_pin = next(r for r in lines(cfg["options.extras_require"]["openenv"]) if r.startswith("openenv=="))
    assert packages["openenv"]["version"] == openenv_pin.split("==")[1]
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    import gencoord_env

    assert project["version"] == gencoord_env.__version__ and f"gencoord_env[openenv]=={gencoord_env.__version__}" in project["dependencies"]


def test_the_dockerfiles_entrypoint_serves_as_the_container_would() -> None:
    """The image's command, in its working folder (``/app/repo`` is this repository), with its ENV (PATH's
    ``/app/.venv`` is this virtualenv), ``-e PORT=...`` as ``docker run`` would give it, and ``0.0.0.0``, which a
    container binds in a network of its own, as 127.0.0.1. Its health check passes, a client plays an episode
    through it, ``openenv validate --url`` passes, and ``docker stop``'s SIGTERM ends it (uvicorn shuts down,
    then ends by the signal it caught, as ``docker stop`` expects)."""
    from gencoord_env.agents import make_policy
    from gencoord_env.commands.client import GencoordEnvClient, agent_info

    steps = instructions()
    assert steps[0][0] == "FROM"
    for op, args in steps:
        if op == "COPY":  # every source is in the build context, the repository root
            *sources, _ = shlex.split(args)
            assert all((ROOT / s).exists() for s in sources if not s.startswith("--")), args
    workdir = [args for op, args in steps if op == "WORKDIR"][-1]
    cwd = ROOT / Path(workdir).relative_to("/app/repo")
    command = json.loads(next(args for op, args in steps if op == "CMD"))
    healthcheck = next(args for op, args in steps if op == "HEALTHCHECK").split(" CMD ", 1)[1]
    port = free_port()
    env = {**os.environ, **image_env(str(Path(sys.executable).parent)), "PORT": str(port)}
    assert env["GENCOORD_SERVE"].startswith("--backend sim")
    command = [part.replace("0.0.0.0", "127.0.0.1") for part in command]
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def healthy() -> bool:
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]  # type: ignore[union-attr]
            return subprocess.run(["sh", "-c", healthcheck], env=env, capture_output=True, timeout=60).returncode == 0

        until(healthy, "the container's health check", 300)
        url = f"http://127.0.0.1:{port}"
        policy = make_policy("rule")
        with GencoordEnvClient(base_url=url) as client:
            result = client.reset(index=0, context=True)
            while not result.done:
                result = client.step(policy.act(result.observation.text, agent_info(result.observation)))
            assert result.observation.outcome == "SUCCESS" and result.reward == 1.0
        validated = openenv_cli("validate", "--url", url)
        assert validated.returncode == 0, validated.stdout + validated.stderr
        report = json.loads(validated.stdout)
        assert report["passed"] and report["mode"] == "simulation", report
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code in (0, -signal.SIGTERM), proc.stderr.read().decode()[-3000:]  # type: ignore[union-attr]
