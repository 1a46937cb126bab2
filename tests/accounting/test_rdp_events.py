"""RDP currency and dp-accounting events: costs, relations, composition before conversion, to_dp_event."""

from fractions import Fraction

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from accounting import GDP, RDP, ZCDP, ApproxDP, BudgetExceeded, Ledger, PureDP, rdp
from accounting.events import planned_curve

ADD_REMOVE = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
REPLACE_ONE = dp_accounting.NeighboringRelation.REPLACE_ONE


def sgd_event(q=0.01, z=1.0, steps=100):
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)), steps)


def rdp_epsilon(event, delta, relation=ADD_REMOVE):
    accountant = rdp_privacy_accountant.RdpAccountant(neighboring_relation=relation)
    accountant.compose(event)
    return accountant.get_epsilon(delta)


def pld_epsilon(event, delta, relation=ADD_REMOVE):
    accountant = pld_privacy_accountant.PLDAccountant(relation, value_discretization_interval=1e-4)
    accountant.compose(event)
    return accountant.get_epsilon(delta)


def rdp_pool(budget=None, relation="add_remove", plan=None):
    """An rdp account holding the whole budget (default ApproxDP(10, 1e-5)); its budget curve shaped like ``plan``
    (default: Gaussian)."""
    budget = ApproxDP(10, 1e-5) if budget is None else budget
    ledger = Ledger(budget, relation=relation)
    curves = None if plan is None else {"sgd": planned_curve(plan, budget.eps, budget.delta)}
    return ledger, ledger.split({"sgd": 1}, currency={"sgd": "rdp"}, curves=curves)["sgd"]


@pytest.mark.parametrize("events", [1, 2])
def test_subsampled_dpsgd_events_are_bounded_at_the_held_order(events, claims):
    delta = 1e-5
    ledger, pool = rdp_pool(plan=sgd_event(steps=400))
    (order,) = pool.orders
    for _ in range(events):
        pool.charge_event(sgd_event(), mechanism="DP-SGD", relation="add_remove")
    composed = dp_accounting.ComposedDpEvent([sgd_event()] * events)
    orders = sorted({float(order), *claims.RUNG_ORDERS})
    at_orders = rdp_privacy_accountant.RdpAccountant(orders)
    at_orders.compose(composed)
    curve = dict(zip(orders, at_orders._rdp, strict=True))
    assert float(pool.spent.epsilons[0]) == pytest.approx(curve[float(order)], rel=1e-9)
    # the claim: the ladder read at the held order (at δ_F) and the rung orders (docs/accounting.md, "Claims")
    eps = float(ledger.guarantee().eps)
    assert eps == pytest.approx(claims.claim_reference(curve.get, 10, delta, float(order)), rel=1e-6)
    assert eps >= rdp_epsilon(composed, delta) * (1 - 1e-9)  # above the full grid's non-adaptive figure


def test_the_default_rdp_budget_holds_the_gaussian_best_order_and_meets_the_share(claims):
    _, pool = rdp_pool(ApproxDP(4, 0.02))
    (order,) = pool.orders
    # argmax over the grid of the Gaussian's largest rho (CKS at each order), at the filter's δ_F = 0.9·δ
    assert float(order) == claims.best_order(4, 0.018) == 2.7
    (budget,) = pool.budget.epsilons
    claim, _ = rdp_privacy_accountant.compute_epsilon([2.7], [float(budget)], 0.018)
    assert claim <= 4 + 1e-9 and claim == pytest.approx(4, rel=1e-9)  # nothing wasted at the held order
    rho = budget / order  # the Gaussian with this rho fits exactly: the grid's best rho
    assert float(rho) == pytest.approx(float(rdp.largest_gaussian_rho(Fraction(4), Fraction(18, 1000))), rel=1e-9)


def test_the_full_grid_gaussian_curve_refuses_a_subsampled_run_that_the_held_order_takes():
    rho = rdp.largest_gaussian_rho(Fraction(4), Fraction(9, 10**6))  # meets the share at the filter's δ_F
    ledger = Ledger(ApproxDP(4, 1e-5), relation="add_remove")
    gaussian = ledger.split({"sgd": 1}, currency={"sgd": "rdp"}, curves={"sgd": RDP(rdp.gaussian_curve(rho))})["sgd"]
    with pytest.raises(BudgetExceeded):  # high orders: the subsampled curve is far above αρ
        gaussian.charge_event(sgd_event(), mechanism="DP-SGD", relation="add_remove")
    _, held = rdp_pool(ApproxDP(4, 1e-5))
    for _ in range(10):
        held.charge_event(sgd_event(), mechanism="DP-SGD", relation="add_remove")


def test_a_user_curve_is_checked_against_the_share():
    planned = rdp_privacy_accountant.RdpAccountant()
    planned.compose(sgd_event(steps=1000))
    curve = RDP.from_floats_up(planned._rdp)
    ledger = Ledger(ApproxDP(4, 1e-5), relation="add_remove")
    pool = ledger.split({"sgd": 1}, currency={"sgd": "rdp"}, curves={"sgd": curve})["sgd"]
    assert pool.budget == curve
    for _ in range(9):
        pool.charge_event(sgd_event(), mechanism="DP-SGD", relation="add_remove")
    with pytest.raises(BudgetExceeded):  # 1100 of the 1000 planned steps
        pool.charge_event(sgd_event(steps=200), mechanism="DP-SGD", relation="add_remove")
    tight = Ledger(ApproxDP(0.5, 1e-5), relation="add_remove")
    with pytest.raises(ValueError, match="curves"):
        tight.split({"sgd": 1}, currency={"sgd": "rdp"}, curves={"sgd": curve})


def test_over_budget_event_is_refused_and_changes_nothing(tmp_path):
    with Ledger(ApproxDP(1.5, 1e-5), relation="add_remove", journal=tmp_path / "j.db") as ledger:
        pool = ledger.split({"sgd": 1}, currency={"sgd": "rdp"},
                            curves={"sgd": planned_curve(sgd_event(steps=60), 1.5, 1e-5)})["sgd"]
        pool.charge_event(sgd_event(steps=50), mechanism="DP-SGD", relation="add_remove")
        before = (ledger.to_json(), ledger.guarantee(), ledger.to_dp_event())
        with pytest.raises(BudgetExceeded):
            pool.charge_event(sgd_event(steps=5000), mechanism="DP-SGD", relation="add_remove")
        assert (ledger.to_json(), ledger.guarantee(), ledger.to_dp_event()) == before
    with Ledger.from_journal(tmp_path / "j.db") as ledger:
        assert (ledger.to_json(), ledger.guarantee(), ledger.to_dp_event()) == before


def test_to_dp_event_round_trips_through_dp_accounting():
    ledger = Ledger(ApproxDP(20, 1e-5), relation="add_remove")
    accounts = ledger.split({"g": 1, "r": 1, "z": 1}, currency={"g": "gdp", "r": "rdp", "z": "zcdp"},
                            curves={"r": planned_curve(sgd_event(), Fraction(20, 3), Fraction(1, 3 * 10**5))})
    accounts["g"].charge(GDP(0.5), mechanism="Gaussian", relation="add_remove")
    accounts["g"].charge_event(dp_accounting.GaussianDpEvent(2.0), mechanism="Gaussian", relation="add_remove")
    accounts["r"].charge_event(sgd_event(), mechanism="DP-SGD", relation="add_remove")
    accounts["z"].charge(ZCDP(0.05), mechanism="tree", relation="add_remove")
    event = ledger.to_dp_event()
    expected = dp_accounting.ComposedDpEvent([
        dp_accounting.GaussianDpEvent(2.0), dp_accounting.GaussianDpEvent(2.0), sgd_event(),
        dp_accounting.ZCDpEvent(0.05)])
    assert event == expected
    # charging it again in an rdp account costs the RDP curve of everything charged
    again = Ledger(ApproxDP(20, 1e-5), relation="add_remove")
    pool = again.split({"all": 1}, currency={"all": "rdp"}, curves={"all": planned_curve(event, 20, 1e-5)})["all"]
    pool.charge_event(event, mechanism="replay", relation="add_remove")
    (order,) = pool.orders
    at_order = rdp_privacy_accountant.RdpAccountant([float(order)])
    at_order.compose(expected)
    assert float(pool.spent.epsilons[0]) == pytest.approx(at_order._rdp[0], rel=1e-8)
    pure = Ledger(ApproxDP(1, 1e-5), relation="add_remove")
    pure.charge(PureDP(0.1), mechanism="Laplace", relation="add_remove")
    with pytest.raises(TypeError, match="charge #1"):
        pure.to_dp_event()


def test_relations_are_restated_soundly_or_refused():
    z = 1.0
    # unsampled: an add/remove Gaussian in a replace-one ledger doubles its sensitivity (ρ ×4)
    _, pool = rdp_pool(ApproxDP(100, 1e-5), relation="replace_one")
    same = pool.charge_event(dp_accounting.GaussianDpEvent(z), mechanism="g", relation="replace_one").charged
    doubled = pool.charge_event(dp_accounting.GaussianDpEvent(z), mechanism="g", relation="add_remove").charged
    assert doubled.epsilons == tuple(4 * e for e in same.epsilons) or all(
        d >= 4 * s * (1 - 1e-11) for d, s in zip(doubled.epsilons, same.epsilons, strict=True))
    # sampled add/remove event in a replace-one ledger: refused by rdp, PLD replace-one in approx
    with pytest.raises(TypeError, match="RdpAccountant"):
        pool.charge_event(sgd_event(), mechanism="DP-SGD", relation="add_remove")
    approx = Ledger(ApproxDP(10, 1e-5))
    receipt = approx.charge_event(sgd_event(), mechanism="DP-SGD", relation="add_remove", delta=1e-6)
    replace = pld_epsilon(sgd_event(), 1e-6, REPLACE_ONE)
    assert float(receipt.charged.eps) == pytest.approx(replace, rel=1e-9)
    assert replace > pld_epsilon(sgd_event(), 1e-6, ADD_REMOVE) * 1.1  # never the add/remove figure
    with pytest.raises(TypeError, match="sampled"):
        approx.charge_event(sgd_event(), mechanism="DP-SGD", relation="replace_one", delta=1e-6)
    with pytest.raises(ValueError, match="replace_one"):
        rdp_pool()[1].charge_event(dp_accounting.GaussianDpEvent(z), mechanism="g", relation="replace_one")
    # the Gaussian the pitfall names: PLD replace-one is 11.00, add/remove 4.89, at δ = 1e-6
    gaussian = Ledger(ApproxDP(20, 1e-5)).charge_event(dp_accounting.GaussianDpEvent(1.0), mechanism="g",
                                                        relation="add_remove", delta=1e-6)
    assert float(gaussian.charged.eps) == pytest.approx(pld_epsilon(dp_accounting.GaussianDpEvent(1.0), 1e-6,
                                                                    REPLACE_ONE), rel=1e-9)


def test_each_currency_costs_events_and_refuses_the_rest():
    gauss = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(2.0), 3)
    g = Ledger(GDP(5), relation="add_remove")
    assert g.charge_event(gauss, mechanism="g", relation="add_remove").charged == GDP.from_mu_squared(Fraction(3, 4))
    with pytest.raises(TypeError, match="unsubsampled Gaussian"):
        g.charge_event(dp_accounting.LaplaceDpEvent(1.0), mechanism="l", relation="add_remove")
    with pytest.raises(TypeError, match="delta"):
        g.charge_event(gauss, mechanism="g", relation="add_remove", delta=1e-5)
    z = Ledger(ZCDP(5), relation="add_remove")
    assert z.charge_event(gauss, mechanism="g", relation="add_remove").charged == ZCDP(Fraction(3, 8))
    p = Ledger(PureDP(5), relation="add_remove")
    laplace = dp_accounting.LaplaceDpEvent(2.0)
    assert p.charge_event(laplace, mechanism="l", relation="add_remove").charged == PureDP(Fraction(1, 2))
    a = Ledger(ApproxDP(5, 1e-5), relation="add_remove")
    with pytest.raises(TypeError, match="delta"):
        a.charge_event(gauss, mechanism="g", relation="add_remove")
    eps = a.charge_event(gauss, mechanism="g", relation="add_remove", delta=1e-6).charged.eps
    assert float(eps) == pytest.approx(pld_epsilon(gauss, 1e-6), rel=1e-9)
    with pytest.raises(TypeError, match="DpEvent"):
        a.charge_event(ApproxDP(1, 1e-6), mechanism="x", relation="add_remove", delta=1e-6)


@pytest.mark.parametrize("rho, delta", [(0.5, 1e-6), (0.005, 1e-6), (2.0, 1e-3)])
def test_rdp_conversion_matches_dp_accounting_compute_epsilon(rho, delta):
    curve = rdp.gaussian_curve(Fraction(rho))
    ours = float(rdp.curve_to_approx_certified(curve, Fraction(delta)))
    theirs, _ = rdp_privacy_accountant.compute_epsilon([float(o) for o in rdp.ORDERS], [float(c) for c in curve],
                                                       delta)
    assert ours == pytest.approx(theirs, rel=1e-12) and ours >= theirs


def test_exact_curves_of_other_costs_and_refusals():
    ledger = Ledger(RDP([order for order in rdp.ORDERS]))  # budget α at every order
    assert ledger.charge(ZCDP(0.25), mechanism="z").charged.epsilons == tuple(o / 4 for o in rdp.ORDERS)
    assert ledger.charge(GDP(0.5), mechanism="g").charged.epsilons == rdp.gaussian_curve(Fraction(1, 8))
    pure = ledger.charge(PureDP(0.2), mechanism="p").charged.epsilons
    assert pure == tuple(min(Fraction(1, 5), o / 50) for o in rdp.ORDERS)
    with pytest.raises(TypeError, match="approximate"):
        ledger.charge(ApproxDP(0.1, 1e-9), mechanism="a")
    with pytest.raises(TypeError, match="approximate"):
        ledger.charge(ZCDP(0.1, 1e-9), mechanism="a")
    with pytest.raises(TypeError, match="RDP"):
        Ledger(ZCDP(1)).charge(ledger.root.spent, mechanism="r")
    assert float(ledger.guarantee(1e-5).eps) > 0
    np.testing.assert_array_less(-1e-300, [float(e) for e in ledger.root.remaining.epsilons])


@pytest.mark.parametrize("rho", [0.01, 0.5])
def test_zcdp_and_gdp_curves_equal_dp_accountings(rho):
    orders = [float(o) for o in rdp.ORDERS]
    zcdp = rdp_privacy_accountant.RdpAccountant(orders)
    zcdp.compose(dp_accounting.ZCDpEvent(rho))
    gaussian = rdp_privacy_accountant.RdpAccountant(orders)
    gaussian.compose(dp_accounting.GaussianDpEvent(1 / np.sqrt(2 * rho)))  # μ = √(2ρ)
    ledger = Ledger(RDP([1000 * o for o in rdp.ORDERS]))
    ours_z = [float(e) for e in ledger.charge(ZCDP(rho), mechanism="z").charged.epsilons]
    ours_g = [float(e) for e in ledger.charge(GDP(np.sqrt(2 * rho)), mechanism="g").charged.epsilons]
    np.testing.assert_allclose(ours_z, zcdp._rdp, rtol=1e-12)
    np.testing.assert_allclose(ours_g, gaussian._rdp, rtol=1e-9)


def test_a_gaussian_event_in_a_gdp_pool_converts_like_the_pld():
    delta = 1e-6
    ledger = Ledger(ApproxDP(20, delta), relation="add_remove")
    pool = ledger.split({"g": 1}, currency={"g": "gdp"})["g"]
    gauss = dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(1.5),
                                           dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(3.0), 4)])
    pool.charge_event(gauss, mechanism="g", relation="add_remove")
    figure = float(ledger.nonadaptive_figure(delta).eps)  # composed once, as if fixed in advance: the PLD
    assert figure == pytest.approx(pld_epsilon(gauss, delta), rel=2e-3)
    assert figure <= float(ledger.guarantee().eps) <= 20  # the claim holds however it was chosen
