"""DP-SGD on real rows with crafted canaries: black box (final model) and white box (every step, two runs).

Small sizes on generated data (numpy only); the digits reproduction is slow (examples/audit_dpsgd_canaries.py).
"""

import math

import numpy as np
import pytest

from audits.bounds import gdp_mu_for_epsilon
from audits.dpsgd_canary import CANARY_NORM, DPSGDBlackBoxAudit, canary_rows, stable_lr
from audits.dpsgd_whitebox import DPSGDWhiteBoxAudit
from audits.membership.data import generated
from audits.planted import AddRemoveNoiseDPSGD, HalvedNoiseVectorisedDPSGD

DATA = generated(200, 5)


def test_canary_rows_put_each_canary_in_a_column_no_real_row_uses():
    X, y = DATA
    features, labels = canary_rows(X, y, np.array([1.0, math.nan, 0.0]), 1.0)
    assert features.shape == (202, 8) and labels.tolist()[-2:] == [1.0, 0.0]
    assert not features[:200, 5:].any()
    assert features[200].tolist() == [0.0] * 5 + [CANARY_NORM, 0.0, 0.0]
    assert features[201].tolist() == [0.0] * 7 + [CANARY_NORM]


def test_the_step_size_keeps_the_canary_clipped():
    """lr·(T·C + 3√T·σ)/N is the half-width logit(1 − C/a)/a of the region where a·|σ(z) − y| ≥ C."""
    lr = stable_lr(1000.0, 20, 3.0, 1.0)
    half = lr * (20 + 3 * math.sqrt(20) * 3.0) / 1000.0
    z = CANARY_NORM * half
    assert abs(CANARY_NORM * (1 - 1 / (1 + math.exp(-z))) - 1.0) < 1e-12


def test_black_box_reaches_most_of_the_claimed_mu_and_stays_below_it():
    result = DPSGDBlackBoxAudit(10.0, data=DATA, steps=10).run(300, seed=0, holdout_runs=50)
    assert result.claimed_mu == pytest.approx(gdp_mu_for_epsilon(10.0, 1e-5), rel=1e-9)
    assert result.verdict == "consistent"
    assert 1.12 <= result.mu_lower_bound <= result.claimed_mu
    assert result.epsilon_lower_bound_clopper_pearson <= result.ceiling + 0.5


@pytest.mark.parametrize("engine, planted", [
    ("numpy", AddRemoveNoiseDPSGD),
    pytest.param("vectorised", HalvedNoiseVectorisedDPSGD, marks=pytest.mark.slow),  # 14 s: torch per fit
])
def test_black_box_refutes_half_the_noise(engine, planted):
    result = DPSGDBlackBoxAudit(2.0, data=DATA, steps=5, engine=engine, mechanism_class=planted).run(
        300, seed=1, holdout_runs=50)
    assert result.verdict == "violated"


def test_white_box_observations_are_the_clipped_gradient_plus_the_charged_noise():
    audit = DPSGDWhiteBoxAudit(4.0, data=DATA, canaries=400, steps=5)
    coins, observations, receipt = audit._run(np.random.default_rng(3))
    # ρ = μ²/2 = T(2C)²/(2σ²): σ = 2C√T/μ; label 1 gives +C, label 0 gives −C, every step.
    sigma = 2 * math.sqrt(5) / gdp_mu_for_epsilon(4.0, 1e-5)
    assert observations.shape == (5, 400)
    assert abs(observations[:, coins].mean() - 1.0) < 5 * sigma / math.sqrt(observations[:, coins].size)
    assert abs(observations[:, ~coins].mean() + 1.0) < 5 * sigma / math.sqrt(observations[:, ~coins].size)
    assert observations[:, coins].std() == pytest.approx(sigma, rel=0.08)


def test_white_box_in_two_runs_is_tight_as_gaussian_dp_and_certified_below_the_claim():
    report = DPSGDWhiteBoxAudit(10.0, data=DATA, canaries=500, steps=10).run(2, seed=0)
    assert report.verdict == "consistent"
    assert 1.5 <= report.mu_lower_bound <= report.claimed_mu
    assert 0 < report.epsilon_lower_bound <= report.claimed_epsilon


def test_white_box_refutes_the_vectorised_engines_halved_noise():
    report = DPSGDWhiteBoxAudit(2.0, data=DATA, canaries=300, steps=5, engine="vectorised",
                                mechanism_class=HalvedNoiseVectorisedDPSGD).run(2, seed=0)
    assert report.refuted_by == "μ-GDP" or report.refuted_by == "certified"
    assert report.mu_lower_bound > report.claimed_mu


def test_opacus_through_the_ledger_adapter_white_box():
    report = DPSGDWhiteBoxAudit(10.0, data=DATA, canaries=200, steps=3, engine="opacus-ledger").run(2, seed=0)
    assert report.mechanism == "opacus DP-SGD" and report.claimed_cost.startswith("GDP")
    assert report.verdict == "consistent" and report.mu_lower_bound >= 1.0
