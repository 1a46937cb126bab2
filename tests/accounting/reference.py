"""Slow reference implementations shared by the accounting tests (independent of accounting.convert)."""

import numpy as np


def cks_by_dense_grid(rho: float, delta: float) -> float:
    """Slow reference: CKS Cor. 13 minimised over a dense grid of real orders, refined twice."""
    low, high = 1e-4, 1e5
    for _ in range(3):
        alpha = 1.0 + np.geomspace(low, high, 100_001)
        eps = alpha * rho + np.log1p(-1.0 / alpha) - np.log(alpha * delta) / (alpha - 1.0)
        best = int(np.argmin(eps))
        low, high = alpha[max(best - 2, 0)] - 1.0, alpha[min(best + 2, alpha.size - 1)] - 1.0
    return float(max(0.0, eps.min()))
