"""Conversions between privacy notions, and Gaussian noise calibration.

Every function here errs on the safe side: a conversion to (ε, δ) returns an ε
that is a valid upper bound (evaluated at a concrete Rényi order), an inverse
returns a ρ at or below the true supremum, and a calibrated σ is rounded up so
that the noise is never smaller than the charge allows.

Sources (see docs/references.md, "Privacy definitions and composition"):

- Bun & Steinke 2016 (BS), Prop. 1.3 / 1.6: ρ-zCDP ⇒ (ρ + 2√(ρ ln(1/δ)), δ)-DP;
  ε-DP ⇒ (ε²/2)-zCDP; Gaussian with L2 sensitivity Δ and std σ is Δ²/(2σ²)-zCDP.
- Canonne, Kamath & Steinke 2020 (CKS), Prop. 12 / Cor. 13: an (α, τ)-RDP
  mechanism is (ε, δ)-DP with ε = τ + ln(1 − 1/α) − ln(αδ)/(α − 1); for
  ρ-zCDP τ = αρ, minimised here over real α > 1 (a 1-D scipy minimisation;
  dp-accounting only evaluates a fixed grid of orders).
- Balle & Wang 2018, Thm 8 (analytic Gaussian): delegated to dp-accounting's
  ``get_sigma_gaussian`` and rounded up.
- RDP curves → (ε, δ): delegated to dp-accounting's ``rdp.compute_epsilon``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Literal

import numpy as np

from accounting.costs import Number, as_fraction, show
from accounting.validation import check_exact, check_real

__all__ = [
    "zcdp_to_approx",
    "approx_to_zcdp",
    "approx_to_zcdp_order",
    "pure_to_zcdp",
    "gaussian_sigma",
    "gaussian_rho",
    "gaussian_rho_exact",
    "analytic_gaussian_sigma",
    "rdp_to_approx",
    "cks_epsilon_at",
    "cks_rho_at",
    "zcdp_to_approx_certified",
    "approx_to_zcdp_certified",
]

#: Relative safety margin applied when a float result becomes an exact
#: rational bound (covers the float rounding of log/exp, ~1e-15 relative).
_MARGIN = 1e-9


_FLOAT_MAX = Fraction(np.finfo(float).max)

#: Largest ρ or ε the float conversions accept (their results must stay finite floats).
_LARGEST = Fraction(10**301)


def _positive(value: Number, name: str) -> float:
    return float(check_exact(name, value, 0, _LARGEST, low_open=True))


def _nonnegative(value: Number, name: str) -> float:
    return float(check_exact(name, value, 0, _LARGEST))


def _delta(value: Number, name: str = "delta") -> float:
    return float(check_exact(name, value, 0, 1, low_open=True, high_open=True))


def cks_epsilon_at(alpha: float, rho: float, delta: float) -> float:
    """CKS bound at one order: ε(α) = αρ + ln(1 − 1/α) − ln(αδ)/(α − 1), α > 1.

    Any α > 1 gives a valid (ε, δ) for a ρ-zCDP mechanism (CKS 2020, Prop. 12
    with τ = αρ); the result is clipped at 0. Evaluated as :func:`_cks_epsilon_u`
    at u = α − 1 (the form the minimisation uses).
    """
    return max(0.0, _cks_epsilon_u(alpha - 1.0, rho, math.log(delta)))


def cks_rho_at(alpha: float, eps: float, delta: float) -> float:
    """Largest ρ whose CKS bound at order α is at most ε (solve ε(α) = ε for ρ), via :func:`_cks_rho_u`."""
    return max(0.0, _cks_rho_u(alpha - 1.0, eps, math.log(delta)))


def _cks_epsilon_u(u: float, rho: float, log_delta: float) -> float:
    """:func:`cks_epsilon_at` at α = 1 + u, written in u so that tiny u (huge ρ) keeps its precision.

    αρ = ρ + uρ; ln(1 − 1/α) = ln u − ln(1 + u); ln(αδ)/(α − 1) = (ln(1 + u) + ln δ)/u.
    """
    log1p_u = math.log1p(u)
    return rho + u * rho + math.log(u) - log1p_u - (log1p_u + log_delta) / u


def _cks_rho_u(u: float, eps: float, log_delta: float) -> float:
    """:func:`cks_rho_at` at α = 1 + u, written in u (see :func:`_cks_epsilon_u`)."""
    log1p_u = math.log1p(u)
    return (eps - math.log(u) + log1p_u + (log1p_u + log_delta) / u) / (1.0 + u)


def _best_u(objective: Callable[[float], float], guess: float) -> float:
    """Minimise ``objective(u)`` over u = α − 1 > 0, searching ln u around the guess."""
    from scipy import optimize  # lazily: scipy.optimize is not on a bandit's import path (issue 26)

    v0 = math.log(guess)
    result = optimize.minimize_scalar(
        lambda v: objective(math.exp(v)),
        bounds=(v0 - 12.0, v0 + 12.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    u = math.exp(float(result.x))
    return u if objective(u) <= objective(guess) else guess


def zcdp_to_approx(
    rho: Number, delta: Number, method: Literal["cks", "bun_steinke"] = "cks"
) -> float:
    """ε such that a ρ-zCDP mechanism is (ε, δ)-DP.

    Parameters
    ----------
    rho : real, >= 0
        zCDP parameter.
    delta : real in (0, 1)
        Target δ.
    method : {"cks", "bun_steinke"}
        ``"cks"`` (default): Canonne–Kamath–Steinke 2020 Cor. 13, minimised over
        real α > 1. ``"bun_steinke"``: ρ + 2√(ρ ln(1/δ)) (BS 2016 Prop. 1.3).

    Returns
    -------
    float
        ε (0 when ρ = 0). Example: ρ = 0.5, δ = 1e-6 gives CKS 5.2215,
        Bun–Steinke 5.7565 (docs/references.md check values).
    """
    r = _nonnegative(rho, "rho")
    d = _delta(delta)
    if method not in ("cks", "bun_steinke"):
        raise ValueError(f"method must be 'cks' or 'bun_steinke', got {method!r}")
    if r == 0.0:
        return 0.0
    log_inv_delta = -math.log(d)
    if method == "bun_steinke":
        return r + 2.0 * math.sqrt(r * log_inv_delta)
    # Start at the minimiser α − 1 = √(ln(1/δ)/ρ) of the Bun–Steinke relaxation αρ + ln(1/δ)/(α − 1).
    u = _best_u(lambda v: _cks_epsilon_u(v, r, -log_inv_delta), math.sqrt(log_inv_delta / r))
    return max(0.0, _cks_epsilon_u(u, r, -log_inv_delta))


def approx_to_zcdp(eps: Number, delta: Number, method: Literal["cks", "bun_steinke"] = "cks") -> float:
    """Largest ρ such that ρ-zCDP implies (ε, δ)-DP under the chosen conversion.

    Parameters
    ----------
    eps : real, > 0
    delta : real in (0, 1)
    method : {"cks", "bun_steinke"}
        ``"cks"``: sup over α > 1 of [ε − ln(1 − 1/α) + ln(αδ)/(α − 1)]/α (the
        inverse of CKS Cor. 13). ``"bun_steinke"``: (√(ε + ln(1/δ)) − √ln(1/δ))².

    Returns
    -------
    float
        ρ (0 if no α gives a positive ρ). Used by the ledger to give a zCDP
        account made from an (ε, δ) share its ρ budget (rounded down there).
    """
    e = _positive(eps, "eps")
    d = _delta(delta)
    if method not in ("cks", "bun_steinke"):
        raise ValueError(f"method must be 'cks' or 'bun_steinke', got {method!r}")
    log_inv_delta = -math.log(d)
    bs = (math.sqrt(e + log_inv_delta) - math.sqrt(log_inv_delta)) ** 2
    if method == "bun_steinke":
        return bs
    u = _best_u(lambda v: -_cks_rho_u(v, e, -log_inv_delta), math.sqrt(log_inv_delta / bs))
    return max(0.0, _cks_rho_u(u, e, -log_inv_delta))


def approx_to_zcdp_order(eps: Number, delta: Number) -> float:
    """The real order α > 1 at which :func:`approx_to_zcdp`'s CKS inverse takes its largest ρ."""
    e = _positive(eps, "eps")
    log_delta = math.log(_delta(delta))
    bs = (math.sqrt(e - log_delta) - math.sqrt(-log_delta)) ** 2
    return 1.0 + _best_u(lambda v: -_cks_rho_u(v, e, log_delta), math.sqrt(-log_delta / bs))


def zcdp_to_approx_certified(rho: Fraction, delta: Fraction) -> Fraction:
    """Exact rational ε ≥ the CKS ε of ρ-zCDP at δ (rounded up by a safety margin).

    The ledger uses this for ``guarantee()`` and reports: the returned ε is an
    upper bound even after float rounding of the logarithms.
    """
    if rho == 0:
        return Fraction(0)
    eps = zcdp_to_approx(rho, delta)
    return Fraction(math.nextafter(eps * (1.0 + _MARGIN) + _MARGIN, math.inf))


def approx_to_zcdp_certified(eps: Fraction, delta: Fraction) -> Fraction:
    """Exact rational ρ a hair below :func:`approx_to_zcdp` (rounded down).

    The ledger gives a zCDP account made from an (ε, δ) share this ρ_max; the
    true CKS inverse is irrational, so we store a rational strictly below it.
    """
    rho = approx_to_zcdp(eps, delta)
    lowered = rho * (1.0 - _MARGIN)
    if lowered <= 0.0:
        return Fraction(0)
    exact = Fraction(lowered)
    # A shorter rational, still <= lowered (round down to 1e-15 relative).
    scale = 10 ** max(0, 15 - math.floor(math.log10(lowered)))
    return Fraction(math.floor(exact * scale), scale)


def pure_to_zcdp(eps: Number) -> float:
    """ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4)."""
    e = _nonnegative(eps, "eps")
    return e * e / 2.0


def _sensitivity(sensitivity: Number) -> Fraction:
    """Δ read both as printed and as the binary float the code computes with; the larger."""
    delta_l2 = check_exact("sensitivity", sensitivity, 0, low_open=True)
    return max(delta_l2, Fraction(float(sensitivity)))


def _compositions(compositions: Number) -> Fraction:
    return check_exact("compositions", compositions, 0, low_open=True)


def gaussian_rho_exact(sigma: Number, sensitivity: Number, compositions: Number = 1) -> Fraction:
    """Exact zCDP of k Gaussian releases: ρ = k·Δ²/(2σ²) (BS 2016, Prop. 1.6), as a Fraction.

    The one Gaussian calibration of the project (``mechanisms.noise`` re-exports
    it as ``gaussian_rho``). σ is the exact binary float the noise is drawn
    with; Δ the larger of its printed and binary values; k (> 0, e.g. the tree
    depth L or a factorization's Σc_k²) is exact.
    """
    check_real("sigma", float(check_exact("sigma", sigma)), 0, low_open=True)  # its binary float must be > 0
    s = Fraction(float(sigma))
    delta_l2 = _sensitivity(sensitivity)
    return _compositions(compositions) * delta_l2 * delta_l2 / (2 * s * s)


def gaussian_rho(sigma: Number, sensitivity: Number, compositions: Number = 1) -> float:
    """zCDP of k Gaussian releases, ρ = k·Δ²/(2σ²) (BS 2016, Prop. 1.6), as a float rounded up.

    The returned float is never below :func:`gaussian_rho_exact`, so charging
    it never undercharges; beyond the largest float it is ``math.inf`` (charge
    :func:`gaussian_rho_exact` instead: the ledger refuses it as over budget).
    """
    exact = gaussian_rho_exact(sigma, sensitivity, compositions)
    if exact > _FLOAT_MAX:
        return math.inf
    rho = float(exact)
    while Fraction(rho) < exact:
        rho = math.nextafter(rho, math.inf)
    return rho


def _sqrt_guess(target: Fraction, rho: Number) -> float:
    """A float within a few ulps of √target, for any size of the rational target (no float overflow)."""
    shift = (target.numerator.bit_length() - target.denominator.bit_length()) // 2  # √target ≈ 2**shift
    scaled = target / Fraction(4) ** shift if shift >= 0 else target * Fraction(4) ** -shift  # in [1/4, 4]
    try:
        sigma = math.ldexp(math.sqrt(float(scaled)), shift)
    except OverflowError:
        sigma = math.inf
    if not sys.float_info.min <= sigma < math.inf:
        raise ValueError("rho must give a sigma within the float range (about 1e-300 to 1e300), "
                         f"got rho={show(as_fraction(rho, 'rho'))}")
    return sigma


def gaussian_sigma(rho: Number, sensitivity: Number, compositions: Number = 1) -> float:
    """Smallest float σ with k·Δ²/(2σ²) ≤ ρ exactly, i.e. σ = Δ·√(k/(2ρ)) rounded up.

    σ is the exact binary float returned; ρ is read as printed (the ledger's
    rule; a Fraction is exact); Δ as the larger of its printed and binary values.
    ``mechanisms.noise`` re-exports this as ``gaussian_sigma_for``.

    Parameters
    ----------
    rho : real, > 0
        zCDP budget of the k releases.
    sensitivity : real, > 0
        L2 sensitivity Δ of one release under the charge's neighbouring relation.
    compositions : real, > 0
        Number k of Gaussian releases of sensitivity Δ the budget pays for (a
        rational weight for the tree depth or a factorization's column norm²).
    """
    r = check_exact("rho", rho, 0, low_open=True)
    delta_l2 = _sensitivity(sensitivity)
    target = _compositions(compositions) * delta_l2 * delta_l2 / (2 * r)  # exact σ² lower limit
    sigma = _sqrt_guess(target, rho)
    while Fraction(sigma) ** 2 < target:
        sigma = math.nextafter(sigma, math.inf)
    while Fraction(math.nextafter(sigma, 0.0)) ** 2 >= target:
        sigma = math.nextafter(sigma, 0.0)
    return sigma


def analytic_gaussian_sigma(eps: Number, delta: Number, sensitivity: Number) -> float:
    """σ of the analytic Gaussian mechanism for (ε, δ)-DP (Balle & Wang 2018, Thm 8).

    Delegates to dp-accounting's ``get_sigma_gaussian`` (unit sensitivity,
    Brent with xtol 1e-12), scales by Δ and rounds up past the root-finder's
    tolerance, so Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) ≤ δ holds.
    """
    import dp_accounting

    e = _positive(eps, "eps")
    d = _delta(delta)
    s = _positive(sensitivity, "sensitivity")
    unit = float(dp_accounting.get_sigma_gaussian(e, d, tol=1e-12))
    return (unit * (1.0 + _MARGIN) + 1e-11) * s


def rdp_to_approx(orders: Sequence[float], rdp: Sequence[float], delta: Number) -> float:
    """ε of an RDP curve at δ: min over the given orders of the CKS Prop. 12 bound.

    Delegates to dp-accounting's ``rdp.compute_epsilon``.
    """
    from dp_accounting import rdp as dp_rdp

    d = _delta(delta)
    order_array = np.asarray(orders, dtype=float)
    rdp_array = np.asarray(rdp, dtype=float)
    if order_array.ndim != 1 or order_array.shape != rdp_array.shape or order_array.size == 0:
        raise ValueError("orders and rdp must be non-empty 1-D sequences of the same length")
    if not np.all(np.isfinite(order_array)) or np.any(order_array <= 1.0):
        raise ValueError("orders must be finite and > 1")
    if not np.all(np.isfinite(rdp_array)) or np.any(rdp_array < 0.0):
        raise ValueError("rdp must be finite and >= 0")
    eps, _ = dp_rdp.compute_epsilon(order_array, rdp_array, d)
    return float(eps)
