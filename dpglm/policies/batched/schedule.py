"""The batch schedule of the batched GLM bandit, fixed before the first round (paper §5 "Batch structure").

``M = ⌈ln ln T⌉ + 1`` batches with ``B₁ = min((c₁α)^{2/3}, cap)``, ``B₂ = α``,
``B_k = α√B_{k−1}`` (choices 1 and 2 of :mod:`dpglm.policies.batched`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accounting.validation import check_int, check_real, check_size

__all__ = ["BatchSchedule", "batch_schedule", "max_batches"]


@dataclass(frozen=True)
class BatchSchedule:
    """Batch lengths fixed before the first round (paper §5 "Batch structure").

    Attributes
    ----------
    lengths : tuple of int
        ``B₁, …, B_M``; they sum to the horizon.
    alpha : float
        The α solving ``Σ_k B_k(α) = T`` (real lengths).
    warmup_formula : float
        ``(c₁α)^{2/3}`` before the cap.
    warmup_capped : bool
        Whether the cap on ``B₁`` bound.
    """

    lengths: tuple[int, ...]
    alpha: float
    warmup_formula: float
    warmup_capped: bool

    @property
    def ends(self) -> np.ndarray:
        """Cumulative end points: batch k holds rounds ``ends[k−1] ≤ t < ends[k]`` (0-based)."""
        return np.cumsum(self.lengths)


def max_batches(horizon: int) -> int:
    """``⌈ln ln T⌉ + 1`` (at least 2): the batch budget of paper §5 / Sawarni et al. (2024)."""
    return max(2, math.ceil(math.log(math.log(max(int(horizon), 3)))) + 1)


def _real_lengths(alpha: float, n_batches: int, warmup_scale: float, warmup_cap: float) -> list[float]:
    lengths = [min((warmup_scale * alpha) ** (2.0 / 3.0), warmup_cap), alpha]
    while len(lengths) < n_batches:
        lengths.append(alpha * math.sqrt(lengths[-1]))
    return lengths[:n_batches]


def batch_schedule(
    horizon: int, *, warmup_scale: float, warmup_cap: float | None = None, n_batches: int | None = None
) -> BatchSchedule:
    """The batch lengths ``B₁ = min((c₁α)^{2/3}, cap)``, ``B₂ = α``, ``B_k = α√B_{k−1}``.

    Parameters
    ----------
    horizon : int >= 1
        T.
    warmup_scale : float > 0
        c₁ (paper §5: ``κ e^{3S} d² γ²/S``).
    warmup_cap : float >= 1, optional
        Upper bound on ``B₁``; default ``⌈T^{2/3}⌉`` (:mod:`dpglm.policies.batched`, choice 2).
    n_batches : int >= 1, optional
        M; default :func:`max_batches`.

    Returns
    -------
    BatchSchedule
        α solved by bisection so the real lengths sum to T; integer lengths are the
        differences of the rounded-down cumulative end points, empty batches dropped.
    """
    horizon = check_size("horizon", horizon)
    warmup_scale = check_real("warmup_scale", warmup_scale, 0.0, low_open=True)
    cap = float(math.ceil(horizon ** (2.0 / 3.0))) if warmup_cap is None else check_real("warmup_cap", warmup_cap, 1.0)
    m = max_batches(horizon) if n_batches is None else check_int("n_batches", n_batches)
    if m == 1:
        return BatchSchedule((horizon,), float(horizon), float(horizon), False)
    lo, hi = 0.0, float(horizon)  # Σ lengths(α) is increasing in α and ≥ T at α = T
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if sum(_real_lengths(mid, m, warmup_scale, cap)) < horizon:
            lo = mid
        else:
            hi = mid
    alpha = hi
    real = _real_lengths(alpha, m, warmup_scale, cap)
    ends = np.minimum(np.floor(np.cumsum(real) + 1e-9).astype(np.int64), horizon)
    ends[-1] = horizon
    lengths = np.diff(np.concatenate([[0], ends]))
    formula = (warmup_scale * alpha) ** (2.0 / 3.0)
    return BatchSchedule(tuple(int(b) for b in lengths if b > 0), alpha, formula, formula > cap)

