r"""Square-root factorization continual counter: prefix sums with less noise than the tree at the same ρ.

Beyond the paper. The prefix-sum matrix A (T×T lower-triangular all-ones) is
factored as A = B·C with B = C = A^{1/2}, the lower-triangular Toeplitz matrix
with entries c_{t−s}, c_k = binom(2k, k)/4^k (the coefficients of (1 − x)^{-1/2};
Fichtenberger, Henzinger & Upadhyay 2023, "Constant matters: fine-grained error
bound on differentially private continual observation", ICML; Henzinger,
Upadhyay & Upadhyay 2023, SODA). The mechanism releases B(Cx + Z) = Ax + BZ:
the prefix sums plus correlated noise (BZ)_t = Σ_{s≤t} c_{t−s} Z_s.

Privacy (zCDP). Changing one element x_s by D (‖D‖ ≤ Δ, L2 or Frobenius)
changes (Cx)_t by c_{t−s} D for every t ≥ s, so Cx has sensitivity
Δ·max_s ‖C e_s‖₂ = Δ·√(Σ_{k<T} c_k²) (column 1 is the longest). With i.i.d.
N(0, σ²) noise (symmetrised for matrices: per-node Rényi divergence is
α‖D‖_F²/(2σ²), derivation in ``mechanisms.tree``), Cx + Z is

    ρ = (Σ_{k<T} c_k²) · Δ² / (2σ²)  zCDP,

and the released prefix sums are post-processing by the invertible B. For
lower-triangular factorizations with Gaussian noise this holds for adaptively
chosen streams too (Denisov, McMahan, Rush, Smith & Thakurta 2022, Thm 2.1).
Σ c_k² is computed in floating point and inflated by (1 + 8T·2⁻⁵³), an upper
bound on its rounding error, then rounded up: the charge is never below the loss.

Error. The per-entry (diagonal) variance of the prefix noise at t is
σ²·Σ_{k<t} c_k² ≈ σ²(1 + ln t/π), against σ_tree²·popcount(t) with
σ_tree² = L·Δ²/(2ρ) for the tree at the same ρ.

Cost of the lower error: all T noise draws are made at construction (after the
charge) and correlated by one FFT convolution, O(T·d²·log T) time once and
O(T·d²) memory, then O(d²) per append; the tree needs only O(L·d²) memory.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from scipy.signal import fftconvolve

from mechanisms.noise import round_up
from mechanisms.release import Release
from mechanisms.tree import ContinualRelease, symmetrised_normal

__all__ = ["SquareRootFactorizationMechanism", "square_root_coefficients"]


def square_root_coefficients(horizon: int) -> np.ndarray:
    """First ``horizon`` entries c_k = binom(2k, k)/4^k of the first column of A^{1/2}.

    Recurrence c_0 = 1, c_k = c_{k−1}·(2k − 1)/(2k), vectorised as a cumulative product.
    """
    k = np.arange(1, int(horizon), dtype=float)
    return np.concatenate(([1.0], np.cumprod((2.0 * k - 1.0) / (2.0 * k))))


def _column_norm_squared_upper(coefficients: np.ndarray) -> Fraction:
    """An upper bound on Σ c_k² (exact arithmetic above the float sum's worst-case rounding)."""
    total = Fraction(math.fsum((coefficients**2).tolist()))
    slack = 1 + Fraction(8 * coefficients.size, 2**53)
    return round_up(total * slack)


class SquareRootFactorizationMechanism(ContinualRelease):
    """Continual release of noisy prefix sums through the square-root factorization of the prefix-sum matrix.

    Same interface, neighbouring relation, sensitivity semantics and element checks
    as ``BinaryTreeMechanism``; the whole horizon costs ρ = (Σ_{k<T} c_k²)·Δ²/(2σ²)
    zCDP, charged once at construction before any noise is drawn (derivation in
    the module docstring).

    Parameters
    ----------
    account : accounting.Account
        zCDP account charged once for the whole horizon.
    horizon : int
        Number T ≥ 1 of elements.
    shape : tuple
        ``(d,)`` vectors or ``(d, d)`` symmetric matrices (symmetrised noise).
    sensitivity : float
        Δ ≥ ‖x_s − x_s'‖ (L2, Frobenius for matrices) under ``relation``.
    rng : numpy.random.Generator
        Source of the noise.
    sigma : float, optional
        Std of the uncorrelated noise Z (diagonal entries for matrices).
    cost : accounting.ZCDP, optional
        Cost of the whole horizon; σ is calibrated to it, rounded up. If neither
        ``sigma`` nor ``cost`` is given, all of ``account.remaining`` is spent.
    relation : {"replace_one", "add_remove"}
    psd : bool
        Matrix elements are positive semidefinite (element bound Δ/√2 under replace-one).

    Raises
    ------
    accounting.BudgetExceeded
        At construction, if the account cannot pay; no noise is drawn.
    """

    mechanism_name = "SquareRootFactorizationMechanism"

    def _plan(self) -> tuple[Fraction, str, str]:
        """An element enters Cx with weight Σ_{k<T} c_k² (rounded up): ρ = (Σ c_k²)·Δ²/(2σ²)."""
        self.coefficients = square_root_coefficients(self.horizon)
        self.column_norm_squared = _column_norm_squared_upper(self.coefficients)
        return self.column_norm_squared, f"sum c_k^2={float(self.column_norm_squared)!r}", "sigma"

    def _start(self) -> None:
        """All T noise draws, made once the horizon is charged, correlated by the factor B."""
        white = symmetrised_normal(self.rng, self.sigma, self.shape, count=self.horizon)
        kernel = self.coefficients.reshape((self.horizon,) + (1,) * len(self.shape))
        self._noise = fftconvolve(kernel, white, axes=0)[: self.horizon]
        self._sum = np.zeros(self.shape)

    def _noise_weight(self, t: int) -> float:
        """The t-th release carries Σ_{s≤t} c_{t−s} Z_s: variance σ²·Σ_{k<t} c_k²."""
        return float(np.sum(self.coefficients[:t] ** 2))

    def append(self, x: np.ndarray) -> Release:
        """Add element x_{t+1} and release S_{t+1} + Σ_{s≤t+1} c_{t+1−s} Z_s.

        Raises
        ------
        ValueError
            If the horizon is exhausted or ``x`` is malformed (see ``StreamElements.check``).
        """
        element = self._elements.check(x, self.t)
        self._sum = self._sum + element
        self.t += 1
        return self._release(self._sum + self._noise[self.t - 1], self.receipt)
