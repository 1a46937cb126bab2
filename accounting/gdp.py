"""Gaussian differential privacy: the exact (ε, δ) of μ-GDP, its inverse, and pure ε-DP as GDP.

μ-GDP (Dong, Roth & Su 2022, §2) bounds every test between neighbours by
the tradeoff curve G_μ of N(0, 1) against N(μ, 1). It is *equivalent* to the
family of (ε, δ(ε))-DP guarantees for all ε ≥ 0 with (DRS 2022, Cor. 2.13)

    δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2),

so converting a GDP spend to (ε, δ) loses nothing (no Rényi order is chosen).
δ_μ(ε) decreases in ε and increases in μ; both inverses below are found by a
float root finder and then *certified* in 60-digit arithmetic (mpmath): the ε
returned is a rational with δ_μ(ε) ≤ δ, the μ returned a rational with
δ_μ(ε) ≤ δ, each checked with a margin far above mpmath's working error.

The filter: a ledger account in currency ``"gdp"`` grants adaptively chosen
μᵢ-GDP charges while Σμᵢ² ≤ μ_max², which keeps μ_max-GDP under fully adaptive
composition (Smith & Thakurta 2022); see ``docs/accounting.md``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING

from accounting.validation import check_exact

if TYPE_CHECKING:
    import mpmath  # imported where used (60-digit certification): not on the import path

__all__ = [
    "approx_to_gdp",
    "approx_to_gdp_certified",
    "certified_delta",
    "gdp_delta",
    "gdp_to_approx",
    "gdp_to_approx_certified",
    "pure_to_gdp_certified",
]

#: Working precision (decimal digits) of the certificates.
_DIGITS = 60
#: Slack a certificate demands below the target δ, relative (far above 10⁻⁶⁰ working error).
_SLACK = Fraction(1, 10**30)


def gdp_delta(mu: float, eps: float) -> float:
    """δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) in floats (DRS 2022, Cor. 2.13); 0 for μ = 0."""
    if mu <= 0.0:
        return 0.0
    from scipy import special  # lazily: a ledger without a gdp conversion does not import scipy (issue 26)

    a = -eps / mu + mu / 2.0
    b = -eps / mu - mu / 2.0
    return max(0.0, float(special.ndtr(a)) - math.exp(eps + float(special.log_ndtr(b))))


def _delta_mp(mu2: Fraction, eps: Fraction) -> mpmath.mpf:
    """δ_μ(ε) in 60-digit arithmetic from the exact μ² and ε."""
    import mpmath

    with mpmath.workdps(_DIGITS):
        mu = mpmath.sqrt(mpmath.mpf(mu2.numerator) / mu2.denominator)
        e = mpmath.mpf(eps.numerator) / eps.denominator
        return mpmath.ncdf(-e / mu + mu / 2) - mpmath.exp(e) * mpmath.ncdf(-e / mu - mu / 2)


def certified_delta(mu2: Fraction, eps: Fraction, delta: Fraction) -> bool:
    """True when δ_μ(ε) ≤ δ is certain: 60-digit evaluation at least 10⁻³⁰·δ below δ."""
    import mpmath

    if mu2 == 0:
        return True
    value = _delta_mp(mu2, eps)
    with mpmath.workdps(_DIGITS):
        slack = mpmath.mpf(_SLACK.numerator) / _SLACK.denominator
        bound = mpmath.mpf(delta.numerator) / delta.denominator * (1 - slack)
        return bool(value <= bound)


def gdp_to_approx(mu: float, delta: float) -> float:
    """Smallest ε ≥ 0 with δ_μ(ε) ≤ δ (float root of the tradeoff formula)."""
    if mu <= 0.0 or gdp_delta(mu, 0.0) <= delta:
        return 0.0
    high = mu * mu / 2.0 + mu * math.sqrt(2.0 * math.log(1.0 / delta)) + 1.0  # the Gaussian tail bound is above
    while gdp_delta(mu, high) > delta:
        high *= 2.0
    from scipy import optimize  # lazily: scipy.optimize is not on a bandit's import path (issue 26)

    return float(optimize.brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, high, xtol=1e-14, rtol=1e-15))


def approx_to_gdp(eps: float, delta: float) -> float:
    """Largest μ with δ_μ(ε) ≤ δ (float root; δ_μ(ε) increases in μ)."""
    high = 1.0
    while gdp_delta(high, eps) <= delta:
        high *= 2.0
    from scipy import optimize  # lazily: scipy.optimize is not on a bandit's import path (issue 26)

    return float(optimize.brentq(lambda m: gdp_delta(m, eps) - delta, 0.0, high, xtol=1e-15, rtol=1e-15))


@lru_cache(maxsize=4096)
def gdp_to_approx_certified(mu2: Fraction, delta: Fraction) -> Fraction:
    """A rational ε with δ_μ(ε) ≤ δ certified, within ~10⁻⁹ relative of the exact ε of μ-GDP at δ.

    Parameters
    ----------
    mu2 : Fraction
        μ², exact (what a gdp account sums).
    delta : Fraction in (0, 1)
    """
    check_exact("delta", delta, 0, 1, low_open=True, high_open=True)
    if mu2 == 0:
        return Fraction(0)
    eps = gdp_to_approx(math.sqrt(float(mu2)), float(delta))
    margin = 1e-9
    while True:
        candidate = Fraction(math.nextafter(eps * (1.0 + margin) + margin, math.inf))
        if certified_delta(mu2, candidate, delta):
            return candidate
        margin *= 16.0


@lru_cache(maxsize=1024)
def approx_to_gdp_certified(eps: Fraction, delta: Fraction) -> Fraction:
    """A rational μ ≤ the largest μ meeting (ε, δ), certified δ_μ(ε) ≤ δ, within ~10⁻⁹ relative of it.

    A gdp account made from an (ε, δ) share gets μ_max² with this μ_max.
    """
    check_exact("eps", eps, 0)
    check_exact("delta", delta, 0, 1, low_open=True, high_open=True)
    mu = approx_to_gdp(float(eps), float(delta))
    margin = 1e-9
    while mu > 0:
        lowered = mu * (1.0 - margin)
        scale = 10 ** max(0, 15 - math.floor(math.log10(lowered)))
        candidate = Fraction(math.floor(Fraction(lowered) * scale), scale)
        if candidate > 0 and certified_delta(candidate * candidate, eps, delta):
            return candidate
        margin *= 16.0
        if margin > 0.5:
            break
    raise ValueError(f"no mu > 0 meets (eps={float(eps)}, delta={float(delta)}) in certified arithmetic")


def pure_to_gdp_certified(eps: Fraction) -> Fraction:
    """A rational μ ≥ 2Φ⁻¹(e^ε/(1 + e^ε)): ε-DP implies μ-GDP with this μ, the smallest such.

    The pure tradeoff f_ε(α) = max(0, 1 − e^ε α, e^{−ε}(1 − α)) is linear between
    (0, 1) and its fixed point α* = 1/(1 + e^ε) (and symmetric beyond). G_μ is
    convex, equals 1 at 0 and crosses the diagonal at Φ(−μ/2); with
    Φ(−μ/2) = α* it meets f_ε at both ends of that chord, so it lies below it:
    G_μ ≤ f_ε, i.e. ε-DP ⇒ μ-GDP (DRS 2022, f-DP and symmetric
    tradeoffs, §2). No smaller μ works, since G_μ(α*) > α* = f_ε(α*) then.
    """
    import mpmath

    if check_exact("eps", eps, 0) == 0:
        return Fraction(0)
    if eps > 2000:
        # Φ̄(x) ≤ e^{−x²/2}/2, so Φ̄(√(2ε)) ≤ e^{−ε}/2 ≤ 1/(1 + e^ε): μ = 2√(2ε) dominates; an integer at or
        # above it. Costs this large are only ever refused, but must be refused as BudgetExceeded.
        return Fraction(math.isqrt(math.ceil(8 * eps)) + 1)
    with mpmath.workdps(_DIGITS + int(eps)):  # 1 − tail keeps 60 digits for any ε
        e = mpmath.mpf(eps.numerator) / eps.denominator
        # Φ⁻¹(e^ε/(1+e^ε)) = −Φ⁻¹(1/(1+e^ε)), computed on the small tail for accuracy.
        tail = 1 / (1 + mpmath.exp(e))
        mu = -2 * mpmath.sqrt(2) * mpmath.erfinv(2 * tail - 1)
        scaled = mpmath.ceil(mu * 10**18 * (1 + mpmath.mpf(10) ** -30))
    return Fraction(int(scaled), 10**18)
