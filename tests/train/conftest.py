"""Shared fixtures: the built data sets (once per session) and a tiny offline model."""
from __future__ import annotations

from pathlib import Path

import pytest

from gencoord_env.train.data import build_all


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data")
    build_all(out)
    return out
