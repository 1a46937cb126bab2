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
        MixtureThreshold(5, 0.01, 0.0)
    # ε = ∞ is allowed (no noise, λ unbounded): without the means λ* has no upper bound,
    # so the data-free threshold never lets a pair stop
    assert MixtureThreshold(5, 0.01, float("inf")).pair(3, 3) == np.inf


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


# --- the weighted estimator (docs/bai-threshold.md, "Weighted") -------------------------------------

def _log_phi_weighted_reference(f, th, k, w0=0.1):
    """min over a fine u grid of log(w0 + (1 − w0) J(u, F)) with the two-sided prior and Σ_j φ(θ v_j), by trapezoids."""
    n, v, shift = th.phase(k)
    shift -= th.centre
    u_min = min(1.0, np.sqrt(8 * f / n) / th.epsilon)
    x = np.linspace(0.0, 60.0, 300_001)
    best = np.inf
    for u in np.unique(np.concatenate([np.geomspace(u_min, 1.0, 25), [1.0]])):
        th_ = u * np.exp(-x)
        pen = np.prod([np.clip(1 - (th_ * vj) ** 2, 0, None) for vj in v], axis=0)
        y = np.exp(f * (np.exp(-x) - 1)) * pen * 0.5 / (1 + np.abs(shift + np.log(u) - x)) ** 2
        best = min(best, np.logaddexp(np.log(w0), np.log1p(-w0) + f + np.log(np.trapezoid(y, x))))
    return best


@pytest.mark.parametrize("eps,k", [(1e-3, 20), (0.05, 9), (3.0, 12)])
def test_weighted_table_is_below_the_quadrature_of_its_mixture(eps, k):
    th = MixtureThreshold(5, 0.01, eps, estimator="weighted", noise_log_mgf=laplace_log_mgf(1.0))
    g = th.log_phi_lower(k)
    for f in (2.0, 10.0, 30.0):
        ref = _log_phi_weighted_reference(f, th, k)
        got = g[np.searchsorted(th.f, f)]
        assert got <= ref + 1e-6
        assert got >= ref - 0.5


def test_weighted_phase_matches_the_estimator_and_the_closed_form():
    from dpglm.bai.estimators import PrivateEstimator, WeightedEstimator
    from dpglm.bai.mixture_threshold import batch_weights

    eps = 0.01
    th = MixtureThreshold(3, 0.1, eps, estimator="weighted")
    # η = 1: batches 1, 1, 2, 4, ..., 2^{k−2}; w = m/(m + 8/ε²); W_k = Σ m_j w_j / max w
    sizes = np.array([1, 1] + [2**j for j in range(1, 11)], dtype=float)
    w = sizes / (sizes + 8e4)
    np.testing.assert_allclose(batch_weights(sizes, eps), w)
    np.testing.assert_allclose(th.phase(12)[0], np.sum(sizes * w) / w.max())
    est = WeightedEstimator(PrivateEstimator(2, 3, eps, np.random.default_rng(0), eta=1.0, forget=False), eps)
    rng = np.random.default_rng(1)
    for _ in range(12):
        add = (est.next_refresh - est.counts).astype(np.int64)
        est.observe(add, rng.binomial(add, 0.5).astype(float))
    np.testing.assert_allclose(est.phase_counts, th.phase(12)[0], rtol=1e-12)
    assert np.all(est.phases == 12)


def _weighted_paths(mu, eps, runs, phases, rng):
    """W d⁻(μ̃, μ), W d⁺(μ̃, μ) and μ̃ per phase of the weighted estimator over GeometricBatchMean's own releases."""
    from dpglm.bai.estimators import PrivateEstimator, WeightedEstimator

    est = WeightedEstimator(PrivateEstimator(runs, 1, eps, rng, eta=1.0, forget=False), eps)
    over, under, means = (np.empty((runs, phases)) for _ in range(3))
    for k in range(phases):
        add = (est.next_refresh - est.counts).astype(np.int64)
        est.observe(add, rng.binomial(add, mu).astype(float))
        n, m = est.phase_counts[:, 0], est.means()[:, 0]
        over[:, k] = n * d_minus(m, np.full_like(m, mu), eps)
        under[:, k] = n * d_plus(m, np.full_like(m, mu), eps)
        means[:, k] = m
    return over, under, means


@pytest.mark.parametrize("eps,pairs,runs", [(0.05, [(0.0, 1.0), (0.5, 0.5)], 100)] + [
    pytest.param(e, [(0.0, 1.0), (0.5, 0.5), (0.05, 0.95), (0.9, 0.95)], 300, marks=pytest.mark.slow)
    for e in (0.002, 0.05, 2.0)])
def test_weighted_monte_carlo_crossings_stay_below_delta(eps, pairs, runs):
    """As the cumulative check, for the weighted estimator: every phase pair up to 2^11, K = 2, δ = 0.2."""
    delta, phases = 0.2, 12
    th = MixtureThreshold(2, delta, eps, estimator="weighted")
    k = np.arange(1, phases + 1)
    for s, (mu_a, mu_b) in enumerate(pairs):
        rng = np.random.default_rng((int(eps * 1000), s, 7))
        over, _, m_a = _weighted_paths(mu_a, eps, runs, phases, rng)
        _, under, m_b = _weighted_paths(mu_b, eps, runs, phases, rng)
        hits = 0
        for r in range(runs):
            c = th.pair_data(k, m_a[r], np.broadcast_to(k, (phases, phases)), np.broadcast_to(m_b[r], (phases, phases)))
            hits += bool(np.any(over[r][:, None] + under[r][None, :] > c))
        lo = 0.0 if hits == 0 else beta_dist.ppf(0.005, hits, runs - hits + 1)
        assert lo < delta, (eps, mu_a, mu_b, hits)


@pytest.mark.parametrize("runs,pairs", [(40, [(0.9, 0.95)])] + [
    pytest.param(300, [(0.5, 0.5), (0.9, 0.95), (0.2, 0.3)], marks=pytest.mark.slow)])
def test_infinite_epsilon_threshold_covers_exact_means_over_every_count(runs, pairs):
    """ε = ∞, every count a phase (EB-TCI with DP-TT's threshold): crossings over counts ≤ 400 stay below δ = 0.2."""
    from dpglm.bai.divergences import kl

    delta, n_max = 0.2, 400
    th = MixtureThreshold(2, delta, float("inf"), schedule="every-count")
    n = np.arange(1, n_max + 1)
    for s, (mu_a, mu_b) in enumerate(pairs):
        rng = np.random.default_rng((11, s))
        hits = 0
        for _ in range(runs):
            m_a = np.cumsum(rng.random(n_max) < mu_a) / n
            m_b = np.cumsum(rng.random(n_max) < mu_b) / n
            over = n * np.where(m_a > mu_a, kl(m_a, np.full(n_max, mu_a)), 0.0)
            under = n * np.where(m_b < mu_b, kl(m_b, np.full(n_max, mu_b)), 0.0)
            ka = kb = np.array([2, 3, 5, 8, 13, 20, 30, 50, 80, 120, 180, 270, 400])  # a grid of count pairs
            c = th.pair_data(ka, m_a[ka - 1], np.broadcast_to(kb, (ka.size, kb.size)),
                             np.broadcast_to(m_b[kb - 1], (ka.size, kb.size)))
            hits += bool(np.any(over[ka - 1][:, None] + under[kb - 1][None, :] > c))
        lo = 0.0 if hits == 0 else beta_dist.ppf(0.005, hits, runs - hits + 1)
        assert lo < delta, (mu_a, mu_b, hits)
