"""The README as written: its Python blocks run, its shell commands name subcommands, options and values
that exist, and its option and pool tables list exactly what the env accepts."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gencoord_env.commands.cli import DELEGATED, env_choices, main
from gencoord_env.commands.experiments.specs import EXPERIMENTS
from gencoord_env.tasks.pools import POOL_SIZES
from gencoord_env.train.cli import COMMANDS as TRAIN_COMMANDS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
FENCED = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
TOP_COMMANDS = ("setup", "rollout", "serve", *DELEGATED)


def python_blocks() -> list[str]:
    return [body for lang, body in FENCED.findall(README) if lang == "python"]


def needs_minecraft(block: str) -> bool:
    """A block that builds an env without ``backend="sim"`` runs on the default backend, Minecraft."""
    return "parallel_env(" in block and 'backend="sim"' not in block


def shell_commands() -> list[str]:
    """Every command the README shows: indented code lines and inline code spans, split at ``&&``."""
    prose = FENCED.sub("", README)
    indented = [line.strip() for line in prose.splitlines() if line.startswith("    ") and line.strip()]
    spans = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]
    found = []
    for text in indented + spans:
        for part in text.split("&&"):
            command = re.sub(r"^\S*\.venv/bin/", "", part.strip())
            command = re.sub(r"\s+#.*$", "", command)  # a trailing comment
            if re.match(r"(gencoord|python3?|pip) ", command):
                found.append(command)
    return found


def gencoord_commands() -> list[list[str]]:
    return [c.split()[1:] for c in shell_commands() if c.startswith("gencoord ")]


def _help(path: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as e:
        main([*path, "--help"])
    assert e.value.code == 0, path
    return capsys.readouterr().out


def _command_path(words: list[str]) -> list[str]:
    assert words and words[0] in TOP_COMMANDS, f"gencoord {' '.join(words)}: no such subcommand"
    if words[0] == "train":
        assert len(words) > 1 and words[1] in TRAIN_COMMANDS, f"gencoord {' '.join(words)}: no such train command"
        return words[:2]
    return words[:1]


def _options(words: list[str]) -> dict[str, str | None]:
    """``--name`` -> the word after it (None when another option or nothing follows)."""
    opts: dict[str, str | None] = {}
    for i, w in enumerate(words):
        m = re.fullmatch(r"\[?(--[a-z][a-z0-9-]*)\]?", w)
        if m:
            nxt = words[i + 1] if i + 1 < len(words) else None
            opts[m[1]] = None if nxt is None or nxt.lstrip("[").startswith("-") else nxt.strip("[]")
    return opts


def test_the_readme_shows_the_main_and_test_commands() -> None:
    commands = shell_commands()
    assert "pip install -q ." in commands and "gencoord setup" in commands
    assert "gencoord rollout --backend minecraft --pool heldout --policy rule --episodes 16" in commands
    assert "pip install -q -e '.[lm,rl,test]'" in commands and "python -m pytest -q -n 4 --dist loadgroup" in commands


@pytest.mark.parametrize("words", gencoord_commands(), ids=" ".join)
def test_shell_command_names_existing_options_and_values(words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    path = _command_path(words)
    usage = _help(path, capsys)
    tables = env_choices()
    for opt, value in _options(words).items():
        assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", usage), f"gencoord {' '.join(path)} has no {opt}"
        name = opt[2:]
        if name in tables and value and not value.isupper() and value != "...":
            for v in value.split("|"):  # `sim|minecraft` names both
                assert v in tables[name], f"{opt} {v}: not one of {tables[name]}"
    if path == ["experiment"] and len(words) > 1 and not words[1].startswith("-") and not words[1].isupper():
        assert words[1] in (*EXPERIMENTS, "all"), words[1]


def test_python_commands_name_existing_files() -> None:
    for command in shell_commands():
        words = command.split()
        if words[0].startswith("python") and words[1].endswith(".py"):
            assert (ROOT / words[1]).is_file(), command


def test_option_table_lists_exactly_what_the_env_accepts() -> None:
    rows = re.findall(r"^\| `(\w+)` \| (.+) \|$", README, re.M)
    tables = env_choices()
    listed = {name: cell for name, cell in rows if name in ("route", "view", "backend", "surface")}
    assert set(listed) == {"route", "view", "backend", "surface"}
    for name, cell in listed.items():
        # the names are the code spans at the start of each comma-separated entry
        names = re.findall(r"(?:^|\), |, )`(\w+)`", cell)
        assert sorted(names) == sorted(tables[name]), (name, names)


def test_pool_table_lists_every_pool_with_its_size() -> None:
    rows = dict(re.findall(r"^\| `(\w+)` \| (\d+) \| \d+ \|", README, re.M))
    assert {k: int(v) for k, v in rows.items()} == POOL_SIZES


def _runtime_missing() -> str:
    try:
        from gencoord_env.world.minecraft import locate

        locate()
        return ""
    except Exception as e:  # noqa: BLE001 - any lookup failure means: not installed here
        return str(e)


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_python_block_runs_as_written(index: int, tmp_path: Path) -> None:
    block = python_blocks()[index]
    if needs_minecraft(block) and (missing := _runtime_missing()):
        pytest.skip(f"the block runs on Minecraft: {missing}")
    proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"README block {index}:\n{block}\n{proc.stderr[-3000:]}"
