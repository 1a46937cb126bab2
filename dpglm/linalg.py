"""The small linear algebra the policies share: floored spectra and bounds on μ̇.

Every private policy inverts a *released* design matrix. A noisy release need not be
positive definite, so its eigenvalues are floored before it is inverted, whitened or
its log-determinant taken. Flooring is post-processing of the release, so it costs no
privacy (``docs/joint-dp-privacy.md``, ``docs/shuffle-accounting.md``). On an exact
``λI + Σ xxᵀ`` with floor ``≤ λ`` it never binds. Assumptions E.1 and J.1 of the
paper (``V ⪰ λ_min I``) are then true by construction.

The policies' constants also need the range of μ̇ over the ball ``|z| ≤ S`` (paper
§4, κ and the leaf weights ``μ̇/e``). :func:`dmu_range` evaluates it on one fine grid,
so every registered family works, not just the symmetric unimodal ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .glm import GLMFamily, get_family

__all__ = ["FlooredSpectrum", "dmu_range", "floored_inverse"]

#: Points of the grid on [−S, S] that :func:`dmu_range` evaluates μ̇ on.
DMU_GRID_POINTS = 20001


@dataclass(frozen=True)
class FlooredSpectrum:
    """A symmetric matrix with its eigenvalues floored, and what the policies need of it.

    Parameters
    ----------
    eigenvalues : ndarray, shape (d,)
        The floored eigenvalues ``max(w, floor)``.
    eigenvectors : ndarray, shape (d, d)
        Orthonormal eigenvectors, one per column.

    Build one with :meth:`of`.
    """

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    diagonal: bool = False
    """The eigenvectors are the identity (a scaled identity λI, a policy's start): the products
    below are diagonal and formed in O(d²), the same floats as the O(d³) ones."""

    @classmethod
    def of(cls, matrix: np.ndarray, floor: float) -> FlooredSpectrum:
        """The spectrum of the symmetric ``matrix``, eigenvalues floored at ``floor > 0``.

        A finite scaled identity λI gets eigh's own answer, (λ, …, λ) and I, without the
        O(d³) decomposition (a large-d policy starts in seconds, not minutes).
        """
        if not floor > 0:
            raise ValueError(f"floor must be > 0, got {floor!r}")
        m = np.asarray(matrix, dtype=float)
        if _is_scaled_identity(m):
            return cls(np.full(m.shape[0], max(float(m[0, 0]), floor)), np.eye(m.shape[0]), diagonal=True)
        w, q = np.linalg.eigh(m)
        return cls(np.maximum(w, floor), q)

    @property
    def matrix(self) -> np.ndarray:
        """The floored matrix ``Q diag(w) Qᵀ``."""
        if self.diagonal:
            return np.diag(self.eigenvalues)
        return (self.eigenvectors * self.eigenvalues) @ self.eigenvectors.T

    @property
    def inverse(self) -> np.ndarray:
        """``Q diag(1/w) Qᵀ``, the inverse of the floored matrix."""
        if self.diagonal:
            return np.diag(1.0 / self.eigenvalues)
        return (self.eigenvectors / self.eigenvalues) @ self.eigenvectors.T

    @property
    def whitening(self) -> np.ndarray:
        """``W = diag(w^{-1/2}) Qᵀ``, so that ``W M Wᵀ = I`` and ``‖Wx‖² = xᵀM⁻¹x``."""
        if self.diagonal:
            return np.diag(1.0 / np.sqrt(self.eigenvalues))
        return (self.eigenvectors / np.sqrt(self.eigenvalues)).T

    @property
    def logdet(self) -> float:
        """``log det`` of the floored matrix."""
        return float(np.sum(np.log(self.eigenvalues)))


def _is_scaled_identity(m: np.ndarray) -> bool:
    """``m`` is c·I with c finite and nonzero (one entry is read first: a noisy release fails at once)."""
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] == 0 or (m.shape[0] > 1 and m[0, 1] != 0):
        return False
    c = m[0, 0]
    return bool(np.isfinite(c) and c != 0 and np.all(m.diagonal() == c) and np.count_nonzero(m) == m.shape[0])


def floored_inverse(matrix: np.ndarray, floor: float) -> np.ndarray:
    """Inverse of the symmetric ``matrix`` after flooring its eigenvalues at ``floor``."""
    return FlooredSpectrum.of(matrix, floor).inverse


def dmu_range(family: str | GLMFamily, radius: float) -> tuple[float, float]:
    """``(min, max)`` of μ̇ over ``[−radius, radius]``, on a grid of 20001 points.

    For logistic and probit μ̇ is symmetric and unimodal at 0, so this is
    ``(μ̇(radius), μ̇(0))`` up to rounding. The result is cached per family and radius.

    Raises
    ------
    ValueError
        If ``radius`` is not a finite number ``>= 0``.
    """
    radius = float(radius)
    if not np.isfinite(radius) or radius < 0:
        raise ValueError(f"radius must be a finite number >= 0, got {radius}")
    return _dmu_range(get_family(family), radius)


@lru_cache(maxsize=64)
def _dmu_range(family: GLMFamily, radius: float) -> tuple[float, float]:
    values = family.dmu(np.linspace(-radius, radius, DMU_GRID_POINTS))
    return float(np.min(values)), float(np.max(values))
