"""The time-uniform pair threshold (docs/bai-threshold.md): its numerical lower bound and a Monte Carlo check.

The Monte Carlo check drives the real :class:`mechanisms.geometric.GeometricBatchMean`
(so it covers whatever noise the estimator actually draws) over a grid of means and
privacy levels, and counts runs in which *some* pair of phases (k_a, k_b) — every
combination, i.e. any sampling rule — has Ñ_a d⁻_ε(μ̃_a, μ_a) + Ñ_b d⁺_ε(μ̃_b, μ_b) > c(k_a, k_b).
"""

import numpy as np
import pytest
from scipy.stats import beta as beta_dist

from accounting import Ledger, PureDP
from dpglm.bai.divergences import d_minus, d_plus
from dpglm.bai.mixture_threshold import (
    MixtureThreshold,
    discrete_laplace_log_mgf,
    laplace_log_mgf,
)
from dpglm.bai.thresholds import LaplaceTailThreshold
from mechanisms.geometric import GeometricBatchMean


def _log_phi_reference(f, k, n, eps, w0=0.1):
    """min over a fine u grid of log(w0 + (1 − w0) J(u, F)), J by a dense trapezoid rule (independent of the table)."""
    u_min = min(1.0, np.sqrt(8 * f / n) / eps)
    v = np.linspace(0.0, 60.0, 600_001)
    best = np.inf
    for u in np.unique(np.concatenate([np.geomspace(u_min, 1.0, 25), [1.0]])):
        th = u * np.exp(-v)
        y = np.exp(f * (np.exp(-v) - 1)) * np.clip(1 - th * th, 0, None) ** k / (1 + np.log(1 / u) + v) ** 2
        best = min(best, np.logaddexp(np.log(w0), np.log1p(-w0) + f + np.log(np.trapezoid(y, v))))
    return best


@pytest.mark.parametrize("eps,k", [(1e-3, 20), (0.1, 8), (10.0, 12)])
def test_table_is_below_the_quadrature_of_the_mixture(eps, k):
    th = MixtureThreshold(5, 0.01, eps)
    g = th.log_phi_lower(k)
    n = th.points[k - 1]
    for f in (2.0, 10.0, 30.0, 60.0):
        ref = _log_phi_reference(f, k, n, eps)
        got = g[np.searchsorted(th.f, f)]
        assert got <= ref + 1e-6  # a lower bound ...
        assert got >= ref - 0.35  # ... and not a loose one (grid losses only)


def test_pair_threshold_is_below_two_per_arm_union_thresholds_and_symmetric():
    th = MixtureThreshold(5, 0.01, 1e-3)
    old = LaplaceTailThreshold(5, 0.01)
    for k in (3, 10, 22):
        assert th.pair(k, k) < 0.75 * 2 * old(np.array([k]))[0]
    assert th.pair(4, 9) == th.pair(9, 4)
    np.testing.assert_array_equal(th(np.array([[4]]), np.array([9, 4])), [[th.pair(4, 9), th.pair(4, 4)]])
    # Ĝ ≤ F + log(1 − w₀) for w₀ = 0.1, so c ≥ log((K − 1)/δ) − 2 log(1/0.9)
    assert th.pair(1, 1) > np.log(4 / 0.01) - 2 * np.log(1 / 0.9)
    with pytest.raises(ValueError, match="epsilon"):
        MixtureThreshold(5, 0.01, float("inf"))


def test_continuous_laplace_mgf_dominates_the_discrete_one_of_the_same_scale():
    """So a threshold built for Lap(b) stays valid if the estimator draws discrete Laplace of scale b instead."""
    theta = np.linspace(0.0, 0.999, 400)
    for t in (1, 2, 3, 10, 1000):
        for kappa in (1.0, 1.7):
            assert np.all(discrete_laplace_log_mgf(t, kappa)(theta) <= laplace_log_mgf(kappa)(theta) + 1e-12)


def test_discrete_laplace_mgf_tends_to_the_continuous_one_and_matches_its_series():
    theta = np.array([0.1, 0.5, 0.9])
    np.testing.assert_allclose(discrete_laplace_log_mgf(10**6)(theta), laplace_log_mgf()(theta), rtol=1e-6)
    # the lattice's scale in grid units reaches 2^41 and more: still exact
    np.testing.assert_allclose(discrete_laplace_log_mgf(2**41)(theta), laplace_log_mgf()(theta), rtol=1e-9)
    # t = 1, s = θ: log of Σ_z tanh(1/2) e^{−|z|} e^{sz}, summed directly
    z = np.arange(-2000, 2001)
    direct = [np.log(np.sum(np.tanh(0.5) * np.exp(-np.abs(z) + s * z))) for s in theta]
    np.testing.assert_allclose(discrete_laplace_log_mgf(1)(theta), direct, rtol=1e-12)


def _deviation_paths(mu, eps, runs, phases, rng):
    """Ñ d⁻(μ̃, μ), Ñ d⁺(μ̃, μ) and μ̃ at every phase k = 1..phases, from GeometricBatchMean's releases."""
    ledgers = [Ledger(PureDP(eps)) for _ in range(runs)]
    mech = GeometricBatchMean([ledger.root for ledger in ledgers], 1, eps, rng)
    over, under, means = (np.empty((runs, phases)) for _ in range(3))
    for k in range(phases):
        add = (mech.next_refresh - mech.counts).astype(np.int64)
        released = mech.observe(add, rng.binomial(add, mu).astype(float))
        noisy = np.array([rel.value for _, _, rel in released])
        n = mech.phase_counts[:, 0].astype(float)
        m = np.clip(noisy / n, 0.0, 1.0)
        over[:, k] = n * d_minus(m, np.full_like(m, mu), eps)
        under[:, k] = n * d_plus(m, np.full_like(m, mu), eps)
        means[:, k] = m
    return over, under, means


def _crossing_runs(mu_a, mu_b, eps, delta, runs, phases, seed):
    """Runs where some phase pair has D > c(k_a, k_b; μ̃_a, μ̃_b) (the data-dependent threshold the rule uses)."""
    th = MixtureThreshold(2, delta, eps)
    rng = np.random.default_rng(seed)
    over, _, m_a = _deviation_paths(mu_a, eps, runs, phases, rng)
    _, under, m_b = _deviation_paths(mu_b, eps, runs, phases, rng)
    k = np.arange(1, phases + 1)
    hits = 0
    for r in range(runs):
        # rows = phases of arm a (the over-estimated lead), columns = phases of arm b
        c = th.pair_data(k, m_a[r], np.broadcast_to(k, (phases, phases)), np.broadcast_to(m_b[r], (phases, phases)))
        hits += bool(np.any(over[r][:, None] + under[r][None, :] > c))
    return hits


@pytest.mark.parametrize("eps,pairs,slow", [(1.0, [(0.0, 1.0), (0.9, 0.95)], False)] + [
    pytest.param(e, [(0.0, 1.0), (0.5, 0.5), (0.05, 0.95), (0.9, 0.95), (0.001, 0.999)], True, marks=pytest.mark.slow)
    for e in (0.01, 1.0, 100.0)])
def test_monte_carlo_crossings_stay_below_delta(eps, pairs, slow):
    """K = 2, δ = 0.2: the crossing probability over all phase pairs up to 2^11 must not exceed δ.

    The Clopper–Pearson 99% lower limit of the crossing rate must stay below δ.
    The threshold is the data-dependent one the stopping rule uses (pair_data).
    Measured (300 runs, 12 phases; mean pairs (0, 1), (½, ½), (0.05, 0.95), (0.9, 0.95),
    (0.001, 0.999)): 1/0/0/0/1 crossings at ε = 0.01, 5/1/1/0/2 at ε = 1, 3/0/0/0/0 at ε = 100.
    """
    delta, runs, phases = 0.2, (300 if slow else 120), (12 if slow else 10)
    for s, (mu_a, mu_b) in enumerate(pairs):
        hits = _crossing_runs(mu_a, mu_b, eps, delta, runs, phases, (int(eps * 100), s))
        lo = 0.0 if hits == 0 else beta_dist.ppf(0.005, hits, runs - hits + 1)
        assert lo < delta, (mu_a, mu_b, hits)


def test_data_dependent_threshold_is_below_the_data_free_one():
    """pair_data only narrows the range of λ*/ε, so it is never above pair(); at small ε nothing changes."""
    for eps in (1e-3, 46.4):
        th = MixtureThreshold(5, 0.01, eps)
        k = np.array([[6, 12, 20]])
        m = np.array([[0.9, 0.85, 0.999]])
        got = th.pair_data(np.array([12]), np.array([0.9]), k, m, np.array([1]))
        free = th(np.full_like(k, 12), k)
        assert np.isinf(got[0, 1]) and np.all(got[0, [0, 2]] <= free[0, [0, 2]])
        if eps < 1:
            np.testing.assert_array_equal(got[0, [0, 2]], free[0, [0, 2]])
        else:  # the noise penalty is gone for interior means: about half
            assert np.all(got[0, [0, 2]] < 0.7 * free[0, [0, 2]])
