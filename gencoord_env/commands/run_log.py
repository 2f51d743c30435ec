"""RunLog: the scalars of a training run, one CSV row per logged step and, optionally, TensorBoard.

>>> import io
>>> log = RunLog(io.StringIO())
>>> log.write(512, success=0.5, loss=0.1)
>>> log.write(1024, success=0.75, loss=0.05)
>>> log.rows[-1]
{'step': 1024, 'success': 0.75, 'loss': 0.05}

The columns are fixed by the first row (``step`` first); a later row with other keys is refused, naming
them, so that a CSV never silently changes its layout. ``tensorboard=`` a folder also writes each scalar
with ``torch.utils.tensorboard.SummaryWriter`` (it needs the ``tensorboard`` package: ``pip install
tensorboard``; the CSV alone needs nothing).
"""
from __future__ import annotations

import csv
import os
from typing import IO, Any

from gencoord_env.errors import UsageError


class RunLog:
    def __init__(self, path: str | os.PathLike[str] | IO[str], tensorboard: str | os.PathLike[str] | None = None) -> None:
        self.path = path
        self.rows: list[dict[str, float]] = []
        self.columns: list[str] | None = None
        self._writer: Any = None
        if tensorboard is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as e:
                raise ImportError(f"RunLog(tensorboard=...) needs the tensorboard package ({e}); pip install tensorboard, "
                                  "or log to the CSV only") from None
            self._writer = SummaryWriter(os.fspath(tensorboard))

    def write(self, step: int, **scalars: float) -> None:
        """One row: ``step`` and the run's scalars at it."""
        row = {"step": int(step), **{k: float(v) for k, v in scalars.items()}}
        if self.columns is None:
            self.columns = list(row)
            self._append(",".join(self.columns) + "\n", fresh=True)
        elif list(row) != self.columns:
            raise UsageError(f"RunLog row keys {list(row)} differ from the columns {self.columns} set by the first row")
        self.rows.append(row)
        out = _Line()
        csv.writer(out, lineterminator="\n").writerow([row[c] for c in self.columns])
        self._append(out.text)
        if self._writer is not None:
            for name, value in scalars.items():
                self._writer.add_scalar(name, float(value), int(step))

    def _append(self, text: str, fresh: bool = False) -> None:
        if hasattr(self.path, "write"):
            self.path.write(text)
            return
        with open(self.path, "w" if fresh else "a", encoding="utf-8") as f:
            f.write(text)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


class _Line:
    text = ""

    def write(self, s: str) -> None:
        self.text += s


__all__ = ["RunLog"]
