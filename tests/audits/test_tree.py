"""Binary-tree audit: Σⱼ y_{2^j} certifies the tree's whole zCDP charge; a depth-unscaled tree is refuted."""

import math

import numpy as np
import pytest
from scipy import stats

from audits.planted import DepthUnscaledTree, HalvedNoiseFactorization, HalvedNoiseTree
from audits.tree import TreeAudit, factorization_weights


def test_tree_scores_are_the_gaussian_pair_of_the_derivation():
    # T = 32: L = 6 nodes hold x₁; Σⱼ y_{2^j} ~ N(±L/2, L σ²) with σ² = L Δ²/(2ρ).
    audit = TreeAudit(2.0, horizon=32)
    depth, rho = 6, float(audit.rho)
    sigma = math.sqrt(depth / (2 * rho))
    rng = np.random.default_rng(5)
    null, alternative = audit.sample(0, 20_000, rng)[:, 0], audit.sample(1, 20_000, rng)[:, 0]
    standard_error = math.sqrt(depth) * sigma / math.sqrt(20_000)
    assert abs(null.mean() + depth / 2) < 5 * standard_error
    assert abs(alternative.mean() - depth / 2) < 5 * standard_error
    assert null.std() == pytest.approx(math.sqrt(depth) * sigma, rel=0.03)
    # μ of the pair is the tree's whole charge: √(2ρ) = √L Δ/σ.
    assert audit.claim().mu == pytest.approx(math.sqrt(depth) / sigma, rel=1e-9)


def test_tree_audit_is_tight_and_consistent():
    result = TreeAudit(2.0, horizon=32).run(20_000, seed=3)
    assert result.verdict == "consistent"
    assert 0.8 * 2.0 <= result.epsilon_lower_bound <= 2.0


def test_depth_unscaled_tree_is_refuted():
    # Missing √L with L = 6: the true μ is √6 ≈ 2.45 times the claim; REFERENCES says ≈ 300
    # runs refute a 3.3× gap, so 2 000 runs suffice here.
    result = TreeAudit(1.0, horizon=32, mechanism_class=DepthUnscaledTree).run(2_000, seed=3)
    assert result.verdict == "violated"
    assert result.mu_lower_bound > 1.5 * result.claimed_mu


def test_bad_horizon_and_shape_are_refused():
    with pytest.raises(ValueError, match="horizon"):
        TreeAudit(1.0, horizon=0)
    with pytest.raises(ValueError, match="shape"):
        TreeAudit(1.0, shape="tensor")


def test_matrix_runs_are_the_off_diagonal_gaussian_pair_of_the_bandits_trees():
    # 2×2 PSD leaves (Δ/(2√2))uuᵀ vs (Δ/(2√2))vvᵀ: an off-diagonal entry moves by Δ/√2 and its
    # node noise is N(0, σ²/2) ((Z + Zᵀ)/2), so Σⱼ y_{2^j} ~ N(∓LΔ/(2√2), Lσ²/2); T = 16, L = 5.
    audit = TreeAudit(2.0, horizon=16, shape="matrix", sensitivity=2**0.5)
    depth, sigma = 5, audit._single.sigma
    assert sigma == pytest.approx(2**0.5 * math.sqrt(depth / (2 * float(audit.rho))), rel=1e-8)
    rng = np.random.default_rng(7)
    null, alternative = audit.sample(0, 20_000, rng)[:, 0], audit.sample(1, 20_000, rng)[:, 0]
    shift = depth * 2**0.5 / (2 * math.sqrt(2))
    spread = math.sqrt(depth / 2) * sigma
    assert abs(null.mean() + shift) < 5 * spread / math.sqrt(20_000)
    assert abs(alternative.mean() - shift) < 5 * spread / math.sqrt(20_000)
    assert null.std() == pytest.approx(spread, rel=0.03)
    # Runs of one bulk tree are independent: neighbouring entries are uncorrelated.
    assert abs(np.corrcoef(null[:-1:2], null[1::2])[0, 1]) < 0.05


def test_matrix_bulk_matches_a_loop_of_two_by_two_trees_as_the_bandit_builds_them():
    # A slow reference: 2×2 PSD trees built one per run, each fed the rank-one leaf itself.
    from accounting import ZCDP
    from audits.base import huge_budget_account
    from mechanisms.tree import BinaryTreeMechanism

    audit = TreeAudit(2.0, horizon=8, shape="matrix", sensitivity=2**0.5)
    rng = np.random.default_rng(3)
    u = np.array([1.0, 1.0]) / 2 ** 0.5
    reference = []
    for _ in range(1500):
        tree = BinaryTreeMechanism(huge_budget_account("zcdp"), 8, (2, 2), 2**0.5, rng, cost=ZCDP(audit.rho), psd=True)
        total = np.zeros((2, 2))
        for t in range(1, 9):
            release = tree.append(np.outer(u, u) if t == 1 else np.zeros((2, 2))).value
            if t & (t - 1) == 0:
                total += release
        reference.append(-total[0, 1])
    bulk = audit.sample(0, 1500, rng)[:, 0]
    assert tree.sigma == audit._single.sigma
    assert stats.ks_2samp(np.array(reference), bulk).pvalue > 1e-3


def test_halved_noise_matrix_tree_is_refuted():
    result = TreeAudit(1.0, horizon=32, shape="matrix", mechanism_class=HalvedNoiseTree).run(5_000, seed=2)
    assert result.verdict == "violated"
    # σ/2: the true μ is twice the claim; a valid bound stays below it.
    assert 1.4 * result.claimed_mu < result.mu_lower_bound <= 2 * result.claimed_mu


def test_factorization_weights_certify_its_whole_charge():
    from mechanisms.factorization import (
        SquareRootFactorizationMechanism,
        square_root_coefficients,
    )

    c = square_root_coefficients(32)
    w = factorization_weights(c)
    # 𝟙ᵀ(BBᵀ)⁻¹𝟙 = Σ c_k² (module docstring): the LR statistic's μ is the charged √(2ρ).
    assert float(np.ones(32) @ w) == pytest.approx(float(np.sum(c**2)), rel=1e-10)
    result = TreeAudit(2.0, horizon=32, mechanism_class=SquareRootFactorizationMechanism).run(20_000, seed=4)
    assert result.verdict == "consistent" and result.mechanism == "SquareRootFactorizationMechanism"
    assert 0.8 * 2.0 <= result.epsilon_lower_bound <= 2.0


def test_halved_noise_factorization_is_refuted():
    result = TreeAudit(1.0, horizon=32, mechanism_class=HalvedNoiseFactorization).run(5_000, seed=2)
    assert result.verdict == "violated"
    assert 1.4 * result.claimed_mu < result.mu_lower_bound <= 2 * result.claimed_mu
