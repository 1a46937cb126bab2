"""The two pluggable ingredients of the batched loop: where ``V``/``H_k`` and ``θ̂_k`` come from.

Exact ones are :mod:`dpglm.policies.batched.exact`, shuffle-private ones
:mod:`dpglm.policies.batched.private` (paper §5, App. T and U).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["BatchEstimator", "DesignSum", "PreconditionedEstimator"]


class DesignSum(Protocol):
    """Forms a batch's design matrix ``Σ leaves + λI`` (exact) or releases it (private)."""

    def matrix(self, x: np.ndarray, weights: np.ndarray, batch: int, bound: float) -> np.ndarray | None:
        """``Σ_t weights[t]·x_t x_tᵀ`` plus the ridge, or ``None`` if the release was refused.

        The leaves are given by their factors (a leaf's d² entries are formed a chunk of rows
        at a time, never all at once): ``x`` has shape (n, d), rows in the unit ball;
        ``weights`` (n,) lies in ``[0, bound]``, so each leaf is PSD with trace at most
        ``bound``; ``batch`` is the 1-based batch index (the parallel-composition key of a
        private release).
        """


class BatchEstimator(Protocol):
    """Estimates θ* from one batch's data alone, over ``‖θ‖ ≤ S``."""

    def fit(self, X: np.ndarray, y: np.ndarray, batch: int) -> np.ndarray | None:
        """The estimate, or ``None`` if it was refused (budget)."""


@runtime_checkable
class PreconditionedEstimator(Protocol):
    """A :class:`BatchEstimator` that can also use the batch's released design matrix.

    When ``uses_design`` is true the loop passes the batch's release (public once
    released: post-processing) and whether its leaves were the warm-up's unit ones.
    """

    uses_design: bool

    def fit(self, X: np.ndarray, y: np.ndarray, batch: int, *, design: np.ndarray | None = None,
            unit_leaves: bool = False) -> np.ndarray | None:
        """The estimate, or ``None`` if it was refused (budget)."""
