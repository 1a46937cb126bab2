"""Loading an example script as a module (examples/ is not a package)."""

import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def load_example():
    """``load_example(name)``: examples/NAME.py imported as a module (registered, so its classes pickle)."""
    def load(name):
        spec = importlib.util.spec_from_file_location(f"{name}_example", EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    return load
