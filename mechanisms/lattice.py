r"""Float-safe noisy releases: round the statistic to a power-of-two grid and add exact discrete noise on it.

Why (Mironov 2012, "On significance of the least significant bits for
differential privacy"): x + (float Laplace or Gaussian noise) computed in
floating point has outputs that are possible for one input and impossible for
its neighbour (82% of the outputs of ``LaplaceMechanism`` at ε = 1 on input 0
could not occur on input 1), so the claimed ε or ρ is not what the floats
deliver. Here every noisy value is

    y = fl(g·n + g·Z),   n = rint(x/g) ∈ ℤᵐ,   Z ∈ ℤᵐ exact discrete noise,

with g = 2^k a power of two. g·n and g·Z are exact floats and IEEE addition is
correctly rounded, so y is a deterministic function of the integer vector
n + Z: the release is post-processing of an integer-valued mechanism whose
privacy is exactly that of the discrete noise (``docs/float-safe-noise.md``).

Sensitivity on the grid. rint moves each coordinate by at most g/2, so for
neighbours ‖n − n'‖·g ≤ ‖x − x'‖ + g‖1‖: L2 sensitivity Δ + g√m, and, n − n'
being an integer vector, L1 sensitivity ⌊Δ/g⌋ + m grid steps (each coordinate
|nᵢ − n'ᵢ| ≤ |xᵢ − x'ᵢ|/g + 1). The discrete noise is calibrated to the inflated
sensitivity so that the mechanism's charge (computed for Δ) stays exact:

* Gaussian: the discrete Gaussian N_ℤ(0, S) with integer S ≥ (σ/g)²(1 + g√m/Δ)²
  is Δ_g²/(2S)-zCDP for integer shifts of L2 norm Δ_g (Canonne, Kamath & Steinke
  2020, Thm 4 and its product form, Thm 15), and Δ_g²/(2S) ≤ Δ²/(2σ²), the charge.
* Laplace: the discrete Laplace with integer scale t ≥ (⌊Δ/g⌋ + m)/ε is ε-DP
  (pmf ratio exp(‖n − n'‖₁/t); Ghosh, Roughgarden & Sundararajan 2009; CKS 2020 §2).

The grid (what is public: σ or b, Δ, and the number m of entries; never the data):
g = 2^(⌊log₂ σ⌋ − ``GAUSSIAN_BITS``), so σ/g ∈ [2^28, 2^29), and g = 2^(⌊log₂ b⌋ −
``LAPLACE_BITS``), so b/g ∈ [2^40, 2^41). Limits from exact integer arithmetic: the
discrete Gaussian sampler needs S ≤ 2^62 (σ/g < 2^31: at most 30 bits), the discrete
Laplace t ≤ 2^52. The relative noise inflation is g√m/Δ ≤ 2^-28·(σ/Δ)·√m (Gaussian)
and g·m/Δ ≤ 2^-40·(b/Δ)·m (Laplace), recorded as ``noise_inflation``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from mechanisms.discrete import (
    MAX_SCALE,
    MAX_SIGMA2,
    FloatArray,
    IntArray,
    discrete_gaussian,
    discrete_gaussian_gdp_mu,
    discrete_laplace,
)

__all__ = ["GAUSSIAN_BITS", "LAPLACE_BITS", "GaussianLattice", "LaplaceLattice", "NoiseStream", "gdp_mu_squared",
           "gdp_sigma", "round_to_grid"]

#: σ in grid units lies in [2^GAUSSIAN_BITS, 2^(GAUSSIAN_BITS + 1)).
GAUSSIAN_BITS = 28
#: b in grid units lies in [2^LAPLACE_BITS, 2^(LAPLACE_BITS + 1)).
LAPLACE_BITS = 40


#: Smallest grid: g·n stays a normal float (exact) for every integer n ≠ 0.
_MIN_GRID = 2.0**-1000


def _grid_below(value: float, bits: int) -> float:
    """2^(⌊log₂ value⌋ − bits), at least 2⁻¹⁰⁰⁰: a power of two, from the public noise parameter only.

    The floor keeps g·n exact for noise parameters below ~2⁻⁹⁷⁰ (whose costs no real
    budget pays); the calibration then simply uses fewer bits.
    """
    _, exponent = math.frexp(value)  # value = m·2^exponent, m ∈ [1/2, 1)
    return max(math.ldexp(1.0, exponent - 1 - bits), _MIN_GRID)


def _sqrt_up(m: int) -> Fraction:
    """A rational ≥ √m (exact when m is a perfect square)."""
    root = math.isqrt(m)
    if root * root == m:
        return Fraction(root)
    return Fraction(math.isqrt(m * 4**32) + 1, 2**32)


def round_to_grid(x: npt.ArrayLike, grid: float) -> FloatArray:
    """g·rint(x/g) elementwise: exact floats on the grid, each within g/2 of x.

    x/g and the product are exact (power-of-two scaling); a quotient that underflows
    rounds to 0, still within g/2.

    Raises
    ------
    ValueError
        If x/g overflows (|x| beyond ~2^1023·g); checked before any charge by callers.
    """
    units = np.rint(np.asarray(x, dtype=np.float64) / grid)
    if not np.all(np.isfinite(units)):
        raise ValueError(f"x is too large for the noise grid {grid!r} (|x|/grid overflows a float)")
    rounded: FloatArray = units * grid
    return rounded


class GaussianLattice:
    """Discrete Gaussian noise on the grid g for statistics of ``entries`` coordinates, L2 sensitivity Δ.

    Parameters
    ----------
    sigma : float
        The nominal σ the charge was computed for (ρ = Δ²/(2σ²)).
    sensitivity : float
        Δ, the L2 (or Frobenius) sensitivity the charge was computed for.
    entries : int
        m, the number of coordinates rounded (d for vectors, d² for (d, d) matrices).

    Attributes
    ----------
    grid : float
        g, a power of two.
    sigma2 : int
        S, the discrete Gaussian's σ² in grid units (module docstring).
    noise_inflation : float
        √S·g/σ − 1 ≥ 0, the relative noise added to absorb the rounding.

    Raises
    ------
    ValueError
        If S would exceed 2^62 (σ√m/Δ beyond ~2^30): no exact sampler; the message names the limit.
    """

    def __init__(self, sigma: float, sensitivity: float, entries: int) -> None:
        self.grid = _grid_below(sigma, GAUSSIAN_BITS)
        units = Fraction(sigma) / Fraction(self.grid)
        delta = Fraction(sensitivity)
        factor = (delta + Fraction(self.grid) * _sqrt_up(int(entries))) / delta
        target = (units * factor) ** 2
        self.sigma2 = -(-target.numerator // target.denominator)
        if self.sigma2 > MAX_SIGMA2:
            raise ValueError(
                f"sigma/sensitivity * sqrt(entries) = {sigma / sensitivity * math.sqrt(entries):.3g} is too large "
                f"for exact discrete Gaussian noise on the grid (sigma^2 in grid units {self.sigma2} > 2^62)")
        self.noise_inflation = math.sqrt(self.sigma2) * self.grid / sigma - 1.0

    def gdp_mu(self, sensitivity: float, entries: int) -> float:
        """A μ′ ≥ Δ/σ with which this lattice's release of ``entries`` coordinates is μ′-GDP.

        The rounded statistic moves by at most (Δ + g√m)/g grid steps in L2, and the
        discrete Gaussian of variance S is then μ′-GDP with μ′ from
        :func:`mechanisms.discrete.discrete_gaussian_gdp_mu` (``docs/float-safe-noise.md``,
        "Discrete Gaussian as GDP"). Relative excess over Δ/σ: about 2·2⁻²⁸·(σ/Δ)·√m.
        """
        steps = (float(sensitivity) + self.grid * math.sqrt(entries)) / self.grid * (1 + 2.0**-50)
        return discrete_gaussian_gdp_mu(self.sigma2, steps, int(entries))

    def integers(self, rng: np.random.Generator, count: int) -> IntArray:
        """``count`` i.i.d. N_ℤ(0, S) draws (grid units)."""
        return discrete_gaussian(rng, self.sigma2, count)

    def scale(self, units: IntArray, shape: tuple[int, ...], symmetric: bool = False) -> FloatArray:
        """Grid units → noise values g·Z of ``shape``; ``symmetric``: g·(Z + Zᵀ)/2 on the last two axes.

        (Z + Zᵀ)/2 is a half-integer multiple of g: still exact floats.
        """
        noise = units.reshape(shape).astype(np.float64)
        if symmetric:
            noise = (noise + np.swapaxes(noise, -1, -2)) / 2.0
        return noise * self.grid

    def add(self, rng: np.random.Generator, x: npt.ArrayLike, symmetric: bool = False) -> FloatArray:
        """fl(g·rint(x/g) + g·Z): the float-safe release of x (module docstring)."""
        rounded = round_to_grid(x, self.grid)
        noisy: FloatArray = rounded + self.scale(self.integers(rng, rounded.size), rounded.shape, symmetric)
        return noisy


def gdp_mu_squared(sigma: float, sensitivity: float, entries: int) -> Fraction:
    """μ′² (exact rational, rounded up) of one float-safe Gaussian release on its :class:`GaussianLattice`.

    The release rounds ``entries`` = m coordinates to the grid g and adds N_ℤ(0, S) noise;
    neighbours move the rounded integer vector by at most Δ/g + √m in L2 (this module's
    docstring), so the release is μ′-GDP with μ′ = :meth:`GaussianLattice.gdp_mu`
    (``docs/float-safe-noise.md``, "Discrete Gaussian as GDP"). About Δ/σ·(1 + 2⁻²⁷√m σ/Δ).
    """
    return Fraction(GaussianLattice(sigma, sensitivity, entries).gdp_mu(sensitivity, entries)) ** 2


@lru_cache(maxsize=256)
def gdp_sigma(mu_squared: Fraction, sensitivity: float, entries: int, compositions: Fraction = Fraction(1)) -> float:
    """A float σ, within ~10⁻⁹ relative of the smallest, whose lattice releases keep k·μ′² ≤ μ².

    k = ``compositions`` releases of sensitivity Δ (the tree depth, the epochs of
    DP-SGD) compose in GDP as √(k)·μ′ (Dong, Roth & Su 2022, Cor. 3.3). Starts at
    the continuous σ = Δ√(k)/μ and raises it until :func:`gdp_mu_squared` meets the
    budget exactly (rational comparison). A function of its arguments alone, so its
    results are kept in-process (a private bandit's DP-SGD refits all ask for the same σ).
    """
    if mu_squared <= 0:
        raise ValueError(f"mu must be > 0 for Gaussian noise, got mu^2 = {float(mu_squared)}")
    sigma = sensitivity * math.sqrt(float(compositions) / float(mu_squared))
    for _ in range(200):
        have = compositions * gdp_mu_squared(sigma, sensitivity, entries)
        if have <= mu_squared:
            return sigma
        sigma *= 1.0 + max(2.0**-40, 0.5 * (float(have / mu_squared) - 1.0) + 2.0**-45)
    raise RuntimeError(f"could not calibrate sigma to mu^2 = {float(mu_squared)} (sensitivity {sensitivity})")


class LaplaceLattice:
    """Discrete Laplace noise on the grid g: pure ε-DP for L1 sensitivity Δ over ``entries`` coordinates.

    Parameters
    ----------
    epsilon : fractions.Fraction
        The ε charged (exact).
    scale : float
        The nominal Laplace scale b (sets the grid only).
    sensitivity : float
        Δ, the L1 sensitivity.
    entries : int
        m, the number of coordinates rounded.

    Attributes
    ----------
    grid : float
    scale_units : int
        t = ⌈(⌊Δ/g⌋ + m)/ε⌉, the discrete Laplace scale in grid units.
    noise_inflation : float
        t·g/b − 1 (may be slightly negative when b was rounded up for the charge).
    """

    def __init__(self, epsilon: Fraction, scale: float, sensitivity: float, entries: int) -> None:
        self.grid = _grid_below(scale, LAPLACE_BITS)
        steps = Fraction(sensitivity) / Fraction(self.grid)
        shift = steps.numerator // steps.denominator + int(entries)
        units = Fraction(shift) / Fraction(epsilon)
        self.scale_units = -(-units.numerator // units.denominator)
        if self.scale_units > MAX_SCALE:
            raise ValueError(f"epsilon={float(epsilon):.6g} is too small (or entries={entries} too many) for exact "
                             f"discrete Laplace noise on the grid: its scale would be {float(units):.3g} grid "
                             "units > 2^52")
        self.noise_inflation = self.scale_units * self.grid / scale - 1.0

    def integers(self, rng: np.random.Generator, count: int) -> IntArray:
        """``count`` i.i.d. discrete Laplace draws of scale t (grid units)."""
        return discrete_laplace(rng, self.scale_units, count)

    def add(self, rng: np.random.Generator, x: npt.ArrayLike) -> FloatArray:
        """fl(g·rint(x/g) + g·Y), Y discrete Laplace: the float-safe release of x."""
        rounded = round_to_grid(x, self.grid)
        noise = self.integers(rng, rounded.size).reshape(rounded.shape).astype(np.float64) * self.grid
        noisy: FloatArray = rounded + noise
        return noisy


class NoiseStream:
    """Integer noise drawn in blocks and handed out in order: i.i.d., so the law is unchanged.

    For mechanisms whose one charge covers every draw (a tree's horizon): create
    it only after the charge. ``take(n)`` returns the next n draws.
    """

    def __init__(self, lattice: GaussianLattice, rng: np.random.Generator, block: int = 4096) -> None:
        self.lattice, self.rng, self.block = lattice, rng, int(block)
        self._buffer = np.zeros(0, dtype=np.int64)
        self._at = 0

    def take(self, count: int) -> IntArray:
        """The next ``count`` draws (a fresh block when the buffer runs out)."""
        if self._at + count > self._buffer.size:
            rest = self._buffer[self._at:]
            fresh = self.lattice.integers(self.rng, max(self.block, count))
            self._buffer, self._at = np.concatenate((rest, fresh)), 0
        out = self._buffer[self._at: self._at + count]
        self._at += count
        return out
