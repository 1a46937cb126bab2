"""Gaussian and Laplace audits: tight on the real mechanisms, refuting halved-sensitivity variants."""

import math

import numpy as np
import pytest
from dp_accounting import get_sigma_gaussian

from audits.noise import GaussianAudit, LaplaceAudit
from audits.planted import HalvedSensitivityGaussian, HalvedSensitivityLaplace


def test_gaussian_claim_is_the_analytic_gaussian_of_the_target():
    audit = GaussianAudit(1.0, 1e-5)
    claim = audit.claim()
    # Balle–Wang analytic Gaussian via dp-accounting: σ for (ε, δ) at sensitivity 1.
    assert claim.mu == pytest.approx(1 / get_sigma_gaussian(1.0, 1e-5), rel=1e-6)
    assert claim.epsilon == pytest.approx(1.0, rel=1e-6)
    # The ledger's zCDP → (ε, δ) conversion is valid but looser than the exact Gaussian curve.
    assert claim.ledger_epsilon > claim.epsilon


def test_gaussian_bulk_runs_have_the_single_mechanisms_law():
    audit = GaussianAudit(2.0)
    rng = np.random.default_rng(3)
    null, alternative = audit.sample(0, 40_000, rng)[:, 0], audit.sample(1, 40_000, rng)[:, 0]
    sigma = 1 / audit.claim().mu  # Δ/σ = μ with Δ = 1
    # 40 000 draws: the sample mean is within 5 standard errors of 0 and of Δ, the std within 2 %.
    assert abs(null.mean()) < 5 * sigma / 200 and abs(alternative.mean() - 1) < 5 * sigma / 200
    assert null.std() == pytest.approx(sigma, rel=0.02)


def test_gaussian_audit_is_tight_and_consistent():
    result = GaussianAudit(2.0).run(20_000, seed=1)
    assert result.verdict == "consistent"
    assert 0.8 * 2.0 <= result.epsilon_lower_bound <= 2.0
    assert result.mu_lower_bound <= result.claimed_mu


def test_halved_sensitivity_gaussian_is_refuted():
    result = GaussianAudit(1.0, mechanism_class=HalvedSensitivityGaussian).run(20_000, seed=1)
    assert result.verdict == "violated"
    # Noise for Δ/2 on a statistic that moves by Δ: the true μ is twice the claim.
    assert result.mu_lower_bound > 1.6 * result.claimed_mu
    assert result.epsilon_lower_bound > result.claimed_epsilon


def test_laplace_audit_is_tight_and_consistent():
    # REFERENCES: ≈ 954 runs per side certify 0.8·ε at ε = 1; 20 000 certify more.
    result = LaplaceAudit(1.0).run(20_000, seed=2)
    assert result.verdict == "consistent"
    assert result.claimed_epsilon == 1.0 and result.claimed_delta == 0.0
    assert 0.8 <= result.epsilon_lower_bound <= 1.0


def test_halved_sensitivity_laplace_is_refuted():
    result = LaplaceAudit(1.0, mechanism_class=HalvedSensitivityLaplace).run(20_000, seed=2)
    assert result.verdict == "violated"
    # The scale is Δ/(2ε): the true ε is 2, and the bound gets most of the way there.
    assert 1.0 < result.epsilon_lower_bound <= 2.0 + 1e-9
    assert result.epsilon_lower_bound > 0.8 * 2.0


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="epsilon"):
        GaussianAudit(0.0)
    with pytest.raises(ValueError, match="delta"):
        GaussianAudit(1.0, delta=0.0)
    with pytest.raises(ValueError, match="sensitivity"):
        LaplaceAudit(1.0, sensitivity=-1.0)
    with pytest.raises(ValueError, match="runs"):
        LaplaceAudit(1.0).run(5)
    assert math.isfinite(GaussianAudit(4.0).claim().epsilon)


def test_wrong_kinds_are_type_errors_naming_the_argument():
    # accounting.validation's rule: a bool, a string or a float count are the wrong kind, not a value out of range.
    with pytest.raises(TypeError, match="epsilon"):
        GaussianAudit(True)
    with pytest.raises(TypeError, match="delta"):
        GaussianAudit(1.0, delta="1e-5")
    with pytest.raises(TypeError, match="runs"):
        LaplaceAudit(1.0).run(100.0)
    with pytest.raises(ValueError, match=r"seed must be an int >= 0"):
        LaplaceAudit(1.0).run(100, seed=-1)
