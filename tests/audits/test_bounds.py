"""Lower-bound formulas against closed forms, scipy's exact binomial interval and dp-accounting."""

import math

import numpy as np
import pytest
from dp_accounting import get_sigma_gaussian
from dp_accounting.pld import privacy_loss_distribution
from scipy import special, stats

from audits.bounds import (
    clopper_pearson_upper,
    epsilon_from_rates,
    epsilon_lower_bound,
    gdp_delta,
    gdp_epsilon,
    gdp_mu_for_epsilon,
    gdp_mu_from_rates,
    gdp_mu_lower_bound,
    one_run_epsilon_lower_bound,
    one_run_p_value,
)


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (17, 1000), (500, 1000), (999, 1000), (1000, 1000)])
def test_clopper_pearson_matches_scipy_exact_interval(k, n):
    # scipy's two-sided exact interval at level 1 - α puts α/2 in each tail.
    high = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact").high
    assert clopper_pearson_upper(k, n, 0.025) == pytest.approx(high, rel=1e-10, abs=1e-12)


def test_clopper_pearson_zero_successes_closed_form():
    # P[Bin(n, p) = 0] = (1 - p)^n = α  ⇒  p = 1 - α^{1/n}.
    for n in (1, 7, 100_000):
        assert clopper_pearson_upper(0, n, 0.025) == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-10)


def test_perfect_test_certifies_about_log_n_over_3_7():
    # REFERENCES: n runs per side can never certify more than about ln(n / 3.7).
    for n in (1_000, 100_000):
        bound = epsilon_lower_bound(0, n, 0, n)
        ub = 1 - 0.025 ** (1 / n)
        assert bound == pytest.approx(math.log((1 - ub) / ub), rel=1e-9)
        assert bound == pytest.approx(math.log(n / math.log(40)), abs=2e-3)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
def test_laplace_exact_rates_give_true_epsilon(eps):
    # Laplace(0, 1/ε) vs Laplace(1, 1/ε), test "x ≥ 1": FPR = e^{-ε}/2, FNR = 1/2.
    fpr, fnr = 0.5 * math.exp(-eps), 0.5
    assert epsilon_from_rates(fpr, fnr) == pytest.approx(eps, rel=1e-12)
    # Counts at those exact rates over many runs: the certified bound approaches ε from below.
    n = 10**9
    bound = epsilon_lower_bound(round(fpr * n), n, round(fnr * n), n)
    assert eps * 0.995 < bound < eps


def test_delta_lowers_the_bound_by_the_closed_form():
    # ln((1 - δ - FNR)/FPR) with FPR = 0.01, FNR = 0.5, δ = 0.1.
    assert epsilon_from_rates(0.01, 0.5, 0.1) == pytest.approx(math.log(0.4 / 0.01))
    assert epsilon_from_rates(0.5, 0.5) == 0.0


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("threshold", [-1.0, 0.5, 2.0])
def test_gaussian_exact_rates_give_true_mu(sigma, threshold):
    # N(0, σ²) vs N(1, σ²), test "x ≥ t": the GDP parameter is 1/σ at every threshold.
    fpr = stats.norm.sf(threshold / sigma)
    fnr = stats.norm.cdf((threshold - 1.0) / sigma)
    assert gdp_mu_from_rates(fpr, fnr) == pytest.approx(1 / sigma, rel=1e-9)


@pytest.mark.parametrize("mu", [0.25, 1.0, 2.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-3])
def test_gdp_epsilon_matches_dp_accounting_gaussian_pld(mu, delta):
    pld = privacy_loss_distribution.from_gaussian_mechanism(
        1 / mu, sensitivity=1, value_discretization_interval=1e-3)
    reference = pld.get_epsilon_for_delta(delta)
    assert gdp_epsilon(mu, delta) == pytest.approx(reference, abs=1e-5)
    assert gdp_delta(mu, gdp_epsilon(mu, delta)) == pytest.approx(delta, rel=1e-6)


def test_gdp_epsilon_zero_when_delta_exceeds_total_variation():
    # δ(0) = 2Φ(μ/2) - 1 is the total variation distance.
    assert gdp_delta(0.2, 0.0) == pytest.approx(2 * stats.norm.cdf(0.1) - 1)
    assert gdp_epsilon(0.2, 0.2) == 0.0


def test_gdp_mu_bound_covers_true_mu_with_stated_confidence():
    # 2000 simulated audits of N(0,1) vs N(μ,1) at threshold μ/2, 2000 runs per side:
    # the 95 % lower bound may exceed μ in at most 5 % of them (binomial slack 1 %).
    rng = np.random.default_rng(7)
    mu, n, repeats = 0.8, 2000, 2000
    rate = stats.norm.sf(mu / 2)
    fps = rng.binomial(n, rate, size=repeats)
    fns = rng.binomial(n, rate, size=repeats)
    bounds = np.array([gdp_mu_lower_bound(int(a), n, int(b), n) for a, b in zip(fps, fns, strict=True)])
    assert np.mean(bounds > mu) <= 0.06
    # and is not vacuous: the median bound is within 15 % of μ at this run count.
    assert np.median(bounds) > 0.85 * mu


def test_gdp_mu_bound_is_the_formula_on_clopper_pearson_bounds():
    fpr_ub = clopper_pearson_upper(120, 1000, 0.025)
    fnr_ub = clopper_pearson_upper(300, 2000, 0.025)
    expected = special.ndtri(1 - fpr_ub) - special.ndtri(fnr_ub)
    assert gdp_mu_lower_bound(120, 1000, 300, 2000) == pytest.approx(expected, rel=1e-12)


def _slow_one_run_p_value(m, r, v, eps, delta):
    """Reference: the theorem's sum written term by term, binomial pmf from log-gamma."""
    q = math.exp(eps) / (1 + math.exp(eps))
    pmf = [math.exp(math.lgamma(r + 1) - math.lgamma(j + 1) - math.lgamma(r - j + 1)
                    + j * math.log(q) + (r - j) * math.log(1 - q)) for j in range(r + 1)]
    tail = sum(pmf[v:])
    worst, window = 0.0, 0.0
    for i in range(1, v + 1):
        window += pmf[v - i]  # P[v - i ≤ B < v]
        worst = max(worst, window / i)
    return min(1.0, tail + 2 * m * delta * worst)


@pytest.mark.parametrize("m,r,v,eps,delta", [
    (100, 40, 35, 1.0, 1e-5), (1000, 200, 150, 0.5, 1e-3), (50, 50, 50, 2.0, 1e-4), (20, 10, 0, 1.0, 0.01),
    (5000, 1500, 1200, 1.0, 1e-5),  # long windows: exercises the truncation below mean - 40 sd
])
def test_one_run_p_value_matches_term_by_term_reference(m, r, v, eps, delta):
    assert one_run_p_value(m, r, v, eps, delta) == pytest.approx(
        _slow_one_run_p_value(m, r, v, eps, delta), rel=1e-9, abs=1e-15)


def test_one_run_all_correct_pure_closed_form():
    # δ = 0, v = r: q^r = α  ⇒  ε = logit(α^{1/r}).
    for r in (10, 600):
        expected = special.logit(0.05 ** (1 / r))
        assert one_run_epsilon_lower_bound(1000, r, r, delta=0.0) == pytest.approx(expected, abs=1e-9)


def test_one_run_randomized_response_approaches_true_epsilon():
    # ε-DP randomized response guesses right with probability e^ε/(1+e^ε): with many
    # canaries the bound approaches ε from below.
    eps, r = 1.0, 1_000_000
    v = round(r * special.expit(eps))
    bound = one_run_epsilon_lower_bound(r, r, v, delta=0.0)
    assert 0.99 * eps < bound < eps
    # δ > 0 can only lower it.
    assert one_run_epsilon_lower_bound(2000, 1000, 900, delta=1e-6) < \
        one_run_epsilon_lower_bound(2000, 1000, 900, delta=0.0)


def test_bad_input_is_refused_with_named_argument():
    with pytest.raises(ValueError, match="confidence"):
        epsilon_lower_bound(1, 10, 1, 10, confidence=1.0)
    with pytest.raises(ValueError, match="delta"):
        epsilon_lower_bound(1, 10, 1, 10, delta=-0.1)
    with pytest.raises(ValueError, match="false positive"):
        epsilon_lower_bound(11, 10, 1, 10)
    with pytest.raises(TypeError, match="integers"):
        gdp_mu_lower_bound(1.5, 10, 1, 10)
    with pytest.raises(ValueError, match="mu"):
        gdp_epsilon(-1.0, 1e-5)
    with pytest.raises(ValueError, match="correct"):
        one_run_p_value(10, 5, 6, 1.0, 0.0)


@pytest.mark.parametrize("eps,delta", [(0.5, 1e-5), (1.0, 1e-5), (4.0, 1e-5), (2.0, 1e-3)])
def test_gdp_mu_for_epsilon_matches_dp_accounting_analytic_gaussian(eps, delta):
    # dp-accounting's analytic-Gaussian calibration (Balle & Wang 2018) gives σ for sensitivity 1.
    assert gdp_mu_for_epsilon(eps, delta) == pytest.approx(1 / get_sigma_gaussian(eps, delta), rel=1e-6)
    assert gdp_epsilon(gdp_mu_for_epsilon(eps, delta), delta) == pytest.approx(eps, rel=1e-9)


def test_ceiling_from_tails_is_the_best_expected_count_bound():
    from audits.bounds import ceiling_from_tails, epsilon_lower_bound

    # Two thresholds: rates (0.5, 0.5) certify nothing; (0.01, 0.5) certify the CP bound of 1000/50000.
    bound, index = ceiling_from_tails(np.array([0.5, 0.01]), np.array([0.5, 0.5]), 100_000)
    assert index == 1
    assert bound == pytest.approx(epsilon_lower_bound(1000, 100_000, 50_000, 100_000))
    with pytest.raises(ValueError, match="same"):
        ceiling_from_tails(np.array([0.5]), np.array([0.5, 0.1]), 10)


def test_planned_tests_are_bonferroni_corrected_with_the_held_out_one():
    from audits.noise import LaplaceAudit

    class Planned(LaplaceAudit):
        def planned_thresholds(self, claim, runs):
            return [(0, 0.5), (0, 3.0)]

    result = Planned(1.0).run(5_000, seed=3)
    assert result.candidates == 3
    # The certified bound of the chosen test at level α/3 per test is what is reported.
    from audits.bounds import epsilon_lower_bound

    expected = epsilon_lower_bound(result.false_positives, 5_000, result.false_negatives, 5_000,
                                   confidence=1 - 0.05 / 3)
    assert result.epsilon_lower_bound == pytest.approx(expected)
