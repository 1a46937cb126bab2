"""GLM families against closed forms, finite differences, scipy.stats and scipy.optimize."""

import numpy as np
import pytest
from scipy import optimize, stats

from dpglm.glm import (
    LOGISTIC,
    PROBIT,
    GLMFamily,
    available_families,
    fit_mle,
    get_family,
    kappa,
    kappa_star,
    kappa_support,
    register_family,
)

FAMILIES = [LOGISTIC, PROBIT]
Z = np.linspace(-8.0, 8.0, 161)


def test_probit_link_matches_scipy_norm():
    np.testing.assert_allclose(PROBIT.mu(Z), stats.norm.cdf(Z), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(PROBIT.dmu(Z), stats.norm.pdf(Z), rtol=1e-12)


def test_logistic_link_closed_form():
    np.testing.assert_allclose(LOGISTIC.mu(Z), 1.0 / (1.0 + np.exp(-Z)), rtol=1e-12)
    m = 1.0 / (1.0 + np.exp(-Z))
    np.testing.assert_allclose(LOGISTIC.dmu(Z), m * (1 - m), rtol=1e-10)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_derivatives_by_finite_differences(family):
    h = 1e-5
    z = np.linspace(-5, 5, 41)
    np.testing.assert_allclose(
        (family.log_partition(z + h) - family.log_partition(z - h)) / (2 * h), family.mu(z), atol=1e-8
    )
    np.testing.assert_allclose((family.mu(z + h) - family.mu(z - h)) / (2 * h), family.dmu(z), atol=1e-8)
    np.testing.assert_allclose((family.dmu(z + h) - family.dmu(z - h)) / (2 * h), family.d2mu(z), atol=1e-8)


def test_logistic_loss_is_bernoulli_log_likelihood(rng):
    X = rng.normal(size=(30, 4)) / 3
    y = rng.integers(0, 2, 30).astype(float)
    theta = rng.normal(size=4)
    p = 1 / (1 + np.exp(-X @ theta))
    expected = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    np.testing.assert_allclose(LOGISTIC.nll_per_sample(theta, X, y), expected, rtol=1e-10)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_gradient_and_hessian_by_finite_differences(family, rng):
    X = rng.normal(size=(50, 3)) / 2
    y = rng.random(50)
    theta = rng.normal(size=3)
    lam, h = 0.7, 1e-6
    eye = np.eye(3)
    num_grad = np.array(
        [(family.nll(theta + h * e, X, y, lam) - family.nll(theta - h * e, X, y, lam)) / (2 * h) for e in eye]
    )
    np.testing.assert_allclose(family.grad(theta, X, y, lam), num_grad, rtol=1e-6, atol=1e-6)
    num_hess = np.array(
        [(family.grad(theta + h * e, X, y, lam) - family.grad(theta - h * e, X, y, lam)) / (2 * h) for e in eye]
    )
    np.testing.assert_allclose(family.hessian(theta, X, y, lam), num_hess, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_unconstrained_mle_matches_scipy(family, rng):
    X = rng.normal(size=(200, 3)) / 2
    theta_true = np.array([1.0, -2.0, 0.5])
    y = (rng.random(200) < family.mu(X @ theta_true)).astype(float)
    ours = family.fit_mle(X, y, lam=1.0)
    ref = optimize.minimize(
        lambda t: family.nll(t, X, y, 1.0), np.zeros(3), jac=lambda t: family.grad(t, X, y, 1.0),
        method="BFGS", options={"gtol": 1e-11},
    ).x
    np.testing.assert_allclose(ours, ref, atol=1e-6)
    np.testing.assert_allclose(family.grad(ours, X, y, 1.0), 0.0, atol=1e-6)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_ball_constrained_mle_matches_scipy_slsqp(family, rng):
    X = rng.normal(size=(200, 3)) / 2
    y = (rng.random(200) < family.mu(X @ np.array([2.0, -3.0, 1.0]))).astype(float)
    ours = fit_mle(family, X, y, lam=0.1, radius=1.0)
    ref = optimize.minimize(
        lambda t: family.nll(t, X, y, 0.1), np.zeros(3), jac=lambda t: family.grad(t, X, y, 0.1),
        constraints=[{"type": "ineq", "fun": lambda t: 1.0 - t @ t}], method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    ).x
    assert np.linalg.norm(ours) <= 1.0 + 1e-9
    np.testing.assert_allclose(ours, ref, atol=1e-5)


def test_constrained_mle_inside_ball_is_unconstrained(rng):
    X = rng.normal(size=(100, 2)) / 2
    y = (rng.random(100) < PROBIT.mu(X @ np.array([0.3, 0.2]))).astype(float)
    free = PROBIT.fit_mle(X, y, lam=1.0)
    assert np.linalg.norm(free) < 5.0
    np.testing.assert_allclose(PROBIT.fit_mle(X, y, lam=1.0, radius=5.0), free, atol=1e-12)


def test_separable_data_with_ball_stays_on_the_sphere():
    X = np.array([[0.5, 0.0], [-0.5, 0.0], [0.0, 0.5], [0.0, -0.5]])
    y = np.array([1.0, 0.0, 1.0, 0.0])  # separable: unregularised MLE diverges
    theta = LOGISTIC.fit_mle(X, y, lam=0.0, radius=3.0)
    np.testing.assert_allclose(np.linalg.norm(theta), 3.0, rtol=1e-6)
    np.testing.assert_allclose(theta / np.linalg.norm(theta), [np.sqrt(0.5), np.sqrt(0.5)], atol=1e-5)


def test_warm_start_reaches_the_same_point(rng):
    X = rng.normal(size=(80, 3)) / 2
    y = rng.integers(0, 2, 80).astype(float)
    a = PROBIT.fit_mle(X, y, lam=2.0)
    b = PROBIT.fit_mle(X, y, lam=2.0, theta0=np.array([3.0, -3.0, 3.0]))
    np.testing.assert_allclose(a, b, atol=1e-8)


def test_kappa_definitions_by_hand():
    theta = np.array([2.0, 0.0])
    arms = np.array([[[1.0, 0.0], [0.0, 0.5]], [[-0.5, 0.0], [0.0, 0.0]]])  # z in {2, 0, -1, 0}
    assert kappa(PROBIT, theta, arms) == pytest.approx(1 / stats.norm.pdf(2.0), rel=1e-12)
    assert kappa_star(PROBIT, theta, arms) == pytest.approx(1 / stats.norm.pdf(0.0), rel=1e-12)
    assert kappa(LOGISTIC, theta, arms[0]) == pytest.approx((1 + np.exp(2)) ** 2 / np.exp(2), rel=1e-12)
    assert kappa_star(LOGISTIC, theta, arms) == pytest.approx(4.0)
    assert kappa_support(PROBIT, 3.0) == pytest.approx(1 / stats.norm.pdf(3.0), rel=1e-12)


def test_registry_and_errors():
    assert set(available_families()) >= {"logistic", "probit"}
    assert get_family("Probit") is PROBIT
    assert get_family(LOGISTIC) is LOGISTIC
    with pytest.raises(ValueError, match="family must be one of"):
        get_family("cauchit")
    with pytest.raises(TypeError):
        get_family(3)
    cloglog = GLMFamily(
        name="test-cloglog-like",
        log_partition=lambda z: np.logaddexp(0.0, z),
        mu=PROBIT.mu, dmu=PROBIT.dmu, d2mu=PROBIT.d2mu,
    )
    register_family(cloglog)
    assert get_family("test-cloglog-like") is cloglog
    with pytest.raises(ValueError, match="already registered"):
        register_family(GLMFamily("probit", LOGISTIC.log_partition, LOGISTIC.mu, LOGISTIC.dmu, LOGISTIC.d2mu))
    X = np.zeros((3, 2))
    with pytest.raises(ValueError, match="lam"):
        PROBIT.nll(np.zeros(2), X, np.zeros(3), lam=-1)
    with pytest.raises(ValueError, match="X must have shape"):
        PROBIT.grad(np.zeros(3), X, np.zeros(3))
    with pytest.raises(ValueError, match="y must have shape"):
        PROBIT.grad(np.zeros(2), X, np.zeros(4))
    with pytest.raises(ValueError, match="radius"):
        PROBIT.fit_mle(X, np.zeros(3), lam=1.0, radius=0.0)
    with pytest.raises(ValueError, match="finite"):
        PROBIT.fit_mle(np.full((3, 2), np.nan), np.zeros(3), lam=1.0)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_a_fit_on_many_rows_sums_them_in_chunks_to_the_same_minimiser(family, rng, monkeypatch):
    # Memory flat in n: above one chunk the loss, gradient and Hessian are summed a chunk at a
    # time; the minimiser is the one-block Newton's (and satisfies the optimality condition).
    import dpglm.glm_newton as glm

    X = rng.normal(size=(500, 4)) / 2
    y = (rng.random(500) < family.mu(X @ np.array([1.0, -2.0, 0.5, 0.0]))).astype(float)
    whole = fit_mle(family, X, y, lam=0.3, radius=1.5)
    monkeypatch.setattr(glm, "_GRAM_CHUNK", 37)
    chunked = fit_mle(family, X, y, lam=0.3, radius=1.5)
    assert np.allclose(chunked, whole, atol=1e-10)
    free = fit_mle(family, X, y, lam=0.3)
    assert np.abs(X.T @ (family.mu(X @ free) - y) + 0.3 * free).max() < 1e-8


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_a_warm_started_ball_refit_meets_the_kkt_conditions_of_the_cold_fit(family, rng):
    # A policy refits θ̂_o after each new row from the last (θ, ν): the answer must be the
    # cold fit's, and (θ, ν) must satisfy ∇L(θ) + νθ = 0 with ‖θ‖ = S, ν > 0 (KKT, L convex).
    from dpglm.glm import fit_mle_ball

    X = rng.normal(size=(300, 5)) / 2
    y = (rng.random(300) < family.mu(X @ np.array([3.0, -2.0, 1.0, 0.5, 0.0]))).astype(float)
    theta, nu = fit_mle_ball(family, X[:290], y[:290], 0.25, 1.0, np.zeros(5))
    for n in range(291, 301):
        theta, nu = fit_mle_ball(family, X[:n], y[:n], 0.25, 1.0, theta, nu)
        cold = fit_mle(family, X[:n], y[:n], lam=0.25, radius=1.0)
        assert np.allclose(theta, cold, atol=1e-8)
        grad = X[:n].T @ (family.mu(X[:n] @ theta) - y[:n]) + 0.25 * theta
        assert nu > 0 and abs(np.linalg.norm(theta) - 1.0) <= 1e-9
        assert np.abs(grad + nu * theta).max() < 1e-6
