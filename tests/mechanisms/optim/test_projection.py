"""Exactness of the Euclidean projections against slow references (scipy, KKT, closed forms)."""

import numpy as np
import pytest
from scipy.optimize import minimize

from mechanisms.optim.projection import BallProjection, EllipsoidProjection, MetricProjection


def _reference_projection(
    y: np.ndarray, center: np.ndarray, V: np.ndarray, radius: float, metric: np.ndarray | None = None
) -> np.ndarray:
    """Slow reference: SLSQP on min ‖x − y‖²_W s.t. (x − c)ᵀV(x − c) ≤ r² (W = I unless given)."""
    W = np.eye(len(y)) if metric is None else metric
    constraint = {
        "type": "ineq",
        "fun": lambda x: radius**2 - (x - center) @ V @ (x - center),
        "jac": lambda x: -2.0 * V @ (x - center),
    }
    scale = float((y - center) @ W @ (y - center))  # objective of order 1 keeps SLSQP's line search sane
    result = minimize(
        lambda x: float((x - y) @ W @ (x - y)) / scale,
        x0=center.copy(),
        jac=lambda x: 2.0 * W @ (x - y) / scale,
        constraints=[constraint],
        method="SLSQP",
        options={"ftol": 1e-10, "maxiter": 1000},
    )
    assert result.success, result.message
    return result.x


def _ill_conditioned_spd(rng: np.random.Generator, dim: int, condition: float) -> np.ndarray:
    q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    eigenvalues = np.geomspace(1.0, condition, dim)
    return (q * eigenvalues) @ q.T


def test_ellipsoid_projection_matches_scipy_reference(rng):
    V = _ill_conditioned_spd(rng, 3, 200.0)
    center = rng.normal(size=3)
    projection = EllipsoidProjection(center, V, 0.8)
    for _ in range(10):
        y = center + rng.normal(size=3) * 3.0
        assert not projection.contains(y)
        expected = _reference_projection(y, center, V, 0.8)
        np.testing.assert_allclose(projection(y), expected, atol=1e-6)


def test_ellipsoid_projection_satisfies_kkt_conditions(rng):
    """x = Π(y) iff ‖x − c‖_V = r and y − x = μV(x − c) with μ ≥ 0 (convex projection)."""
    V = _ill_conditioned_spd(rng, 5, 1e4)
    center = rng.normal(size=5)
    projection = EllipsoidProjection(center, V, 1.3)
    for scale in (0.5, 3.0, 50.0, 1e4):
        y = center + rng.normal(size=5) * scale
        x = projection(y)
        if (y - center) @ V @ (y - center) <= 1.3**2:
            np.testing.assert_array_equal(x, y)
            continue
        assert abs(np.sqrt((x - center) @ V @ (x - center)) - 1.3) <= 1e-10
        normal = V @ (x - center)
        mu = float((y - x) @ normal / (normal @ normal))
        assert mu > 0
        np.testing.assert_allclose(y - x, mu * normal, atol=1e-9 * max(1.0, np.linalg.norm(y - x)))
        assert projection.multiplier(y) == pytest.approx(mu, rel=1e-8)


def test_projected_points_are_feasible_and_inside_points_fixed(rng):
    V = _ill_conditioned_spd(rng, 4, 1e3)
    center = rng.normal(size=4)
    projection = EllipsoidProjection(center, V, 0.5)
    points = center + rng.normal(size=(500, 4)) * rng.exponential(2.0, size=(500, 1))
    for y in points:
        x = projection(y)
        assert np.sqrt((x - center) @ V @ (x - center)) <= 0.5 * (1 + 1e-12)
        assert projection.contains(x, rtol=1e-12)
        np.testing.assert_allclose(projection(x), x, atol=1e-12)
    inside = center + np.array([0.01, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(projection(inside), inside)


def test_isotropic_ellipsoid_equals_ball_closed_form(rng):
    """V = sI: ‖θ − c‖_V ≤ r is the ball of radius r/√s, projected radially."""
    center = rng.normal(size=5)
    y = center + rng.normal(size=5) * 10.0
    ellipsoid = EllipsoidProjection(center, 4.0 * np.eye(5), 3.0)
    offset = y - center
    expected = center + offset * (1.5 / np.linalg.norm(offset))
    np.testing.assert_allclose(ellipsoid(y), expected, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(BallProjection(1.5, center)(y), expected, rtol=1e-13, atol=1e-13)


def test_ball_projection_matches_scipy_reference(rng):
    center = rng.normal(size=3)
    ball = BallProjection(2.0, center=center)
    for _ in range(5):
        y = center + rng.normal(size=3) * 5.0
        expected = _reference_projection(y, center, np.eye(3), 2.0)
        np.testing.assert_allclose(ball(y), expected, atol=1e-6)
    origin_ball = BallProjection(1.0)
    np.testing.assert_allclose(origin_ball(np.array([3.0, 4.0])), [0.6, 0.8], rtol=1e-15)
    np.testing.assert_array_equal(origin_ball(np.array([0.3, 0.4])), [0.3, 0.4])


def test_metric_projection_matches_scipy_reference(rng):
    """argmin over Θ of (x − y)ᵀM⁻¹(x − y), for an ellipsoid and a ball."""
    M = _ill_conditioned_spd(rng, 3, 50.0)
    V = _ill_conditioned_spd(rng, 3, 20.0)
    center = rng.normal(size=3)
    sets = [(EllipsoidProjection(center, V, 0.7), V, 0.7), (BallProjection(1.2, center), np.eye(3), 1.2)]
    for projection, matrix, radius in sets:
        metric = MetricProjection(projection, M)
        for _ in range(5):
            y = center + rng.normal(size=3) * 4.0
            expected = _reference_projection(y, center, matrix, radius, metric=np.linalg.inv(M))
            x = metric(y)
            np.testing.assert_allclose(x, expected, atol=1e-6)
            assert projection.contains(x, rtol=1e-12)
            assert not np.allclose(x, projection(y), atol=1e-3)  # a different point than the Euclidean one
        inside = center + 1e-3
        np.testing.assert_array_equal(metric(inside), inside)
    np.testing.assert_allclose(MetricProjection(sets[0][0], np.eye(3))(center + 5.0), sets[0][0](center + 5.0),
                               atol=1e-12)


def test_metric_projection_rejects_bad_input():
    with pytest.raises(ValueError, match="positive definite"):
        MetricProjection(BallProjection(1.0), -np.eye(2))
    with pytest.raises(ValueError, match="shape"):
        MetricProjection(EllipsoidProjection(np.zeros(3), np.eye(3), 1.0), np.eye(2))
    with pytest.raises(ValueError, match="matrix"):
        MetricProjection(BallProjection(1.0), np.ones(2))
    with pytest.raises(TypeError, match="projection"):
        MetricProjection("ball", np.eye(2))


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"center": np.zeros(2), "V": np.array([[1.0, 0.0], [0.0, -1.0]]), "radius": 1.0}, "positive definite"),
        ({"center": np.zeros(2), "V": np.array([[1.0, 0.5], [0.0, 1.0]]), "radius": 1.0}, "symmetric"),
        ({"center": np.zeros(3), "V": np.eye(2), "radius": 1.0}, "shape"),
        ({"center": np.zeros(2), "V": np.eye(2), "radius": 0.0}, "radius"),
        ({"center": np.array([np.nan, 0.0]), "V": np.eye(2), "radius": 1.0}, "center"),
    ],
)
def test_ellipsoid_rejects_bad_input(kwargs, error):
    with pytest.raises(ValueError, match=error):
        EllipsoidProjection(**kwargs)


def test_projection_rejects_bad_vectors():
    with pytest.raises(ValueError, match="radius"):
        BallProjection(-1.0)
    with pytest.raises(TypeError, match="radius"):
        BallProjection("1")
    ball = BallProjection(1.0, center=np.zeros(2))
    with pytest.raises(ValueError, match="theta"):
        ball(np.zeros(3))
    with pytest.raises(ValueError, match="theta"):
        EllipsoidProjection(np.zeros(2), np.eye(2), 1.0)(np.array([np.inf, 0.0]))
