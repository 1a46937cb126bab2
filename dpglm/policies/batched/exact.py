"""The exact ingredients of non-private B-GLinCB (Sawarni et al. 2024): exact sums and the regularised MLE."""

from __future__ import annotations

import numpy as np

from dpglm.glm import GLMFamily

__all__ = ["ExactDesignSum", "MLEBatchEstimator"]


_CHUNK = 4096  # leaves formed at a time


class ExactDesignSum:
    """Exact ``Σ w x xᵀ + λI`` (non-private B-GLinCB, Sawarni et al. 2024).

    The leaves ``w·(x xᵀ)`` are formed a chunk of rows at a time and added in order, the
    running sum leading each chunk's reduction: the same sequential sum as one pass over
    all the leaves (an outer-axis reduction adds row after row), in O(chunk·d²) memory.
    """

    def __init__(self, lam: float) -> None:
        self.lam = float(lam)

    def matrix(self, x: np.ndarray, weights: np.ndarray, batch: int, bound: float) -> np.ndarray:
        d = x.shape[-1]
        total = np.zeros((1, d, d))
        for start in range(0, len(x), _CHUNK):
            rows, w = x[start: start + _CHUNK], weights[start: start + _CHUNK]
            leaves = w[:, None, None] * (rows[:, :, None] * rows[:, None, :])
            total = np.concatenate([total, leaves]).sum(axis=0, keepdims=True)
        return total[0] + self.lam * np.eye(d)


class MLEBatchEstimator:
    """Regularised MLE ``argmin_{‖θ‖≤S} L(θ; λ)`` on one batch (paper §4 loss; non-private)."""

    def __init__(self, family: GLMFamily, lam: float, radius: float) -> None:
        self.family, self.lam, self.radius = family, float(lam), float(radius)

    def fit(self, X: np.ndarray, y: np.ndarray, batch: int) -> np.ndarray:
        return self.family.fit_mle(X, y, lam=self.lam, radius=self.radius)

