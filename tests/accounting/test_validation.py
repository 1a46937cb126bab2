"""accounting.validation: the shared checks accept exactly their documented ranges."""

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from accounting.validation import (
    check_exact,
    check_generator,
    check_int,
    check_positive,
    check_probability,
    check_real,
    check_text,
)


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


@pytest.mark.parametrize(
    ("value", "exact"),
    [
        (0.1, Fraction(1, 10)),  # a float is read as the decimal it prints as, not its binary value
        (np.float64(0.1), Fraction(1, 10)),
        (Decimal("0.1"), Fraction(1, 10)),
        (np.int64(3), Fraction(3)),
        (10**400, Fraction(10**400)),
        (Fraction(2, 3), Fraction(2, 3)),
    ],
)
def test_check_exact_reads_numbers_as_printed(value, exact):
    result = check_exact("x", value)
    assert result == exact and type(result) is Fraction
    assert Fraction(0.1) != Fraction(1, 10)  # the reading differs from the binary value


def test_check_exact_interval_ends_are_exact():
    assert check_exact("d", 0, 0, 1, high_open=True) == 0
    assert check_exact("d", Fraction(10**30 - 1, 10**30), 0, 1, high_open=True) < 1  # 1 − 1e-30: a float would say 1
    with pytest.raises(ValueError, match=r"^d must be a real number in \[0, 1\), got 1$"):
        check_exact("d", 1, 0, 1, high_open=True)
    with pytest.raises(ValueError, match=r"^eps must be a finite number > 0, got 0.0$"):
        check_exact("eps", 0.0, 0, low_open=True)
    with pytest.raises(ValueError, match=r"^rho must be a finite number >= 0, got -1e\+400$"):
        check_exact("rho", Fraction(-(10**400)), 0)


@pytest.mark.parametrize("value", [True, np.bool_(False), 1j, "1", None])
def test_check_exact_rejects_non_reals(value):
    with pytest.raises(TypeError, match=r"^x must be a real number \(a finite number >= 0\), got "):
        check_exact("x", value, 0)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), Decimal("NaN"), Decimal("-Infinity")])
def test_check_exact_rejects_non_finite(value):
    with pytest.raises(ValueError, match=r"^x must be a finite number, got "):
        check_exact("x", value)


def test_check_text():
    assert check_text("mechanism", "Gaussian") == "Gaussian"
    assert check_text("note", "", required=False) == ""
    with pytest.raises(ValueError, match=r"^mechanism must be a non-empty string$"):
        check_text("mechanism", "  ")
    with pytest.raises(TypeError, match=r"^note must be a str, got int$"):
        check_text("note", 3, required=False)


# -- numpy scalars in costs: read in their own precision (issue 21) ------------------------------

def test_numpy_float_scalars_are_read_as_the_decimal_they_print_as_in_their_own_precision():
    from accounting import BudgetExceeded, Ledger, PureDP
    from accounting.validation import check_exact

    # float(np.float32(0.1)) is 0.100000001490116...; str() in float32 precision is '0.1'.
    assert float(np.float32(0.1)) != 0.1
    for value in (np.float32(0.1), np.float16(0.1), np.float64(0.1), np.longdouble("0.1")):
        assert check_exact("eps", value) == Fraction(1, 10)
    ledger = Ledger(PureDP(1))
    for _ in range(10):  # ten charges of 0.1 fit in 1 (the tenth was refused before)
        ledger.charge(PureDP(np.float32(0.1)), mechanism="m")
    assert ledger.remaining == PureDP(0)
    with pytest.raises(BudgetExceeded):
        ledger.charge(PureDP(np.float32(0.1)), mechanism="m")


def test_noise_calibrated_from_a_numpy_scalar_cost_is_still_rounded_up():
    from accounting import ZCDP, Ledger, PureDP
    from mechanisms import GaussianMechanism
    from mechanisms.geometric import GeometricBatchMean

    rng = np.random.default_rng(0)
    gaussian = GaussianMechanism(Ledger(ZCDP(1)), 1.0, rng, cost=ZCDP(np.float32(0.1)))
    assert gaussian.cost == ZCDP(Fraction(1, 10))
    # rho = Δ²/(2σ²) of the float σ, in exact arithmetic, never above the charged 1/10;
    # and σ is the continuous σ = 1/√0.2 rounded up by no more than a relative 1e-9.
    assert Fraction(1) / (2 * Fraction(gaussian.sigma) ** 2) <= Fraction(1, 10)
    assert math.sqrt(5.0) <= gaussian.sigma <= math.sqrt(5.0) * (1 + 1e-9)
    geometric = GeometricBatchMean(Ledger(PureDP(1)).split({"a": 1}, currency={"a": "pure"})["a"], 2,
                                   np.float32(0.1), rng)
    (_, _, release), = geometric.observe(np.array([1, 0]), np.array([1.0, 0.0]))
    assert release.receipt.cost == PureDP(Fraction(1, 10))  # not 0.100000001490116...
    assert 1 / Fraction(geometric.scale) <= Fraction(1, 10)  # Lap(b) with 1/b ≤ ε exactly: b rounded up


def test_memory_limit_is_the_address_space_left_under_ulimit_v():
    """In a child whose RLIMIT_AS leaves 1 GiB above its current size, 2 GiB is refused naming the argument."""
    import subprocess
    import sys

    script = (
        "import os, resource\n"
        "from accounting.validation import check_memory, memory_limit\n"
        "used = int(open('/proc/self/statm').read().split()[0]) * os.sysconf('SC_PAGE_SIZE')\n"
        "resource.setrlimit(resource.RLIMIT_AS, (used + 2**30, resource.getrlimit(resource.RLIMIT_AS)[1]))\n"
        "assert 0.9 * 2**30 < memory_limit() <= 2**30, memory_limit()\n"
        "try:\n"
        "    check_memory('n', 5, 2 * 2**30, 'a table')\n"
        "except ValueError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out == "n=5 needs 2 GiB for a table, more than the 1 GiB of memory this process may use\n"
