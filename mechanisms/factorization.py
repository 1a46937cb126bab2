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

Float safety (``docs/float-safe-noise.md``). The mechanism releases B·Y with
Y_t = g·rint((Cx)_t/g) + g·Z_t, Z_t discrete Gaussian on the power-of-two grid g
(``mechanisms.lattice``): Y is a function of an integer array, and B·Y is
post-processing. Changing x_s by D leaves rows t < s of Cx, hence their rounding,
unchanged, and moves row t ≥ s by c_{t−s}D before rounding and by at most
c_{t−s}‖D‖ + g√m after it (m entries per row), so by Minkowski the rounded Cx has
sensitivity ≤ √(Σc_k²)·Δ + g√(m·T). The discrete noise is calibrated to that
(relative inflation g√(mT)/(√(Σc_k²)Δ)) at the same charge; per-row Rényi
divergences add over independent rows, symmetrised rows as in ``mechanisms.tree``.

Cost of exactness: Cx is not a running sum, so each append computes
(Cx)_t = Σ_{s≤t} c_{t−s}x_s and (BY)_t = Σ_{s≤t} c_{t−s}Y_s from the stored
history: O(t·d²) work per append (O(T²·d²) in all) and O(T·d²) memory; the
tree needs O(L·d²) per append and memory.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from mechanisms.lattice import round_to_grid
from mechanisms.noise import round_up
from mechanisms.release import Release
from mechanisms.tree import ContinualRelease

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
        zCDP or GDP account (currency ``"zcdp"`` or ``"gdp"``) charged once for the whole horizon.
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
    cost : accounting.ZCDP or accounting.GDP, optional
        Cost of the whole horizon (in the account's currency); σ is calibrated to it, rounded up. If neither
        ``sigma`` nor ``cost`` is given, all of ``account.remaining`` is spent.
    relation : {"replace_one", "add_remove"}
    psd : bool
        Matrix elements are positive semidefinite (element bound Δ/√2 under replace-one).
    invalid : {"raise", "clip"}
        As ``BinaryTreeMechanism``: refuse an element beyond the bounds after the charge
        (default), or clip it into them before its noise.

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

    def _state_bytes(self, horizon: int) -> int:
        """The two T-row history buffers, the T coefficients and a block of T rows of noise."""
        return 8 * (3 * horizon * math.prod(self.shape) + horizon)

    def _start(self) -> None:
        """History buffers for Cx and its noisy version (the noise itself is drawn at first append)."""
        self._elements_seen = np.zeros((self.horizon, *self.shape))
        self._noisy_cx = np.zeros((self.horizon, *self.shape))

    def _gdp_entries(self) -> int:
        """All T·m entries of Cx: one element moves them together, and they are rounded jointly."""
        return self.horizon * int(np.prod(self.shape))

    def _gdp_terms(self, compositions: Fraction) -> tuple[float, Fraction, int]:
        """One Gaussian release of the T·m vector Cx, of L2 sensitivity √(Σc_k²)·Δ: μ² = μ′² (k = 1).

        Changing element s moves Cx by c_{t−s}(x_s − x_s') in row t ≥ s, of total L2 norm
        √(Σ_{k<T−s} c_k²)·‖x_s − x_s'‖ ≤ √(Σc_k²)·Δ; Cx is rounded to the lattice as one
        vector (:meth:`append`), so :func:`mechanisms.lattice.gdp_mu_squared` of that vector
        bounds its GDP (``docs/float-safe-noise.md``). Continuous limit: μ = √(Σc_k²)·Δ/σ,
        i.e. μ²/2 = the zCDP charge (Dong, Roth & Su 2022; Bun & Steinke 2016).
        """
        return self._row_sensitivity(), Fraction(1), self._gdp_entries()

    def _row_sensitivity(self) -> float:
        """√(Σc_k²)·Δ rounded down (a smaller value only enlarges the noise's rounding allowance)."""
        return float(np.nextafter(math.sqrt(float(self.column_norm_squared)) * self.charged_sensitivity, 0.0))

    def _noise_weight(self, t: int) -> float:
        """The t-th release carries Σ_{s≤t} c_{t−s} Z_s: variance σ²·Σ_{k<t} c_k²."""
        return float(np.sum(self.coefficients[:t] ** 2))

    def append(self, x: npt.ArrayLike) -> Release:
        """Add element x_{t+1} and release S_{t+1} + Σ_{s≤t+1} c_{t+1−s} Z_s.

        Raises
        ------
        ValueError
            If the horizon is exhausted or ``x`` is malformed (see ``StreamElements.check``).
        """
        element = self._elements.check(x, self.t)
        nodes = self._node_noise(self._row_sensitivity(), self.horizon)
        t = self.t
        self._elements_seen[t] = element
        weights = self.coefficients[t::-1]  # c_{t−s} for s = 0..t
        cx = np.tensordot(weights, self._elements_seen[: t + 1], axes=1)
        self._noisy_cx[t] = round_to_grid(cx, nodes.lattice.grid) + nodes.noise(1)[0]
        self.t += 1
        return self._release(np.tensordot(weights, self._noisy_cx[: t + 1], axes=1), self.receipt)
