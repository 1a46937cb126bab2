"""The exact ingredients of non-private B-GLinCB (Sawarni et al. 2024): exact sums and the regularised MLE."""

from __future__ import annotations

import numpy as np

from dpglm.glm import GLMFamily

__all__ = ["ExactDesignSum", "MLEBatchEstimator"]


class ExactDesignSum:
    """Exact ``Σ leaves + λI`` (non-private B-GLinCB, Sawarni et al. 2024)."""

    def __init__(self, lam: float) -> None:
        self.lam = float(lam)

    def matrix(self, leaves: np.ndarray, batch: int, bound: float) -> np.ndarray:
        d = leaves.shape[-1]
        return leaves.sum(axis=0) + self.lam * np.eye(d)


class MLEBatchEstimator:
    """Regularised MLE ``argmin_{‖θ‖≤S} L(θ; λ)`` on one batch (paper §4 loss; non-private)."""

    def __init__(self, family: GLMFamily, lam: float, radius: float) -> None:
        self.family, self.lam, self.radius = family, float(lam), float(radius)

    def fit(self, X: np.ndarray, y: np.ndarray, batch: int) -> np.ndarray:
        return self.family.fit_mle(X, y, lam=self.lam, radius=self.radius)

