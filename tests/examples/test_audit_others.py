"""Auditing other libraries through the public audit API (slow; skipped without the audit-others extra).

diffprivlib's Laplace and analytic Gaussian mechanisms, and opacus's DP-SGD on scikit-learn's
breast-cancer data (white-box gradient canary, black-box canary example). A correct library is
consistent with its claim; the white-box DP-SGD audit, whose score is the whole privacy loss, must
certify a real part of it.
"""

import math

import pytest


@pytest.mark.slow
def test_diffprivlib_laplace_and_gaussian_are_consistent_with_their_claims(load_example):
    pytest.importorskip("sklearn")
    pytest.importorskip("diffprivlib")
    results = load_example("audit_diffprivlib").main(runs=20_000, epsilons=(1.0,))
    laplace, gaussian = results
    assert laplace.verdict == "consistent" and gaussian.verdict == "consistent"
    # Laplace's output is its own likelihood-ratio statistic: 20 000 runs certify most of ε = 1.
    assert 0.7 < laplace.epsilon_lower_bound <= 1.0
    assert gaussian.claimed_delta == 1e-5


@pytest.mark.slow
def test_opacus_white_box_and_black_box_audits_are_consistent_with_the_receipt(load_example):
    pytest.importorskip("sklearn")
    pytest.importorskip("opacus")
    module = load_example("audit_opacus")
    white = module.whitebox_audit(steps=4, noise_multiplier=2.0).run(1_000, seed=0, holdout_runs=300)
    # Full batch, 4 steps, z = 2: μ = √4/2 = 1, read from the ledger's GDP receipt.
    assert white.claimed_mu == pytest.approx(1.0)
    assert white.verdict == "consistent" and white.mu_lower_bound > 0.5
    black = module.blackbox_audit(steps=4, noise_multiplier=2.0).run(1_000, seed=0, holdout_runs=300)
    # ε of μ = 1 at δ = 1e-5 (the Gaussian curve), read from the same GDP receipt.
    assert black.claimed_epsilon == pytest.approx(white.claimed_epsilon) and math.isfinite(black.claimed_epsilon)
    assert black.verdict == "consistent" and black.epsilon_lower_bound < black.claimed_epsilon
