"""Fixtures of the mechanisms tests: slow references shared by more than one test module.

Tests run with ``--import-mode=importlib`` (no package ``tests``), so a reference two
modules need is handed out as a fixture rather than imported.
"""

from __future__ import annotations

import math

import numpy as np
import pytest


def _rounding_law(v: float, bound: float, levels: int) -> np.ndarray:
    """Law of one value's randomized rounding level in {0, ..., 2g}, written out by hand.

    s = (v + L)·g/L; level ⌊s⌋ with probability 1 − (s − ⌊s⌋), ⌊s⌋ + 1 with probability
    s − ⌊s⌋ (the vector-summation randomizer, Cheu et al. 2022).
    """
    scaled = (v + bound) * levels / bound
    low = int(math.floor(scaled))
    law = np.zeros(2 * levels + 1)
    law[min(low, 2 * levels)] += 1 - (scaled - low)
    if scaled > low:
        law[low + 1] += scaled - low
    return law


@pytest.fixture(scope="session")
def rounding_law():
    """:func:`_rounding_law`: ``rounding_law(v, bound, levels)`` -> pmf over the 2g + 1 levels."""
    return _rounding_law
