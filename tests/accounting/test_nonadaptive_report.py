"""The non-adaptive figure (all charges composed once) and the report's columns, partitions and root name."""

import json
from fractions import Fraction

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from accounting import GDP, ZCDP, ApproxDP, BudgetExceeded, Ledger, PureDP
from accounting.report import NONADAPTIVE


def opacus_run(q=0.1, z=3.0, steps=50):
    return dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)),
                                             steps)


def test_two_opacus_runs_compose_into_one_pld_at_the_summed_delta():
    ledger = Ledger(ApproxDP(100, 1e-4), relation="add_remove")
    for _ in range(2):
        ledger.charge_event(opacus_run(), mechanism="opacus", relation="add_remove", delta=1e-5)
    claim = ledger.guarantee()  # the two charges' ε add (approx charges), stated at the budget's δ
    figure = ledger.nonadaptive_figure()  # at the δ the charges spent
    joint = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    joint.compose(dp_accounting.ComposedDpEvent([opacus_run(), opacus_run()]))
    reference = joint.get_epsilon(2e-5)
    assert claim.delta == Fraction(1, 10**4) and figure.delta == Fraction(2, 10**5)
    assert float(figure.eps) == pytest.approx(reference, rel=1e-6)  # Composed([e, e]) is SelfComposed(e, 2)
    assert float(figure.eps) < 0.85 * float(claim.eps)  # composing beats adding the two (ε, δ) — if fixed
    at_claim = ledger.nonadaptive_figure(claim.delta)
    text = ledger.report()
    assert f"{NONADAPTIVE}: ε={float(at_claim.eps):.4g}" in text and "budget (the filter" in text
    document = json.loads(ledger.to_json())
    assert document["not_claims"]["nonadaptive"]["eps"] == float(at_claim.eps)
    assert document["not_claims"]["nonadaptive_means"] == NONADAPTIVE
    assert document["claim"]["eps"] == float(claim.eps) and "adaptive" in document["claim"]["means"]


def test_mixed_currencies_compose_through_their_rdp_curves_where_one_has_no_pld():
    delta = 1e-6
    ledger = Ledger(ApproxDP(20, 1e-5), relation="add_remove")
    accounts = ledger.split({"sgd": 1, "pure": 1, "gdp": 1, "zcdp": 1},
                            currency={"pure": "pure", "gdp": "gdp", "zcdp": "zcdp"})
    accounts["sgd"].charge_event(opacus_run(0.01, 1.0, 200), mechanism="DP-SGD", relation="add_remove", delta=1e-6)
    accounts["pure"].charge_event(dp_accounting.LaplaceDpEvent(2.0), mechanism="Laplace", relation="add_remove")
    accounts["gdp"].charge(GDP(0.5), mechanism="Gaussian", relation="add_remove")
    accounts["zcdp"].charge(ZCDP(0.05), mechanism="tree", relation="add_remove")
    figure = ledger.nonadaptive_figure(delta)
    accountant = rdp_privacy_accountant.RdpAccountant()  # the same events, composed by dp-accounting
    accountant.compose(dp_accounting.ComposedDpEvent([
        opacus_run(0.01, 1.0, 200), dp_accounting.LaplaceDpEvent(2.0), dp_accounting.GaussianDpEvent(2.0),
        dp_accounting.ZCDpEvent(0.05)]))
    reference = accountant.get_epsilon(delta)
    assert reference <= float(figure.eps) <= reference * (1 + 1e-6)
    claim = ledger.guarantee()
    assert float(ledger.nonadaptive_figure(claim.delta).eps) <= float(claim.eps)  # the claim is never below it
    accounts["sgd"].charge(ApproxDP(0.1, 1e-7), mechanism="plain", relation="add_remove")
    with pytest.raises(TypeError, match="charge #6 .*neither a PLD nor an RDP curve"):
        ledger.nonadaptive_figure(delta)
    assert "none (charge #6" in ledger.report()


def paper_ledger():
    ledger = Ledger(ApproxDP(4, 0.02))
    return ledger, ledger.split({"tree": 1, "switching": 1, "optimizer": 1},
                                currency={"tree": "zcdp", "optimizer": "zcdp"})


def test_allocated_and_charged_are_separate_columns():
    ledger, accounts = paper_ledger()
    accounts["tree"].charge(ZCDP(0.1), mechanism="BinaryTreeMechanism")
    root = json.loads(ledger.to_json())["accounts"]
    assert root["allocated"]["exact"] == {"eps": "4", "delta": "1/50"}  # all handed to sub-accounts
    assert root["charged"]["exact"] == {"eps": "0", "delta": "0"}  # nothing charged to the root itself
    tree = root["children"][0]
    assert tree["charged"]["exact"]["rho"] == "1/10" and tree["allocated"]["exact"]["rho"] == "0"
    header = ledger.report().splitlines()[1]
    assert "allocated" in header and "  charged  " in header and "spent" not in header


def test_the_mechanism_summary_composes_partitions_by_max():
    ledger = Ledger(PureDP(1))
    for key in range(56):
        ledger.charge(PureDP(Fraction(1, 2)), mechanism="GeometricBatchMean", partition=key)
    ledger.charge(PureDP(Fraction(1, 4)), mechanism="GeometricBatchMean")
    (use,) = ledger.root.usage()
    assert use["count"] == 57 and use["partitions"] == 56 and use["total"] == PureDP(Fraction(3, 4))
    assert "GeometricBatchMean ×57, 56 partitions composed by max: ε=0.75" in ledger.report()


def test_the_root_account_has_one_name_everywhere():
    ledger, _ = paper_ledger()
    assert ledger.report().splitlines()[3].startswith("<root> ")
    assert json.loads(ledger.to_json())["accounts"]["name"] == "<root>"
    with pytest.raises(BudgetExceeded, match="account '<root>'"):
        Ledger(PureDP(1)).charge(PureDP(2), mechanism="m")
    with pytest.raises(ValueError, match="account '<root>' has no budget left"):
        ledger.split({"again": 1})


def test_gdp_charges_compose_exactly_and_beat_their_discretised_pld():
    # Three GDP charges compose to sqrt(0.3² + 0.4² + 1.2²) = 1.3-GDP exactly (Dong, Roth & Su,
    # Corollary 3.3); the figure is that Gaussian's ε at δ, read here from its closed-form curve
    # δ(ε) = Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2), certified (rounded up, never below it), and
    # dp-accounting's PLD of the same Gaussian is no lower beyond that rounding (1e-8).
    from math import exp

    from scipy.optimize import brentq
    from scipy.stats import norm

    delta = 1e-5
    ledger = Ledger(ApproxDP(20, 1e-3))
    pool = ledger.split({"pool": 1}, currency={"pool": "gdp"})["pool"]
    for mu in (0.3, 0.4, 1.2):
        pool.charge(GDP(mu), mechanism="m")
    figure = float(ledger.nonadaptive_figure(delta).eps)
    mu = 1.3
    closed = brentq(lambda e: norm.cdf(-e / mu + mu / 2) - exp(e) * norm.cdf(-e / mu - mu / 2) - delta, 0, 50)
    assert closed - 1e-9 <= figure == pytest.approx(closed, rel=1e-6)
    pld = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(dp_accounting.GaussianDpEvent(1 / mu))
    assert figure <= pld.get_epsilon(delta) + 1e-8
