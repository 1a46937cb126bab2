"""Checked dp-accounting events: malformed events refused naming the field, exact reductions, bounded work, DP-FTRL."""

import math
from fractions import Fraction

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant
from scipy import optimize, stats

from accounting import GDP, RDP, ZCDP, ApproxDP, BudgetExceeded, Ledger, PureDP, rdp

G = dp_accounting.GaussianDpEvent
SELF = dp_accounting.SelfComposedDpEvent
POISSON = dp_accounting.PoissonSampledDpEvent
TREE = dp_accounting.SingleEpochTreeAggregationDpEvent


def gaussian_eps(mu, delta):
    """ε of the Gaussian pair at distance μ at δ, from δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (independent)."""
    def excess(eps):
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps + stats.norm.logcdf(-eps / mu - mu / 2)) - delta
    return optimize.brentq(excess, 0, mu * mu + 10 * mu + 50, xtol=1e-13)


def ledgers():
    return {"gdp": Ledger(GDP(10), relation="add_remove"), "zcdp": Ledger(ZCDP(50), relation="add_remove"),
            "pure": Ledger(PureDP(100), relation="add_remove"), "rdp": Ledger(RDP(rdp.gaussian_curve(Fraction(50))),
                                                                             relation="add_remove"),
            "approx": Ledger(ApproxDP(8, 1e-5), relation="add_remove")}


def charge(ledger, event):
    delta = 1e-6 if ledger.currency == "approx" else None
    return ledger.charge_event(event, mechanism="m", relation="add_remove", delta=delta)


MALFORMED = [  # (currency, event, error, field named) — the list, and the other fields of each kind
    ("gdp", SELF(G(1.0), -99), ValueError, "SelfComposedDpEvent.count"),
    ("gdp", SELF(G(1.0), 0.5), TypeError, "SelfComposedDpEvent.count"),
    ("gdp", SELF(G(1.0), True), TypeError, "SelfComposedDpEvent.count"),
    ("zcdp", dp_accounting.ZCDpEvent(-1.0), ValueError, "ZCDpEvent.rho"),
    ("zcdp", dp_accounting.ZCDpEvent(1.0, float("nan")), ValueError, "ZCDpEvent.xi"),
    ("zcdp", SELF(G(1.0), -99), ValueError, "SelfComposedDpEvent.count"),
    ("pure", SELF(dp_accounting.LaplaceDpEvent(1.0), -99), ValueError, "SelfComposedDpEvent.count"),
    ("pure", dp_accounting.LaplaceDpEvent(0.0), ValueError, "LaplaceDpEvent.noise_multiplier"),
    ("gdp", G("1"), TypeError, "GaussianDpEvent.noise_multiplier"),
    ("gdp", G(float("nan")), ValueError, "GaussianDpEvent.noise_multiplier"),
    ("rdp", G(float("inf")), ValueError, "GaussianDpEvent.noise_multiplier"),
    ("rdp", G(-1.0), ValueError, "GaussianDpEvent.noise_multiplier"),
    ("rdp", POISSON(1.5, G(1.0)), ValueError, "PoissonSampledDpEvent.sampling_probability"),
    ("rdp", POISSON("0.1", G(1.0)), TypeError, "PoissonSampledDpEvent.sampling_probability"),
    ("rdp", POISSON(0.1, 1.0), TypeError, "PoissonSampledDpEvent.event"),
    ("approx", dp_accounting.SampledWithoutReplacementDpEvent(10, 11, G(1.0)), ValueError, "sample_size"),
    ("approx", dp_accounting.ComposedDpEvent([G(1.0), "x"]), TypeError, r"ComposedDpEvent.events\[1\]"),
    ("approx", dp_accounting.NonPrivateDpEvent(), TypeError, "NonPrivateDpEvent"),
    ("approx", SELF(G(1.0), 10**9), ValueError, "mu"),  # 72.8 TiB of PLD in dp-accounting; refused unbuilt
    # bounded work: its PLD (~10^9 points) is not built; its RDP conversion is charged, and does not fit
    ("approx", SELF(POISSON(0.5, G(0.5)), 10**7), BudgetExceeded, "exceeds remaining"),
]


@pytest.mark.parametrize("currency, event, error, field", MALFORMED)
def test_every_malformed_event_is_refused_naming_the_field_and_changes_nothing(currency, event, error, field):
    ledger = ledgers()[currency]
    before = ledger.root.spent
    with pytest.raises(error, match=field):
        charge(ledger, event)
    assert ledger.root.spent == before and ledger.root.usage() == []


def test_huge_gaussian_compositions_are_costed_in_closed_form_and_refused_by_the_budget():
    ledger = ledgers()["approx"]
    with pytest.raises(BudgetExceeded):  # μ² = 10⁵: ε ≈ 5·10⁴ (dp-accounting ran past 20 s building its PLD)
        charge(ledger, SELF(G(10.0), 10**7))
    assert ledger.root.usage() == []


def test_count_zero_is_a_no_op_in_every_currency():
    for ledger in ledgers().values():
        receipt = charge(ledger, SELF(G(1.0) if ledger.currency != "pure" else dp_accounting.LaplaceDpEvent(1.0), 0))
        assert not any(getattr(receipt.charged, "epsilons", None) or [getattr(receipt.charged, f, 0) for f in
                                                                      ("eps", "rho", "mu_squared")])


SAMPLED = POISSON(0.1, G(3.0))
BY_CURRENCY = {"gdp": [G(2.0), G(0.7)], "zcdp": [G(2.0), dp_accounting.ZCDpEvent(0.03)],
               "pure": [dp_accounting.LaplaceDpEvent(3.0)], "rdp": [G(2.0), SAMPLED],
               "approx": [G(2.0)]}


def forms(event, n):
    """SelfComposed(e, n), Composed([e] * n), and a nested mixture with a no-op: one normal form."""
    halves = dp_accounting.ComposedDpEvent([SELF(event, n // 2), dp_accounting.ComposedDpEvent(
        [event] * (n - n // 2)), dp_accounting.NoOpDpEvent()])
    return SELF(event, n), dp_accounting.ComposedDpEvent([event] * n), halves


@pytest.mark.parametrize("currency", sorted(BY_CURRENCY))
@pytest.mark.parametrize("n", [1, 2, 7])
def test_self_composition_costs_the_same_as_the_explicit_composition(currency, n):
    for event in BY_CURRENCY[currency]:
        costs = [charge(ledgers()[currency], form).charged for form in forms(event, n)]
        assert costs[0] == costs[1] == costs[2]


def test_a_sampled_self_composition_costs_the_same_pld_as_the_explicit_one():
    mixed = dp_accounting.ComposedDpEvent([SAMPLED, G(5.0)])
    costs = [charge(Ledger(ApproxDP(100, 1e-5), relation="add_remove"), form).charged for form in forms(mixed, 3)]
    assert costs[0] == costs[1] == costs[2]


@pytest.mark.parametrize("z, n", [(1.0, 100), (2.5, 7), (0.3, 1)])
def test_unsampled_gaussian_self_composition_is_the_gaussian_z_over_root_n(z, n):
    delta = 1e-6
    event = SELF(G(z), n)
    mu_squared = n / Fraction(z) ** 2
    assert charge(Ledger(GDP(100), relation="add_remove"), event).charged == GDP.from_mu_squared(mu_squared)
    assert charge(Ledger(ZCDP(5000), relation="add_remove"), event).charged == ZCDP(mu_squared / 2)
    approx = Ledger(ApproxDP(500, 1e-5), relation="add_remove")
    eps = float(charge(approx, event).charged.eps)
    reference = gaussian_eps(math.sqrt(n) / z, delta)
    assert reference <= eps <= reference * (1 + 1e-8)
    curve = charge(Ledger(RDP(rdp.gaussian_curve(Fraction(5000))), relation="add_remove"), event).charged
    accountant = rdp_privacy_accountant.RdpAccountant([float(o) for o in rdp.ORDERS])
    accountant.compose(G(z / math.sqrt(n)))
    np.testing.assert_allclose([float(e) for e in curve.epsilons], accountant._rdp, rtol=1e-12)


@pytest.mark.parametrize("z, steps", [(2.0, 7), (1.0, [3, 8, 5]), (0.5, 1)])
def test_dp_ftrl_tree_is_charged_as_the_gaussian_tree_with_doubled_sensitivity(z, steps):
    event = TREE(z, steps)
    special = rdp_privacy_accountant.RdpAccountant([2.0], dp_accounting.NeighboringRelation.REPLACE_SPECIAL)
    special.compose(TREE(z / 2, steps))  # dp-accounting's tree at z/2: α μ²/2 with μ² the replace-one cost
    expected = Fraction(special._rdp[0])  # = 2 · μ²/2
    for relation in ("replace_one", "add_remove"):
        receipt = Ledger(GDP(100)).charge_event(event, mechanism="DP-FTRL", relation=relation)
        assert float(receipt.charged.mu_squared) == pytest.approx(float(expected), rel=1e-12)
        assert receipt.charged.mu_squared >= expected * (1 - Fraction(1, 10**12))
    approx = Ledger(ApproxDP(100, 1e-5)).charge_event(event, mechanism="DP-FTRL", relation="replace_one", delta=1e-6)
    assert float(approx.charged.eps) >= gaussian_eps(math.sqrt(float(expected)), 1e-6)
    with pytest.raises(ValueError, match="REPLACE_SPECIAL"):
        Ledger(GDP(100), relation="add_remove").charge_event(event, mechanism="DP-FTRL", relation="add_remove")
    with pytest.raises(TypeError, match="sampled"):
        Ledger(ApproxDP(100, 1e-5)).charge_event(POISSON(0.1, event), mechanism="DP-FTRL", relation="replace_one",
                                                 delta=1e-6)
