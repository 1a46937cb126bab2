"""Gaussian and Laplace mechanisms: charge first, exact rounded-up calibration, noise moments, bad input."""

from fractions import Fraction
from types import SimpleNamespace

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp
from hypothesis import given
from hypothesis import strategies as st

from accounting import ZCDP, ApproxDP, BudgetExceeded, Ledger, PureDP
from mechanisms import GaussianMechanism, LaplaceMechanism, Release
from mechanisms.noise import round_up


def zcdp_account(rho=1.0):
    return Ledger(ZCDP(rho)).root


def pure_account(eps=1.0):
    return Ledger(PureDP(eps)).root


# ----- calibration ---------------------------------------------------------------------------------


def test_round_up_keeps_15_digits_and_never_rounds_down():
    assert round_up(Fraction(1, 3)) == Fraction(333333333333334, 10**15)
    assert round_up(Fraction(2, 3) * 1000) == Fraction(666666666666667, 10**12)
    assert round_up(Fraction(5, 10)) == Fraction(1, 2)
    assert round_up(Fraction(123456789, 10**30)) == Fraction(123456789, 10**30)
    with pytest.raises(ValueError, match="value must be > 0"):
        round_up(Fraction(0))


@given(st.fractions(min_value=Fraction(1, 10**30), max_value=Fraction(10**30)))
def test_round_up_property(value):
    rounded = round_up(value)
    assert value <= rounded < value * (1 + Fraction(1, 10**14))
    digits = rounded
    while digits.denominator != 1:
        digits *= 10
    assert len(str(digits.numerator).rstrip("0")) <= 15


def test_gaussian_from_sigma_charges_delta_sq_over_two_sigma_sq():
    account = zcdp_account(10)
    mechanism = GaussianMechanism(account, 1.5, np.random.default_rng(0), sigma=0.7)
    exact = Fraction(1.5) ** 2 / (2 * Fraction(0.7) ** 2)  # Bun & Steinke 2016, Prop. 1.6
    assert exact <= mechanism.cost.rho <= exact * (1 + Fraction(1, 10**14))
    mechanism.release(np.zeros(3))
    assert account.spent.rho == mechanism.cost.rho


def test_gaussian_from_cost_uses_it_exactly_and_rounds_noise_up():
    account = zcdp_account(1)
    cost = ZCDP(0.3)
    mechanism = GaussianMechanism(account, 2.0, np.random.default_rng(0), cost=cost)
    sigma = mechanism.sigma
    assert sigma == pytest.approx(2.0 / np.sqrt(2 * 0.3), rel=1e-15)
    assert Fraction(2.0) ** 2 / (2 * Fraction(sigma) ** 2) <= Fraction(3, 10)
    smaller = float(np.nextafter(sigma, 0.0))
    assert Fraction(2.0) ** 2 / (2 * Fraction(smaller) ** 2) > Fraction(3, 10)
    mechanism.release(1.0)
    assert account.spent.rho == Fraction(3, 10)


def test_gaussian_charge_matches_dp_accounting_rdp():
    """ρ-zCDP and the RDP of dp-accounting's Gaussian (noise multiplier σ/Δ) give the same ε."""
    mechanism = GaussianMechanism(zcdp_account(5), 1.0, np.random.default_rng(0), sigma=2.0)
    direct = rdp.RdpAccountant()
    direct.compose(dp_accounting.GaussianDpEvent(2.0))
    via_zcdp = rdp.RdpAccountant()
    via_zcdp.compose(dp_accounting.ZCDpEvent(float(mechanism.cost.rho)))
    assert via_zcdp.get_epsilon(1e-6) == pytest.approx(direct.get_epsilon(1e-6), rel=1e-9)


def test_laplace_from_scale_and_from_cost():
    account = pure_account(3)
    mechanism = LaplaceMechanism(account, 2.0, np.random.default_rng(0), scale=4.0)
    assert mechanism.cost.eps == Fraction(1, 2)  # ε = Δ₁/b
    mechanism.release(np.ones(2))
    assert account.spent.eps == Fraction(1, 2)
    calibrated = LaplaceMechanism(account, 1.0, np.random.default_rng(0), cost=PureDP(0.3))
    assert Fraction(1.0) / Fraction(calibrated.scale) <= Fraction(3, 10)
    assert Fraction(1.0) / Fraction(float(np.nextafter(calibrated.scale, 0))) > Fraction(3, 10)
    calibrated.release(0.0)
    assert account.spent.eps == Fraction(8, 10)


def test_laplace_in_a_zcdp_account_is_converted_by_the_ledger():
    account = zcdp_account(1)
    LaplaceMechanism(account, 1.0, np.random.default_rng(0), scale=2.0).release(0.0)
    assert account.spent.rho == Fraction(1, 8)  # (ε = 1/2)²/2


# ----- charge before sampling -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_refused_charge_draws_no_noise(kind):
    rng = np.random.default_rng(7)
    if kind == "gaussian":
        account = zcdp_account(0.1)
        mechanism = GaussianMechanism(account, 1.0, rng, sigma=1.0)  # costs 0.5 > 0.1
    else:
        account = pure_account(0.1)
        mechanism = LaplaceMechanism(account, 1.0, rng, scale=1.0)  # costs 1 > 0.1
    before = rng.bit_generator.state
    spent_before = account.spent
    with pytest.raises(BudgetExceeded):
        mechanism.release(np.zeros(4))
    assert rng.bit_generator.state == before
    assert account.spent == spent_before


def test_second_release_refused_after_budget_used():
    account = zcdp_account(1)
    rng = np.random.default_rng(1)
    mechanism = GaussianMechanism(account, 1.0, rng, cost=ZCDP(0.6))
    first = mechanism.release(np.zeros(2))
    assert isinstance(first, Release) and first.receipt.mechanism == "GaussianMechanism"
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceeded):
        mechanism.release(np.zeros(2))
    assert rng.bit_generator.state == state


def test_receipt_states_relation_and_partition():
    account = zcdp_account(1)
    mechanism = GaussianMechanism(account, 1.0, np.random.default_rng(0), sigma=4.0, relation="replace_one")
    receipt = mechanism.release(0.0, partition="arm-3").receipt
    assert receipt.relation == "replace_one" and receipt.partition == "arm-3"
    assert "L2 sensitivity=1.0" in receipt.note


# ----- noise moments -------------------------------------------------------------------------------


def test_gaussian_noise_moments(rng):
    mechanism = GaussianMechanism(zcdp_account(1), 1.0, rng, sigma=1.5)
    x = np.linspace(-1, 1, 200_000)
    noise = np.asarray(mechanism.release(x).value) - x
    assert abs(noise.mean()) < 4 * 1.5 / np.sqrt(x.size)
    assert noise.var() == pytest.approx(1.5**2, rel=0.02)


def test_laplace_noise_moments(rng):
    mechanism = LaplaceMechanism(pure_account(1), 1.0, rng, scale=2.0)
    noise = np.asarray(mechanism.release(np.zeros(200_000)).value)
    assert noise.var() == pytest.approx(2 * 2.0**2, rel=0.03)  # Var Lap(b) = 2b²
    assert np.mean(np.abs(noise)) == pytest.approx(2.0, rel=0.02)  # E|Lap(b)| = b


def test_same_seed_same_release():
    def once():
        mech = GaussianMechanism(zcdp_account(1), 1.0, np.random.default_rng(3), sigma=1.0)
        return mech.release(np.arange(4.0)).value

    np.testing.assert_array_equal(once(), once())


def test_scalar_in_scalar_out():
    value = GaussianMechanism(zcdp_account(1), 1.0, np.random.default_rng(0), sigma=1.0).release(2.0).value
    assert isinstance(value, float)


# ----- bad input -----------------------------------------------------------------------------------


def test_bad_construction_names_the_argument():
    rng = np.random.default_rng(0)
    account = zcdp_account(1)
    with pytest.raises(ValueError, match="sensitivity"):
        GaussianMechanism(account, 0.0, rng, sigma=1.0)
    with pytest.raises(ValueError, match="sensitivity"):
        GaussianMechanism(account, float("nan"), rng, sigma=1.0)
    with pytest.raises(ValueError, match="exactly one of sigma"):
        GaussianMechanism(account, 1.0, rng)
    with pytest.raises(ValueError, match="exactly one of sigma"):
        GaussianMechanism(account, 1.0, rng, sigma=1.0, cost=ZCDP(0.1))
    with pytest.raises(ValueError, match="sigma"):
        GaussianMechanism(account, 1.0, rng, sigma=-1.0)
    with pytest.raises(TypeError, match="cost must be an accounting.ZCDP"):
        GaussianMechanism(account, 1.0, rng, cost=PureDP(1))
    with pytest.raises(ValueError, match="delta=0"):
        GaussianMechanism(account, 1.0, rng, cost=ZCDP(0.1, 1e-6))
    with pytest.raises(TypeError, match="rng"):
        GaussianMechanism(account, 1.0, 42, sigma=1.0)
    with pytest.raises(ValueError, match="relation"):
        GaussianMechanism(account, 1.0, rng, sigma=1.0, relation="neighbours")
    with pytest.raises(TypeError, match="currency 'zcdp'"):
        GaussianMechanism(pure_account(), 1.0, rng, sigma=1.0)
    with pytest.raises(ValueError, match="exactly one of scale"):
        LaplaceMechanism(account, 1.0, rng)
    with pytest.raises(TypeError, match="cost must be an accounting.PureDP"):
        LaplaceMechanism(account, 1.0, rng, cost=ZCDP(0.1))
    with pytest.raises(ValueError, match="scale"):
        LaplaceMechanism(account, 1.0, rng, scale=0)


@pytest.mark.parametrize("x", [np.array([]), "abc", np.array([True]), [[1.0], [2.0, 3.0]]])
def test_a_statistic_of_the_wrong_kind_is_refused_before_any_charge(x):
    # Its kind and shape are public: refused for free.
    account = zcdp_account(1)
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    mechanism = GaussianMechanism(account, 1.0, rng, sigma=1.0)
    with pytest.raises((ValueError, TypeError), match="x must"):
        mechanism.release(x)
    assert account.spent.rho == 0
    assert rng.bit_generator.state == state


@pytest.mark.parametrize("x", [np.array([1.0, np.nan]), float("inf"), 1e300])
def test_a_statistic_whose_values_are_bad_is_charged_then_refused(x):
    # Whether its values are finite (or fit the noise grid) depends on the data: a free refusal
    # would tell the caller about them, so the charge is made and stays spent; no noise is drawn.
    account = zcdp_account(1)
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    mechanism = GaussianMechanism(account, 1.0, rng, sigma=1.0)
    with pytest.raises(ValueError, match="x must be finite|x is too large for the noise grid"):
        mechanism.release(x)
    assert account.spent.rho == Fraction(1, 2)  # ρ = Δ²/(2σ²) of one release
    assert rng.bit_generator.state == state


# ----- per-user sums with checked rows --------------------------------------------------------------


def test_release_sum_checks_each_row_against_the_relation_bound():
    rng = np.random.default_rng(0)
    account = zcdp_account(12)  # 2 + 2 (the refused sum) + 8 (add/remove, restated)
    gaussian = GaussianMechanism(account, 2.0, rng, sigma=1.0)
    rows = np.array([[0.6, 0.8], [0.0, 1.0], [-1.0, 0.0]])  # L2 norms 1 = Δ/2
    value = np.asarray(gaussian.release_sum(rows).value)
    assert value.shape == (2,)
    spent = account.spent.rho
    state = rng.bit_generator.state
    with pytest.raises(ValueError, match=r"contributions\[1\] has L2 norm .*\(refused after the charge"):
        gaussian.release_sum(np.array([[0.1, 0.1], [0.9, 0.9]]))  # a private row too long: charged, then refused
    assert account.spent.rho == spent + Fraction(2, 1) and rng.bit_generator.state == state  # ρ = Δ²/(2σ²) = 2
    removal = GaussianMechanism(account, 2.0, rng, sigma=1.0, relation="add_remove")
    removal.release_sum(np.array([[1.2, 1.6]]))  # norm 2 = Δ under add/remove
    laplace = LaplaceMechanism(pure_account(5), 1.0, rng, scale=1.0)
    assert isinstance(laplace.release_sum(np.array([0.5, -0.5, 0.25])).value, float)  # scalar rows, |row| ≤ Δ/2
    with pytest.raises(ValueError, match=r"contributions\[0\] has L1 norm"):
        laplace.release_sum(np.array([[0.3, 0.3]]))  # L1 0.6 > 0.5, although L2 0.42 < 0.5
    with pytest.raises(ValueError, match="one row per user"):
        laplace.release_sum(1.0)


def test_release_sum_mean_is_the_exact_sum(rng):
    mechanism = GaussianMechanism(zcdp_account(5), 1.0, rng, sigma=0.5)
    rows = rng.uniform(-0.35, 0.35, size=(50, 20_000))
    rows /= np.maximum(1.0, np.linalg.norm(rows, axis=1, keepdims=True) / 0.5)
    noise = np.asarray(mechanism.release_sum(rows).value) - rows.sum(axis=0)
    assert abs(noise.mean()) < 5 * 0.5 / np.sqrt(rows.shape[1])
    assert noise.std() == pytest.approx(0.5, rel=0.03)


# ----- non-negative rows ----------------------------------------------------------------------------


def brute_force_replace_sensitivity(rows, order):
    """Slow reference: max ‖a − b‖ over every pair of the given admissible rows."""
    return max(np.linalg.norm(a - b, ord=order) for a in rows for b in rows)


def test_nonnegative_scalar_rows_reach_the_full_sensitivity(rng):
    """Rewards in [0, B] under replace-one: |a − b| ≤ B, so rows up to Δ = B certify Δ (not Δ/2)."""
    grid = np.linspace(0.0, 1.0, 101)
    assert brute_force_replace_sensitivity(grid[:, None], 2) == 1.0  # the replace-one Δ of [0, 1] rewards is 1
    rewards = rng.uniform(0.0, 1.0, size=200)
    rewards[0] = 1.0
    account = zcdp_account(10)
    gaussian = GaussianMechanism(account, 1.0, rng, sigma=1.0)
    with pytest.raises(ValueError, match=r"contributions\[0\] has L2 norm 1.0 > 0.5"):
        gaussian.release_sum(rewards)  # the rows are private: charged, then refused
    assert account.spent.rho == Fraction(1, 2)
    assert isinstance(gaussian.release_sum(rewards, nonnegative=True).value, float)
    assert account.spent.rho == 1
    laplace = LaplaceMechanism(pure_account(5), 1.0, rng, scale=1.0)
    laplace.release_sum(rewards[:, None], nonnegative=True)  # (n, 1) rows are scalars too
    with pytest.raises(ValueError, match=r"contributions\[2\] has a negative entry"):
        laplace.release_sum(np.array([0.5, 0.2, -0.1]), nonnegative=True)
    with pytest.raises(ValueError, match="L1 norm"):
        laplace.release_sum(np.array([0.5, 1.01]), nonnegative=True)


def test_nonnegative_vector_rows_save_sqrt2_in_l2_and_nothing_in_l1():
    """Disjoint supports are the worst case: ‖a − b‖₂ = √2·B but ‖a − b‖₁ = 2B."""
    bound = 1.0
    disjoint = np.array([[bound, 0.0], [0.0, bound]])
    assert brute_force_replace_sensitivity(disjoint, 2) == pytest.approx(np.sqrt(2) * bound)
    assert brute_force_replace_sensitivity(disjoint, 1) == 2 * bound
    angles = np.linspace(0.0, np.pi / 2, 400)  # every non-negative direction in 2-D, norm B
    arc = bound * np.column_stack([np.cos(angles), np.sin(angles)])
    assert brute_force_replace_sensitivity(arc, 2) <= np.sqrt(2) * bound + 1e-12
    rng = np.random.default_rng(1)
    gaussian = GaussianMechanism(zcdp_account(10), np.sqrt(2) * bound, rng, sigma=1.0)
    rows = 0.999999 * arc[::50]  # L2 norm just under B = Δ/√2 > Δ/2
    with pytest.raises(ValueError, match="L2 norm"):
        gaussian.release_sum(rows)
    gaussian.release_sum(rows, nonnegative=True)
    with pytest.raises(ValueError, match="L2 norm"):
        gaussian.release_sum(rows * 1.00001, nonnegative=True)
    laplace = LaplaceMechanism(pure_account(5), 2 * bound, rng, scale=1.0)  # Δ₁ = 2B for L1 rows of norm B
    with pytest.raises(ValueError, match="L1 norm"):
        laplace.release_sum(disjoint * 1.01, nonnegative=True)  # L1 1.01 > Δ/2: no saving in L1
    laplace.release_sum(disjoint, nonnegative=True)


def test_nonnegative_does_not_change_add_remove():
    gaussian = GaussianMechanism(zcdp_account(10), 1.0, np.random.default_rng(2), sigma=1.0, relation="add_remove")
    gaussian.release_sum(np.array([[0.6, 0.8]]), nonnegative=True)  # norm 1 = Δ, as without the option
    with pytest.raises(ValueError, match="L2 norm"):
        gaussian.release_sum(np.array([[0.6, 0.8]]) * 1.001, nonnegative=True)


def test_laplace_checks_the_account_at_construction():
    rng = np.random.default_rng(0)
    with pytest.raises(TypeError, match="account must be an accounting.Account"):
        LaplaceMechanism(object(), 1.0, rng, scale=1.0)
    with pytest.raises(TypeError, match="account must charge in currency 'pure' or 'approx' or 'zcdp'"):
        LaplaceMechanism(SimpleNamespace(charge=lambda *a, **k: None, currency="dollars"), 1.0, rng, scale=1.0)
    # Every real currency can pay a pure-DP charge: ε as (ε, 0), or ε²/2 zCDP (Bun & Steinke 2016, Prop. 1.4).
    zcdp = zcdp_account(1.0)
    LaplaceMechanism(zcdp, 1.0, rng, cost=PureDP(0.5)).release(0.0)
    assert zcdp.spent == ZCDP(Fraction(1, 8))
    approx = Ledger(ApproxDP(1, 1e-6)).root
    LaplaceMechanism(approx, 1.0, rng, cost=PureDP(0.5)).release(0.0)
    assert approx.spent == ApproxDP(Fraction(1, 2), 0)
