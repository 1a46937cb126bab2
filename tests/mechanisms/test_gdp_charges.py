"""Gaussian mechanisms in a gdp account charge the μ′ that dominates their discrete noise, not Δ/σ."""

import math
from fractions import Fraction

import numpy as np
import pytest

from accounting import GDP, ApproxDP, BudgetExceeded, Ledger
from mechanisms import BinaryTreeMechanism, GaussianMechanism
from mechanisms.discrete import discrete_gaussian_gdp_mu
from mechanisms.factorization import SquareRootFactorizationMechanism
from mechanisms.lattice import GaussianLattice
from mechanisms.optim.dpsgd import DPSGD
from mechanisms.optim.projection import BallProjection


def gdp_pool(eps=4, delta=0.02):
    ledger = Ledger(ApproxDP(eps, delta))
    return ledger, ledger.split({"pool": 1}, currency={"pool": "gdp"})["pool"]


def node_mu(sigma, sensitivity, entries):
    """Independent recomputation: the lattice's S and grid, integer shift ≤ Δ/g + √m, then discrete_gaussian_gdp_mu."""
    lattice = GaussianLattice(sigma, sensitivity, entries)
    return discrete_gaussian_gdp_mu(lattice.sigma2, sensitivity / lattice.grid + math.sqrt(entries) * (1 + 1e-15),
                                    entries)


def test_gaussian_mechanism_charges_the_dominating_mu_per_release():
    _, pool = gdp_pool()
    mechanism = GaussianMechanism(pool, 1.5, np.random.default_rng(0), sigma=3.0)
    receipt = mechanism.release(np.zeros(7)).receipt
    mu = receipt.charged.mu
    assert mu >= 0.5 and mu == pytest.approx(0.5, rel=1e-7)  # never Δ/σ itself: the discrete noise is not 0.5-GDP
    assert mu == pytest.approx(node_mu(3.0, 1.5, 7), rel=1e-12)
    assert receipt.charged.mu_squared > Fraction(1, 4)
    with pytest.raises(ValueError, match="sigma"):
        GaussianMechanism(pool, 1.0, np.random.default_rng(0), cost=GDP(0.1))


def test_tree_in_a_gdp_account_spends_its_cost_and_its_noise_dominates_it():
    _, pool = gdp_pool()
    tree = BinaryTreeMechanism(pool, 100, (3, 3), 1.0, np.random.default_rng(1), psd=True)
    assert tree.cost == GDP.from_mu_squared(pool.budget.mu_squared) and pool.remaining == GDP(0)
    mu_noise = math.sqrt(tree.depth) * node_mu(tree.sigma, tree.charged_sensitivity, 9)
    assert mu_noise <= tree.cost.mu * (1 + 1e-15)
    assert mu_noise == pytest.approx(tree.cost.mu, rel=1e-8)  # σ is not over-calibrated
    continuous = tree.charged_sensitivity * math.sqrt(tree.depth) / tree.sigma
    assert continuous < tree.cost.mu and continuous == pytest.approx(tree.cost.mu, rel=1e-6)
    assert tree.append(np.eye(3) * 0.1).value.shape == (3, 3)
    _, other = gdp_pool()
    fixed = BinaryTreeMechanism(other, 100, (4,), 1.0, np.random.default_rng(1), sigma=3.0)
    assert fixed.cost.mu == pytest.approx(math.sqrt(fixed.depth) * node_mu(3.0, fixed.charged_sensitivity, 4),
                                          rel=1e-12)


def test_an_over_budget_gdp_release_is_refused_before_any_noise():
    _, pool = gdp_pool(0.5, 1e-6)
    rng = np.random.default_rng(2)
    mechanism = GaussianMechanism(pool, 1.0, rng, sigma=0.01)
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceeded):
        mechanism.release(np.zeros(3))
    assert rng.bit_generator.state == state and pool.spent == GDP(0)


def test_dpsgd_full_batch_in_a_gdp_account():
    _, pool = gdp_pool()
    X = np.random.default_rng(3).normal(size=(40, 3)) / 3
    y = (X[:, 0] > 0).astype(float)
    optimizer = DPSGD(pool, "logistic", np.random.default_rng(4), clip=1.0, engine="vectorised")
    receipt = optimizer.fit(X, y, steps=20, lr=0.5, projection=BallProjection(2.0), noise_multiplier=30.0,
                            normalizer=40).receipt
    expected = math.sqrt(20) * node_mu(30.0, 2.0, 3)  # 20 epochs of one full-batch step, sensitivity 2C
    assert receipt.charged.mu == pytest.approx(expected, rel=1e-12)
    assert receipt.charged.mu > 2 * math.sqrt(20) / 30
    spent = optimizer.fit(X, y, steps=5, lr=0.5, projection=BallProjection(2.0), cost=GDP(Fraction(1, 2)),
                          normalizer=40).receipt
    assert spent.charged == GDP(Fraction(1, 2))


@pytest.mark.parametrize("shape", [(2,), (3, 3)])
def test_the_factorization_mechanism_charges_one_gaussian_release_of_cx(shape):
    # Cx is one release of T·m entries whose L2 sensitivity is √(Σ c_k²)·Δ (c_k = binom(2k, k)/4^k),
    # rounded jointly on one lattice: μ′ of that vector, recomputed here from the closed-form coefficients.
    _, pool = gdp_pool()
    horizon = 64
    mechanism = SquareRootFactorizationMechanism(pool, horizon, shape, 1.0, np.random.default_rng(0),
                                                 psd=len(shape) == 2)
    assert mechanism.cost == GDP.from_mu_squared(pool.budget.mu_squared) and pool.remaining == GDP(0)
    column = sum(math.comb(2 * k, k) ** 2 / 16**k for k in range(horizon))
    row_sensitivity = math.sqrt(column) * mechanism.charged_sensitivity
    entries = horizon * int(np.prod(shape))
    mu_noise = node_mu(mechanism.sigma, row_sensitivity, entries)
    assert mu_noise <= mechanism.cost.mu * (1 + 1e-12)
    assert mu_noise == pytest.approx(mechanism.cost.mu, rel=1e-8)  # σ is not over-calibrated
    continuous = row_sensitivity / mechanism.sigma  # the continuous Gaussian's μ, i.e. √(2ρ) of its zCDP charge
    assert continuous < mechanism.cost.mu and continuous == pytest.approx(mechanism.cost.mu, rel=1e-5)
    element = np.full(shape, 0.1) if len(shape) == 1 else np.eye(3) * 0.1
    assert mechanism.append(element).value.shape == shape
