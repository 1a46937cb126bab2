"""DP-SGD benchmark: time per fit (the joint-DP bandit's refits) and excess empirical risk vs ρ.

Run by hand: ``python -m benchmarks.dpsgd`` (about a minute on an idle 2-core machine).

1. Time per ``DPSGD.fit``: 5000 points and small refits of 200 / 50 points, d = 5,
   full batch, ball and ellipsoid projections, both engines (opacus's GradSampleModule +
   DPOptimizer, and the vectorised GLM path that reproduces it), median of repeated
   fits; wall-clock and CPU time (the machine is shared: CPU time is the steadier one).
2. Excess empirical risk F(θ_priv) − F(θ̂) of the mean logistic NLL on 5000 points,
   d = 5 (θ* uniform on the sphere of radius 3, contexts uniform in the unit ball, as in
   the paper's Fig. 1), θ̂ the non-private optimum over the ball ‖θ‖ ≤ 3 (Newton,
   with the KKT multiplier found by root-finding when the ball binds), at ρ ∈ {0.01, 0.1, 1}
   (replace-one zCDP), clip C = 1 (never binds: ‖x‖ ≤ 1),
   lr = 20 (≈ 1/L for isotropic unit-ball contexts, a public choice), several step counts;
   the rows ρ = 10⁶ are the optimisation error alone (both engines give the same θ; the
   vectorised one is used here for speed).
3. The same on anisotropic contexts (coordinate scales 1, 1, 0.5, 0.25, 0.1): plain GD
   at lr = 1/L against GD preconditioned by a public M = (E[xxᵀ]/4)⁻¹.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit

from accounting import ZCDP, Ledger
from mechanisms.optim import DPSGD, BallProjection, EllipsoidProjection
from mechanisms.optim.dpsgd import ENGINES

DIM = 5
RADIUS = 3.0


def unit_ball(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    """n points uniform in the unit ball of R^dim."""
    directions = rng.normal(size=(n, dim))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return directions * rng.random((n, 1)) ** (1.0 / dim)


def logistic_problem(rng: np.random.Generator, n: int, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """θ* uniform on the sphere of radius 3; contexts uniform in the unit ball, coordinate j scaled by scales[j]."""
    theta_star = rng.normal(size=DIM)
    theta_star *= RADIUS / np.linalg.norm(theta_star)
    X = unit_ball(rng, n, DIM) * scales
    y = (rng.random(n) < expit(X @ theta_star)).astype(float)
    return X, y


def mean_nll(theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    z = X @ theta
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def ridge_mle(X: np.ndarray, y: np.ndarray, ridge: float) -> np.ndarray:
    """argmin of the mean logistic NLL + (ridge/2)‖θ‖² by Newton's method (strictly convex)."""
    theta = np.zeros(X.shape[1])
    for _ in range(100):
        p = expit(X @ theta)
        grad = X.T @ (p - y) / len(y) + ridge * theta
        hess = (X * (p * (1 - p))[:, None]).T @ X / len(y) + ridge * np.eye(X.shape[1])
        step = np.linalg.solve(hess, grad)
        theta = theta - step
        if np.linalg.norm(step) < 1e-14:
            break
    return theta


def constrained_mle(X: np.ndarray, y: np.ndarray, radius: float) -> np.ndarray:
    """argmin of the mean logistic NLL over ‖θ‖ ≤ radius (KKT: a ridge ν ≥ 0 with ‖θ(ν)‖ = radius)."""
    theta = ridge_mle(X, y, 0.0)
    if np.linalg.norm(theta) <= radius:
        return theta
    nu = brentq(lambda nu: np.linalg.norm(ridge_mle(X, y, nu)) - radius, 0.0, 10.0, xtol=1e-15)
    return ridge_mle(X, y, nu)


def big_account():
    return Ledger(ZCDP(10**9)).split({"optimizer": 1}, currency={"optimizer": "zcdp"})["optimizer"]


def time_fits() -> None:
    rng = np.random.default_rng(1)
    X, y = logistic_problem(rng, 5000, np.ones(DIM))
    V = X[:200].T @ X[:200] + np.eye(DIM)
    projections = {
        "ball": BallProjection(RADIUS),
        "ellipsoid": EllipsoidProjection(np.zeros(DIM), V, 2.0),
    }
    print("time per DPSGD.fit (full batch, d = 5, median of 7)")
    print(f"{'engine':>10} {'n':>6} {'steps':>6} {'projection':>10} {'wall ms/fit':>12} {'cpu ms/fit':>11} "
          f"{'cpu ms/step':>12}")
    for engine in ENGINES:
        optimizer = DPSGD(big_account(), "logistic", np.random.default_rng(2), clip=1.0, engine=engine)
        optimizer.fit(X[:50], y[:50], cost=ZCDP(1), steps=3, lr=20.0, projection=projections["ball"])  # warm-up
        for n in (5000, 200, 50):
            for steps in (20, 50):
                for name, projection in projections.items():
                    wall, cpu = [], []
                    for _ in range(7):
                        start, start_cpu = time.perf_counter(), time.process_time()
                        optimizer.fit(X[:n], y[:n], cost=ZCDP(0.1), steps=steps, lr=20.0, projection=projection)
                        wall.append(time.perf_counter() - start)
                        cpu.append(time.process_time() - start_cpu)
                    print(
                        f"{engine:>10} {n:>6} {steps:>6} {name:>10} {1e3 * np.median(wall):>12.1f}"
                        f" {1e3 * np.median(cpu):>11.1f} {1e3 * np.median(cpu) / steps:>12.3f}"
                    )


def excess_risk(scales: np.ndarray, variants: dict[str, dict], seeds: int = 8) -> None:
    """Excess risk table over ρ and steps for contexts uniform in the unit ball scaled by ``scales``."""
    print(
        f"\nexcess empirical risk F(θ) − F(θ̂), mean logistic NLL, n = 5000, d = 5, context scales "
        f"{tuple(float(v) for v in scales)}, {seeds} seeds (mean ± sd)"
    )
    problems = []
    for seed in range(seeds):
        rng = np.random.default_rng(100 + seed)
        X, y = logistic_problem(rng, 5000, scales)
        optimum = constrained_mle(X, y, RADIUS)
        problems.append((X, y, optimum, mean_nll(optimum, X, y)))
    start_excess = [mean_nll(np.zeros(DIM), X, y) - best for X, y, _, best in problems]
    print(f"θ = 0: {np.mean(start_excess):.2e}")
    print(f"{'variant':>16} {'rho':>6} {'steps':>6} {'excess risk':>20} {'‖θ − θ̂‖':>16}")
    for name, options in variants.items():
        for rho in (0.01, 0.1, 1.0, 1e6):
            for steps in (1, 2, 3, 5, 10, 25, 50):
                excess, distance = [], []
                for seed, (X, y, optimum, best) in enumerate(problems):
                    optimizer = DPSGD(
                        big_account(), "logistic", np.random.default_rng(seed), clip=1.0, engine="vectorised"
                    )
                    theta = optimizer.fit(
                        X, y, cost=ZCDP(rho), steps=steps, projection=BallProjection(RADIUS), **options
                    ).value
                    excess.append(mean_nll(theta, X, y) - best)
                    distance.append(np.linalg.norm(theta - optimum))
                print(
                    f"{name:>16} {rho:>6g} {steps:>6} {np.mean(excess):>10.2e} ± {np.std(excess):.1e}"
                    f" {np.mean(distance):>7.3f} ± {np.std(distance):.3f}"
                )


if __name__ == "__main__":
    time_fits()
    excess_risk(np.ones(DIM), {"GD lr=20": {"lr": 20.0}})
    # Anisotropic contexts: E[xxᵀ] = diag(s²)/(d + 2). Plain GD at lr = 1/L (L = λ_max/4 bounds the
    # logistic curvature) against GD preconditioned by the public M = (E[xxᵀ]/4)⁻¹, lr = 1
    # (in the bandit, M would come from the released design matrix).
    scales = np.array([1.0, 1.0, 0.5, 0.25, 0.1])
    covariance = np.diag(scales**2) / (DIM + 2)
    excess_risk(
        scales,
        {
            "GD lr=1/L": {"lr": 4.0 / float(np.max(np.diag(covariance)))},
            "preconditioned": {"lr": 1.0, "preconditioner": np.linalg.inv(covariance / 4.0)},
        },
    )
