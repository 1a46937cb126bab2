"""SquareRootFactorizationMechanism: A^{1/2} coefficients, charge, correlated-noise covariance, error vs the tree."""

import math
from fractions import Fraction

import dp_accounting
import numpy as np
import pytest
import scipy.linalg
from dp_accounting import rdp
from scipy.special import gammaln

from accounting import ZCDP, BudgetExceeded, Ledger
from mechanisms import BinaryTreeMechanism, SquareRootFactorizationMechanism
from mechanisms.factorization import square_root_coefficients

#: Elements are accepted up to 1e-9 relative above their bound, and the charge pays Δ(1 + 2e-9) (tree docstring).
SLACK = 1 + Fraction(2, 10**9)


def zcdp_account(rho=1.0):
    return Ledger(ZCDP(rho)).root


def reference_square_root(horizon):
    """Principal square root of the lower-triangular all-ones matrix, by scipy (independent of the recurrence)."""
    return np.real(scipy.linalg.sqrtm(np.tril(np.ones((horizon, horizon)))))


def test_coefficients_give_the_square_root_of_the_prefix_sum_matrix():
    horizon = 40
    c = square_root_coefficients(horizon)
    toeplitz = scipy.linalg.toeplitz(c, np.zeros(horizon))
    np.testing.assert_allclose(toeplitz @ toeplitz, np.tril(np.ones((horizon, horizon))), atol=1e-12)
    np.testing.assert_allclose(toeplitz, reference_square_root(horizon), atol=1e-8)
    exact = [Fraction(math.comb(2 * k, k), 4**k) for k in range(horizon)]
    np.testing.assert_allclose(c, [float(v) for v in exact], rtol=1e-14)


def test_charge_is_an_upper_bound_on_the_exact_column_norm_and_matches_dp_accounting():
    horizon, sigma, sensitivity = 300, 2.0, 1.5
    mech = SquareRootFactorizationMechanism(zcdp_account(10), horizon, (3,), sensitivity, np.random.default_rng(0),
                                            sigma=sigma)
    column = sum(Fraction(math.comb(2 * k, k), 4**k) ** 2 for k in range(horizon))  # exact Σ c_k²
    charged_sensitivity = Fraction(sensitivity) * SLACK
    exact = column * charged_sensitivity**2 / (2 * Fraction(sigma) ** 2)
    assert exact <= mech.cost.rho <= exact * (1 + Fraction(1, 10**9))
    gaussian = rdp.RdpAccountant()  # Cx + Z is one Gaussian of sensitivity Δ·‖C e_1‖₂
    gaussian.compose(dp_accounting.GaussianDpEvent(sigma / (float(charged_sensitivity) * math.sqrt(float(column)))))
    charged = rdp.RdpAccountant()
    charged.compose(dp_accounting.ZCDpEvent(float(mech.cost.rho)))
    assert charged.get_epsilon(1e-6) == pytest.approx(gaussian.get_epsilon(1e-6), rel=1e-8)


def test_refused_charge_draws_no_noise():
    rng = np.random.default_rng(3)
    account = zcdp_account(0.01)
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceeded):
        SquareRootFactorizationMechanism(account, 50, (2, 2), 1.0, rng, sigma=1.0)
    assert rng.bit_generator.state == state and account.spent.rho == 0


def test_correlated_noise_covariance_is_sigma_sq_b_bt():
    """Cov(noise_t, noise_u) = σ²(B Bᵀ)_{tu} with B = A^{1/2} from scipy; coordinates are replicates."""
    horizon, d, sigma = 12, 6000, 0.9
    mech = SquareRootFactorizationMechanism(zcdp_account(10), horizon, (d,), 1.0, np.random.default_rng(4), sigma=sigma)
    x = np.full(d, 0.3 / np.sqrt(d))
    noise = np.array([np.asarray(mech.append(x).value) - x * t for t in range(1, horizon + 1)])
    b = reference_square_root(horizon)
    expected = sigma**2 * b @ b.T
    np.testing.assert_allclose(noise @ noise.T / d, expected, atol=5 * np.max(np.diag(expected)) / np.sqrt(d))
    for t in (1, 5, 12):
        assert mech.noise_variance(t) == pytest.approx(expected[t - 1, t - 1], rel=1e-9)


def test_matrix_elements_get_symmetrised_noise():
    horizon, d, sigma = 5, 40, 1.0
    mech = SquareRootFactorizationMechanism(zcdp_account(100), horizon, (d, d), 1.0, np.random.default_rng(6),
                                            sigma=sigma)
    for _ in range(horizon):
        value = np.asarray(mech.append(np.zeros((d, d))).value)
    np.testing.assert_array_equal(value, value.T)
    b = reference_square_root(horizon)
    row = b[horizon - 1]
    rows, cols = np.triu_indices(d, k=1)
    assert np.diag(value).var() == pytest.approx(sigma**2 * row @ row, rel=5 * math.sqrt(2 / d))
    assert value[rows, cols].var() == pytest.approx(sigma**2 * row @ row / 2, rel=5 * math.sqrt(2 / rows.size))


def test_lower_error_than_the_tree_at_the_same_rho():
    """Same ρ, T = 5000: per-entry noise variance from the closed forms (tree: L·Δ²/(2ρ)·popcount(t))."""
    horizon, rho = 5000, 0.5
    tree = BinaryTreeMechanism(zcdp_account(rho), horizon, (1,), 1.0, np.random.default_rng(0))
    mech = SquareRootFactorizationMechanism(zcdp_account(rho), horizon, (1,), 1.0, np.random.default_rng(0))
    depth = math.ceil(math.log2(horizon + 1))
    popcounts = np.array([bin(t).count("1") for t in range(1, horizon + 1)])
    tree_var = depth / (2 * rho) * popcounts
    k = np.arange(horizon)
    c2 = np.cumsum(np.exp(2 * (gammaln(k + 0.5) - gammaln(k + 1.0))) / np.pi)  # c_k = Γ(k + ½)/(√π k!)
    factor_var = c2[-1] * float(SLACK) ** 2 / (2 * rho) * c2
    assert tree.noise_variance(4095) == pytest.approx(tree_var[4094])
    assert mech.noise_variance(horizon) == pytest.approx(factor_var[-1], rel=1e-9)
    assert factor_var.max() < tree_var.max() / 5
    assert factor_var.mean() < tree_var.mean() / 3


def test_bad_input_and_horizon():
    mech = SquareRootFactorizationMechanism(zcdp_account(10), 2, (2,), 2.0, np.random.default_rng(0), sigma=3.0)
    with pytest.raises(ValueError, match="norm"):
        mech.append(np.array([1.0, 1.0]))
    mech.append(np.array([1.0, 0.0]))
    mech.append(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="horizon exceeded"):
        mech.append(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="shape"):
        SquareRootFactorizationMechanism(zcdp_account(), 2, (2, 3), 1.0, np.random.default_rng(0), sigma=3.0)


def test_both_continual_mechanisms_share_one_set_up():
    """Same charge rule (ρ = k·Δ²/(2σ²)), receipt fields and t-range check from the shared base."""
    from mechanisms.tree import ContinualRelease

    for cls, weight in [(BinaryTreeMechanism, Fraction(3)), (SquareRootFactorizationMechanism, None)]:
        account = zcdp_account(10)
        mech = cls(account, 5, (2,), 1.0, np.random.default_rng(0), sigma=2.0)
        assert isinstance(mech, ContinualRelease)
        if weight is None:  # Σ_{k<5} c_k², c = 1, 1/2, 3/8, 5/16, 35/128
            weight = sum(Fraction(math.comb(2 * k, k), 4**k) ** 2 for k in range(5))
        exact = weight * SLACK**2 / 8
        assert exact <= mech.cost.rho <= exact * (1 + Fraction(1, 10**9))
        assert mech.receipt.mechanism == cls.__name__ and account.spent == mech.cost
        with pytest.raises(ValueError, match=r"t must be an int in \[1, 5\]"):
            mech.noise_variance(6)
