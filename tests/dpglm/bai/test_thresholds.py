"""The provable GLR threshold: Gamma tail, the lemma checked by Monte Carlo, docs/references.md's candidate."""

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import brentq

from dpglm.bai.divergences import d_minus
from dpglm.bai.thresholds import (
    ZETA2,
    ChernoffThreshold,
    GammaThreshold,
    HeuristicThreshold,
    LaplaceTailThreshold,
    laplace_sum_tail,
    laplace_tail,
    worst_case_quantile,
)


def test_threshold_is_the_gamma_quantile():
    K, delta = 5, 0.01
    th = GammaThreshold(K, delta)
    for k in (1, 2, 7, 30):
        assert stats.gamma(k + 1).sf(th(k)) == pytest.approx(delta / (K * ZETA2 * k**2), rel=1e-8)
    assert th(np.array([1, 2])).shape == (2,)
    with pytest.raises(ValueError, match="phase"):
        th(0)
    with pytest.raises(ValueError, match="delta"):
        GammaThreshold(5, 1.5)
    assert GammaThreshold.provable and not HeuristicThreshold.provable


@pytest.mark.parametrize("k, mu, eps", [(3, 0.3, 0.5), (5, 0.8, 0.05), (4, 0.5, 5.0)])
def test_lemma_tail_bound_by_monte_carlo(k, mu, eps):
    """P[n·d⁻_ε(clip μ̃, μ) > x] ≤ T_k(x) ≤ P[Gamma(k + 1) > x] at n = 2^{k−1}, μ̃ = (S_n + Σ_k Lap(1/ε))/n."""
    rng = np.random.default_rng(7)
    n, m = 2 ** (k - 1), 400_000
    s = rng.binomial(n, mu, m)
    lap = rng.laplace(0, 1 / eps, (m, k)).sum(axis=1)
    est = np.clip((s + lap) / n, 0, 1)
    stat = n * d_minus(est, np.full(m, mu), eps)  # overestimation side
    stat_up = n * d_minus(1 - est, np.full(m, 1 - mu), eps)  # underestimation side (d⁺ by symmetry)
    for x in (2.0, 4.0, 7.0):
        bound = laplace_tail(x, k)
        assert bound <= stats.gamma(k + 1).sf(x)
        for st in (stat, stat_up):
            emp = np.mean(st > x)
            # empirical tail within its own Monte-Carlo noise of the bound (3 sd)
            assert emp <= bound + 3 * np.sqrt(bound / m) + 1e-6


def test_bai_md_candidate_is_valid_and_looser():
    """docs/references.md's candidate c − k(1 + log(c/k)) = log(2Kζ(2)k²/δ) meets the Gamma(k+1) bound too."""
    K, delta = 5, 0.01
    th = GammaThreshold(K, delta)
    for k in range(1, 257):
        level = np.log(2 * K * ZETA2 * k**2 / delta)
        cand = brentq(lambda c, k=k, level=level: c - k * (1 + np.log(c / k)) - level, k * 1.0000001, 1e5)
        assert stats.gamma(k + 1).sf(cand) <= delta / (K * ZETA2 * k**2)
        assert cand > th(k)


def test_heuristic_is_half_log_of_one_plus_log_n_over_delta():
    h = HeuristicThreshold(5, 0.01)
    assert float(h(3, 100)) == pytest.approx(0.5 * np.log((1 + np.log(100)) / 0.01))


def test_laplace_tail_matches_monte_carlo():
    """T_k(c) = P[E + (ΣL)⁺ > c] against a direct simulation (sd ≈ 3e-4)."""
    rng = np.random.default_rng(0)
    m = 1_000_000
    for k in (1, 3):
        w = rng.laplace(0, 1, (m, k)).sum(axis=1)
        e = rng.exponential(1, m)
        for c in (2.0, 5.0, 8.0):
            assert laplace_tail(c, k) == pytest.approx(np.mean(e + np.maximum(w, 0) > c), abs=1.5e-3)
    assert laplace_tail(0.0, 2) == 1.0


def test_default_threshold_solves_its_tail_and_beats_gamma():
    K, delta = 5, 0.01
    th, gamma = LaplaceTailThreshold(K, delta), GammaThreshold(K, delta)
    for k in (1, 4, 20):
        assert laplace_tail(float(th(k)), k) == pytest.approx(delta / (K * ZETA2 * k**2), rel=1e-6)
        assert th(k) < gamma(k)
    assert th(20) < gamma(20) - 10  # ~0.7 nat per Laplace term
    assert LaplaceTailThreshold.provable


def test_laplace_sum_tail_closed_form_and_monte_carlo():
    assert laplace_sum_tail(2.0, 1) == pytest.approx(0.5 * np.exp(-2.0), rel=1e-12)
    # k = 2: P[W > x] = e^{-x}(2 + x)/4, from the convolution of two Laplace densities
    assert laplace_sum_tail(3.0, 2) == pytest.approx(np.exp(-3.0) * 5 / 4, rel=1e-12)
    rng = np.random.default_rng(1)
    w = rng.laplace(0, 1, (1_000_000, 6)).sum(axis=1)
    for x in (0.0, 2.0, 6.0, 10.0):
        assert laplace_sum_tail(x, 6) == pytest.approx(np.mean(w > x), abs=1.5e-3)


@pytest.mark.parametrize("eps", [0.01, 1.0, 100.0])
def test_arm_with_mean_zero_has_statistic_w_plus_whatever_eps(eps):
    """At μ = 0, n·d⁻_ε(μ̃, 0) = min((εΣL)⁺, εn) exactly: the worst case does not improve as ε grows."""
    rng = np.random.default_rng(2)
    k, n = 4, 8
    lap = rng.laplace(0, 1 / eps, (2000, k)).sum(axis=1)
    est = np.clip(lap / n, 0, 1)
    stat = n * d_minus(est, np.zeros_like(est), eps)
    np.testing.assert_allclose(stat, np.minimum(np.maximum(eps * lap, 0), eps * n), rtol=1e-12, atol=1e-12)


def test_default_threshold_is_within_two_nats_of_the_worst_case_quantile():
    K, delta = 5, 0.01
    th = LaplaceTailThreshold(K, delta)
    for k in (1, 5, 13, 25):
        target = delta / (K * ZETA2 * k**2)
        lower = worst_case_quantile(k, target)
        assert laplace_sum_tail(lower, k) == pytest.approx(target, rel=1e-6)
        assert lower < th(k) < lower + 2.5


def test_chernoff_threshold_for_non_private_means():
    th = ChernoffThreshold(5, 0.01)
    assert float(th(1, 100)) == pytest.approx(np.log(5 * ZETA2 * 100**2 / 0.01))
    # the union it pays for sums to δ: Σ_n K e^{−c(n)} = δ
    n = np.arange(1, 2_000_001, dtype=float)
    assert 5 * np.exp(-th(1, n)).sum() == pytest.approx(0.01, rel=1e-6)
    with pytest.raises(ValueError, match="count"):
        th(1, 0)
