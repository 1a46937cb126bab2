"""The V/H tree pair: one joint charge (the largest of the three neighbour cases), paid before any noise."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from accounting import GDP, ApproxDP, BudgetExceeded, Ledger
from dpglm.policies.joint_dp import JointDPGLMBandit
from dpglm.policies.tree_pair import build_tree_pair
from mechanisms.lattice import GaussianLattice


def _mu_direct(tree, shift: float, d: int) -> float:
    """μ′ of one node of ``tree`` for a shift of Frobenius norm ``shift``, from the formula written out.

    The node is rounded to the grid g and gets N_ℤ(0, S) noise on m = d² entries: the
    rounded node moves by ≤ shift/g + √m grid steps, and a discrete Gaussian is then
    ((steps + √m)/√S)-GDP up to a term exp(−2π²S) that vanishes here
    (docs/float-safe-noise.md, "Discrete Gaussian as GDP").
    """
    lattice = GaussianLattice(tree.sigma, tree.charged_sensitivity, d * d)
    assert math.exp(-2 * math.pi**2 * lattice.sigma2) == 0.0
    m = d * d
    return (shift / lattice.grid + 2 * math.sqrt(m)) / math.sqrt(lattice.sigma2)


@pytest.mark.parametrize("eps", [1024.0, 1e6])
def test_pair_charge_is_the_largest_neighbour_case_computed_directly(eps):
    d, horizon = 3, 5000
    policy = JointDPGLMBandit("probit", d, horizon, 2.5, eps, 0.02, np.random.default_rng(0))
    assert policy.exploration_possible
    v, h = policy.design_v.tree, policy.design_h.tree
    depth = int(horizon).bit_length()
    both_v = depth * _mu_direct(v, v.charged_sensitivity, d) ** 2
    both_h = depth * _mu_direct(h, h.charged_sensitivity, d) ** 2
    move = depth * (_mu_direct(v, v.charged_sensitivity / math.sqrt(2), d) ** 2
                    + _mu_direct(h, h.charged_sensitivity / math.sqrt(2), d) ** 2)
    joint = max(both_v, both_h, move)
    pool = policy.ledger.account("pool")
    spent = float(pool.spent.mu_squared)  # before round 1: the trees' charges only
    assert spent == pytest.approx(joint, rel=1e-12)
    # Each tree's own cost covers its both-in-one-tree case; the move case is the largest by the
    # lattice's rounding allowance only, and the pair fits the plan's tree share.
    assert both_v <= float(v.cost.mu_squared) and both_h <= float(h.cost.mu_squared)
    assert max(both_v, both_h) < move <= policy.plan.mu_sq_trees * (1 + 1e-15)
    assert spent >= policy.plan.mu_sq_trees * (1 - 1e-6)
    # Continuous Gaussian (Δ/σ per node, L nodes): the joint μ² is half of what charging the two
    # trees separately would cost, i.e. each tree's σ is √2 smaller for the same share.
    continuous = depth * max(2 / v.sigma**2, 2 * (h.sensitivity / math.sqrt(2)) ** 2 / h.sigma**2,
                             1 / v.sigma**2 + (h.sensitivity / math.sqrt(2)) ** 2 / h.sigma**2)
    assert spent == pytest.approx(continuous, rel=1e-4)
    assert float(v.cost.mu_squared + h.cost.mu_squared) == pytest.approx(2 * spent, rel=1e-6)


def test_pair_is_refused_before_any_noise_when_the_pool_cannot_pay():
    ledger = Ledger(ApproxDP(4.0, 0.02))
    pool = ledger.split({"pool": 1}, currency={"pool": "gdp"})["pool"]
    mu_sq = float(pool.budget.mu_squared)
    pool.charge(GDP.from_mu_squared(Fraction(mu_sq) / 2), mechanism="earlier release")
    rng = np.random.default_rng(7)
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceeded):
        build_tree_pair(pool, 100, 2, (math.sqrt(2), 0.3), rng, 0.75 * mu_sq)
    assert rng.bit_generator.state == state
    # Fits: the pool then holds the earlier release plus the pair's joint μ², at most the share asked.
    pair = build_tree_pair(pool, 100, 2, (math.sqrt(2), 0.3), rng, 0.4 * mu_sq)
    assert pool.spent.mu_squared == Fraction(mu_sq) / 2 + pair.mu_sq
    assert pair.mu_sq <= Fraction(0.4 * mu_sq)
    assert rng.bit_generator.state == state
