"""The scripts in examples/ load as modules here, so that tests call their functions with a small budget
instead of repeating their training code."""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"gencoord_examples_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def example() -> Callable[[str], ModuleType]:
    return load_example
