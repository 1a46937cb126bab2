"""f-DP one-run bounds (Mahloujifar, Melis & Chaudhuri 2025) against a slow, literal evaluation of their recursion.

The reference below keeps the whole arrays r[v], …, r[0] and h[v], …, h[0] as the
paper writes them (no early stop), and inverts each tradeoff curve numerically
(bisection on 1 − f from the curve's definition) instead of using the closed forms
the library uses. A bound b from the library must be rejected by the reference at
b − 0.004 and not rejected at b + 0.004 (its search resolution is far finer).
"""

import math
from statistics import NormalDist

import pytest

from audits.bounds import (
    gdp_epsilon,
    one_run_epsilon_lower_bound,
    one_run_fdp_epsilon_lower_bound,
    one_run_gdp_epsilon_lower_bound,
    one_run_gdp_mu_lower_bound,
)


def approx_dp_tradeoff(epsilon, delta):
    # Dong, Roth, Su 2022, Prop. 2.5: the tradeoff curve of (ε, δ)-DP.
    return lambda x: max(0.0, 1 - delta - math.exp(epsilon) * x, math.exp(-epsilon) * (1 - delta - x))


def gaussian_tradeoff(mu):
    # Dong, Roth, Su 2022, Def. 2.6: G_μ(x) = Φ(Φ⁻¹(1 − x) − μ).
    normal = NormalDist()
    return lambda x: normal.cdf(normal.inv_cdf(1 - x) - mu) if 0 < x < 1 else (1.0 - x)


def inverse_blow_up_by_bisection(tradeoff, y):
    """Smallest x in [0, 1] with 1 − f(x) ≥ y, by 60 bisection steps on the curve itself."""
    if y <= 1 - tradeoff(0.0):
        return 0.0
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        if 1 - tradeoff(middle) >= y:
            high = middle
        else:
            low = middle
    return high


def reference_rejects(tradeoff, m, guesses, correct, alpha):
    r = [0.0] * (correct + 1)
    h = [0.0] * (correct + 1)
    r[correct] = alpha * correct / m
    h[correct] = alpha * (guesses - correct) / m
    for i in range(correct - 1, -1, -1):
        h[i] = max(h[i + 1], inverse_blow_up_by_bisection(tradeoff, r[i + 1]))
        r[i] = min(1.0, r[i + 1] + i / (guesses - i) * (h[i] - h[i + 1]))
    return r[0] + h[0] > guesses / m


CASES = [(1000, 100, 90), (1000, 200, 180), (500, 500, 350), (1000, 60, 60), (800, 300, 240)]


@pytest.mark.parametrize("m, guesses, correct", CASES)
@pytest.mark.parametrize("delta", [0.0, 1e-5, 1e-3])
def test_fdp_epsilon_bound_is_the_recursion_s_edge(m, guesses, correct, delta):
    bound = one_run_fdp_epsilon_lower_bound(m, guesses, correct, delta=delta, confidence=0.95)
    assert bound > 0.1
    assert reference_rejects(approx_dp_tradeoff(bound - 0.004, delta), m, guesses, correct, 0.05)
    assert not reference_rejects(approx_dp_tradeoff(bound + 0.004, delta), m, guesses, correct, 0.05)


@pytest.mark.parametrize("m, guesses, correct", CASES)
def test_gdp_mu_bound_is_the_recursion_s_edge(m, guesses, correct):
    mu = one_run_gdp_mu_lower_bound(m, guesses, correct, confidence=0.95)
    assert mu > 0.05
    assert reference_rejects(gaussian_tradeoff(mu - 0.004), m, guesses, correct, 0.05)
    assert not reference_rejects(gaussian_tradeoff(mu + 0.004), m, guesses, correct, 0.05)
    assert one_run_gdp_epsilon_lower_bound(m, guesses, correct, delta=1e-5) == pytest.approx(gdp_epsilon(mu, 1e-5))


def test_chance_level_guesses_certify_nothing():
    assert one_run_fdp_epsilon_lower_bound(1000, 200, 100, delta=1e-5) == 0.0
    assert one_run_gdp_mu_lower_bound(1000, 200, 100) == 0.0
    assert one_run_fdp_epsilon_lower_bound(1000, 0, 0, delta=1e-5) == 0.0


def test_fdp_beats_steinke_where_its_2m_delta_term_bites():
    # Steinke's p-value adds 2mδ·(a window of the binomial); at m = 10⁶, δ = 1e-5 that term is
    # large, while the f-DP recursion folds δ into the curve.
    steinke = one_run_epsilon_lower_bound(10**6, 20_000, 19_000, delta=1e-5)
    fdp = one_run_fdp_epsilon_lower_bound(10**6, 20_000, 19_000, delta=1e-5)
    assert fdp > steinke + 0.1


def test_gaussian_reading_is_above_the_assumption_free_one():
    # The Gaussian curve through (ε, δ) lies above the (ε, δ) curve: refuting it is easier.
    fdp = one_run_fdp_epsilon_lower_bound(1000, 200, 180, delta=1e-5)
    assert one_run_gdp_epsilon_lower_bound(1000, 200, 180, delta=1e-5) > fdp


def test_bad_counts_are_refused_in_one_line():
    with pytest.raises(ValueError, match="correct ≤ guesses"):
        one_run_fdp_epsilon_lower_bound(100, 10, 11, delta=1e-5)
    with pytest.raises(ValueError, match="confidence"):
        one_run_gdp_mu_lower_bound(100, 10, 9, confidence=1.5)
