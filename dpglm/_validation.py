"""Boundary checks shared by the policies and the BAI algorithms: one helper per kind of argument.

Each raises a one-line ``TypeError`` (wrong kind) or ``ValueError`` (out of range)
that names the argument and its allowed range, so that bad input never reaches
arithmetic that would fail obscurely (``math domain error``, ``IndexError``) or,
worse, silently (a complex arm's imaginary part dropped by ``float``, a negative
step budget taken as a stopping time). The generic checks (an int, a real in an interval, a probability, a
generator) are :mod:`accounting.validation`'s, re-exported here beside the bandit-specific ones.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from accounting.validation import (
    check_array,
    check_generator,
    check_int,
    check_memory,
    check_positive,
    check_probability,
    check_real,
    check_size,
    short_repr,
)

__all__ = [
    "check_dimension",
    "check_generator",
    "check_horizon_left",
    "check_int",
    "check_max_steps",
    "check_positive",
    "check_probability",
    "check_real",
    "check_reward",
    "check_round_order",
    "check_size",
    "real_array",
]


def real_array(name: str, value: object) -> np.ndarray:
    """``value`` as a float array if its entries are real numbers (integer or floating dtype).

    Raises
    ------
    TypeError
        If the entries are complex (the imaginary part would be dropped), boolean,
        strings or objects; the message names ``name`` and the dtype.
    """
    return check_array(name, value)


def check_reward(reward: object, bound: float) -> float:
    """Return ``reward`` as a float if it is a real number in [0, ``bound``].

    Raises
    ------
    TypeError
        If ``reward`` is not a real number (``None``, a string, a complex number).
    ValueError
        If it is NaN or outside [0, ``bound``].
    """
    if isinstance(reward, (bool, np.bool_)) or not isinstance(reward, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"reward must be a real number in [0, R] = [0, {bound}], got {type(reward).__name__}")
    try:
        r = float(reward)
    except OverflowError:  # an int beyond the float range
        r = math.inf
    if not (0.0 <= r <= bound):
        raise ValueError(f"reward must lie in [0, R] = [0, {bound}], got {short_repr(reward)}")
    return r


def check_round_order(pending: object, calling: str) -> None:
    """A round is ``choose(arms)`` then ``observe(reward)``: refuse a second ``choose`` or an early ``observe``.

    ``pending`` is what the policy kept from its last ``choose`` (``None`` if
    observed since); ``calling`` is ``"choose"`` or ``"observe"``.

    Raises
    ------
    ValueError
        ``choose`` with a round pending, or ``observe`` without one.
    """
    if calling == "choose" and pending is not None:
        raise ValueError("observe(reward) must be called before the next choose(arms)")
    if calling == "observe" and pending is None:
        raise ValueError("choose(arms) must be called before observe(reward)")


def check_horizon_left(t: int, horizon: int) -> None:
    """Refuse a round beyond the horizon the policy was built (and, if private, charged) for.

    Raises
    ------
    ValueError
        If ``t`` rounds (``t >= horizon``) have already been played.
    """
    if t >= horizon:
        raise ValueError(f"horizon exceeded: all {horizon} rounds (horizon={horizon}) already played")


def check_max_steps(max_steps: object, n_arms: int) -> int:
    """The step budget of a best-arm identification run: an int >= K (every arm is pulled once first).

    A smaller budget (or −1) would be reported as the stopping time of a run that
    already made K pulls. Raises as :func:`check_int`.
    """
    return check_int("max_steps", max_steps, n_arms, 2**53,
                     why=f"K = {n_arms} arms, each pulled once first; counts above 2^53 lose float precision")


#: Largest run-state of a lockstep BAI simulation: n_runs × K cells (a few int64/float arrays and a ledger per run).
MAX_RUN_CELLS = 10**7


def check_n_runs(n_runs: object, n_arms: int) -> int:
    """The number of lockstep runs of a best-arm identification simulation: an int in [1, 10^7 / K].

    Every run holds (K,)-rows in about ten arrays and, if private, its own ledger, all
    allocated up front; a larger request would exhaust memory (or spend minutes building
    ledgers) before the first step. Split it into several calls. Raises as :func:`check_int`.
    """
    return check_int("n_runs", n_runs, 1, MAX_RUN_CELLS // n_arms,
                     why=f"at most {MAX_RUN_CELLS:.0e} run x arm cells with K = {n_arms}; split larger batches")


def check_dimension(d: object, matrices: int = 8) -> int:
    """The dimension d of a policy: a size whose ``matrices`` (d, d) float matrices fit in memory.

    Raises
    ------
    TypeError, ValueError
        As :func:`check_size`, or if the matrices would not fit (``accounting.validation.check_memory``).
    """
    d = check_size("d", d)
    check_memory("d", d, 8 * matrices * d * d, f"{matrices} (d, d) matrices")
    return d
