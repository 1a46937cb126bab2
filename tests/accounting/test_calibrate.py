"""Noise calibrated to an account's remaining budget: fits, uses >= 0.99 of it, and a hair less noise would not fit."""

import math
from fractions import Fraction

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from accounting import (
    GDP,
    ZCDP,
    ApproxDP,
    Ledger,
    PureDP,
    calibrate_gaussian_sigma,
    calibrate_noise_multiplier,
)


def sgd(q, z, steps):
    step = dp_accounting.GaussianDpEvent(z) if q == 1 else dp_accounting.PoissonSampledDpEvent(
        q, dp_accounting.GaussianDpEvent(z))
    return dp_accounting.SelfComposedDpEvent(step, steps)


def account(currency, budget=None, spend=None):
    ledger = Ledger(budget or ApproxDP(8, 1e-5), relation="add_remove")
    child = ledger.split({"a": 1}, currency={"a": currency})["a"]
    if spend is not None:
        child.charge(spend, mechanism="earlier", relation="add_remove")
    return child


def test_rdp_calibration_fits_the_held_order_and_uses_all_of_it():
    pool = account("rdp", spend=ZCDP(0.1))  # a partly spent account: calibrate to what remains
    (order,) = pool.orders
    (left,) = pool.remaining.epsilons
    z = calibrate_noise_multiplier(pool, sample_rate=0.01, steps=1000)

    def at_order(noise):  # dp-accounting at the held order: an independent costing of the run
        accountant = rdp_privacy_accountant.RdpAccountant([float(order)])
        accountant.compose(sgd(0.01, noise, 1000))
        return accountant._rdp[0]

    assert 0.99 * float(left) <= at_order(z) <= float(left)
    assert at_order(z * (1 - 1e-3)) > float(left) * (1 - 1e-9)  # the smallest z, to the search's tolerance
    receipt = pool.charge_event(sgd(0.01, z, 1000), mechanism="DP-SGD", relation="add_remove")
    assert receipt.charged.at(order) >= Fraction(0.99) * left


def test_approx_calibration_fits_the_pld_at_the_remaining_delta():
    pool = account("approx", ApproxDP(1, 1e-5), spend=ApproxDP(0.25, 1e-6))
    eps_left, delta_left = pool.remaining.eps, pool.remaining.delta
    z = calibrate_noise_multiplier(pool, sample_rate=0.1, steps=30)

    def pld_eps(noise):
        accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
        accountant.compose(sgd(0.1, noise, 30))
        return accountant.get_epsilon(float(delta_left))

    assert 0.99 * float(eps_left) <= pld_eps(z) <= float(eps_left)
    assert pld_eps(z * 0.995) > float(eps_left) * 0.999
    receipt = pool.charge_event(sgd(0.1, z, 30), mechanism="DP-SGD", relation="add_remove", delta=delta_left)
    assert receipt.charged.eps / eps_left >= Fraction(99, 100)


@pytest.mark.parametrize("currency", ["gdp", "zcdp"])
def test_full_batch_calibration_in_gdp_and_zcdp_is_the_closed_form(currency):
    pool = account(currency)
    z = calibrate_noise_multiplier(pool, sample_rate=1, steps=100)
    left = pool.remaining.mu_squared if currency == "gdp" else 2 * pool.remaining.rho  # μ² = steps/z²
    exact = math.sqrt(100 / float(left))
    assert exact <= z <= exact * (1 + 1e-2)
    pool.charge_event(sgd(1, z, 100), mechanism="GD", relation="add_remove")
    with pytest.raises(ValueError, match="sample_rate"):
        calibrate_noise_multiplier(account(currency), sample_rate=0.5, steps=100)


def gaussian_eps(mu, delta):
    """ε at δ of the Gaussian pair at distance μ (Dong, Roth & Su 2022, Cor. 2.13), by root finding here."""
    from scipy import optimize, stats

    def excess(eps):
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps + stats.norm.logcdf(-eps / mu - mu / 2)) - delta
    return optimize.brentq(excess, 0, mu * mu + 10 * mu + 50, xtol=1e-13)


@pytest.mark.parametrize("currency", ["gdp", "zcdp", "rdp", "approx"])
def test_gaussian_sigma_is_the_smallest_that_fits(currency):
    pool = account(currency)
    left = pool.remaining
    sigma = calibrate_gaussian_sigma(pool, sensitivity=2.0)
    mu2 = (2.0 / sigma) ** 2  # independent closed forms of one Gaussian release, μ = Δ/σ
    used, limit = {
        "gdp": lambda: (mu2, float(left.mu_squared)),
        "zcdp": lambda: (mu2 / 2, float(left.rho)),
        "rdp": lambda: (float(pool.orders[0]) * mu2 / 2, float(left.epsilons[0])),
        "approx": lambda: (gaussian_eps(math.sqrt(mu2), float(left.delta)), float(left.eps)),
    }[currency]()
    assert 0.99 * limit <= used <= limit * (1 + 1e-9)
    delta = left.delta if currency == "approx" else None
    pool.charge_event(dp_accounting.GaussianDpEvent(sigma / 2.0), mechanism="g", relation="add_remove", delta=delta)


def test_gdp_sigma_for_the_lattice_noise_of_a_gaussian_mechanism():
    from mechanisms.lattice import gdp_mu_squared
    from mechanisms.noise import GaussianMechanism

    pool = account("gdp")
    left = pool.remaining.mu_squared
    sigma = calibrate_gaussian_sigma(pool, sensitivity=1.0,
                                     cost_of=lambda s: GDP.from_mu_squared(gdp_mu_squared(s, 1.0, 3)))
    assert gdp_mu_squared(sigma, 1.0, 3) <= left and gdp_mu_squared(sigma * (1 - 1e-6), 1.0, 3) > left * (1 - 1e-2)
    mechanism = GaussianMechanism(pool, 1.0, np.random.default_rng(0), relation="add_remove", sigma=sigma)
    mechanism.release(np.zeros(3))  # charged μ′² of its own lattice: fits what was left


def test_calibration_refuses_what_cannot_pay_for_gaussian_noise():
    with pytest.raises(TypeError, match="pure"):
        calibrate_gaussian_sigma(Ledger(PureDP(1)), sensitivity=1.0)
    spent = Ledger(ZCDP(1))
    spent.charge(ZCDP(1), mechanism="all")
    with pytest.raises(ValueError, match="nothing left"):
        calibrate_noise_multiplier(spent, sample_rate=1, steps=10)
    with pytest.raises(ValueError, match="sample_rate"):
        calibrate_noise_multiplier(Ledger(ApproxDP(1, 1e-5)), sample_rate=0, steps=10)
    with pytest.raises(TypeError, match="steps"):
        calibrate_noise_multiplier(Ledger(ApproxDP(1, 1e-5)), sample_rate=0.1, steps=2.5)


# The grid of issue 30 (28 of 182 calibrations raised though an answer existed): every cell returns a z the
# account then grants, or — only where every z fits, so no smallest one exists — says so in one line.
GRID = [(currency, eps, delta, q, steps) for currency in ("approx", "rdp") for eps in (0.1, 1, 8, 30, 100)
        for delta in (1e-20, 1e-5, 0.5) for q in (1e-4, 0.01, 0.5) for steps in (1, 1000)]
DEFAULT = [("approx", 0.1, 1e-20, 0.01, 1000), ("approx", 1, 0.5, 1e-4, 1), ("rdp", 100, 1e-5, 0.5, 1000),
           ("rdp", 8, 1e-20, 0.5, 1), ("rdp", 0.1, 0.5, 0.01, 1000)]  # the slow ones: a minute each (PLDs)
SLOW = [pytest.param(*cell, marks=pytest.mark.slow) for cell in GRID if cell not in DEFAULT]


@pytest.mark.parametrize("currency, eps, delta, q, steps", DEFAULT + SLOW)
def test_calibration_answers_wherever_an_answer_exists(currency, eps, delta, q, steps):
    ledger = Ledger(ApproxDP(eps, delta), relation="add_remove")
    pool = ledger if currency == "approx" else ledger.split({"sgd": 1}, currency={"sgd": currency})["sgd"]
    try:
        z = calibrate_noise_multiplier(pool, sample_rate=q, steps=steps)
    except ValueError as why:
        # no smallest z: the run costs nothing for any noise (the record is sampled with chance ≤ δ)
        assert 1 - (1 - q) ** steps <= delta and "no noise is needed" in str(why) and "\n" not in str(why)
        return
    kwargs = {"delta": pool.remaining.delta} if currency == "approx" else {}
    pool.charge_event(sgd(q, z, steps), mechanism="DP-SGD", relation="add_remove", **kwargs)  # granted
    assert ledger.guarantee().eps <= eps


def test_a_record_sampled_with_chance_exactly_delta_costs_nothing():
    """q = 0.5 once at δ = 0.5: the record's chance of being sampled is δ exactly (the never-sampled bound, in
    fractions: 1 − (1 − q)ⁿ), so every z fits and calibration says so at once; past 1024 steps the bound is a
    float rounded up, never below the exact one."""
    from accounting.events import _never_sampled_bound, cost_of_event

    def sampled(q, n):
        step = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(1.0))
        return dp_accounting.SelfComposedDpEvent(step, n)

    assert _never_sampled_bound(sampled(0.5, 1)) == Fraction(1, 2)
    assert _never_sampled_bound(sampled(0.25, 3)) == 1 - Fraction(3, 4) ** 3
    exact = 1 - (1 - Fraction(0.001)) ** 2000
    assert exact <= _never_sampled_bound(sampled(0.001, 2000)) <= exact * (1 + Fraction(1, 10**9))
    # a float q below 0.5 is not on numpy's 2⁻⁵³ grid: random() < q keeps a record with chance K/2⁵³, K the
    # grid points below q (found here by the sampler's own float comparison), a hair above q
    q, low, high = 0.01, 0, 2**53
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if middle * 2.0**-53 < q else (low, middle)
    kept = Fraction(high, 2**53)
    assert kept > Fraction(q) and _never_sampled_bound(sampled(q, 1)) >= kept
    assert _never_sampled_bound(sampled(q, 5000)) >= 1 - (1 - kept) ** 5000
    free, _ = cost_of_event(sampled(0.5, 1), "approx", "add_remove", "add_remove", delta=Fraction(1, 2))
    assert free.eps == 0
    with pytest.raises(ValueError, match="no noise is needed"):
        calibrate_noise_multiplier(Ledger(ApproxDP(0.1, 0.5), relation="add_remove"), sample_rate=0.5, steps=1)
