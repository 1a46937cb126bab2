"""The ledger's claim (accounting/claims.py, ladder.py, plans.py; docs/accounting.md "Claims").

Checked against independent sources: a Monte-Carlo of the ex-post hockey-stick divergence under an adversary that
stops when it is ahead (the definition itself, computed from simulated privacy losses), dp-accounting's RDP and PLD
accountants, opacus's RDP calibration, and closed forms.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from accounting import GDP, RDP, ZCDP, ApproxDP, BudgetExceeded, Ledger, PureDP, calibrate_noise_multiplier
from accounting.gdp import approx_to_gdp_certified, gdp_to_approx_certified
from accounting.ladder import LADDER_SHARE, filter_delta
from accounting.plans import OffPlan
from accounting.rdp import gaussian_curve


def sgd(q, z, steps=1):
    step = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z))
    return step if steps == 1 else dp_event.SelfComposedDpEvent(step, steps)


def dp_accounting_eps(event, delta, accountant):
    acc = (rdp_privacy_accountant.RdpAccountant() if accountant == "rdp"
           else pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4))
    acc.compose(event)
    return acc.get_epsilon(delta)


# ----- validity: the ex-post hockey-stick under an adversary that stops when it is ahead ------------------------
def _claims_after_each_step(currency, share, mu, steps):
    """The claim's ε after k = 0, 1, ... charges of one μ-GDP Gaussian step each, until the filter refuses."""
    ledger = Ledger(ApproxDP(*share), relation="add_remove")
    account = ledger.split({"a": 1}, currency={"a": currency})["a"]
    cost = {"gdp": GDP(mu), "zcdp": ZCDP(Fraction(mu) ** 2 / 2),
            "rdp": RDP(gaussian_curve(Fraction(mu) ** 2 / 2))}[currency]
    claims = [0.0]
    for _ in range(steps):
        try:
            account.charge(cost, mechanism="gaussian", relation="add_remove")
        except BudgetExceeded:
            break
        claims.append(float(ledger.guarantee().eps))
    return np.array(claims)


def _expost_delta(claims, mu, stop_at, paths=200_000, seed=0):
    """E_P[(1 − e^{E − L})⁺] and its standard error over simulated runs of Gaussian steps of μ.

    Under the first input each step's privacy loss is μZ + μ²/2 (Z standard normal). The adversary runs the
    steps one by one and stops as soon as the loss reaches ``stop_at[k]`` after k steps — the most it can do to
    push the loss above a figure read off the run — or when the ledger refuses.
    """
    rng = np.random.default_rng(seed)
    loss = np.zeros(paths)
    ran = np.zeros(paths, dtype=int)
    alive = np.ones(paths, dtype=bool)
    for k in range(1, len(claims)):
        loss = np.where(alive, loss + mu * rng.standard_normal(paths) + mu * mu / 2, loss)
        ran = np.where(alive, k, ran)
        alive &= loss < stop_at[k]
    gap = np.maximum(0.0, 1.0 - np.exp(claims[ran] - loss))
    return gap.mean(), gap.std() / math.sqrt(paths)


@pytest.mark.parametrize("currency", ["gdp", "zcdp", "rdp"])
def test_the_claim_holds_ex_post_against_an_adversary_that_stops_when_ahead(currency):
    share, mu = (3, Fraction(1, 20)), 0.2
    claims = _claims_after_each_step(currency, share, mu, 400)
    # The realised spend converted as if its costs had been fixed (what guarantee() returned before): not a claim.
    old = np.array([0.0] + [float(gdp_to_approx_certified(Fraction(mu) ** 2 * k, share[1]))
                            for k in range(1, len(claims))])
    for stop_at in (claims, old):  # the adversary aims at each figure in turn
        new_delta, new_se = _expost_delta(claims, mu, stop_at)
        assert new_delta + 4 * new_se <= float(share[1])
    old_delta, old_se = _expost_delta(old, mu, old)
    assert old_delta - 4 * old_se > float(share[1])  # 0.080 at δ = 0.05: the old figure was broken
    assert claims[-1] <= share[0]  # never above the share


# ----- tightness: DP-SGD charged step by step, against dp-accounting ---------------------------------------------
def _per_step_claim(q, z, steps):
    ledger = Ledger(ApproxDP(8, 1e-5), relation="add_remove")
    account = ledger.split({"sgd": 1}, currency={"sgd": "rdp"})["sgd"]
    for _ in range(steps):
        account.charge_event(sgd(q, z), mechanism="DP-SGD", relation="add_remove")
    return ledger.guarantee()


CASES = [(0.8, 100), (1.0, 1000)]
SLOW_CASES = [(z, T) for z in (0.8, 1.0) for T in (100, 300, 1000, 3000) if (z, T) not in CASES]


@pytest.mark.parametrize("z, steps", CASES + [pytest.param(*c, marks=pytest.mark.slow) for c in SLOW_CASES])
def test_per_step_dpsgd_claim_lies_between_the_pld_and_1_6_times_the_rdp_accountant(z, steps):
    claim = _per_step_claim(0.01, z, steps)
    assert claim.delta == Fraction(1, 10**5) and claim.bases == ("odometer",)
    rdp_eps = dp_accounting_eps(sgd(0.01, z, steps), 1e-5, "rdp")
    pld_eps = dp_accounting_eps(sgd(0.01, z, steps), 1e-5, "pld")
    assert pld_eps <= float(claim.eps) <= 1.6 * rdp_eps


def test_a_declared_plan_claims_its_pld_within_5_percent():
    ledger = Ledger(ApproxDP(8, 1e-5), relation="add_remove")
    account = ledger.split({"sgd": 1}, currency={"sgd": "rdp"})["sgd"]
    figure = account.plan([sgd(0.01, 1.0, 1000)], relation="add_remove")
    assert ledger.guarantee().eps == 0  # nothing charged yet
    for _ in range(300):  # a prefix of the plan, charged one step at a time
        account.charge_event(sgd(0.01, 1.0), mechanism="DP-SGD", relation="add_remove")
    claim = ledger.guarantee()
    pld_eps = dp_accounting_eps(sgd(0.01, 1.0, 1000), 1e-5, "pld")
    assert claim.eps == figure and claim.bases == ("plan",)
    assert pld_eps <= float(claim.eps) <= 1.05 * pld_eps


def test_an_off_plan_charge_is_refused_and_changes_nothing():
    ledger = Ledger(ApproxDP(8, 1e-5), relation="add_remove")
    account = ledger.split({"sgd": 1}, currency={"sgd": "rdp"})["sgd"]
    account.plan([sgd(0.01, 1.0, 10), sgd(0.02, 2.0, 5)], relation="add_remove")
    for _ in range(3):
        account.charge_event(sgd(0.01, 1.0), mechanism="DP-SGD", relation="add_remove")
    before = ledger.to_json()
    with pytest.raises(OffPlan, match="not the next step of the plan"):
        account.charge_event(sgd(0.01, 0.9), mechanism="DP-SGD", relation="add_remove")
    with pytest.raises(OffPlan):  # a step the plan does not hold
        account.charge_event(dp_event.GaussianDpEvent(5.0), mechanism="release", relation="add_remove")
    assert ledger.to_json() == before
    account.charge_event(sgd(0.02, 2.0), mechanism="DP-SGD", relation="add_remove")  # skipping is allowed
    with pytest.raises(OffPlan):  # going back is not
        account.charge_event(sgd(0.01, 1.0), mechanism="DP-SGD", relation="add_remove")
    with pytest.raises(ValueError, match="before the first charge"):
        account.plan([sgd(0.01, 1.0, 10)], relation="add_remove")


def test_a_plan_must_fit_its_share_and_is_journalled(tmp_path):
    path = tmp_path / "plan.db"
    ledger = Ledger(ApproxDP(8, 1e-5), path, relation="add_remove")
    account = ledger.split({"sgd": 1}, currency={"sgd": "rdp"})["sgd"]
    with pytest.raises(ValueError, match="exceeds account"):
        account.plan([sgd(0.1, 1.0, 500)], relation="add_remove")
    figure = account.plan([sgd(0.01, 1.0, 100)], relation="add_remove")
    for _ in range(40):
        account.charge_event(sgd(0.01, 1.0), mechanism="DP-SGD", relation="add_remove")
    ledger.close()
    reopened = Ledger.from_journal(path)
    again = reopened.account("sgd")
    assert again.declared_plan.steps_left == 60 and reopened.guarantee().eps == figure
    with pytest.raises(OffPlan):
        again.charge_event(sgd(0.01, 2.0), mechanism="DP-SGD", relation="add_remove")
    reopened.close()


# ----- the claim's shape -------------------------------------------------------------------------------------------
def test_an_approx_claim_is_stated_at_the_budget_delta_not_the_delta_spent():
    ledger = Ledger(ApproxDP(1, 1e-5))
    ledger.charge(ApproxDP(0.25, 1e-7), mechanism="m")
    ledger.charge(PureDP(0.25), mechanism="m")
    claim = ledger.guarantee()
    assert (claim.eps, claim.delta) == (Fraction(1, 2), Fraction(1, 10**5))
    assert ledger.guarantee(1e-4).delta == Fraction(1, 10**4)  # a larger δ is implied
    with pytest.raises(ValueError, match="budget's delta"):
        ledger.guarantee(1e-6)


def test_a_pure_claim_is_the_realised_epsilon():
    ledger = Ledger(PureDP(3))
    ledger.charge(PureDP(0.5), mechanism="m")
    ledger.charge(PureDP(0.5), mechanism="m", partition=1)
    ledger.charge(PureDP(0.75), mechanism="m", partition=2)
    assert ledger.guarantee().cost == PureDP(Fraction(5, 4))


def test_a_gdp_share_reserves_a_tenth_of_its_delta_for_the_rungs():
    ledger = Ledger(ApproxDP(4, 0.02))
    pool = ledger.split({"pool": 1}, currency={"pool": "gdp"})["pool"]
    mu_max = approx_to_gdp_certified(Fraction(4), Fraction(9, 500))
    assert pool.budget.mu_squared == mu_max * mu_max
    assert pool.budget.mu == pytest.approx(1.598, abs=5e-4)  # 1.6188 at the whole δ: 1.3% more noise
    assert sum(pool.ladder.deltas) + pool.ladder.top_delta <= Fraction(1, 50)
    assert Fraction(1, 10) == LADDER_SHARE and filter_delta(Fraction(1, 50)) == Fraction(9, 500)
    pool.charge(GDP(mu_max), mechanism="all of it")
    assert 4 - Fraction(1, 10**9) <= ledger.guarantee().eps <= 4  # the whole budget: the share, never above


def test_calibration_holds_the_workloads_order_and_matches_opacus():
    opacus_utils = pytest.importorskip("opacus.accountants.utils")
    ledger = Ledger(ApproxDP(8, 1e-5), relation="add_remove")
    account = ledger.split({"sgd": 1}, currency={"sgd": "rdp"})["sgd"]
    z = calibrate_noise_multiplier(account, sample_rate=0.01, steps=1000)
    theirs = opacus_utils.get_noise_multiplier(target_epsilon=8, target_delta=1e-5, sample_rate=0.01, steps=1000,
                                               accountant="rdp")
    assert theirs <= z <= 1.05 * theirs
    account.charge_event(sgd(0.01, z, 1000), mechanism="DP-SGD", relation="add_remove")  # granted
    assert ledger.guarantee().eps <= 8


@pytest.mark.parametrize("q, z, steps", [(0.01, 1.0, 1000), (0.1, 2.0, 500), (0.25, 3.0, 200), (0.07, 1.2, 300),
                                         (0.5, 4.0, 50)])
def test_the_issues_five_dpsgd_runs_fit_a_default_share_alone(q, z, steps):
    ledger = Ledger(ApproxDP(8, 1e-5), relation="add_remove")
    account = ledger.split({"sgd": 1}, currency={"sgd": "rdp"})["sgd"]
    account.charge_event(sgd(q, z, steps), mechanism="DP-SGD", relation="add_remove")
    assert dp_accounting_eps(sgd(q, z, steps), 1e-5, "pld") <= float(ledger.guarantee().eps) <= 8


def test_a_gdp_plan_may_be_charged_in_any_order_and_claims_the_exact_gaussian():
    ledger = Ledger(ApproxDP(4, 0.02))
    pool = ledger.split({"pool": 1}, currency={"pool": "gdp"})["pool"]
    figure = pool.plan([GDP(0.5), GDP(0.3), GDP(0.3)])
    # μ² = 0.25 + 0.09 + 0.09: one Gaussian (Dong, Roth & Su 2022, Cor. 3.3) at the share's whole δ
    assert figure == gdp_to_approx_certified(Fraction(43, 100), Fraction(1, 50))
    pool.charge(GDP(0.3), mechanism="refit")
    pool.charge(GDP(0.5), mechanism="tree")  # the plan's order is not the charges' order
    assert ledger.guarantee().eps == figure and ledger.guarantee().bases == ("plan",)
    pool.charge(GDP(0.3), mechanism="refit")
    with pytest.raises(OffPlan):
        pool.charge(GDP(0.3), mechanism="refit")  # two refits were planned, not three
    with pytest.raises(OffPlan):
        pool.charge(GDP(0.1), mechanism="other")


def test_a_read_only_exhausted_journal_says_read_only_not_over_budget(tmp_path):
    """On main a charge on an exhausted journal opened read-only raised BudgetExceeded (issue 31)."""
    from accounting import JournalReadOnlyError

    path = tmp_path / "spent.db"
    with Ledger(PureDP(1), path) as ledger:
        ledger.charge(PureDP(1), mechanism="everything")
    with Ledger.from_journal(path, read_only=True) as shown:
        for attempt in (lambda: shown.charge(PureDP(0.5), mechanism="more"),
                        lambda: shown.split({"child": 1}), lambda: shown.root.split({"other": 1}, partition=1)):
            with pytest.raises(JournalReadOnlyError, match="opened read-only"):
                attempt()
