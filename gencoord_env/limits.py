"""The limits table ``data/limits.json``: one set of numbers for the Python package and the Node sidecar.

Section ``args`` bounds what one agent input may hold (quantities, ticks, name lengths, arguments per
task, tasks per path). The contract rejects a record beyond them, the op table's types take their bounds
from them (``world.types``), and the sidecar reads the same file (``mineflayer_server/src/rules.js``), so a
world's own check of a skill call can only fail on a bug. Other sections are kept as they are
(``Limits.sections``) for the modules that read them.

>>> LIMITS.args["count"].max
2304
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gencoord_env.data_files import data_path, read_json
from gencoord_env.errors import DataError

LIMITS_PATH = data_path("limits.json")

#: The limits section ``args`` must hold (the contract, the codec and the op table read each of them).
ARG_LIMITS = frozenset({"count", "ticks", "name_chars", "task_args", "path_tasks"})


class LimitsError(DataError):
    """``limits.json`` is malformed; the message names the entry to fix."""


@dataclass(frozen=True)
class Limit:
    """An inclusive integer range, ``limits.json``'s ``{min, max, about}``."""

    name: str
    min: int
    max: int
    about: str = ""

    def __contains__(self, value: object) -> bool:
        return type(value) is int and self.min <= value <= self.max

    def cite(self, section: str = "args") -> str:
        """Where the number comes from, for messages: ``"limits.args.count"``."""
        return f"limits.{section}.{self.name}"


@dataclass(frozen=True)
class Limits:
    args: Mapping[str, Limit]
    sections: Mapping[str, Any]  # every section of the file as decoded (args included)


def _limit(raw: Any, where: str, name: str) -> Limit:
    if not isinstance(raw, dict) or set(raw) - {"min", "max", "about"}:
        raise LimitsError(f"{where}: expected an object {{min, max, about}}, got {raw!r}")
    low, high = raw.get("min"), raw.get("max")
    if type(low) is not int or type(high) is not int or not 0 <= low <= high:
        raise LimitsError(f"{where}: expected integers 0 <= min <= max, got min {low!r} and max {high!r}")
    return Limit(name, low, high, str(raw.get("about", "")))


def parse_limits(raw: Any) -> Limits:
    """Validate a decoded ``limits.json``; section ``args`` must hold exactly ``ARG_LIMITS``."""
    if not isinstance(raw, dict) or not isinstance(raw.get("args"), dict):
        raise LimitsError("limits: expected an object with the object 'args'")
    names = set(raw["args"])
    if names != ARG_LIMITS:
        missing, extra = sorted(ARG_LIMITS - names), sorted(names - ARG_LIMITS)
        raise LimitsError(f"limits.args: expected exactly {sorted(ARG_LIMITS)}"
                          + (f"; missing {missing}" if missing else "") + (f"; unknown {extra}" if extra else ""))
    args = {name: _limit(entry, f"limits.args.{name}", name) for name, entry in raw["args"].items()}
    return Limits(MappingProxyType(args), MappingProxyType(dict(raw)))


def load_limits(path: Path = LIMITS_PATH) -> Limits:
    """Read and validate a limits table (the packaged one by default)."""
    return parse_limits(read_json(path, "limits table", LimitsError))


LIMITS: Limits = load_limits()

__all__ = ["ARG_LIMITS", "LIMITS", "LIMITS_PATH", "Limit", "Limits", "LimitsError", "load_limits", "parse_limits"]
