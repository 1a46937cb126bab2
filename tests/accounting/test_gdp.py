"""Gaussian DP: exact conversions (against dp-accounting and the closed form), the gdp filter, journalling."""

from fractions import Fraction

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant
from scipy import stats

from accounting import GDP, ZCDP, ApproxDP, BudgetExceeded, Ledger, PureDP, gdp


def pld_epsilon(events, delta, relation="add_remove"):
    neighbors = {"add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
                 "replace_one": dp_accounting.NeighboringRelation.REPLACE_ONE}[relation]
    accountant = pld_privacy_accountant.PLDAccountant(neighbors, value_discretization_interval=1e-4)
    accountant.compose(dp_accounting.ComposedDpEvent(events))
    return accountant.get_epsilon(delta)


def closed_form_delta(mu, eps):
    """δ_μ(ε) of the Gaussian tradeoff curve, written independently with scipy's norm."""
    return stats.norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("mu2, delta", [(Fraction(1), 1e-5), (Fraction(2), 1e-5), (Fraction(1, 100), 1e-6),
                                        (Fraction(25), 1e-3)])
def test_gdp_to_approx_matches_dp_accounting_pld_and_is_certified(mu2, delta):
    eps = gdp.gdp_to_approx_certified(mu2, Fraction(delta))
    sigma = 1 / np.sqrt(float(mu2))  # GaussianDpEvent(σ/Δ) under add/remove is (Δ/σ)-GDP
    assert float(eps) == pytest.approx(pld_epsilon([dp_accounting.GaussianDpEvent(sigma)], delta), rel=2e-3)
    assert closed_form_delta(np.sqrt(float(mu2)), float(eps)) <= delta  # certified: at or above the exact ε
    assert closed_form_delta(np.sqrt(float(mu2)), float(eps) * (1 - 1e-7)) > delta  # and tight


@pytest.mark.parametrize("eps, delta", [(4, 0.02), (1, 1e-5), (0.1, 1e-6), (8, 1e-9)])
def test_approx_to_gdp_matches_the_analytic_gaussian_of_dp_accounting(eps, delta):
    mu = gdp.approx_to_gdp_certified(Fraction(eps), Fraction(delta))
    sigma = dp_accounting.get_sigma_gaussian(eps, delta, tol=1e-13)  # Balle & Wang 2018, unit sensitivity
    assert float(mu) == pytest.approx(1 / sigma, rel=1e-8)
    assert closed_form_delta(float(mu), eps) <= delta
    assert closed_form_delta(float(mu) * (1 + 1e-7), eps) > delta


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_pure_dp_as_gdp_is_the_smallest_mu_below_the_pure_tradeoff(eps):
    mu = float(gdp.pure_to_gdp_certified(Fraction(eps)))
    alpha = np.linspace(0, 1, 200_001)
    pure = np.maximum.reduce([np.zeros_like(alpha), 1 - np.exp(eps) * alpha, np.exp(-eps) * (1 - alpha)])

    def gaussian_tradeoff(m):
        return stats.norm.cdf(stats.norm.ppf(1 - alpha) - m)

    assert np.all(gaussian_tradeoff(mu) <= pure + 1e-12)
    assert np.any(gaussian_tradeoff(mu * (1 - 1e-4)) > pure)


def test_two_gdp_charges_equal_the_pld_of_two_gaussians():
    delta = 1e-5
    ledger = Ledger(ApproxDP(20, delta))
    pool = ledger.split({"gaussians": 1}, currency={"gaussians": "gdp"})["gaussians"]
    for _ in range(2):
        pool.charge(GDP(1), mechanism="Gaussian", relation="replace_one")
    reference = pld_epsilon([dp_accounting.GaussianDpEvent(1.0)] * 2, delta)  # two (1)-GDP releases
    figure = ledger.nonadaptive_figure(delta)  # the charges composed as if fixed in advance: exact GDP
    assert figure.delta == Fraction("1e-5")
    assert float(figure.eps) == pytest.approx(reference, rel=1e-2)
    assert float(figure.eps) >= reference * (1 - 2e-3)  # PLD's own discretisation is pessimistic
    claim = ledger.guarantee()  # valid however the two were chosen: above the fixed-costs figure, within the share
    assert reference * (1 - 2e-3) <= float(claim.eps) <= 20 and claim.delta == Fraction("1e-5")
    root = Ledger(GDP(2))
    root.charge(GDP(1), mechanism="Gaussian")
    root.charge(GDP(1), mechanism="Gaussian")
    assert float(root.nonadaptive_figure(delta).eps) == pytest.approx(reference, rel=1e-2)
    assert float(root.guarantee(delta).eps) >= reference * (1 - 2e-3)


def test_gdp_share_of_4_002_affords_mu_1_60():
    ledger = Ledger(ApproxDP(4, 0.02))
    pool = ledger.split({"all": 1}, currency={"all": "gdp"})["all"]
    mu = pool.budget.mu
    # the filter meets the share at δ_F = 0.9·δ (a tenth of δ is the odometer's: docs/accounting.md, "Claims")
    assert mu == pytest.approx(1 / dp_accounting.get_sigma_gaussian(4, 0.018, tol=1e-13), rel=1e-8)
    assert mu == pytest.approx(1.5982, abs=1e-4)  # 1.6188 at the whole δ
    assert mu**2 / 2 == pytest.approx(1.2771, abs=1e-4)  # ρ of the same Gaussian, vs 0.29 spent in today's split


def test_gdp_filter_sums_squares_and_refusal_changes_nothing():
    ledger = Ledger(GDP(2))
    for _ in range(3):
        ledger.charge(GDP(1), mechanism="Gaussian")
    before = (ledger.root.spent, ledger.to_json())
    with pytest.raises(BudgetExceeded):
        ledger.charge(GDP(Fraction(1001, 1000)), mechanism="Gaussian")
    assert (ledger.root.spent, ledger.to_json()) == before
    ledger.charge(GDP(1), mechanism="Gaussian")  # Σμ² = 4 = μ_max² exactly
    assert ledger.root.remaining == GDP(0)
    with pytest.raises(BudgetExceeded):
        ledger.charge(GDP(Fraction(1, 10**9)), mechanism="Gaussian")


def test_gdp_conversions_between_currencies_and_relations():
    ledger = Ledger(GDP(3))
    receipt = ledger.charge(GDP(Fraction(1, 2)), mechanism="Gaussian", relation="add_remove")
    assert receipt.charged == GDP(1)  # group privacy, k = 2: 2μ
    receipt = ledger.charge(PureDP(1), mechanism="Laplace")
    assert receipt.charged.mu == pytest.approx(2 * stats.norm.ppf(np.e / (1 + np.e)), rel=1e-12)
    with pytest.raises(TypeError, match="zCDP"):
        ledger.charge(ZCDP(0.1), mechanism="x")
    with pytest.raises(TypeError):
        ledger.charge(ApproxDP(1, 1e-6), mechanism="x")
    zcdp = Ledger(ZCDP(1))
    assert zcdp.charge(GDP(1), mechanism="Gaussian").charged == ZCDP(Fraction(1, 2))
    with pytest.raises(TypeError, match="GDP"):
        Ledger(ApproxDP(1, 1e-5)).charge(GDP(1), mechanism="Gaussian")


def test_gdp_accounts_journal_and_restore_exactly(tmp_path):
    path = tmp_path / "gdp.db"
    with Ledger(ApproxDP(4, 0.02), journal=path) as ledger:
        pool = ledger.split({"pool": 3, "rest": 1}, currency={"pool": "gdp"})["pool"]
        pool.charge(GDP(0.7), mechanism="Gaussian", partition="a")
        pool.charge(GDP(Fraction(1, 3)), mechanism="Gaussian")
        before = (ledger.to_json(), ledger.guarantee(), pool.spent, pool.budget)
    with Ledger.from_journal(path) as ledger:
        pool = ledger.account("pool")
        assert (ledger.to_json(), ledger.guarantee(), pool.spent, pool.budget) == before
        assert pool.spent == GDP.from_mu_squared(Fraction(49, 100) + Fraction(1, 9))


def test_gdp_value_is_exact_and_validated():
    assert GDP(0.1).mu_squared == Fraction(1, 100)
    assert GDP(3) == GDP.from_mu_squared(9) and hash(GDP(3)) == hash(GDP.from_mu_squared(9))
    with pytest.raises(ValueError, match="mu"):
        GDP(-1)
    with pytest.raises(TypeError, match="mu"):
        GDP("1")
    with pytest.raises(AttributeError):
        GDP(1).mu_squared = Fraction(2)
