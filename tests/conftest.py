import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed-seed generator: tests are reproducible run to run."""
    return np.random.default_rng(20261129)
