"""Fixtures: a sidecar directory whose ``src/sidecar.js`` is the Python fake, run by this interpreter."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from gencoord_env.world.minecraft.runtime import Runtime

HERE = Path(__file__).parent


@pytest.fixture
def fake_runtime(tmp_path: Path) -> Runtime:
    """A Runtime that launches ``fake_sidecar.py`` exactly the way the real sidecar is launched."""
    d = tmp_path / "sidecar"
    (d / "src").mkdir(parents=True)
    (d / "package.json").write_text('{"name": "fake-sidecar"}')
    shutil.copy(HERE / "fake_sidecar.py", d / "src" / "sidecar.js")
    return Runtime(node=Path(sys.executable), node_version=(22, 0, 0), sidecar_dir=d)
