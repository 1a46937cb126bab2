"""The discrete Gaussian as Gaussian DP: μ′ dominates it (dp-accounting's PLD of the two pmfs), Δ/σ does not."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution
from scipy import special

from accounting.gdp import gdp_delta
from mechanisms.discrete import discrete_gaussian_gdp_mu

EPSILONS = np.linspace(0.0, 8.0, 33)


def _pld(sigma2: int, shift: int):
    """dp-accounting's PLD of N_ℤ(0, σ²) against N_ℤ(Δ, σ²), from the two (log) pmfs on a ±60σ window."""
    radius = 60 * math.isqrt(sigma2) + 60 + shift
    ks = np.arange(-radius, radius + 1)
    log_w0 = -(ks.astype(float) ** 2) / (2 * sigma2)
    log_w1 = -((ks - shift).astype(float) ** 2) / (2 * sigma2)
    log_p0 = log_w0 - special.logsumexp(log_w0)
    log_p1 = log_w1 - special.logsumexp(log_w1)
    keep = (log_p0 > -700) | (log_p1 > -700)
    return privacy_loss_distribution.from_two_probability_mass_functions(
        dict(zip(ks[keep].tolist(), log_p0[keep].tolist(), strict=True)),
        dict(zip(ks[keep].tolist(), log_p1[keep].tolist(), strict=True)),
        value_discretization_interval=1e-5)


@pytest.mark.parametrize("sigma2, shift", [(1, 1), (100, 1), (4, 2), (2, 3)])
def test_mu_prime_dominates_the_discrete_gaussian(sigma2, shift):
    mu_prime = discrete_gaussian_gdp_mu(sigma2, shift)
    assert mu_prime >= shift / math.sqrt(sigma2)
    pld = _pld(sigma2, shift)
    for eps in EPSILONS:
        assert pld.get_delta_for_epsilon(eps) <= gdp_delta(mu_prime, eps) + 1e-12, eps


def test_the_discrete_gaussian_is_not_delta_over_sigma_gdp():
    """At Δ = σ = 1, ε = 4.29 the discrete Gaussian's δ is ~2× the 1-GDP δ (2.6e-5 vs 1.4e-5)."""
    delta_discrete = _pld(1, 1).get_delta_for_epsilon(4.29)
    assert delta_discrete > 1.5 * gdp_delta(1.0, 4.29)
    assert math.isclose(delta_discrete, 2.6e-5, rel_tol=0.05)


def _gaussianised_cdf_gap(sigma2: int, shift: int, window: int) -> float:
    """sup_k Φ⁻¹(F(k)) − Φ⁻¹(F(k − Δ)) over |k| ≤ window, in 50-digit arithmetic (the exact criterion)."""
    with mpmath.workdps(50):
        radius = window + 200
        weights = [mpmath.exp(-mpmath.mpf(y) ** 2 / (2 * sigma2)) for y in range(-radius, radius + 1)]
        total = mpmath.fsum(weights)
        cdf, running = {}, mpmath.mpf(0)
        for y, w in zip(range(-radius, radius + 1), weights, strict=True):
            running += w
            cdf[y] = running / total
        zeta = {k: mpmath.sqrt(2) * mpmath.erfinv(2 * cdf[k] - 1) for k in range(-window - shift, window + 1)}
        return float(max(zeta[k] - zeta[k - shift] for k in range(-window, window + 1)))


def test_exact_criterion_lies_between_delta_over_sigma_and_mu_prime():
    """σ = 1, Δ = 1: the smallest dominating μ is 1.0458 (4.6% above Δ/σ); μ′ = 2 + 1e-8 is above it."""
    gap = _gaussianised_cdf_gap(1, 1, 12)
    assert 1.04 < gap < discrete_gaussian_gdp_mu(1, 1)
    pld = _pld(1, 1)
    for eps in EPSILONS:
        assert pld.get_delta_for_epsilon(eps) <= gdp_delta(gap * (1 + 1e-4), eps) + 1e-9, eps


def test_bad_arguments():
    with pytest.raises(ValueError, match="sensitivity"):
        discrete_gaussian_gdp_mu(4, 0.0)
    with pytest.raises(ValueError, match="sigma2"):
        discrete_gaussian_gdp_mu(0, 1.0)


@pytest.mark.parametrize("sigma, sensitivity, entries", [(1.0, 1.0, 1), (8.3, 1.414, 9), (0.01, 2.0, 100)])
def test_lattice_gdp_mu_is_barely_above_delta_over_sigma(sigma, sensitivity, entries):
    """On the mechanisms' grids the GDP price of discreteness is ~2⁻²⁸·(σ/Δ)·√m relative."""
    from mechanisms.lattice import GaussianLattice

    lattice = GaussianLattice(sigma, sensitivity, entries)
    mu = lattice.gdp_mu(sensitivity, entries)
    nominal = sensitivity / sigma
    assert nominal <= mu <= nominal * (1 + 8 * 2.0**-28 * max(1.0, sigma / sensitivity) * math.sqrt(entries))
