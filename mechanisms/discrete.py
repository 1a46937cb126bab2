r"""Exact samplers for the discrete Laplace and the discrete Gaussian, vectorised in numpy.

Canonne, Kamath & Steinke (2020), "The Discrete Gaussian for Differential Privacy"
(NeurIPS), Algorithms 1–3; derivations and the float-safety argument in
``docs/float-safe-noise.md``.

* :func:`bernoulli_exp` — Bernoulli(exp(−γ)) for rational γ = p/q ∈ [0, 1]
  (Algorithm 1): K ← 1; while Bernoulli(γ/K): K ← K + 1; return K odd. A coin
  Bernoulli(p/(qK)) is one uniform integer W ∈ {0, …, qK − 1} compared with p
  (two draws, one in {0..K−1} and one in {0..q−1}, when qK would overflow).
* :func:`discrete_laplace` — P(Y = y) ∝ exp(−|y|/t) on ℤ for an integer scale t ≥ 1
  (Algorithm 2 with s = 1): U uniform on {0..t−1} kept with probability exp(−U/t),
  V geometric (the number of Bernoulli(e⁻¹) successes before a failure),
  X = U + tV, a fair sign, and (sign −, X = 0) rejected.
* :func:`discrete_gaussian` — P(Y = y) ∝ exp(−y²/(2σ²)) on ℤ for an integer σ² = S
  (Algorithm 3): Y discrete Laplace with t = ⌊σ⌋ + 1, kept with probability
  exp(−(|Y| − σ²/t)²/(2σ²)).

Exactness. Every random decision is a comparison of uniform integers from the
generator with integers, except the last acceptance of Algorithm 3, whose γ =
(|Y|t − S)²/(2St²) has a numerator of ~4·log₂σ bits. There the decision is made
in float64 *only where it is certified*: γ is enclosed in an interval by outward
rounding (``nextafter`` after each correctly rounded IEEE operation), its integer
part must be the same at both ends, and each coin Bernoulli(f/K) compares a
53-bit uniform cell [u, u + 1)·2⁻⁵³ with the interval of f/K. A cell that straddles
the interval (probability ~2⁻⁵⁰ per coin) is resolved exactly in rational
arithmetic, refining the same uniform with further bits; an element whose
integer part is uncertain is decided exactly from scratch. The output law is
therefore exactly the stated pmf; floats only decide when they provably agree
with exact arithmetic.

The samplers consume the generator in a different order from numpy's own; they
never touch global state.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from accounting.validation import check_int, check_positive

__all__ = ["bernoulli_exp", "discrete_gaussian", "discrete_gaussian_gdp_mu", "discrete_laplace", "MAX_SCALE",
           "MAX_SIGMA2"]

#: Largest integer scale t of :func:`discrete_laplace` (X = U + tV stays far inside int64).
MAX_SCALE = 2**52
#: Largest integer variance S = σ² of :func:`discrete_gaussian` (σ < 2^31, t·|Y| inside int64).
MAX_SIGMA2 = 2**62
_INT64_SAFE = 2**62
_UNIT = 2.0**-53


IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


def _where(mask: BoolArray) -> BoolArray | IntArray:
    """An index selecting what the boolean ``mask`` selects, in order: its True positions when large.

    numpy gathers by positions several times faster than it compresses by a random mask
    (branch mispredictions); below 512 entries the mask itself is the cheaper index.
    """
    return np.flatnonzero(mask) if mask.size > 512 else mask


def _coin(rng: np.random.Generator, p: IntArray, q: IntArray | int, k: int) -> BoolArray:
    """Bernoulli(p/(qK)) for integer arrays 0 ≤ p ≤ q (exact uniform integers).

    An int q is passed to the generator as an int: the draws of a 0-d array bound (numpy's scalar path).
    """
    qmax = q if isinstance(q, int) else int(np.max(q))
    if qmax * k < _INT64_SAFE:
        return rng.integers(0, q * k, size=p.shape) < p
    first = rng.integers(0, k, size=p.shape) == 0 if k > 1 else np.ones(p.shape, dtype=bool)
    return first & (rng.integers(0, q, size=p.shape) < p)  # one uniform per element (q an int or an array)


def bernoulli_exp(rng: np.random.Generator, p: npt.ArrayLike, q: npt.ArrayLike) -> BoolArray:
    """Exact Bernoulli(exp(−p/q)) for integer arrays 0 ≤ p ≤ q, 1 ≤ q < 2^62 (CKS 2020, Algorithm 1).

    Parameters
    ----------
    rng : numpy.random.Generator
    p, q : numpy.ndarray of int64 (or q an int)
        γ = p/q ∈ [0, 1], elementwise.

    Returns
    -------
    numpy.ndarray of bool
    """
    shape = np.shape(p)
    numerators = np.asarray(p, dtype=np.int64).reshape(-1)
    denominators: IntArray | int = (
        int(np.asarray(q, dtype=np.int64)) if not np.ndim(q) else np.asarray(q, dtype=np.int64).reshape(-1)
    )
    heads = _coin(rng, numerators, denominators, 1)
    out = ~heads  # a first tail stops at K = 1 (odd): accept; every other element is False until it stops
    index = np.flatnonzero(heads)
    numerators = numerators[index]
    if not isinstance(denominators, int):
        denominators = denominators[index]
    k = 2
    while index.size:
        heads = _coin(rng, numerators, denominators, k)
        if k % 2:  # a tail at an odd K accepts (at an even K the element stays False)
            out[index[_where(~heads)]] = True
        kept = _where(heads)
        index, numerators = index[kept], numerators[kept]
        if not isinstance(denominators, int):
            denominators = denominators[kept]
        k += 1
    return out.reshape(shape)


def _bernoulli_exp_one(rng: np.random.Generator, n: int) -> BoolArray:
    """``bernoulli_exp(rng, np.ones(n, dtype=np.int64), 1)``: n Bernoulli(e⁻¹), the same draws, fewer steps.

    Its coin at K = 1 is Bernoulli(1/1), heads without a draw (numpy draws nothing for a
    one-value range); the coin at K ≥ 2 is ``rng.integers(0, K) < 1``.
    """
    out = np.zeros(n, dtype=bool)
    index = np.flatnonzero(rng.integers(0, 2, size=n) == 0) if n else np.arange(0)  # K = 2: a tail rejects
    k = 3
    while index.size:
        heads = rng.integers(0, k, size=index.size) == 0
        if k % 2:
            out[index[_where(~heads)]] = True
        index = index[_where(heads)]
        k += 1
    return out


def _geometric_exp1(rng: np.random.Generator, n: int) -> IntArray:
    """Number of Bernoulli(e⁻¹) successes before the first failure: P(V = v) = (1 − e⁻¹) e^{−v}."""
    count = np.zeros(n, dtype=np.int64)
    alive = np.arange(n)
    successes = 0
    while alive.size:
        alive = alive[_where(_bernoulli_exp_one(rng, alive.size))]
        successes += 1
        count[alive] = successes  # alive after j trials: j successes so far
    return count


def discrete_laplace(rng: np.random.Generator, scale: int, size: int) -> IntArray:
    """``size`` i.i.d. draws with P(Y = y) = tanh(1/(2t))·exp(−|y|/t) on ℤ, t = ``scale`` (CKS 2020, Alg. 2).

    Also called the two-sided geometric distribution. Exact: integer arithmetic only.

    Parameters
    ----------
    rng : numpy.random.Generator
    scale : int
        t in [1, 2^52].
    size : int
        Number of draws.

    Returns
    -------
    numpy.ndarray of int64, shape (size,)
    """
    t = check_int("scale", scale, 1, MAX_SCALE)
    n = check_int("size", size, 0)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        want = n - filled
        # Acceptance ≈ (1 − e⁻¹)·(1 − tiny): draw ~1.6× what is missing.
        u = rng.integers(0, t, size=int(want * 1.62) + 8)
        u = u[_where(bernoulli_exp(rng, u, t))]
        v = _geometric_exp1(rng, u.size)
        if v.size and int(v.max()) > (_INT64_SAFE - t) // t:  # probability < exp(−2^10)
            raise RuntimeError("discrete_laplace: geometric draw beyond int64 (probability below 2^-1000)")
        x = v
        x *= t
        x += u  # u + t·v
        negative = rng.integers(0, 2, size=x.size, dtype=np.int8).view(np.bool_)  # a fair sign (1: negative)
        rejected = negative & (x == 0)  # (−, 0) is rejected
        np.negative(x, out=x, where=negative)
        y = (x[~rejected] if rejected.any() else x)[:want]
        out[filled: filled + y.size] = y
        filled += y.size
    return out


#: Relative slack on every float enclosure (a few roundings of 2⁻⁵³ each, generously covered).
_REL = 2.0**-48


def _gamma_interval(magnitude: IntArray, t: int, sigma2: int) -> tuple[FloatArray, FloatArray]:
    """An interval [lo, hi] ∋ γ = (|Y| − S/t)²/(2S), from float64 with a rigorous error bound.

    For |Y|, t < 2^53 (exact as floats) and S < 2^63 (relative error ≤ 2⁻⁵³ as a float):
    q̂ = fl(S/t) has |q̂ − S/t| ≤ 2⁻⁵²·q̂ and the subtraction d̂ = fl(|Y| − q̂) adds at
    most 2⁻⁵³|d̂|, so |d̂ − (|Y| − S/t)| ≤ e = 2⁻⁵⁰(q̂ + |d̂|) with room to spare; the
    square, the division by 2S and the products below each add a relative 2⁻⁵³,
    all inside the factor 1 ± 2⁻⁴⁸.
    """
    s = float(sigma2)
    q = s / t
    d = magnitude.astype(np.float64)
    d -= q
    np.abs(d, out=d)
    e = d + q
    e *= 2.0**-50
    lo = d - e
    np.maximum(lo, 0.0, out=lo)
    hi = d
    hi += e
    for bound, factor in ((lo, 1.0 - _REL), (hi, 1.0 + _REL)):  # in place: the same operations, in order
        bound *= bound
        bound /= 2.0 * s
        bound *= factor
    return lo, hi


def _exact_below(rng: np.random.Generator, threshold: Fraction, cell: int | None = None) -> bool:
    """Is V < ``threshold`` for V uniform on [0, 1)? Exact: V's bits are drawn until the answer is known.

    ``cell`` u continues a uniform already known to lie in [u, u + 1)·2⁻⁵³.
    """
    if cell is None:
        low, width = Fraction(0), Fraction(1)
    else:
        low, width = Fraction(cell, 2**53), Fraction(1, 2**53)
    while True:
        if low + width <= threshold:
            return True
        if low >= threshold:
            return False
        width /= 2**62
        low += int(rng.integers(0, 2**62)) * width


def _exact_bernoulli_exp(rng: np.random.Generator, gamma: Fraction, start_k: int = 1,
                         cell: int | None = None, whole_done: bool = False) -> bool:
    """Exact Bernoulli(exp(−γ)), γ ≥ 0 rational: ⌊γ⌋ Bernoulli(e⁻¹) then Algorithm 1 on the fraction.

    ``start_k``/``cell``/``whole_done`` resume a fast-path run whose coin at K = ``start_k``
    had uniform cell ``cell`` and whose Bernoulli(e⁻¹) factors already all succeeded.
    """
    whole = gamma.numerator // gamma.denominator
    fraction = gamma - whole
    if not whole_done:
        for _ in range(whole):
            if not bool(_bernoulli_exp_one(rng, 1)[0]):
                return False
    k = start_k
    while True:
        heads = _exact_below(rng, fraction / k, cell)
        cell = None
        if not heads:
            return k % 2 == 1
        k += 1


def _survive_whole(rng: np.random.Generator, whole: IntArray | FloatArray) -> BoolArray:
    """Do all of ``whole[i]`` independent Bernoulli(e⁻¹) factors succeed? (The integer part of exp(−γ).)"""
    alive = np.ones(whole.size, dtype=bool)
    pending = np.flatnonzero(whole > 0)
    j = 0
    while pending.size:
        survived = _bernoulli_exp_one(rng, pending.size)
        alive[pending[_where(~survived)]] = False
        j += 1
        pending = pending[_where(survived & (whole[pending] > j))]
    return alive


def _accept_gaussian(rng: np.random.Generator, magnitude: IntArray, t: int, sigma2: int,
                     widen: float = 0.0) -> BoolArray:
    """Bernoulli(exp(−γ)), γ = (|Y|t − S)²/(2St²), per element, exact.

    Three routes, each exact: all-integer when 2St² and the numerator fit in int64
    (small σ); float enclosures where certified (module docstring); rational
    arithmetic for the rest. ``widen`` > 0 enlarges the enclosures (tests use it to
    exercise the rational route) and disables the integer route.
    """
    n = magnitude.size
    accept = np.zeros(n, dtype=bool)
    denominator = 2 * sigma2 * t * t
    if denominator < _INT64_SAFE and widen == 0.0:
        small = np.flatnonzero(magnitude < 2**31)
        difference = magnitude[small] * t - sigma2
        small, difference = small[np.abs(difference) < 2**31], difference[np.abs(difference) < 2**31]
        numerator = difference * difference
        whole, remainder = numerator // denominator, numerator % denominator
        alive = _survive_whole(rng, whole)
        accept[small[alive]] = bernoulli_exp(rng, remainder[alive], denominator)
        unrouted = np.ones(n, dtype=bool)
        unrouted[small] = False
        rest = np.flatnonzero(unrouted)
    else:
        rest = None  # every element (``fast`` None: the identity below)
    exact_scratch: list[int] = []
    resume: list[tuple[int, int, int]] = []  # (element, K, cell)
    candidates = magnitude if rest is None else magnitude[rest]
    in_float = candidates < 2**53  # t < 2^31 always (S ≤ 2^62)
    fast = rest
    if not in_float.all():
        rest = np.arange(n) if rest is None else rest
        fast, candidates = rest[in_float], candidates[in_float]
        exact_scratch.extend(rest[~in_float].tolist())
    g_lo, g_hi = _gamma_interval(candidates, t, sigma2)
    if widen:
        g_hi += widen
    whole = np.floor(g_lo)
    sure = whole == np.floor(g_hi)
    g_lo -= whole  # the fractional parts
    g_hi -= whole
    if not sure.all():
        fast = np.arange(n) if fast is None else fast
        exact_scratch.extend(fast[~sure].tolist())
        fast, whole, g_lo, g_hi = fast[sure], whole[sure], g_lo[sure], g_hi[sure]
    index = np.flatnonzero(_survive_whole(rng, whole))
    elements, lo, hi = index if fast is None else fast[index], g_lo[index], g_hi[index]
    k = 1
    while elements.size:
        cell = rng.integers(0, 2**53, size=elements.size)
        bound_lo, bound_hi = (lo, hi) if k == 1 else (lo / k, hi / k)  # x/1 is x exactly
        bound_lo, bound_hi = bound_lo * (1.0 - _REL), bound_hi * (1.0 + _REL)
        low = cell * _UNIT  # the cell [u, u + 1)·2⁻⁵³; its top u·2⁻⁵³ + 2⁻⁵³ is exact
        heads = low + _UNIT <= bound_lo
        tails = low >= bound_hi  # never both: bound_lo ≤ bound_hi
        if np.count_nonzero(heads) + np.count_nonzero(tails) < elements.size:
            unsure = ~(heads | tails)
            unsure_count = int(unsure.sum())
            resume.extend(zip(elements[unsure].tolist(), [k] * unsure_count, cell[unsure].tolist(), strict=True))
        if k % 2:  # a tail at an odd K accepts (every element starts False and stops once)
            accept[elements[_where(tails)]] = True
        kept = _where(heads)
        elements, lo, hi = elements[kept], lo[kept], hi[kept]
        k += 1
    for i in exact_scratch:
        accept[i] = _exact_bernoulli_exp(rng, Fraction((int(magnitude[i]) * t - sigma2) ** 2, 2 * sigma2 * t * t))
    for i, k_at, cell_at in resume:
        gamma = Fraction((int(magnitude[i]) * t - sigma2) ** 2, 2 * sigma2 * t * t)
        accept[i] = _exact_bernoulli_exp(rng, gamma, start_k=k_at, cell=cell_at, whole_done=True)
    return accept




def discrete_gaussian(rng: np.random.Generator, sigma2: int, size: int, *, _widen: float = 0.0) -> IntArray:
    """``size`` i.i.d. draws with P(Y = y) ∝ exp(−y²/(2σ²)) on ℤ, σ² = ``sigma2`` (CKS 2020, Alg. 3).

    Exact (module docstring): rejection from the discrete Laplace of scale
    t = ⌊σ⌋ + 1 with acceptance exp(−(|Y| − σ²/t)²/(2σ²)).

    Parameters
    ----------
    rng : numpy.random.Generator
    sigma2 : int
        The variance parameter S = σ² in [1, 2^62].
    size : int

    Returns
    -------
    numpy.ndarray of int64, shape (size,)
    """
    s = check_int("sigma2", sigma2, 1, MAX_SIGMA2)
    n = check_int("size", size, 0)
    t = math.isqrt(s) + 1
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        want = n - filled
        y = discrete_laplace(rng, t, int(want * 1.45) + 8)
        y = y[_where(_accept_gaussian(rng, np.abs(y), t, s, _widen))][:want]
        out[filled: filled + y.size] = y
        filled += y.size
    return out


def discrete_gaussian_gdp_mu(sigma2: int, sensitivity: float, entries: int = 1) -> float:
    """A μ′ such that adding i.i.d. N_ℤ(0, σ²) noise to ``entries`` integer coordinates is μ′-GDP.

    For integer shifts of L2 norm ≤ Δ = ``sensitivity`` (grid units), σ² = ``sigma2``:

        μ′ = (Δ + √m)/σ + 3η√m,   η = 2 Σ_{j≥1} exp(−2π²σ²j²),   m = ``entries``,

    rounded up. Proof (``docs/float-safe-noise.md``, "Discrete Gaussian as GDP"): the
    discrete Gaussian's CDF F satisfies Φ(k/σ)/(1+η) ≤ F(k) ≤ Φ((k+1)/σ) for k ≤ −1
    (sum–integral comparison of the increasing density; Z = σ√(2π)(1+η′), 0 ≤ η′ ≤ η,
    by Poisson summation) and the mirrored bounds for k ≥ 0, so ζ = Φ⁻¹∘F lies in
    [k/σ − 1.26η, (k+1)/σ + 1.26η]. One coordinate shifted by an integer D is μ-GDP iff
    μ ≥ sup_k ζ(k) − ζ(k − D) (monotone likelihood ratio: the tradeoff curve is the
    chord polygon of the threshold tests; G_μ is convex), here ≤ (D + 1)/σ + 3η;
    coordinates compose as √(Σμᵢ²) (Dong, Roth & Su 2022, Cor. 3.3), ≤ the formula by
    Minkowski. The discrete Gaussian is *not* Δ/σ-GDP (its δ(ε) exceeds the Gaussian's);
    the price here is a relative √m/Δ, ~2⁻²⁸ on the grids of ``mechanisms.lattice``.

    Parameters
    ----------
    sigma2 : int
        σ² in grid units, ≥ 1.
    sensitivity : float
        Δ > 0 in grid units.
    entries : int
        m ≥ 1 coordinates.

    Returns
    -------
    float
    """
    s = check_int("sigma2", sigma2, 1, 2**1000)
    m = check_int("entries", entries, 1, 2**62)
    steps = check_positive("sensitivity", sensitivity)  # Δ in grid units
    sigma = math.sqrt(s) * (1 - 2.0**-50)  # rounded down: μ′ rounded up
    q = math.exp(-2 * math.pi**2 * s)
    eta = 2 * q / (1 - q) * (1 + 2.0**-40) if q > 0 else 0.0  # Σ_{j≥1} q^{j²} ≤ q/(1 − q)
    root_m = math.sqrt(m) * (1 + 2.0**-50)
    mu = (steps + root_m) / sigma + 3 * eta * root_m
    return float(np.nextafter(mu * (1 + 2.0**-50), np.inf))
