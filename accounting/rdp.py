"""Rényi DP on a fixed grid of orders: the RDP-curve cost, held orders and their certified conversions.

An :class:`RDP` cost is a curve ε(α) at a selection of :data:`ORDERS`
(dp-accounting's default RDP orders, 1.1 … 1024, read exactly; the whole grid
by default): the mechanism is (α, ε(α))-RDP at each listed order (Mironov
2017). An ``"rdp"`` ledger account *holds* the orders of its budget, fixed when
it is made from public parameters (:func:`held_for_share`: one order from the
share; :func:`held_for_workload`: one order from a declared plan; or the
orders of a user curve), sums charges order by order there and grants a charge
only if *every* held order stays within its budget. Feldman & Zrnic 2021 prove
that halting before Σεᵢ(α) exceeds B(α) keeps (α, B(α))-RDP under fully
adaptive composition, for one fixed order α; holding each order at once keeps
each held order's guarantee, so the budget's best conversion is the claim
(``docs/accounting.md``, "Rényi DP"). Granting while only *some* order has room
would not be valid.

Conversion to (ε, δ) takes the minimum over the grid of

    ε(α) + ln(1 − 1/α) − (ln δ + ln α)/(α − 1)

(Canonne, Kamath & Steinke 2020, Prop. 12; Balle et al. 2020, Thm 21), as
dp-accounting's ``compute_epsilon`` does, together with its order-free case
δ ≥ √(1 − e^{−ε(α)}) ⇒ ε = 0 (KL divergence ≤ ε(α) for α > 1, and
Bretagnolle–Huber). Here each term is evaluated in 50-digit arithmetic and
rounded up, so the returned rational is an upper bound.

Exact curves of other costs (every order of the grid, rational arithmetic):
ρ-zCDP is (α, αρ)-RDP (Bun & Steinke 2016, Def. 1.1); μ-GDP is (α, αμ²/2)-RDP
(it is dominated by the Gaussian pair at distance μ); ε-DP is
(α, min(ε, αε²/2))-RDP (Bun & Steinke 2016, Prop. 3.3 and the trivial
D_α ≤ D_∞ ≤ ε).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from accounting.costs import ORDERS, RDP
from accounting.validation import check_exact

if TYPE_CHECKING:
    import mpmath  # imported where used (60-digit certification): not on the import path

__all__ = ["ORDERS", "RDP", "best_order", "curve_to_approx_certified", "gaussian_curve", "held_for_share",
           "held_for_workload", "largest_gaussian_rho", "order_budget", "pure_curve", "scaled_to_share"]

_DIGITS = 50


@lru_cache(maxsize=256)
def _order_array(orders: tuple[Fraction, ...]) -> np.ndarray:
    return np.array([float(order) for order in orders])


def gaussian_curve(rho: Fraction, orders: Sequence[Fraction] = ORDERS) -> tuple[Fraction, ...]:
    """αρ at every order (the Gaussian with μ²/2 = ρ, and ρ-zCDP), exact."""
    return tuple(order * rho for order in orders)


def pure_curve(eps: Fraction, orders: Sequence[Fraction] = ORDERS) -> tuple[Fraction, ...]:
    """min(ε, αε²/2) at every order: the exact rational RDP curve of ε-DP used here."""
    return tuple(min(eps, order * eps * eps / 2) for order in orders)


def _mp(x: Fraction) -> mpmath.mpf:
    import mpmath

    return mpmath.mpf(x.numerator) / x.denominator


@lru_cache(maxsize=4096)
def curve_to_approx_certified(epsilons: Sequence[Fraction], delta: Fraction,
                              orders: tuple[Fraction, ...] = ORDERS) -> Fraction:
    """A rational ε ≥ the CKS Prop. 12 bound of the curve at δ at its best order of the grid (module docstring).

    The best order is found in floats; the bound at that order (any single
    order gives a valid ε) is then evaluated in 50-digit arithmetic and rounded
    up, so float error can only cost optimality, never validity.

    Parameters
    ----------
    epsilons : tuple of Fraction, one per order of ``orders``
    delta : Fraction in (0, 1)
    orders : tuple of Fraction, a selection of :data:`ORDERS` (default: all of them)
    """
    import mpmath

    check_exact("delta", delta, 0, 1, low_open=True, high_open=True)
    if not any(epsilons):
        return Fraction(0)
    if float(delta) ** 2 + math.expm1(-float(min(epsilons))) > 1e-12:  # δ ≥ √(1 − e^{−τ}) ≥ TV distance
        with mpmath.workdps(_DIGITS):
            if _mp(delta) ** 2 + mpmath.expm1(-_mp(min(epsilons))) >= 0:
                return Fraction(0)
    best = _best_index(epsilons, delta, tuple(orders))
    with mpmath.workdps(_DIGITS):
        a = _mp(orders[best])
        value = _mp(epsilons[best]) + mpmath.log(1 - 1 / a) - (mpmath.log(_mp(delta)) + mpmath.log(a)) / (a - 1)
        if value <= 0:
            return Fraction(0)
        scaled = mpmath.ceil(value * 10**20 * (1 + mpmath.mpf(10) ** -30))
    return Fraction(int(scaled), 10**20)


def _best_index(epsilons: Sequence[Fraction], delta: Fraction, orders: tuple[Fraction, ...]) -> int:
    """Index of the order whose CKS bound of the curve at δ is smallest (in floats)."""
    tau = np.array([float(e) for e in epsilons])
    grid = _order_array(orders)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bound = tau + np.log1p(-1 / grid) - (math.log(float(delta)) + np.log(grid)) / (grid - 1)
    return int(np.nanargmin(bound))


def best_order(epsilons: Sequence[Fraction], delta: Fraction, orders: tuple[Fraction, ...] = ORDERS) -> Fraction:
    """The order at which :func:`curve_to_approx_certified` converts the curve (its best order at δ)."""
    return orders[_best_index(epsilons, delta, orders)]


def largest_gaussian_rho(eps: Fraction, delta: Fraction) -> Fraction:
    """The largest ρ (rounded down to a rational) whose Gaussian curve αρ converts to at most ε at δ on the grid.

    For each order the bound is linear in ρ, so its best order gives
    ρ = max_α [ε − ln(1 − 1/α) + (ln δ + ln α)/(α − 1)]/α; the result is then
    checked with :func:`curve_to_approx_certified`.
    """
    import mpmath

    check_exact("eps", eps, 0, low_open=True)
    check_exact("delta", delta, 0, 1, low_open=True, high_open=True)
    with mpmath.workdps(_DIGITS):
        e, log_delta = _mp(eps), mpmath.log(_mp(delta))
        best = max((e - mpmath.log(1 - 1 / _mp(a)) + (log_delta + mpmath.log(_mp(a))) / (_mp(a) - 1)) / _mp(a)
                   for a in ORDERS)
        if best <= 0:
            raise ValueError(f"no Gaussian curve on the grid meets (eps={float(eps)}, delta={float(delta)})")
        rho = Fraction(int(mpmath.floor(best * 10**20 * (1 - mpmath.mpf(10) ** -12))), 10**20)
    if curve_to_approx_certified(gaussian_curve(rho), delta) > eps:
        raise RuntimeError(f"the Gaussian curve of rho={float(rho)} failed its certificate "
                           f"at ({float(eps)}, {float(delta)})")
    return rho


def scaled_to_share(curve: RDP, eps: Fraction, delta: Fraction) -> RDP:
    """The curve c·ε(α) with (nearly) the largest rational c whose conversion is at most (ε, δ).

    For a budget curve shaped like the composition one plans (e.g. the RDP
    curve of a Poisson-subsampled DP-SGD run): a Gaussian budget curve αρ is
    far below a subsampled Gaussian's curve at high orders, and the filter
    holds every order. Bisection on c to 10⁻⁹ relative, each candidate
    certified by :func:`curve_to_approx_certified`.
    """
    if not isinstance(curve, RDP) or max(curve.epsilons) <= 0:
        raise ValueError("curve must be an RDP with a positive value at some order")
    low, high = Fraction(0), Fraction(1)
    while high < 2**64 and curve_to_approx_certified(tuple(high * e for e in curve.epsilons), delta,
                                                                curve.orders) <= eps:
        low, high = high, 2 * high
    for _ in range(40):
        middle = (low + high) / 2
        middle = Fraction(round(middle * 10**15), 10**15) if middle > 10**-12 else middle
        if curve_to_approx_certified(tuple(middle * e for e in curve.epsilons), delta, curve.orders) <= eps:
            low = middle
        else:
            high = middle
    if low == 0:
        raise ValueError(f"no positive multiple of the curve meets (eps={float(eps)}, delta={float(delta)})")
    return RDP(tuple(low * e for e in curve.epsilons), curve.orders)


def order_budget(order: Fraction, eps: Fraction, delta: Fraction) -> Fraction:
    """The largest τ (rounded down to a rational, certified) with (α, τ)-RDP ⇒ (ε, δ)-DP at this one order.

    τ = ε − ln(1 − 1/α) + (ln δ + ln α)/(α − 1) (the conversion solved for τ);
    0 when that is ≤ 0 (no RDP at this order meets the share).
    """
    import mpmath

    with mpmath.workdps(_DIGITS):
        a = _mp(order)
        tau = _mp(eps) - mpmath.log(1 - 1 / a) + (mpmath.log(_mp(delta)) + mpmath.log(a)) / (a - 1)
        if tau <= 0:
            return Fraction(0)
        budget = Fraction(int(mpmath.floor(tau * 10**20 * (1 - mpmath.mpf(10) ** -12))), 10**20)
    if curve_to_approx_certified((budget,), delta, (order,)) > eps:
        raise RuntimeError(f"the budget {float(budget)} at order {float(order)} failed its certificate")
    return budget


def held_for_share(eps: Fraction, delta: Fraction) -> RDP:
    """The default budget of an rdp account funded by (ε, δ): one held order, fixed from the share alone.

    The order is the grid order at which the Gaussian curve meeting the share is
    largest (:func:`largest_gaussian_rho`'s best order: 3.9 for (8, 10⁻⁵)), and
    the budget there is :func:`order_budget`, so the filter's claim is exactly
    the share. One order: a subsampled Gaussian's RDP grows steeply at high
    orders, and every held order must have room (docs/accounting.md).
    """
    check_exact("eps", eps, 0, low_open=True)
    check_exact("delta", delta, 0, 1, low_open=True, high_open=True)
    log_delta = math.log(float(delta))
    grid = _order_array(ORDERS)
    rate = (float(eps) - np.log1p(-1 / grid) + (log_delta + np.log(grid)) / (grid - 1)) / grid
    order = ORDERS[int(np.argmax(rate))]
    budget = order_budget(order, eps, delta)
    if budget <= 0:
        raise ValueError(f"no RDP budget on the grid meets (eps={float(eps)}, delta={float(delta)})")
    return RDP._exact((budget,), (order,))


def held_for_workload(plan: RDP, eps: Fraction, delta: Fraction) -> RDP:
    """A budget for an rdp account that will run ``plan`` (a declared workload): one held order.

    The order maximises B(α)/plan(α), with B = :func:`order_budget`: the order at
    which the most copies of the plan fit the share (a single copy fits iff its
    own conversion at that order is ≤ ε).
    """
    grid = _order_array(plan.orders)
    values = np.array([float(v) for v in plan.epsilons])
    with np.errstate(divide="ignore", invalid="ignore"):
        budgets = float(eps) - np.log1p(-1 / grid) + (math.log(float(delta)) + np.log(grid)) / (grid - 1)
        ratio = np.where((values > 0) & (budgets > 0), budgets / values, -np.inf)
    if not np.isfinite(ratio).any():
        raise ValueError(f"no order of the plan's curve meets (eps={float(eps)}, delta={float(delta)})")
    order = plan.orders[int(np.argmax(ratio))]
    return RDP._exact((order_budget(order, eps, delta),), (order,))
