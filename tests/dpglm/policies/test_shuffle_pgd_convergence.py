"""Preconditioned, warm-started P_GD converges to the batch MLE (ShufflePGDEstimator; issue: P_GD accuracy).

Fed B-GLinCB's own logged history (its batches, so histories cannot diverge), the private
estimator at ε = 2·10⁴ must land within 0.05 of the exact MLE that B-GLinCB computes on
the same data, and the arm B-GLinCB would draw (same uniform) from the design built with
the private estimates must match its own in ≥ 95% of rounds. The plain subgradient P_GD
(``precondition=False``) misses both, which the fast test records.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from accounting import ApproxDP, Ledger
from dpglm.envs import StochasticContextEnv
from dpglm.glm import get_family
from dpglm.policies.batched import (
    BGLinCB,
    ShuffledDesignSum,
    ShufflePGDEstimator,
    max_batches,
    run_batched_policy,
)
from mechanisms.optim import ShufflePGD


class _Shadow(BGLinCB):
    """B-GLinCB that also runs the private estimator on each batch it fits, and compares designs."""

    def __init__(self, *args, eps: float, precondition: bool, noise_rng: np.random.Generator, **kw):
        super().__init__(*args, **kw)
        accounts = Ledger(ApproxDP(eps, 0.02)).split({"covariance": 1, "parameter": 1},
                                                      currency={"covariance": "approx", "parameter": "approx"})
        self.private = ShufflePGDEstimator(self.family, self.params.lam, self.params.radius, accounts["parameter"],
                                           noise_rng, precondition=precondition)
        self.covariance = ShuffledDesignSum(accounts["covariance"], self.params.lam, noise_rng,
                                            n_batches=max_batches(self.horizon), width_delta=0.02)
        self.shadow: dict[int, np.ndarray] = {}
        self.errors: dict[int, float] = {}
        self.matches: list[bool] = []
        self._uniforms = np.random.default_rng(99)
        exact, policy = self.estimator, self

        class Recorder:
            def fit(self, X, y, batch):
                theta = exact.fit(X, y, batch)
                warm = policy.theta_warmup is None
                weights = np.ones(len(X)) if warm else policy._w[: len(X)]
                design = policy.covariance.matrix(X, weights, batch, 1.0 if warm else policy.leaf_bound)
                kw = {"design": design, "unit_leaves": warm} if precondition else {}
                policy.shadow[batch] = policy.private.fit(X, y, batch, **kw)
                policy.errors[batch] = float(np.linalg.norm(policy.shadow[batch] - theta))
                return theta

        self.estimator = Recorder()

    def plan(self, arm_sets):
        super().plan(arm_sets)
        if self.theta_warmup is None:
            return
        saved = (self.theta_warmup, list(self.confidence_sets))
        self.theta_warmup = self.shadow[1]
        self.confidence_sets = [(b, dataclasses.replace(cs, theta=self.shadow[b])) for b, cs in saved[1]]
        private_design, _ = self._scaled_design(arm_sets)
        self.theta_warmup, self.confidence_sets = saved
        u = self._uniforms.random(len(arm_sets))
        for design in (self._plan[2][:, 0], private_design):
            cdf = np.cumsum(design, axis=1)
            picks = [int(np.searchsorted(c, ui * c[-1], side="right")) for c, ui in zip(cdf, u, strict=False)]
            self.matches.append(picks) if design is private_design else setattr(self, "_exact_picks", picks)
        self.matches[-1] = [a == b for a, b in zip(self._exact_picks, self.matches[-1], strict=False)]


def _shadow_run(family: str, S: float, d: int, T: int, precondition: bool, seed: int = 0) -> _Shadow:
    env = StochasticContextEnv(family, d, 20, S, T, np.random.default_rng([300, seed]))
    policy = _Shadow(family, d, T, S, np.random.default_rng([301, seed]), eps=2e4, precondition=precondition,
                     noise_rng=np.random.default_rng([302, seed]))
    run_batched_policy(policy, env)
    return policy


def test_preconditioned_pgd_reaches_the_mle_on_one_batch_where_plain_pgd_does_not():
    fam = get_family("probit")
    rng = np.random.default_rng(4)
    n, d, S, lam = 400, 3, 3.0, 1.0
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    theta_star = np.array([2.0, -1.5, 1.0])
    y = (rng.random(n) < fam.mu(X @ theta_star)).astype(float)
    mle = fam.fit_mle(X, y, lam=lam, radius=S)  # the exact constrained MLE (independent Newton solver)
    errors = {}
    for precondition in (False, True):
        account = Ledger(ApproxDP(2e4, 0.02)).root

        def grad(th, X, y):
            return (fam.mu(X @ th) - y)[:, None] * X + lam / n * th

        pgd = ShufflePGD(account, grad, np.random.default_rng(5), clip=1.0 + lam * S / n, radius=S)
        # ε₀ = 30 per round: the summation noise is negligible next to the optimisation error measured.
        kw = {"iterations": 300, "round_epsilon": 30.0, "round_delta": 1e-5, "delta": 0.01}
        if precondition:  # as ShufflePGDEstimator does for a warm-up batch: M = n·(max μ̇·V)⁻¹, η = 1
            c = float(np.max(fam.dmu(np.linspace(-S, S, 20001))))
            kw |= {"preconditioner": n * np.linalg.inv(c * (X.T @ X + lam * np.eye(d))), "lr": 1.0,
                   "average": "suffix"}
        errors[precondition] = float(np.linalg.norm(np.asarray(pgd.fit(X, y, **kw).value) - mle))
    assert errors[True] < 0.05
    assert errors[False] > 0.2  # the subgradient step 2S/(L√T) is far from converged after 300 iterations


@pytest.mark.slow
@pytest.mark.parametrize("family, S", [("probit", 3.0), ("logistic", 3.5)])
def test_private_estimates_on_bglincb_history_match_its_mle_and_choices(family, S):
    policy = _shadow_run(family, S, 3, 5000, precondition=True)
    assert len(policy.errors) >= 2 and max(policy.errors.values()) < 0.05, policy.errors
    matches = [m for batch in policy.matches for m in batch]
    assert np.mean(matches) >= 0.95, np.mean(matches)
