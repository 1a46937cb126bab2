"""BinaryTreeMechanism: charge once before any noise, prefix-sum noise covariance, element checks, accounting."""

import math
from fractions import Fraction

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp

from accounting import ZCDP, BudgetExceeded, Ledger, PureDP
from mechanisms import BinaryTreeMechanism, Release
from mechanisms.tree import tree_depth

#: Elements are accepted up to 1e-9 relative above their bound, and the charge pays Δ(1 + 2e-9) (tree docstring).
SLACK = 1 + Fraction(2, 10**9)


def zcdp_account(rho=1.0):
    return Ledger(ZCDP(rho)).root


def dyadic_nodes(t):
    """Slow reference: the dyadic intervals (start, length) whose union is [1, t], largest first."""
    nodes, start = [], 1
    for level in reversed(range(t.bit_length())):
        if t >> level & 1:
            nodes.append((start, 2**level))
            start += 2**level
    return nodes


# ----- depth and cost ------------------------------------------------------------------------------


def test_depth_is_ceil_log2_of_horizon_plus_one():
    for horizon in range(1, 2050):
        assert tree_depth(horizon) == math.ceil(math.log2(horizon + 1))


def test_every_element_lies_in_at_most_depth_nodes():
    """Count, with the reference decomposition, the distinct nodes any prefix sum uses that contain s."""
    horizon = 37
    for s in range(1, horizon + 1):
        holding = {node for t in range(s, horizon + 1) for node in dyadic_nodes(t) if node[0] <= s < node[0] + node[1]}
        assert len(holding) <= tree_depth(horizon)


@pytest.mark.parametrize("horizon, shape, sigma, sensitivity", [(5000, (3, 3), 4.0, 1.0), (100, (2,), 1.3, 2.0)])
def test_charge_matches_dp_accounting_tree_aggregation(horizon, shape, sigma, sensitivity):
    """ρ = L·Δ²/(2σ²) gives the same ε as dp-accounting's tree aggregation with noise multiplier σ/Δ."""
    tree = BinaryTreeMechanism(zcdp_account(100), horizon, shape, sensitivity, np.random.default_rng(0), sigma=sigma)
    charged_sensitivity = Fraction(sensitivity) * SLACK
    exact = Fraction(math.ceil(math.log2(horizon + 1))) * charged_sensitivity**2 / (2 * Fraction(sigma) ** 2)
    assert exact <= tree.cost.rho <= exact * (1 + Fraction(1, 10**14))
    multiplier = sigma / float(charged_sensitivity)
    delta = 1e-6
    tree_event = rdp.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_SPECIAL)
    tree_event.compose(dp_accounting.SingleEpochTreeAggregationDpEvent(multiplier, horizon))
    gaussians = rdp.RdpAccountant()
    gaussians.compose(dp_accounting.GaussianDpEvent(multiplier), tree.depth)
    charged = rdp.RdpAccountant()
    charged.compose(dp_accounting.ZCDpEvent(float(tree.cost.rho)))
    assert charged.get_epsilon(delta) == pytest.approx(tree_event.get_epsilon(delta), rel=1e-9)
    assert charged.get_epsilon(delta) == pytest.approx(gaussians.get_epsilon(delta), rel=1e-9)


def test_symmetrised_noise_costs_frobenius_sq_over_two_sigma_sq():
    """Exact Rényi divergence of the (Z + Zᵀ)/2 node on its upper triangle equals α‖D‖_F²/(2σ²).

    Independent of the docstring's algebra: build the linear map vec(Z') → upper(Z), its covariance
    σ²MMᵀ, and evaluate ½ Dᵤᵀ(σ²MMᵀ)⁻¹Dᵤ (the zCDP ρ of a Gaussian with that covariance).
    """
    d, sigma = 4, 1.7
    rows, cols = np.triu_indices(d)
    m = np.zeros((rows.size, d * d))
    for k, (i, j) in enumerate(zip(rows, cols, strict=True)):
        m[k, i * d + j] += 0.5
        m[k, j * d + i] += 0.5
    covariance = sigma**2 * m @ m.T
    generator = np.random.default_rng(5)
    for _ in range(5):
        a = generator.normal(size=(d, d))
        difference = a + a.T
        upper = difference[rows, cols]
        rho = 0.5 * upper @ np.linalg.solve(covariance, upper)
        assert rho == pytest.approx(np.sum(difference**2) / (2 * sigma**2), rel=1e-12)


def test_cost_calibration_is_rounded_up():
    account = zcdp_account(1)
    tree = BinaryTreeMechanism(account, 1000, (3,), 1.0, np.random.default_rng(0), cost=ZCDP(0.4))
    depth = Fraction(10)
    # Calibration reads Δ as the larger of its printed and binary values (accounting.convert.gaussian_sigma).
    charged = max(Fraction(tree.charged_sensitivity), Fraction(repr(tree.charged_sensitivity)))
    assert SLACK <= charged <= SLACK * (1 + Fraction(1, 10**15))
    assert depth * charged**2 / (2 * Fraction(tree.sigma) ** 2) <= Fraction(2, 5)
    assert depth * charged**2 / (2 * Fraction(float(np.nextafter(tree.sigma, 0))) ** 2) > Fraction(2, 5)
    assert account.spent.rho == Fraction(2, 5)


def test_default_spends_all_remaining():
    account = zcdp_account(0.5)
    tree = BinaryTreeMechanism(account, 64, (2, 2), 1.0, np.random.default_rng(0))
    assert account.remaining.rho == 0
    assert tree.sigma == pytest.approx(math.sqrt(7 / (2 * 0.5)) * float(SLACK), rel=1e-14)  # L = 7 for T = 64
    with pytest.raises(ValueError, match="no remaining zCDP budget"):
        BinaryTreeMechanism(account, 64, (2, 2), 1.0, np.random.default_rng(0))


# ----- charge before sampling -----------------------------------------------------------------------


def test_refused_charge_draws_no_noise_and_builds_nothing():
    rng = np.random.default_rng(11)
    account = zcdp_account(0.01)
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceeded):
        BinaryTreeMechanism(account, 100, (3, 3), 1.0, rng, sigma=1.0)
    assert rng.bit_generator.state == state
    assert account.spent.rho == 0


def test_one_charge_for_the_whole_horizon():
    account = zcdp_account(1)
    tree = BinaryTreeMechanism(account, 20, (2,), 1.0, np.random.default_rng(0), sigma=3.0)
    spent = account.spent
    releases = [tree.append(np.array([0.3, 0.1])) for _ in range(20)]
    assert account.spent == spent
    assert all(isinstance(r, Release) and r.receipt is tree.receipt for r in releases)
    assert tree.t == 20


# ----- noise moments (Monte Carlo) ------------------------------------------------------------------


def test_prefix_noise_covariance_is_sigma_sq_times_shared_nodes():
    """Cov(noise_t, noise_u) = σ²·|nodes(t) ∩ nodes(u)|; on the diagonal σ²·popcount(t).

    Each of the d coordinates of one vector tree is an independent replicate.
    """
    horizon, d, sigma = 13, 6000, 0.8
    tree = BinaryTreeMechanism(zcdp_account(10), horizon, (d,), 1.0, np.random.default_rng(1), sigma=sigma)
    x = np.full(d, 0.4 / np.sqrt(d))
    noise = np.array([np.asarray(tree.append(x).value) - x * t for t in range(1, horizon + 1)])
    empirical = noise @ noise.T / d
    times = range(1, horizon + 1)
    expected = np.array([[len(set(dyadic_nodes(t)) & set(dyadic_nodes(u))) for u in times] for t in times]) * sigma**2
    assert np.diag(expected) == pytest.approx([sigma**2 * bin(t).count("1") for t in range(1, horizon + 1)])
    np.testing.assert_allclose(empirical, expected, atol=5 * sigma**2 * 3 / np.sqrt(d))
    assert abs(noise.mean()) < 5 * sigma * 2 / np.sqrt(d * horizon)
    for t in range(1, horizon + 1):
        assert tree.noise_variance(t) == pytest.approx(expected[t - 1, t - 1])


def test_symmetric_matrix_noise_diagonal_sigma_sq_offdiagonal_half():
    horizon, d, sigma, replicates = 7, 30, 1.2, 60
    rng = np.random.default_rng(2)
    samples = {t: [] for t in range(1, horizon + 1)}
    account = zcdp_account(1000)
    element = np.outer([0.3, 0.4] + [0.0] * (d - 2), [0.3, 0.4] + [0.0] * (d - 2))
    for _ in range(replicates):
        tree = BinaryTreeMechanism(account, horizon, (d, d), 1.0, rng, sigma=sigma, psd=True)
        for t in range(1, horizon + 1):
            value = np.asarray(tree.append(element).value)
            np.testing.assert_array_equal(value, value.T)
            samples[t].append(value - t * element)
    rows, cols = np.triu_indices(d, k=1)
    for t in range(1, horizon + 1):
        stack = np.array(samples[t])
        nodes = bin(t).count("1")
        diagonal = stack[:, np.arange(d), np.arange(d)].ravel()
        off = stack[:, rows, cols].ravel()
        assert diagonal.var() == pytest.approx(sigma**2 * nodes, rel=5 * math.sqrt(2 / diagonal.size))
        assert off.var() == pytest.approx(sigma**2 * nodes / 2, rel=5 * math.sqrt(2 / off.size))


def test_prefix_sums_are_unbiased_for_varying_elements(rng):
    horizon, d = 9, 4000
    xs = rng.uniform(-0.5, 0.5, size=(horizon, d)) / np.sqrt(d)
    tree = BinaryTreeMechanism(zcdp_account(10), horizon, (d,), 1.0, rng, sigma=0.5)
    for t in range(horizon):
        error = np.asarray(tree.append(xs[t]).value) - xs[: t + 1].sum(axis=0)
        assert abs(error.mean()) < 5 * 0.5 * math.sqrt(bin(t + 1).count("1") / d)


def test_same_seed_same_releases():
    def run():
        tree = BinaryTreeMechanism(zcdp_account(2), 6, (2, 2), 1.0, np.random.default_rng(9), sigma=1.0)
        return [tree.append(np.eye(2) * 0.3).value for _ in range(6)]

    for a, b in zip(run(), run(), strict=True):
        np.testing.assert_array_equal(a, b)


# ----- element checks ------------------------------------------------------------------------------


def test_element_bounds_follow_the_relation():
    rng = np.random.default_rng(0)
    replace = BinaryTreeMechanism(zcdp_account(), 5, (2,), 2.0, rng, sigma=5.0)
    replace.append(np.array([0.6, 0.8]))  # norm 1 = Δ/2
    replace.append(np.array([0.6, 0.8]) * (1 + 1e-12))  # within the 1e-9 relative float slack
    with pytest.raises(ValueError, match="norm .* > 1.0"):
        replace.append(np.array([0.6, 0.8]) * (1 + 1e-8))
    add_remove = BinaryTreeMechanism(zcdp_account(), 5, (2,), 2.0, rng, sigma=5.0, relation="add_remove")
    add_remove.append(np.array([1.2, 1.6]))  # norm 2 = Δ
    psd = BinaryTreeMechanism(zcdp_account(), 5, (2, 2), math.sqrt(2), rng, sigma=5.0, psd=True)
    psd.append(np.outer([0.6, 0.8], [0.6, 0.8]))  # ‖x xᵀ‖_F = 1 = Δ/√2
    plain = BinaryTreeMechanism(zcdp_account(), 5, (2, 2), math.sqrt(2), rng, sigma=5.0)
    with pytest.raises(ValueError, match="Frobenius norm"):
        plain.append(np.outer([0.6, 0.8], [0.6, 0.8]))


def test_float_normalised_unit_vectors_are_accepted_and_the_slack_is_charged():
    """x xᵀ of float-normalised unit vectors (envs/policies accept ‖x‖ ≤ 1 + 1e-9) fit Δ = √2 with psd."""
    vectors = np.random.default_rng(11).normal(size=(1000, 5))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    outers = np.einsum("ni,nj->nij", vectors, vectors)
    # Independently: how many of them a strict ‖x xᵀ‖_F <= 1 test rejects (exact rational Frobenius norm²).
    strictly_over = sum(sum(Fraction(float(e)) ** 2 for e in outer.ravel()) > 1 for outer in outers)
    assert strictly_over > 50
    tree = BinaryTreeMechanism(zcdp_account(100.0), 1000, (5, 5), math.sqrt(2), np.random.default_rng(0),
                               sigma=1.0, psd=True)
    for outer in outers:
        tree.append(outer)
    assert tree.t == 1000
    # The charge pays for Δ(1 + 2e-9): ρ >= L·2(1 + 2e-9)²/(2σ²) with L = 10, σ = 1.
    assert tree.cost.rho >= 10 * 2 * (1 + Fraction(2, 10**9)) ** 2 / 2
    assert tree.cost.rho <= 10 * 2 * (1 + Fraction(3, 10**9)) ** 2 / 2


def test_psd_bound_certifies_the_sensitivity():
    """Any two admissible PSD elements differ by at most Δ in Frobenius norm (orthogonal rank-ones are tight)."""
    delta = 1.0
    bound = delta / math.sqrt(2)
    generator = np.random.default_rng(4)
    worst = 0.0
    for _ in range(2000):
        u, v = generator.normal(size=(2, 3))
        a = np.outer(u, u) * bound / np.sum(u**2)
        b = np.outer(v, v) * bound / np.sum(v**2)
        worst = max(worst, np.linalg.norm(a - b))
    assert worst <= delta
    e1, e2 = np.eye(3)[:2]
    assert np.linalg.norm(bound * (np.outer(e1, e1) - np.outer(e2, e2))) == pytest.approx(delta)


def test_psd_charge_covers_the_eigenvalue_tolerance():
    tree = BinaryTreeMechanism(zcdp_account(), 10, (4, 4), 1.0, np.random.default_rng(0), sigma=2.0, psd=True)
    tolerance_factor = Fraction(1) + 2 * Fraction(2) * Fraction(1, 10**12)  # 1 + 2√d τ, d = 4
    assert tree.cost.rho >= Fraction(4) * tolerance_factor / (2 * Fraction(4))


@pytest.mark.parametrize(
    "x, message",
    [
        (np.zeros(3), "shape"),
        (np.array([[0.1, 0.2], [0.0, 0.1]]), "symmetric"),
        (np.array([[0.1, np.nan], [np.nan, 0.1]]), "finite"),
        (np.diag([0.3, -0.3]), "positive semidefinite"),
        (np.array([["a", "b"], ["c", "d"]]), "array of real numbers"),
    ],
)
def test_bad_elements_raise_naming_x(x, message):
    rng = np.random.default_rng(0)
    tree = BinaryTreeMechanism(zcdp_account(), 5, (2, 2), 2.0, rng, sigma=5.0, psd=True)
    state = rng.bit_generator.state
    with pytest.raises((ValueError, TypeError), match=message):
        tree.append(x)
    assert rng.bit_generator.state == state and tree.t == 0


def test_horizon_exceeded():
    tree = BinaryTreeMechanism(zcdp_account(), 3, (1,), 2.0, np.random.default_rng(0), sigma=5.0)
    for _ in range(3):
        tree.append(np.array([0.5]))
    with pytest.raises(ValueError, match="horizon exceeded"):
        tree.append(np.array([0.5]))


def test_bad_construction_names_the_argument():
    rng = np.random.default_rng(0)
    account = zcdp_account()
    cases = [
        (dict(horizon=0), ValueError, "horizon"),
        (dict(horizon=2.5), TypeError, "horizon"),
        (dict(shape=(2, 3)), ValueError, "shape"),
        (dict(shape=(2, 2, 2)), ValueError, "shape"),
        (dict(shape="2"), TypeError, "shape"),
        (dict(sensitivity=-1.0), ValueError, "sensitivity"),
        (dict(sigma=0.0), ValueError, "sigma"),
        (dict(sigma=1.0, cost=ZCDP(0.1)), ValueError, "at most one of sigma"),
        (dict(sigma=None, cost=PureDP(0.1)), TypeError, "cost must be an accounting.ZCDP"),
        (dict(relation="swap"), ValueError, "relation"),
        (dict(shape=(3,), psd=True), ValueError, "psd"),
        (dict(rng=np.random.RandomState(0)), TypeError, "rng"),
    ]
    for change, error, message in cases:
        arguments = dict(account=account, horizon=10, shape=(2, 2), sensitivity=1.0, rng=rng, sigma=2.0)
        arguments.update(change)
        with pytest.raises(error, match=message):
            BinaryTreeMechanism(**arguments)
    with pytest.raises(TypeError, match="currency 'zcdp'"):
        BinaryTreeMechanism(Ledger(PureDP(1)).root, 10, (2,), 1.0, rng, sigma=2.0)
    tree = BinaryTreeMechanism(account, 10, 3, 1.0, rng, sigma=20.0)
    assert tree.shape == (3,)
    with pytest.raises(ValueError, match="t must be an int in"):
        tree.noise_variance(11)
