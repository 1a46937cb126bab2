"""ShufflePGD (P_GD): convergence on a logistic problem, its charge against independent compositions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import optimize, special, stats

from accounting import ApproxDP, BudgetExceeded, Ledger
from mechanisms.optim.shuffle_pgd import ShufflePGD, calibrate_round_epsilon, composed_epsilon


def _logistic_problem(rng: np.random.Generator, n: int = 2000, d: int = 3):
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    theta_star = np.array([1.5, -1.0, 0.5])[:d]
    y = (rng.random(n) < special.expit(X @ theta_star)).astype(float)
    return X, y


def _per_sample_gradient(theta, X, y):
    return (special.expit(X @ theta) - y)[:, None] * X


def _loss(theta, X, y):
    z = X @ theta
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def _kov_epsilon(eps0: float, delta0: float, k: int, delta: float) -> float:
    """Exact k-fold composition of (eps0, delta0)-DP (Kairouz–Oh–Viswanath 2015), bisected on eps."""
    i = np.arange(k + 1)
    log_binom = special.gammaln(k + 1) - special.gammaln(i + 1) - special.gammaln(k - i + 1)
    log_norm = k * math.log1p(math.exp(eps0))

    def total_delta(eps: float) -> float:
        terms = np.exp(log_binom + (k - i) * eps0 - log_norm) - np.exp(log_binom + eps + i * eps0 - log_norm)
        inner = float(np.maximum(terms, 0.0).sum())
        return 1.0 - (1.0 - delta0) ** k * (1.0 - inner)

    lo, hi = 0.0, k * eps0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if total_delta(mid) > delta else (lo, mid)
    return hi


def _noiseless_pgd(X, y, iterations, lr, radius, clip):
    """Reference P_GD without privacy: exact clipped mean gradients, same projection and averaging."""
    theta, total = np.zeros(X.shape[1]), np.zeros(X.shape[1])
    for _ in range(iterations):
        total += theta
        g = _per_sample_gradient(theta, X, y)
        g *= np.minimum(1.0, clip / np.linalg.norm(g, axis=1, keepdims=True))[:, :]
        theta = theta - lr * g.mean(axis=0)
        theta *= min(1.0, radius / np.linalg.norm(theta))
    return total / iterations


def test_converges_on_a_small_logistic_problem():
    rng = np.random.default_rng(2026)
    X, y = _logistic_problem(rng)
    mean_gradient = lambda t, X, y: _per_sample_gradient(t, X, y).mean(0)  # noqa: E731
    optimum = optimize.minimize(_loss, np.zeros(3), args=(X, y), jac=mean_gradient).x
    assert np.linalg.norm(optimum) < 3.0  # the unconstrained optimum is feasible
    gap0 = _loss(np.zeros(3), X, y) - _loss(optimum, X, y)
    account = Ledger(ApproxDP(10, 1e-3)).split({"optimizer": 1})["optimizer"]
    T, S, L = 50, 3.0, 1.0
    eps0 = calibrate_round_epsilon(4.0, 1e-5, T)
    pgd = ShufflePGD(account, _per_sample_gradient, rng, clip=L, radius=S)
    kwargs = dict(iterations=T, round_epsilon=eps0, round_delta=1e-5 / (2 * T), delta=1e-5)
    excess = {}
    for lr in (None, 5.0):
        release = pgd.fit(X, y, lr=lr, **kwargs)
        assert np.linalg.norm(release.value) <= S + 1e-12
        assert float(release.receipt.cost.eps) <= 4.0 + 1e-6
        reference = _noiseless_pgd(X, y, T, 2 * S / (L * math.sqrt(T)) if lr is None else lr, S, L)
        excess[lr] = _loss(release.value, X, y) - _loss(optimum, X, y)
        # at total eps = 4 the shuffle noise costs little next to the optimisation error
        assert abs(excess[lr] - (_loss(reference, X, y) - _loss(optimum, X, y))) < 0.02 * gap0
    assert 0.0 <= excess[None] < 0.15 * gap0  # the conservative default step 2S/(L sqrt T)
    assert 0.0 <= excess[5.0] < 0.02 * gap0


def test_charge_equals_an_independent_composition():
    rng = np.random.default_rng(1)
    X, y = _logistic_problem(rng, n=300, d=2)
    account = Ledger(ApproxDP(50, 0.01)).split({"optimizer": 1})["optimizer"]
    eps0, delta0, T, delta = 0.3, 1e-7, 20, 1e-5
    release = ShufflePGD(account, _per_sample_gradient, rng, clip=1.0, radius=2.0).fit(
        X, y, iterations=T, round_epsilon=eps0, round_delta=delta0, delta=delta
    )
    charged = float(release.receipt.cost.eps)
    assert release.receipt.cost.delta == ApproxDP(1, delta).delta
    assert release.receipt.mechanism == "ShufflePGD" and release.receipt.relation == "replace_one"
    # the dp-accounting PLD of (eps0, delta0) self-composed T times, built here
    pld = pld_lib.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(eps0, delta0))
    assert charged == pytest.approx(pld.self_compose(T).get_epsilon_for_delta(delta), abs=2e-9)
    # the exact optimal composition (KOV) is never above the charge, and close to it
    kov = _kov_epsilon(eps0, delta0, T, delta)
    assert kov <= charged <= kov + 5e-3
    # and far below advanced composition (Dwork–Rothblum–Vadhan) at the same delta
    slack = delta - T * delta0
    advanced = eps0 * math.sqrt(2 * T * math.log(1 / slack)) + T * eps0 * math.expm1(eps0)
    assert charged < advanced


def test_calibrate_round_epsilon_meets_the_total():
    eps0 = calibrate_round_epsilon(2.0, 1e-5, 30)
    assert composed_epsilon(eps0, 1e-5 / 60, 30, 1e-5) <= 2.0
    assert composed_epsilon(eps0 * 1.001, 1e-5 / 60, 30, 1e-5) > 2.0


def test_default_step_size_and_reproducibility():
    X, y = _logistic_problem(np.random.default_rng(3), n=200, d=2)
    runs = []
    for _ in range(2):
        account = Ledger(ApproxDP(50, 0.01)).split({"o": 1})["o"]
        pgd = ShufflePGD(account, _per_sample_gradient, np.random.default_rng(9), clip=0.5, radius=2.0)
        assert pgd.step_size(16) == pytest.approx(2 * 2.0 / (0.5 * 4))
        runs.append(pgd.fit(X, y, iterations=5, round_epsilon=1.0, round_delta=1e-7, delta=1e-5).value)
    assert np.array_equal(runs[0], runs[1])


def test_clips_large_gradients_instead_of_failing():
    X, y = _logistic_problem(np.random.default_rng(4), n=200, d=2)
    account = Ledger(ApproxDP(50, 0.01)).split({"o": 1})["o"]
    pgd = ShufflePGD(account, lambda t, X, y: 1e6 * _per_sample_gradient(t, X, y), np.random.default_rng(0),
                     clip=1.0, radius=2.0)
    value = pgd.fit(X, y, iterations=3, round_epsilon=1.0, round_delta=1e-7, delta=1e-5).value
    assert np.linalg.norm(value) <= 2.0 + 1e-12


def test_refused_charge_draws_no_noise():
    X, y = _logistic_problem(np.random.default_rng(5), n=200, d=2)
    account = Ledger(ApproxDP(1, 1e-3)).split({"o": 1})["o"]
    rng = np.random.default_rng(6)
    pgd = ShufflePGD(account, _per_sample_gradient, rng, clip=1.0, radius=2.0)
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceeded):
        pgd.fit(X, y, iterations=10, round_epsilon=0.5, round_delta=1e-7, delta=1e-5)
    assert rng.bit_generator.state == state
    assert account.spent == ApproxDP(0, 0)


def test_bad_input_raises_naming_the_argument():
    X, y = _logistic_problem(np.random.default_rng(7), n=50, d=2)
    account = Ledger(ApproxDP(50, 0.01)).split({"o": 1})["o"]
    rng = np.random.default_rng(8)
    with pytest.raises(ValueError, match="clip"):
        ShufflePGD(account, _per_sample_gradient, rng, clip=0.0, radius=1.0)
    with pytest.raises(TypeError, match="per_sample_gradient"):
        ShufflePGD(account, None, rng, clip=1.0, radius=1.0)
    pgd = ShufflePGD(account, _per_sample_gradient, rng, clip=1.0, radius=1.0)
    kwargs = dict(iterations=3, round_epsilon=1.0, round_delta=1e-7, delta=1e-5)
    with pytest.raises(ValueError, match="y must"):
        pgd.fit(X, y[:-1], **kwargs)
    with pytest.raises(ValueError, match="theta0"):
        pgd.fit(X, y, theta0=np.array([2.0, 0.0]), **kwargs)
    with pytest.raises(ValueError, match="delta must exceed"):
        pgd.fit(X, y, iterations=3, round_epsilon=1.0, round_delta=1e-3, delta=1e-5)
    with pytest.raises(ValueError, match="method"):
        pgd.fit(X, y, method="fast", **kwargs)
    # found by the slow fuzz test: a δ so small that the exact run composition has no finite ε there
    with pytest.raises(ValueError, match=r"^delta=2\.88e-110 is too small: the run has no finite epsilon"):
        pgd.fit(X, y, iterations=2, delta=2.88e-110, noise_bits=3000)
    # found by the slow fuzz test: 1.84e7 rounds asked for an 18 GiB composition grid
    with pytest.raises(ValueError, match=r"^iterations must be an int in \[1, 1000000\] .*got 18400947$"):
        pgd.fit(X, y, iterations=18_400_947, delta=1e-6, noise_bits=3000)
    assert account.spent == ApproxDP(0, 0)


def test_rounds_are_calibrated_for_the_clipped_l2_ball():
    """inputs="l2": each round's bits meet (eps0, delta0) for the l2 ball of radius clip, fewer than the box's."""
    from mechanisms.shuffle_accountant import default_levels, vector_sum_delta

    account = Ledger(ApproxDP(50, 0.01)).split({"o": 1})["o"]
    rng = np.random.default_rng(10)
    n, d, eps0, delta0 = 400, 5, 0.5, 1e-7
    l2 = ShufflePGD(account, _per_sample_gradient, rng, clip=1.0, radius=1.0)
    box = ShufflePGD(account, _per_sample_gradient, rng, clip=1.0, radius=1.0, inputs="box")
    g = default_levels(n, d)
    bits, box_bits = l2.round_noise_bits(n, d, eps0, delta0), box.round_noise_bits(n, d, eps0, delta0)
    assert vector_sum_delta(n, bits, g, eps0, d, max_shift=2.0, l2_shift=2.0) <= delta0
    assert vector_sum_delta(n, bits, g, eps0, d) > delta0  # not enough for every coordinate moving fully
    assert vector_sum_delta(n, box_bits, g, eps0, d) <= delta0 < vector_sum_delta(n, box_bits - 1, g, eps0, d)
    assert bits < 0.6 * box_bits
    assert l2.round_noise_variance(n, d, eps0, delta0) == pytest.approx((1.0 / g) ** 2 * n * (1 + bits) / 4)
    with pytest.raises(ValueError, match="inputs"):
        ShufflePGD(account, _per_sample_gradient, rng, clip=1.0, radius=1.0, inputs="linf")


def test_exact_run_composition_matches_an_independent_pld_and_its_calibration_is_minimal():
    """run_epsilon: T-fold composition of the binomial shift pairs (K_i = level_shifts), built here by dp-accounting."""
    from mechanisms.optim.shuffle_pgd import calibrate_run_noise_bits, run_epsilon
    from mechanisms.shuffle_accountant import default_levels, level_shifts

    n, d, T, delta = 30, 2, 12, 1e-5
    g = default_levels(n, d)
    bits = calibrate_run_noise_bits(n, d, T, 3.0, delta)
    assert run_epsilon(n, d, T, bits, delta) <= 3.0 < run_epsilon(n, d, T, math.floor(bits * 0.99), delta)
    trials = n * bits
    log_base = stats.binom.logpmf(np.arange(trials + 1), trials, 0.5)
    pld = None
    for shift in level_shifts(g, d, max_shift=2.0, l2_shift=2.0):
        upper = {int(k) + shift: float(v) for k, v in enumerate(log_base)}
        lower = {int(k): float(v) for k, v in enumerate(log_base)}
        pair = pld_lib.from_two_probability_mass_functions(upper, lower, value_discretization_interval=1e-4)
        pld = pair if pld is None else pld.compose(pair)
    independent = pld.self_compose(T).get_epsilon_for_delta(delta)
    assert run_epsilon(n, d, T, bits, delta) == pytest.approx(independent, abs=T * d * 2e-4)
    # and far below the generic composition of the same rounds at the same delta split
    release = ShufflePGD(Ledger(ApproxDP(50, 0.01)).split({"o": 1})["o"], _per_sample_gradient,
                         np.random.default_rng(11), clip=1.0, radius=1.0).fit(
        *_logistic_problem(np.random.default_rng(12), n=n, d=d), iterations=T, noise_bits=bits, delta=delta)
    assert float(release.receipt.cost.eps) == pytest.approx(run_epsilon(n, d, T, bits, delta), abs=3e-9)
    assert "composed exactly" in release.receipt.note
