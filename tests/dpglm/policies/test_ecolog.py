"""ECOLog against a slow reference written from Faury et al. (2022) with scipy."""

import math

import numpy as np
import pytest
from scipy import optimize

from dpglm.envs import StochasticContextEnv
from dpglm.glm import LOGISTIC
from dpglm.policies import run_policy_record
from dpglm.policies.ecolog import ECOLog, prox_step


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def bernoulli_nll(theta, x, r):
    p = sigmoid(x @ theta)
    return -(r * np.log(p) + (1 - r) * np.log(1 - p))


def scipy_prox(x, centre, W, S, loss):
    """argmin_{‖θ‖≤S} loss(θ) + ½‖θ − centre‖²_W by SLSQP."""
    def obj(th):
        return loss(th) + 0.5 * (th - centre) @ W @ (th - centre)

    start = centre if np.linalg.norm(centre) <= S else centre * S / np.linalg.norm(centre)
    res = optimize.minimize(obj, start, method="SLSQP",
                            constraints=[{"type": "ineq", "fun": lambda th: S * S - th @ th}],
                            options={"ftol": 1e-15, "maxiter": 1000})
    return res.x


def reference_ecolog(contexts, rewards_of, *, d, S, delta, lam):
    W, theta, cum, choices = lam * np.eye(d), np.zeros(d), 0.0, []
    for t in range(1, len(contexts) + 1):
        gamma = math.sqrt(lam) / 2 + 2 / math.sqrt(lam) * math.log(2 * math.sqrt(1 + t / (4 * lam)) / delta)
        beta = math.sqrt(max(2 * lam * S**2 + (1 + S) ** 2 * gamma + cum, 0))
        W_inv = np.linalg.inv(W)
        scores = [sigmoid(x @ theta) + beta * math.sqrt(x @ W_inv @ x) for x in contexts[t - 1]]
        i = int(np.argmax(scores))
        choices.append(i)
        x, r = contexts[t - 1][i], rewards_of(t - 1, i)
        new = scipy_prox(x, theta, W, S, lambda th, x=x, r=r: bernoulli_nll(th, x, r))
        bar = scipy_prox(x, new, W, S, lambda th, x=x: bernoulli_nll(th, x, 0.0) + bernoulli_nll(th, x, 1.0))
        disc = math.sqrt((new - bar) @ W @ (new - bar))
        cum += 2 * (1 + S) * (bernoulli_nll(bar, x, r) - bernoulli_nll(new, x, r)) - 0.5 * disc
        p = sigmoid(x @ new)
        W = W + p * (1 - p) * np.outer(x, x)
        theta = new
    return choices, theta


def test_same_choices_as_reference():
    T, d, S = 60, 3, 2.0
    env = StochasticContextEnv(LOGISTIC, d, 8, S, T, np.random.default_rng(3))
    policy = ECOLog(LOGISTIC, d, S=S, delta=0.05, lam=1.0)
    record = run_policy_record(policy, env)
    rewards = record.rewards
    choices, theta = reference_ecolog(env.context_sequence, lambda t, i: rewards[t], d=d, S=S, delta=0.05, lam=1.0)
    assert record.actions.tolist() == choices
    np.testing.assert_allclose(policy.theta, theta, atol=1e-5)


@pytest.mark.parametrize("radius", [10.0, 0.3])
def test_prox_step_matches_scipy(rng, radius):
    """Inside the ball (radius 10) and on the sphere (radius 0.3)."""
    for _ in range(4):
        M = rng.normal(size=(3, 3))
        W = M @ M.T + np.eye(3)
        x = rng.normal(size=3)
        x /= 1.2 * np.linalg.norm(x)
        centre = rng.normal(size=3) * 0.5
        r = float(rng.integers(0, 2))
        ours = prox_step(LOGISTIC, x, centre, W, np.linalg.inv(W), radius, reward=r)
        ref = scipy_prox(x, centre, W, radius, lambda th, x=x, r=r: bernoulli_nll(th, x, r))
        np.testing.assert_allclose(ours, ref, atol=1e-6)
        bar = prox_step(LOGISTIC, x, centre, W, np.linalg.inv(W), radius, reward=0.5, scale=2.0)
        ref_bar = scipy_prox(x, centre, W, radius,
                             lambda th, x=x: bernoulli_nll(th, x, 0.0) + bernoulli_nll(th, x, 1.0))
        np.testing.assert_allclose(bar, ref_bar, atol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="lam"):
        ECOLog("logistic", 3, S=1.0, delta=0.1, lam=0.0)
    with pytest.raises(ValueError, match="delta"):
        ECOLog("logistic", 3, S=1.0, delta=0.0)
    with pytest.raises(ValueError, match=r"choose\(arms\) must be called before observe"):
        ECOLog("logistic", 3, S=1.0, delta=0.1).observe(1.0)
