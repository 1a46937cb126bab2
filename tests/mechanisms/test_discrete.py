"""Exact samplers: their laws against closed-form pmfs (chi-square, exact tail masses), fixed seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from mechanisms import discrete
from mechanisms.discrete import bernoulli_exp, discrete_gaussian, discrete_laplace


def _chi_square_p(draws: np.ndarray, pmf: dict[int, float]) -> float:
    """Chi-square p-value of integer draws against a pmf; values outside ``pmf`` lumped with its complement."""
    support = sorted(pmf)
    observed = np.array([np.sum(draws == k) for k in support] + [np.sum(~np.isin(draws, support))], dtype=float)
    probs = np.array([pmf[k] for k in support] + [max(0.0, 1.0 - sum(pmf.values()))])
    expected = probs * draws.size
    keep = expected > 5
    rest = observed[~keep].sum(), expected[~keep].sum()
    observed = np.append(observed[keep], rest[0])
    expected = np.append(expected[keep], rest[1])
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    return float(stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue)


def _laplace_pmf(t: int, radius: int) -> dict[int, float]:
    c = math.tanh(1 / (2 * t))  # (1 − e^{−1/t}) / (1 + e^{−1/t})
    return {k: c * math.exp(-abs(k) / t) for k in range(-radius, radius + 1)}


def _gaussian_pmf(sigma2: float, radius: int) -> dict[int, float]:
    ks = np.arange(-60 * int(math.sqrt(sigma2) + 1) - radius, 60 * int(math.sqrt(sigma2) + 1) + radius + 1)
    weights = np.exp(-ks.astype(float) ** 2 / (2 * sigma2))
    total = weights.sum()
    return {int(k): float(w / total) for k, w in zip(ks, weights, strict=True) if abs(k) <= radius}


@pytest.mark.parametrize("p, q", [(1, 3), (2, 2), (0, 5), (7, 2**61)])
def test_bernoulli_exp_mean(p, q):
    rng = np.random.default_rng(1)
    n = 200_000
    draws = bernoulli_exp(rng, np.full(n, p, dtype=np.int64), q)
    target = math.exp(-p / q)
    assert abs(draws.mean() - target) < 5 * math.sqrt(target * (1 - target) / n) + 1e-12


@pytest.mark.parametrize("t", [1, 3, 10])
def test_discrete_laplace_law(t):
    draws = discrete_laplace(np.random.default_rng(2), t, 300_000)
    assert _chi_square_p(draws, _laplace_pmf(t, 12 * t)) > 1e-4


def test_discrete_laplace_large_scale_tail_masses():
    t = 2**40
    draws = discrete_laplace(np.random.default_rng(3), t, 400_000)
    n = draws.size
    for k in (t // 2, t, 3 * t):
        # P(|Y| ≥ k) = 2·tanh(1/(2t))·e^{−k/t}/(1 − e^{−1/t}) = 2e^{−k/t}/(1 + e^{−1/t}), exactly.
        exact = 2 * math.exp(-k / t) / (1 + math.exp(-1 / t))
        assert abs(np.mean(np.abs(draws) >= k) - exact) < 5 * math.sqrt(exact * (1 - exact) / n)
    assert abs(np.mean(draws > 0) - np.mean(draws < 0)) < 5 * math.sqrt(0.5 / n)


@pytest.mark.parametrize("sigma2", [1, 2, 7, 30])
def test_discrete_gaussian_law(sigma2):
    draws = discrete_gaussian(np.random.default_rng(4), sigma2, 300_000)
    assert _chi_square_p(draws, _gaussian_pmf(sigma2, 8 * int(math.sqrt(sigma2) + 1))) > 1e-4


def test_discrete_gaussian_exact_path_law():
    """Widened float enclosures force the rational resolution of coins and of ⌊γ⌋; the law must not move."""
    draws = discrete.discrete_gaussian(np.random.default_rng(5), 7, 60_000, _widen=0.4)
    assert _chi_square_p(draws, _gaussian_pmf(7, 20)) > 1e-4


def test_acceptance_beyond_float_range_is_exact():
    """|Y| ≥ 2^53 takes the rational path: acceptance exp(−γ) with γ ~ 2^100 is 0."""
    rng = np.random.default_rng(6)
    magnitude = np.array([2**53 + 3, 2**60], dtype=np.int64)
    assert not discrete._accept_gaussian(rng, magnitude, 5, 16).any()


def test_discrete_gaussian_grid_scale_tail_masses():
    """σ² = 2^56 (the grid's scale): tail masses match the Gaussian to far below the sampling error."""
    sigma2 = 2**56
    sigma = 2.0**28
    draws = discrete_gaussian(np.random.default_rng(7), sigma2, 400_000).astype(float)
    n = draws.size
    for k in (0.5, 1.0, 2.0, 3.0):
        exact = 2 * stats.norm.sf(k)  # discretisation error O(1/σ) ~ 1e-8
        assert abs(np.mean(np.abs(draws) >= k * sigma) - exact) < 5 * math.sqrt(exact * (1 - exact) / n)


@pytest.mark.parametrize("sigma2, shift", [(1, 1), (3, 1), (3, 2), (10, 3)])
def test_discrete_gaussian_renyi_matches_zcdp(sigma2, shift):
    """CKS 2020 Thm 4: D_α(N_ℤ(0, σ²) ‖ N_ℤ(Δ, σ²)) ≤ αΔ²/(2σ²) for integer Δ, checked numerically."""
    ks = np.arange(-400, 401).astype(float)
    log_p = -ks**2 / (2 * sigma2) - special.logsumexp(-ks**2 / (2 * sigma2))
    log_q = -(ks - shift) ** 2 / (2 * sigma2) - special.logsumexp(-(ks - shift) ** 2 / (2 * sigma2))
    for alpha in (1.5, 2.0, 5.0, 20.0):
        renyi = special.logsumexp(alpha * log_p + (1 - alpha) * log_q) / (alpha - 1)
        assert renyi <= alpha * shift**2 / (2 * sigma2) * (1 + 1e-12)


@pytest.mark.parametrize("call, error", [
    (lambda rng: discrete_laplace(rng, 0, 3), ValueError),
    (lambda rng: discrete_laplace(rng, 2**53, 3), ValueError),
    (lambda rng: discrete_laplace(rng, 2.5, 3), TypeError),
    (lambda rng: discrete_gaussian(rng, 0, 3), ValueError),
    (lambda rng: discrete_gaussian(rng, True, 3), TypeError),
    (lambda rng: discrete_gaussian(rng, 4, -1), ValueError),
])
def test_bad_arguments(call, error):
    with pytest.raises(error):
        call(np.random.default_rng(0))


def test_zero_size_and_determinism():
    assert discrete_gaussian(np.random.default_rng(0), 4, 0).shape == (0,)
    a = discrete_gaussian(np.random.default_rng(9), 2**50, 1000)
    b = discrete_gaussian(np.random.default_rng(9), 2**50, 1000)
    assert np.array_equal(a, b)


def test_split_coin_draws_one_uniform_per_element():
    """Bernoulli(p/(qK)) with qK ≥ 2^62 (two draws a coin): independent per element for an int q as for an array.

    Reached by σ² ≈ 2^30 (its integer route's denominator 2σ²t² ≈ 2^61, K = 2); a single
    shared uniform would make every coin of the call equal in its second factor.
    """
    q = 2**61 + 1
    p = np.full(20000, q // 2, dtype=np.int64)
    for bound in (q, np.full(20000, q, dtype=np.int64)):
        heads = discrete._coin(np.random.default_rng(5), p, bound, 2)
        assert 0.24 < heads.mean() < 0.26  # P = 1/2 · 1/2
