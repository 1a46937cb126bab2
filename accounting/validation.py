"""The argument checks every package shares: one helper per kind of argument.

Each returns the value in its canonical type or raises a one-line ``TypeError``
(wrong kind) or ``ValueError`` (out of range) that names the argument and its allowed
range, so bad input never reaches arithmetic that would fail obscurely (``math domain
error``) or silently (``True`` taken as 1, a complex number's imaginary part dropped).
It lives in the lowest package so that :mod:`accounting`, :mod:`mechanisms`,
:mod:`audits` and :mod:`dpglm` all use the same rules (``docs/design.md``).
"""

from __future__ import annotations

import math
import numbers
import os
import sys
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction

import numpy as np

__all__ = ["check_array", "check_exact", "check_generator", "check_int", "check_memory", "check_positive",
           "check_probability",
           "check_real", "check_size", "check_state_memory", "check_text", "memory_limit", "short_repr"]


def short_repr(value: object, limit: int = 60) -> str:
    """``repr(value)`` on one line for a message: an array as its shape and dtype, anything long cut to ``limit``."""
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return f"{'-' if value < 0 else ''}an int of {len(str(abs(value)))} digits"
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_array(name: str, value: object) -> np.ndarray:
    """``value`` as a float array if it is a rectangular array of real numbers (int or float dtype).

    Raises
    ------
    TypeError
        If it is ragged, or its entries are complex, boolean, strings, objects or ints
        beyond the float range; the message names ``name``.
    """
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an array of real numbers, got a bool")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):  # ragged nested sequences
        raise TypeError(f"{name} must be a rectangular array of real numbers, got a ragged "
                        f"{type(value).__name__}") from None
    if array.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be an array of real numbers (int or float dtype), got dtype {array.dtype}")
    return array.astype(float, copy=False)


#: The largest count or size an argument may be: every integer up to 2**53 is a float exactly.
MAX_COUNT = 2**53


def check_size(name: str, value: object, low: int = 1) -> int:
    """A count or a size (a horizon, a number of arms, steps): an int in [``low``, 2**53] (raises as ``check_int``)."""
    return check_int(name, value, low, MAX_COUNT, why="a float holds every count up to 2^53")


def _is_real(value: object) -> bool:
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Real)


def check_int(name: str, value: object, low: int = 1, high: int | None = None, *, why: str = "") -> int:
    """Return ``value`` as an int if it is an integer (not a bool, not a float) in ``[low, high]``.

    ``why`` explains the bounds in the message.

    Raises
    ------
    TypeError
        If ``value`` is not an integer (``'3'``, ``2.5``, ``nan``, ``True``).
    ValueError
        If ``value < low`` or ``value > high``.
    """
    allowed = (f"an int >= {low}" if high is None else f"an int in [{low}, {high}]") + (f" ({why})" if why else "")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {allowed}, got {type(value).__name__} {short_repr(value)}")
    number = int(value)
    if number < low or (high is not None and number > high):
        raise ValueError(f"{name} must be {allowed}, got {short_repr(value)}")
    return number


def check_real(
    name: str,
    value: object,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a float if it is a finite real number in the given interval.

    The interval is ``[low, high]``; ``low_open``/``high_open`` exclude an end.

    Raises
    ------
    TypeError
        If ``value`` is not a real number (``None``, a string, a complex, a bool).
    ValueError
        If it is NaN, infinite or outside the interval; the message names ``name``.
    """
    allowed = _describe(low, high, low_open, high_open)
    if not _is_real(value):
        raise TypeError(f"{name} must be a real number ({allowed}), got {type(value).__name__}")
    try:
        number = float(value)  # type: ignore[arg-type]  # _is_real checked numbers.Real
    except OverflowError:  # an int or Fraction beyond the float range (10**400): out of any finite range
        raise ValueError(f"{name} must be {allowed}, got a {type(value).__name__} beyond the float range") from None
    inside = (number > low if low_open else number >= low) and (number < high if high_open else number <= high)
    if not (math.isfinite(number) and inside):
        raise ValueError(f"{name} must be {allowed}, got {short_repr(value)}")
    return number


def _describe(low: float, high: float, low_open: bool, high_open: bool) -> str:
    """``'a finite number > 0'``, ``'a real number in (0, 1)'``: the range in words."""
    if high == math.inf:
        return "a finite number" if low == -math.inf else f"a finite number {'>' if low_open else '>='} {low:g}"
    if low == -math.inf:
        return f"a finite number {'<' if high_open else '<='} {high:g}"
    left, right = "(" if low_open else "[", ")" if high_open else "]"
    return f"a real number in {left}{low:g}, {high:g}{right}"


def check_exact(name: str, value: object, low: Fraction | int | None = None, high: Fraction | int | None = None, *,
                low_open: bool = False, high_open: bool = False) -> Fraction:
    """Return ``value`` read exactly as a Fraction if it is a finite real number in the given interval.

    The privacy ledger's reading rule (docs/accounting.md; :mod:`accounting.costs`):
    an int, Fraction or Decimal is exact, and a float is read as the decimal it prints
    as (``0.1`` is 1/10), so ten charges of 0.1 fit in a budget of 1; a numpy float
    scalar likewise, in its own precision (``str(np.float32(0.1))`` is ``'0.1'``). The interval is
    ``[low, high]`` (None: unbounded); ``low_open``/``high_open`` exclude an end.

    Raises
    ------
    TypeError
        If ``value`` is not a real number (a bool, a string, a complex).
    ValueError
        If it is NaN, infinite or outside the interval; the message names ``name``.
    """
    exact = value if type(value) is Fraction else _read_exact(name, value, low, high, low_open, high_open)
    below = low is not None and (exact <= low if low_open else exact < low)
    above = high is not None and (exact >= high if high_open else exact > high)
    if below or above:
        raise ValueError(f"{name} must be {_describe_exact(low, high, low_open, high_open)}, got {_shown(value)}")
    return exact


def _read_exact(name: str, value: object, low: Fraction | int | None, high: Fraction | int | None, low_open: bool,
                high_open: bool) -> Fraction:
    if type(value) is float and math.isfinite(value):  # the common case first: a Python float
        return Fraction(repr(value))
    if type(value) is int:
        return Fraction(value)
    if isinstance(value, Fraction):
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, Decimal)):
        raise TypeError(f"{name} must be a real number ({_describe_exact(low, high, low_open, high_open)}), "
                        f"got {type(value).__name__}")
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{name} must be {_describe_exact(low, high, low_open, high_open)}, got {value}")
        return Fraction(value)
    as_float = float(value)
    if not math.isfinite(as_float):
        raise ValueError(f"{name} must be {_describe_exact(low, high, low_open, high_open)}, got {as_float}")
    if isinstance(value, numbers.Rational):
        return Fraction(int(value.numerator), int(value.denominator))
    if isinstance(value, np.floating):  # in its own precision: np.float32(0.1) prints, and is read, as 0.1
        return Fraction(str(value))
    return Fraction(repr(as_float))


def _describe_exact(low: Fraction | int | None, high: Fraction | int | None, low_open: bool, high_open: bool) -> str:
    return _describe(-math.inf if low is None else float(low), math.inf if high is None else float(high),
                     low_open, high_open)


def _shown(value: object) -> str:
    """``value`` for a message; a Fraction to 6 digits through Decimal (never overflowing a float)."""
    if isinstance(value, Fraction):
        return f"{(Decimal(value.numerator) / Decimal(value.denominator)).normalize():.6g}"
    return short_repr(value)


def check_positive(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite real number > 0 (raises as :func:`check_real`)."""
    return check_real(name, value, 0.0, low_open=True)


def check_probability(name: str, value: object) -> float:
    """Return ``value`` as a float if it is in the open interval (0, 1): a δ, a confidence level."""
    return check_real(name, value, 0.0, 1.0, low_open=True, high_open=True)


def check_text(name: str, value: object, *, required: bool = True) -> str:
    """Return ``value`` if it is a str, non-blank when ``required`` (a mechanism's name, a note).

    Raises
    ------
    TypeError
        If ``value`` is not a str.
    ValueError
        If ``required`` and ``value`` is empty or only whitespace.
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if required and not value.strip():
        raise ValueError(f"{name} must be a non-empty string")
    return value


def check_generator(rng: object) -> np.random.Generator:
    """Return ``rng`` if it is an explicit ``numpy.random.Generator`` (never global state).

    Raises
    ------
    TypeError
        If ``rng`` is not a ``numpy.random.Generator``.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def memory_limit() -> int:
    """The most bytes one up-front allocation may ask for: the machine's physical memory (16 GiB if
    unknown), or the address space the process has left under its limit (``ulimit -v``) if less."""
    try:
        physical = int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        physical = 16 * 2**30
    return min(physical, _address_space_left())


def _address_space_left() -> int:
    """``RLIMIT_AS`` less the process's current virtual size (/proc/self/statm); ``sys.maxsize`` if unlimited."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft == resource.RLIM_INFINITY:
            return sys.maxsize
        with open("/proc/self/statm") as statm:
            used = int(statm.read().split()[0]) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ImportError, OSError, ValueError):
        return sys.maxsize
    return max(int(soft) - used, 0)


def check_memory(name: str, value: object, nbytes: int, what: str) -> None:
    """Refuse, naming the argument ``name`` (given as ``value``), state of ``nbytes`` bytes beyond physical memory.

    Called with public sizes (shapes, horizons) *before* a mechanism charges, so an
    allocation that cannot succeed is refused before it spends (docs/mechanisms.md,
    "Fail before charging"); ``what`` names the state in the message.

    Raises
    ------
    ValueError
        If ``nbytes`` exceeds :func:`memory_limit`.
    """
    limit = memory_limit()
    if nbytes > limit:
        raise ValueError(f"{name}={value!r} needs {_bytes(nbytes)} for {what}, more than the "
                         f"{_bytes(limit)} of memory this process may use")


def check_state_memory(shape: tuple[int, ...], horizon: int, state_bytes: Callable[[int], int], what: str) -> None:
    """:func:`check_memory` of a stream's state, ``state_bytes(T)`` bytes for horizon T: names ``shape`` if even
    T = 1 does not fit, else ``horizon``."""
    if state_bytes(1) > memory_limit():
        check_memory("shape", shape, state_bytes(1), what)
    check_memory("horizon", horizon, state_bytes(horizon), what)


def _bytes(count: int) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if count >= size:
            return f"{count / size:.3g} {unit}" if count < 10**30 * size else f"~2^{count.bit_length()} bytes"
    return f"{count} bytes"
