"""Whether the Node sidecar is installed here: the tests that start one skip, naming what is missing and the
command that fixes it, where it is not. Test modules of every folder import it by this name (``tests/`` is
on the path through the suite's ``conftest.py``)."""
from __future__ import annotations

import pytest

from gencoord_env.world.minecraft.errors import RuntimeMissing
from gencoord_env.world.minecraft.runtime import Runtime, locate

RUNTIME: Runtime | None
try:
    RUNTIME = locate()
    MISSING = ""
except RuntimeMissing as e:
    RUNTIME, MISSING = None, str(e)

#: skips a test where the sidecar is not installed
needs_sidecar = pytest.mark.skipif(bool(MISSING), reason=f"the Minecraft sidecar is not ready here: {MISSING}")
