"""GLM-UCB against a slow reference written from Filippi et al. (2010) with scipy."""

import numpy as np
import pytest
from scipy import optimize, stats

from dpglm.envs import StochasticContextEnv
from dpglm.glm import PROBIT
from dpglm.policies import run_policy_record
from dpglm.policies.glm_ucb import GLMUCB, link_lipschitz


def reference_glm_ucb(contexts, rewards_of, *, d, T, delta, kappa, lam):
    """Per-arm Python loop, full matrix inverse and a BFGS MLE every round."""

    def loss(theta, X, y):
        z = X @ theta
        b = z * stats.norm.cdf(z) + stats.norm.pdf(z)  # ∫Φ: the probit log-partition
        return np.sum(b - y * z) + 0.5 * lam * theta @ theta

    def grad(theta, X, y):
        return X.T @ (stats.norm.cdf(X @ theta) - y) + lam * theta

    kappa_f = np.sqrt(3 + 2 * np.log(1 + 2 / lam))
    k_mu = 1 / np.sqrt(2 * np.pi)
    X, y, choices, theta = [], [], [], np.zeros(d)
    for t in range(1, T + 1):
        arms = contexts[t - 1]
        V = lam * np.eye(d) + sum(np.outer(x, x) for x in X)
        V_inv = np.linalg.inv(V)
        rho = 2 * k_mu * kappa_f * 1.0 / (1 / kappa) * np.sqrt(2 * d * np.log(t) * np.log(2 * d * T / delta))
        scores = [stats.norm.cdf(x @ theta) + rho * np.sqrt(x @ V_inv @ x) for x in arms]
        i = int(np.argmax(scores))
        choices.append(i)
        X.append(arms[i])
        y.append(rewards_of(t - 1, i))
        Xa, ya = np.array(X), np.array(y)
        theta = optimize.minimize(loss, theta, args=(Xa, ya), jac=grad, method="BFGS",
                                  options={"gtol": 1e-12}).x
    return choices, theta


def test_same_choices_as_reference():
    T, d = 120, 3
    env = StochasticContextEnv(PROBIT, d, 8, 2.0, T, np.random.default_rng(11))
    policy = GLMUCB(PROBIT, d, horizon=T, delta=0.02, kappa=env.kappa, lam=1.5)
    record = run_policy_record(policy, env)
    rewards = record.rewards
    ref_choices, ref_theta = reference_glm_ucb(
        env.context_sequence, lambda t, i: rewards[t], d=d, T=T, delta=0.02, kappa=env.kappa, lam=1.5
    )
    assert record.actions.tolist() == ref_choices
    np.testing.assert_allclose(policy.theta_hat, ref_theta, atol=1e-6)


def test_bonus_is_filippi_rho():
    policy = GLMUCB("logistic", 4, horizon=1000, delta=0.1, kappa=7.0)
    kappa_f = np.sqrt(3 + 2 * np.log(1 + 2 / 4))
    expected = 2 * 0.25 * kappa_f * 7.0 * np.sqrt(2 * 4 * np.log(2 * 4 * 1000 / 0.1))
    assert policy.rho_const == pytest.approx(expected, rel=1e-9)
    assert policy.bonus_width() == 0.0  # log 1 at the first round
    assert link_lipschitz(PROBIT) == pytest.approx(1 / np.sqrt(2 * np.pi), rel=1e-9)


def test_errors():
    with pytest.raises(ValueError, match="delta"):
        GLMUCB("probit", 3, horizon=10, delta=1.5, kappa=2.0)
    with pytest.raises(ValueError, match="kappa"):
        GLMUCB("probit", 3, horizon=10, delta=0.1, kappa=0.5)
    with pytest.raises(ValueError, match="horizon"):
        GLMUCB("probit", 3, horizon=0, delta=0.1, kappa=2.0)
    policy = GLMUCB("probit", 2, horizon=1, delta=0.1, kappa=2.0)
    with pytest.raises(ValueError, match=r"choose\(arms\) must be called before observe"):
        policy.observe(1.0)
    policy.choose(np.array([[0.1, 0.2], [0.0, 0.5]]))
    with pytest.raises(ValueError, match=r"\[0, R\]"):
        policy.observe(2.0)
    with pytest.raises(ValueError, match="unit ball"):
        policy.choose(np.array([[1.0, 1.0]]))


@pytest.mark.slow
def test_table2_row_within_15_percent():
    """Paper Table 2, GLM-UCB: 1400.27 / 1943.23 / 2323.06 at S = 2 / 2.5 / 3 (3 seeds)."""
    for S, paper in ((2.0, 1400.27), (2.5, 1943.23), (3.0, 2323.06)):
        finals = []
        for seed in range(3):
            env = StochasticContextEnv(PROBIT, 3, 20, S, 5000, np.random.default_rng(seed))
            policy = GLMUCB(PROBIT, 3, horizon=5000, delta=0.02, kappa=env.kappa)
            finals.append(run_policy_record(policy, env).regret[-1])
        assert abs(np.mean(finals) - paper) <= 0.15 * paper


def test_memory_does_not_depend_on_the_horizon():
    """The refit rows grow with the rounds played (the slow fuzz test drew horizon ≈ 1e9: 23.5 GiB up front)."""
    import tracemalloc

    tracemalloc.start()
    try:
        policy = GLMUCB("probit", d=3, horizon=10**12, delta=0.05, kappa=5.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # under 1 MiB for a horizon of 1e12 rounds (8·(d+1)·1e12 bytes if preallocated)
    rng = np.random.default_rng(0)
    for _ in range(300):
        policy.choose(rng.uniform(-0.5, 0.5, size=(5, 3)))
        policy.observe(1.0)
    assert policy.n == 300 and policy._rows.n == 300
