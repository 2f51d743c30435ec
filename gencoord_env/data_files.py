"""Reading one of the package's rules tables (``gencoord_env/data/*.json``) with a typed error."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json(path: Path, what: str, error: type[Exception]) -> Any:
    """The decoded JSON of ``path``; ``error`` names ``what`` it is when the file is missing or not JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{what} {path} is missing; reinstall gencoord_env") from None
    except json.JSONDecodeError as err:
        raise error(f"{what} {path} is not valid JSON: {err}") from None
