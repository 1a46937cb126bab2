"""accounting.validation: the shared checks accept exactly their documented ranges."""

import math
from fractions import Fraction

import numpy as np
import pytest

from accounting.validation import check_generator, check_int, check_positive, check_probability, check_real


@pytest.mark.parametrize("value", [1, np.int64(7), 10**30])
def test_check_int_accepts_integers(value):
    assert check_int("n", value) == int(value)
    assert type(check_int("n", value)) is int


@pytest.mark.parametrize("value", [True, np.bool_(True), 2.0, "3", None, float("nan")])
def test_check_int_rejects_non_integers(value):
    with pytest.raises(TypeError, match=r"^n must be an int >= 1"):
        check_int("n", value)


def test_check_int_bounds_and_reason():
    assert check_int("k", 0, 0, 3) == 0
    with pytest.raises(ValueError, match=r"k must be an int in \[0, 3\] \(a reason\), got 4"):
        check_int("k", 4, 0, 3, why="a reason")


@pytest.mark.parametrize(
    ("low", "high", "low_open", "high_open", "inside", "outside"),
    [
        (0.0, 1.0, True, True, [1e-300, 0.5, 1 - 1e-16], [0.0, 1.0]),
        (0.0, 1.0, False, False, [0.0, 1.0], [-1e-300, 1.0000001]),
        (0.0, math.inf, True, False, [1e-300, 1e300], [0.0, -1.0, math.inf]),
        (-math.inf, 2.0, False, True, [-1e300, 1.999], [2.0, -math.inf]),
    ],
)
def test_check_real_interval_ends(low, high, low_open, high_open, inside, outside):
    for x in inside:
        assert check_real("x", x, low, high, low_open=low_open, high_open=high_open) == x
    for x in outside:
        with pytest.raises(ValueError, match=r"^x must be a"):
            check_real("x", x, low, high, low_open=low_open, high_open=high_open)


@pytest.mark.parametrize("value", [True, 1j, "1", None, [1.0]])
def test_check_real_rejects_non_reals(value):
    with pytest.raises(TypeError, match=r"^x must be"):
        check_real("x", value)


def test_check_real_accepts_exact_numbers_and_rejects_nan():
    assert check_real("x", Fraction(1, 3)) == pytest.approx(1 / 3)
    assert check_real("x", np.float32(0.5)) == 0.5
    with pytest.raises(ValueError, match="got nan"):
        check_real("x", float("nan"))


def test_positive_and_probability_messages_name_the_range():
    with pytest.raises(ValueError, match=r"^sigma must be a finite number > 0, got 0$"):
        check_positive("sigma", 0)
    with pytest.raises(ValueError, match=r"^delta must be a real number in \(0, 1\), got 1$"):
        check_probability("delta", 1)
    assert check_probability("delta", 1e-10) == 1e-10


def test_check_generator():
    g = np.random.default_rng(0)
    assert check_generator(g) is g
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator, got RandomState"):
        check_generator(np.random.RandomState(0))
