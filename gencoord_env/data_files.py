"""Where the rules tables live (``gencoord_env/data/*.json``), and reading one with a typed error.

``GENCOORD_DATA_DIR`` set to a folder (before ``gencoord_env`` is imported) makes every table come from
there instead: a copy of ``data/`` with a new skill row, template or recipe runs the whole package,
the Minecraft sidecar included (it reads its rules from the same folder).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: The environment variable naming a folder of rules tables used in place of the package's own.
DATA_DIR_ENV = "GENCOORD_DATA_DIR"
PACKAGE_DATA_DIR = Path(__file__).resolve().parent / "data"


def data_dir() -> Path:
    """The folder the rules tables are read from: ``$GENCOORD_DATA_DIR`` when set, else the package's ``data/``."""
    override = os.environ.get(DATA_DIR_ENV, "").strip()
    return Path(override).resolve() if override else PACKAGE_DATA_DIR


def data_path(name: str) -> Path:
    """The path of the rules table ``name`` (``"catalog.json"``)."""
    return data_dir() / name


def read_json(path: Path, what: str, error: type[Exception]) -> Any:
    """The decoded JSON of ``path``; ``error`` names ``what`` it is when the file is missing or not JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{what} {path} is missing; reinstall gencoord_env") from None
    except json.JSONDecodeError as err:
        raise error(f"{what} {path} is not valid JSON: {err}") from None
