"""GLOC against a slow reference written from Jun et al. (2017) with scipy."""

import numpy as np
import pytest
from scipy import optimize, stats

from dpglm.envs import StochasticContextEnv
from dpglm.glm import LOGISTIC, PROBIT
from dpglm.policies import run_policy_record
from dpglm.policies.gloc import GLOC, project_ball_in_norm


def scipy_projection(u, A, S):
    res = optimize.minimize(lambda th: (th - u) @ A @ (th - u), u * S / np.linalg.norm(u),
                            jac=lambda th: 2 * A @ (th - u), method="SLSQP",
                            constraints=[{"type": "ineq", "fun": lambda th: S * S - th @ th,
                                          "jac": lambda th: -2 * th}],
                            options={"ftol": 1e-15, "maxiter": 500})
    return res.x


def reference_gloc(contexts, rewards_of, *, mu, k_mu, d, S, delta, kappa, lam, preset):
    """Full inverses, a Python loop over arms, scipy projection."""
    c = 1 / kappa
    sigma2 = k_mu**4 if preset == "paper-simulation" else 0.25  # the public code's σ = k_μ²
    X, zs, theta, B = [], [], np.zeros(d), 2 * c * S**2 * lam
    choices = []
    for t in range(len(contexts)):
        A = lam * np.eye(d) + sum(np.outer(x, x) for x in X)
        A_inv = np.linalg.inv(A)
        xz = sum((z * x for z, x in zip(zs, X, strict=True)), np.zeros(d))
        theta_hat = A_inv @ xz
        alpha = 1 + 4 / c * B + 8 * sigma2 / c**2 * np.log(
            2 / delta * np.sqrt(1 + 2 / c * B + 4 * sigma2**2 / (c**4 * delta**2)))
        beta = alpha if preset == "paper-simulation" else (
            alpha + lam * S**2 - (sum(z * z for z in zs) - theta_hat @ xz))
        scores = []
        for x in contexts[t]:
            centre = mu(x @ theta) if preset == "paper-simulation" else x @ theta_hat
            scores.append(centre + np.sqrt(max(beta, 0)) * np.sqrt(x @ A_inv @ x))
        i = int(np.argmax(scores))
        choices.append(i)
        x, r = contexts[t][i], rewards_of(t, i)
        X.append(x)
        A = A + np.outer(x, x)
        A_inv = np.linalg.inv(A)
        g = (mu(x @ theta) - r) * x
        B += 0.5 / c * g @ A_inv @ g
        zs.append(x @ theta)
        u = theta - A_inv @ g / c
        if preset == "paper-simulation":
            theta = S * u / np.linalg.norm(u)
        elif np.linalg.norm(u) > S:
            theta = scipy_projection(u, A, S)
        else:
            theta = u
    return choices, theta


@pytest.mark.parametrize("preset", ["theory", "paper-simulation"])
@pytest.mark.parametrize(
    "family, mu, k_mu",
    [(PROBIT, stats.norm.cdf, 1 / np.sqrt(2 * np.pi)), (LOGISTIC, lambda z: 1 / (1 + np.exp(-z)), 0.25)],
    ids=["probit", "logistic"],
)
def test_same_choices_as_reference(preset, family, mu, k_mu):
    T, d, S = 150, 3, 1.5
    env = StochasticContextEnv(family, d, 10, S, T, np.random.default_rng(5))
    policy = GLOC(family, d, S=S, delta=0.05, kappa=env.kappa, lam=2.0, preset=preset)
    record = run_policy_record(policy, env)
    rewards = record.rewards
    choices, theta = reference_gloc(env.context_sequence, lambda t, i: rewards[t], mu=mu, k_mu=k_mu, d=d, S=S,
                                    delta=0.05, kappa=env.kappa, lam=2.0, preset=preset)
    assert record.actions.tolist() == choices
    np.testing.assert_allclose(policy.theta, theta, atol=1e-5)


def test_projection_matches_scipy(rng):
    for _ in range(5):
        M = rng.normal(size=(4, 4))
        A = M @ M.T + 0.5 * np.eye(4)
        u = rng.normal(size=4) * 3
        ours = project_ball_in_norm(u, A, 1.0)
        np.testing.assert_allclose(np.linalg.norm(ours), 1.0, rtol=1e-9)
        np.testing.assert_allclose(ours, scipy_projection(u, A, 1.0), atol=1e-6)
    inside = np.array([0.1, 0.2, 0.0, 0.0])
    np.testing.assert_array_equal(project_ball_in_norm(inside, np.eye(4), 1.0), inside)


def test_errors():
    with pytest.raises(ValueError, match="preset"):
        GLOC("probit", 3, S=1.0, delta=0.1, kappa=2.0, preset="fast")
    with pytest.raises(ValueError, match="S"):
        GLOC("probit", 3, S=-1.0, delta=0.1, kappa=2.0)
    with pytest.raises(ValueError, match="kappa"):
        GLOC("probit", 3, S=1.0, delta=0.1, kappa=0.0)
    # found by the slow fuzz test: S² overflows (it was a raw OverflowError)
    with pytest.raises(ValueError, match=r"^S=1\.3407807929942597e\+154 is too large"):
        GLOC("logistic", 3, S=1.3407807929942597e154, delta=0.05, kappa=5.0)
    GLOC("logistic", 3, S=1e100, delta=0.05, kappa=5.0)  # large, still a float: accepted
    with pytest.raises(ValueError, match=r"choose\(arms\) must be called before observe"):
        GLOC("probit", 3, S=1.0, delta=0.1, kappa=2.0).observe(0.0)


@pytest.mark.slow
def test_table2_row_within_15_percent():
    """Paper Table 2, GLOC: 384.68 / 631.60 / 1346.59 at S = 2 / 2.5 / 3 (5 seeds)."""
    for S, paper in ((2.0, 384.68), (2.5, 631.60), (3.0, 1346.59)):
        finals = []
        for seed in range(5):
            env = StochasticContextEnv(PROBIT, 3, 20, S, 5000, np.random.default_rng(seed))
            policy = GLOC(PROBIT, 3, S=S, delta=0.02, kappa=env.kappa, preset="paper-simulation")
            finals.append(run_policy_record(policy, env).regret[-1])
        assert abs(np.mean(finals) - paper) <= 0.15 * paper
