"""Mechanisms core benchmark: tree and factorization append time, and their error at the same ρ.

Run ``python -m benchmarks.mechanisms`` (prints two small tables). Times are wall
clock per ``append`` of a symmetric (d, d) matrix element over a horizon T = 5000
(input checks, noise draw and the read-only ``Release`` copy included), after one
charge to an in-memory zCDP ledger; the error table uses the closed-form noise
variances (tree: σ²·popcount(t); factorization: σ²·Σ_{k<t} c_k²) at equal ρ.
"""

from __future__ import annotations

import math
import time

import numpy as np

from accounting import ZCDP, Ledger
from mechanisms import BinaryTreeMechanism, SquareRootFactorizationMechanism

HORIZON = 5000
RHO = 1.0


def time_appends(mechanism_class, d: int, psd: bool, horizon: int = HORIZON, repeats: int = 3) -> tuple[float, float]:
    """Best-of-``repeats`` (construction seconds, microseconds per append) for elements x xᵀ, ‖x‖ ≤ 1.

    With ``psd`` the element bound is Δ/√2 and every append runs an eigenvalue check;
    without it Δ = 2 (bound Δ/2).
    """
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(horizon, d))
    xs *= 0.99 / np.linalg.norm(xs, axis=1, keepdims=True)
    elements = np.einsum("ti,tj->tij", xs, xs)
    best_build, best_append = math.inf, math.inf
    for _ in range(repeats):
        account = Ledger(ZCDP(RHO)).root
        start = time.perf_counter()
        sensitivity = math.sqrt(2) if psd else 2.0
        mechanism = mechanism_class(account, horizon, (d, d), sensitivity, rng, psd=psd)
        built = time.perf_counter()
        for element in elements:
            mechanism.append(element)
        done = time.perf_counter()
        best_build = min(best_build, built - start)
        best_append = min(best_append, (done - built) / horizon * 1e6)
    return best_build, best_append


def error_table(horizons=(100, 1000, 5000, 100_000)) -> list[tuple[int, float, float, float, float]]:
    """Per horizon: tree and factorization worst-case per-entry noise std at ρ = 1, Δ = 1, their ratio, RMSE ratio."""
    rows = []
    for horizon in horizons:
        depth = horizon.bit_length()
        popcounts = np.array([bin(t).count("1") for t in range(1, horizon + 1)])
        tree_var = depth / (2 * RHO) * popcounts
        k = np.arange(1, horizon, dtype=float)
        c = np.concatenate(([1.0], np.cumprod((2 * k - 1) / (2 * k))))
        partial = np.cumsum(c**2)
        factor_var = partial[-1] / (2 * RHO) * partial
        rows.append((horizon, math.sqrt(tree_var.max()), math.sqrt(factor_var.max()),
                     math.sqrt(tree_var.max() / factor_var.max()), math.sqrt(tree_var.mean() / factor_var.mean())))
    return rows


def main() -> None:
    print(f"append time, symmetric (d, d) elements x xᵀ, T = {HORIZON}")
    print(f"{'mechanism':<34}{'psd':>6}{'d':>4}{'build s':>10}{'µs/append':>12}")
    for mechanism_class in (BinaryTreeMechanism, SquareRootFactorizationMechanism):
        for psd in (False, True):
            for d in (3, 5, 10):
                build, per_append = time_appends(mechanism_class, d, psd)
                print(f"{mechanism_class.__name__:<34}{psd!s:>6}{d:>4}{build:>10.4f}{per_append:>12.1f}")
    print()
    print("noise at equal rho = 1 (Delta = 1): worst-case per-entry std, and tree/factorization ratios")
    print(f"{'T':>8}{'tree max std':>14}{'factor max std':>16}{'max-std ratio':>15}{'RMSE ratio':>12}")
    for horizon, tree_std, factor_std, ratio, rmse_ratio in error_table():
        print(f"{horizon:>8}{tree_std:>14.3f}{factor_std:>16.3f}{ratio:>15.2f}{rmse_ratio:>12.2f}")


if __name__ == "__main__":
    main()
