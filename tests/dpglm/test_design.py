import numpy as np
import pytest
from scipy.optimize import minimize

from dpglm.design import g_optimal_design


def _unit_ball(rng, shape, d):
    x = rng.standard_normal((*shape, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return x * rng.uniform(size=(*shape, 1)) ** (1.0 / d)


def _logdet(arms, weights, ridge):
    A = ridge * np.eye(arms.shape[1]) + (arms.T * weights) @ arms
    return np.linalg.slogdet(A)[1]


def test_kiefer_wolfowitz_bound_holds_on_random_arm_sets(rng):
    arms = _unit_ball(rng, (200, 20), 5)
    design = g_optimal_design(arms, ridge=1e-3, tol=1e-3)
    np.testing.assert_allclose(design.weights.sum(axis=-1), 1.0)
    assert np.all(design.weights >= 0)
    # Paper §4.2: max_x xᵀ(εI + E yyᵀ)⁻¹x ≤ d, recomputed here from scratch.
    for a, w in zip(arms[:20], design.weights[:20], strict=True):
        A = 1e-3 * np.eye(5) + (a.T * w) @ a
        lev = np.einsum("ki,ij,kj->k", a, np.linalg.inv(A), a)
        assert lev.max() <= 5 * (1 + 1e-3)


def test_cross_polytope_design_is_uniform_on_vertices():
    # Arms ±e_i and points strictly inside: the optimal design puts 1/(2d) on
    # each vertex and nothing inside; then ‖±e_i‖²_{A⁻¹} = d exactly (ridge → 0).
    d = 3
    vertices = np.vstack([np.eye(d), -np.eye(d)])
    inner = 0.5 * np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]]) / np.sqrt(2)
    arms = np.vstack([vertices, inner])
    design = g_optimal_design(arms, ridge=1e-9, tol=1e-5)
    np.testing.assert_allclose(design.weights[: 2 * d], 1 / (2 * d), atol=1e-3)
    np.testing.assert_allclose(design.g_value, d, rtol=1e-4)


def test_matches_slow_reference_optimum(rng):
    arms = _unit_ball(rng, (8,), 3)
    ridge = 1e-2
    design = g_optimal_design(arms, ridge=ridge, tol=1e-6)

    def negative_logdet(z):
        w = np.exp(z - z.max())
        return -_logdet(arms, w / w.sum(), ridge)

    best = min(
        (minimize(negative_logdet, rng.standard_normal(8), method="Nelder-Mead",
                  options={"maxiter": 20000, "xatol": 1e-10, "fatol": 1e-12}) for _ in range(3)),
        key=lambda r: r.fun,
    )
    assert _logdet(arms, design.weights, ridge) >= -best.fun - 1e-5


def test_stack_equals_one_by_one(rng):
    arms = _unit_ball(rng, (4, 10), 4)
    stacked = g_optimal_design(arms, tol=1e-4)
    for i in range(4):
        # The stack stops when its worst member converges; each single set is
        # therefore at least as converged in the stack: compare leniently.
        single = g_optimal_design(arms[i], tol=1e-4)
        assert abs(_logdet(arms[i], single.weights, 1e-6) - _logdet(arms[i], stacked.weights[i], 1e-6)) < 1e-3


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"arms": np.ones(3)}, "arms"),
        ({"arms": np.full((3, 2), np.nan)}, "finite"),
        ({"arms": np.ones((3, 2)), "ridge": 0.0}, "ridge"),
        ({"arms": np.ones((3, 2)), "tol": -1.0}, "tol"),
    ],
)
def test_bad_input_is_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        g_optimal_design(**kwargs)


def test_available_mask_equals_design_on_the_subset(rng):
    arms = _unit_ball(rng, (12,), 3)
    available = np.zeros(12, dtype=bool)
    available[[0, 2, 3, 5, 7, 8, 11]] = True
    masked = g_optimal_design(arms, available=available, ridge=1e-3, tol=1e-6)
    subset = g_optimal_design(arms[available], ridge=1e-3, tol=1e-6)
    assert np.all(masked.weights[~available] == 0)
    np.testing.assert_allclose(masked.weights[available], subset.weights, atol=1e-4)


def test_mask_must_leave_an_arm():
    with pytest.raises(ValueError, match="available"):
        g_optimal_design(np.ones((2, 3, 2)), available=np.array([[True, False, False], [False] * 3]))


def _one_set_reference(arms, available, ridge, tol):
    """The multiplicative algorithm on one set, every arm in every sum (the unpacked form)."""
    d = arms.shape[1]
    weights = available / available.sum()
    for iteration in range(10_000):
        inverse = np.linalg.inv(np.einsum("k,ki,kj->ij", weights, arms, arms) + ridge * np.eye(d))
        lev = np.einsum("ki,ij,kj->k", arms, inverse, arms)
        information = np.where(weights > 0, lev + ridge * np.trace(inverse), 0.0)
        if information.max() <= d * (1.0 + tol):
            return weights, np.where(weights > 0, lev, 0.0).max(), iteration
        updated = weights * information / d
        weights = updated / updated.sum()
    raise AssertionError("reference did not converge")


def test_each_set_of_a_mixed_stack_is_its_own_design_to_the_last_bit(rng):
    # Sets with 1 to 40 available arms fall in several stacks of packed width. A set's design
    # depends on its own arms and mask only: alone, or in any call around it (a batch planned
    # in chunks, or a round planned alone), it is the same to the last bit; and it is the
    # unpacked one-set reference (every arm in every sum, three-operand einsum) up to rounding.
    arms = _unit_ball(rng, (30, 40), 4) * rng.uniform(0.1, 3.0, size=(30, 1, 1))
    available = rng.uniform(size=(30, 40)) < rng.uniform(0.02, 1.0, size=(30, 1))
    available[np.arange(30), rng.integers(40, size=30)] = True
    design = g_optimal_design(arms, available=available, ridge=1e-4, tol=1e-3)
    assert len({int(c) for c in -(-available.sum(axis=1) // 8)}) >= 3
    halves = [g_optimal_design(arms[part], available=available[part], ridge=1e-4, tol=1e-3)
              for part in (slice(0, 11), slice(11, 30))]
    np.testing.assert_array_equal(design.weights, np.concatenate([h.weights for h in halves]))
    runs = [_one_set_reference(arms[i], available[i], 1e-4, 1e-3) for i in range(30)]
    for i in range(30):
        alone = g_optimal_design(arms[i], available=available[i], ridge=1e-4, tol=1e-3)
        np.testing.assert_array_equal(design.weights[i], alone.weights)
        assert design.g_value[i] == alone.g_value
        np.testing.assert_allclose(alone.weights, runs[i][0], rtol=1e-9, atol=1e-15)
        np.testing.assert_allclose(alone.g_value, runs[i][1], rtol=1e-12)
        assert alone.iterations == runs[i][2]
    assert np.all(design.weights[~available] == 0)
    assert design.iterations == max(it for _, _, it in runs)
