"""Exact numerical accountant of shuffled vector summation, with an l2-aware composition.

The protocol (:mod:`mechanisms.shuffle`; Cheu et al. 2022, the seed paper's App. T via
Chowdhury & Zhou 2022): per coordinate, each user randomly rounds ``v + L`` to one of
``2g + 1`` integer levels (``g = levels``), sends that many one-messages and ``b`` fair
noise bits; the analyzer sees, per coordinate, ``sum_i level_i + Bin(n b, 1/2)``.
Neighbours: one user's vector replaced (``replace_one``). The derivation is also in
``docs/shuffle-accounting.md``.

*Dominating shift vector.* Fix the other users' data; the changed user holds ``v`` or
``v'`` (``m`` coordinates in ``[-L, L]``). Write ``Z ~ Bin(N, 1/2)``, ``N = n b``.

1. Post-processing. The count of coordinate ``j`` is ``level_j + O_j + Z_j`` with ``O_j``
   the others' levels, independent of the changed user's; adding it is post-processing, so
   the laws of ``(level_j + Z_j)_j`` bound the protocol (data processing for the
   hockey-stick divergence ``H_a(P||Q) = sup_E P(E) - a Q(E)``).
2. Coupling the rounding. With ``s_j = (v_j + L) g / L``, ``floor(s) + Ber(frac s)`` has the
   law of ``floor(s + U)``, ``U ~ Uniform[0, 1)``. Taking the same ``U_j`` under both
   inputs writes both output laws as ``U``-mixtures, and by joint convexity of ``H_a`` (an
   f-divergence) ``H_a(P||Q) <= E_U H_a(P_U||Q_U)``. Given ``U`` the pair is the product over
   coordinates of shift pairs ``(Z + c_j + k_j, Z + c_j)`` with
   ``|k_j| <= ceil(tau_j) <= floor(tau_j) + 1``, ``tau_j = g |v_j - v'_j| / L``, and
   ``|k_j| <= 2g`` (the levels lie in ``{0, ..., 2g}``).
3. One coordinate. By translation, and for ``k < 0`` by the reflection ``c -> N - c`` (the
   fair binomial is symmetric), ``(Z + c + k, Z + c)`` is ``(Z + |k|, Z)``; the binomial is
   log-concave, so the shift family has a monotone likelihood ratio and (Neyman–Pearson)
   ``(Z + K, Z)`` dominates ``(Z + k, Z)`` for every ``K >= |k|``, at every order ``a >= 0``.
   The reflection ``c -> N + K - c`` swaps ``(Z + K, Z)``, so both neighbour orders are covered.
4. Composition. A product of pairs, each dominated by its own pair, is dominated by the
   product of the dominating pairs (Zhu, Dong & Wang 2022, Thm. 10), and ``H_a`` of a product
   pair does not change when its coordinates are permuted. Hence, if the sorted bound
   ``floor(tau)_(i) + 1 <= K_i`` holds rank by rank for every neighbouring pair the inputs
   allow, the protocol is dominated by ``(x)_i (Z + K_i, Z)``, whose privacy loss
   distribution is the convolution of the coordinates' (dp-accounting's pessimistic PLD).
5. Per-rank shifts. If every coordinate moves by at most ``a L`` and the change has l2 norm
   at most ``b L``, the ``i``-th largest ``|v_j - v'_j|`` is at most ``L min(a, b / sqrt(i))``
   (``i`` coordinates at least ``t`` contribute ``i t^2 <= b^2 L^2``), so
   ``K_i = min(2g, floor(g min(a, b / sqrt(i))) + 1)`` (:func:`level_shifts`).
6. Input sets (:data:`INPUT_SHIFTS`). ``"box"``: every coordinate in ``[-L, L]``, nothing
   else (``a = 2``, no l2 bound; ``K_i = 2g``: the coordinate-wise composition).
   ``"l2_ball"``: ``||v|| <= L`` (``a = 2``, ``b = 2``). ``"psd_trace"``: symmetric positive
   semidefinite matrices with trace at most ``L``, sent as their ``d(d + 1)/2`` upper-triangle
   entries (``a = 1``, ``b = sqrt 2``): the diagonal lies in ``[0, L]`` and
   ``|A_ij| <= sqrt(A_ii A_jj) <= L/2`` off it, so each entry moves by at most ``L``; and
   ``sum_{i<=j} D_ij^2 = (||D||_F^2 + sum_i D_ii^2) / 2`` with
   ``||D||_F^2 = ||A||_F^2 + ||A'||_F^2 - 2<A, A'> <= 2 L^2`` (``<A, A'> >= 0`` for PSD
   matrices, ``||A||_F <= tr A``) and ``sum_i D_ii^2 <= sum_i A_ii^2 + A'_ii^2 <= 2 L^2``.
   ``w x x^T`` with ``w ||x||^2 <= L`` is such a matrix (the shuffle bandit's leaves).

What this proves and what not: a componentwise upper bound on every allowed shift vector,
sorted, so a valid dominating pair. It is not the worst case over the l2 set itself (the
per-rank bounds are not attained together: ``sum_i K_i^2`` is about ``g^2 b^2 H_m``, ``H_m``
the harmonic number, against ``g^2 b^2`` for one attained shift), and for the box it is the
old composition exactly. For Gaussian noise the exact worst case would depend only on
``b g``; for binomial noise that is not proved here.

Floats: the inputs are checked against their set with a relative tolerance of ``1e-12`` and
``K_i`` is computed from ``g min(a, b / sqrt(i))`` inflated by ``1e-9``, so float rounding of
the inputs and of ``s_j`` cannot cross an integer the bound did not count.
"""

from __future__ import annotations

import collections
import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from accounting import convert
from accounting.validation import check_int, check_positive, check_probability, check_real
from mechanisms.calibration_cache import cached_calibration

__all__ = [
    "INPUT_SHIFTS",
    "calibrate_noise_bits",
    "default_levels",
    "level_shifts",
    "paper_noise_bits",
    "vector_sum_delta",
    "vector_sum_epsilon",
    "vector_sum_pld",
]

#: ``(a, b)`` of each input set: every coordinate moves by at most ``a L`` and the change has
#: l2 norm at most ``b L`` (``None``: no l2 bound). Module docstring, step 6.
INPUT_SHIFTS: dict[str, tuple[float, float | None]] = {
    "box": (2.0, None),
    "l2_ball": (2.0, 2.0),
    "psd_trace": (1.0, math.sqrt(2.0)),
}
#: Log-mass below which a count outcome is moved to the PLD's infinity mass
#: (pessimistic: counted as if it revealed everything).
_LOG_MASS_TRUNCATION = math.log(1e-30)
#: Discretization of privacy-loss values in the PLD (rounded up: pessimistic), for
#: eps <= 1; at a larger target eps it is scaled by eps (see ``_pld_interval``).
_PLD_INTERVAL = 1e-4
#: Most privacy-loss bins per coordinate before the bin width is widened.
_MAX_BINS = 100_000
#: Relative inflation of the per-rank shift bounds before flooring (module docstring: floats).
_SHIFT_SLACK = 1e-9


def default_levels(n: int, dimension: int) -> int:
    """The rounding resolution ``g = max(ceil(2 sqrt(n)), dimension, 4)`` (docs/references.md, Cheu et al. 2022)."""
    n = check_int("n", n, 1)
    dimension = check_int("dimension", dimension, 1)
    return max(math.ceil(2.0 * math.sqrt(n)), dimension, 4)


def paper_noise_bits(n: int, epsilon: float, delta: float, dimension: int, levels: int | None = None) -> float:
    """The recalled closed-form noise-bit count ``b = 24e4 g^2 ln^2(4 d^2 / delta) / (eps^2 n)``.

    Only for comparison with :func:`calibrate_noise_bits` (docs/references.md marks the
    constant as recalled, to verify; it is not used to certify anything).
    """
    n = check_int("n", n, 1)
    epsilon, delta = check_positive("epsilon", epsilon), check_probability("delta", delta)
    dimension = check_int("dimension", dimension, 1)
    g = default_levels(n, dimension) if levels is None else check_int("levels", levels, 1)
    return 24e4 * g**2 * math.log(4.0 * dimension**2 / delta) ** 2 / (epsilon**2 * n)


def level_shifts(
    levels: int, coordinates: int, *, max_shift: float = 2.0, l2_shift: float | None = None
) -> tuple[int, ...]:
    """Per-rank bound ``K_i = min(2g, floor(g min(a, b / sqrt(i))) + 1)`` on the level shifts, largest first.

    Module docstring, steps 2 and 5: every neighbouring pair whose change moves each
    coordinate by at most ``a L = max_shift * L`` and has l2 norm at most ``b L = l2_shift * L``
    shifts its ``i``-th largest level by at most ``K_i``. ``max_shift = 2`` with no l2 bound is
    the coordinate-wise bound ``K_i = 2g``.

    Parameters
    ----------
    levels : int
        g >= 1.
    coordinates : int
        m >= 1.
    max_shift : float
        a in (0, 2], in units of the coordinate bound L.
    l2_shift : float, optional
        b > 0, in units of L; ``None``: no l2 bound.
    """
    levels = check_int("levels", levels, 1)
    coordinates = check_int("coordinates", coordinates, 1)
    a = check_real("max_shift", max_shift, 0.0, 2.0, low_open=True)
    b = math.inf if l2_shift is None else check_positive("l2_shift", l2_shift)
    ranks = np.arange(1, coordinates + 1, dtype=float)
    bound = levels * np.minimum(a, b / np.sqrt(ranks)) * (1.0 + _SHIFT_SLACK)
    return tuple(int(k) for k in np.minimum(2 * levels, np.floor(bound).astype(np.int64) + 1))


def _pld_interval(epsilon: float) -> float:
    """PLD bin width for a delta evaluated at ``epsilon``: ``1e-4 * max(1, epsilon)``.

    Pessimistic rounding moves each coordinate's loss up by less than one bin, so
    the certified delta(eps) lies between the exact delta(eps) and the exact
    delta(eps - coordinates * bin): a relative slack of ``coordinates * 1e-4`` in eps.
    """
    return _PLD_INTERVAL * max(1.0, epsilon)


def _shift_pair_losses(trials: int, shift: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Privacy losses, their masses and the infinity mass of ``(Bin(trials,1/2) + shift, Bin(trials,1/2))``.

    Loss at count c = k + s: ``ln C(N, k) - ln C(N, k + s)``, weighted by the upper law
    ``Bin(N,1/2) + s`` at c. Outcomes the lower law cannot produce (c > N), outcomes of
    upper mass below ``exp(_LOG_MASS_TRUNCATION)``, and (Hoeffding) the mass outside a
    window of 13 sd around the mean go to the infinity mass. For N up to ~1e9 the
    direct ``gammaln`` difference loses ~1e-6 to cancellation, so log-probabilities are
    taken relative to the window's start, as cumulative sums of
    ``ln((N - t + 1)/t) = log1p((N - 2t + 1)/t)`` (accurate to ~1e-10).
    """
    n_trials, s = trials, shift
    half_width = int(math.ceil(13.0 * math.sqrt(n_trials) / 2.0)) + 2
    k_lo = max(0, n_trials // 2 - half_width)
    k_hi = min(n_trials, n_trials // 2 + half_width)
    outside = 0.0 if (k_lo == 0 and k_hi == n_trials) else 2.0 * math.exp(-2.0 * half_width**2 / n_trials)
    t = np.arange(k_lo + 1, min(k_hi + s, n_trials) + 1, dtype=float)
    # rel[j] = ln C(N, k_lo + j) - ln C(N, k_lo)
    rel = np.concatenate([[0.0], np.cumsum(np.log1p((n_trials - 2.0 * t + 1.0) / t))])
    k = np.arange(k_lo, k_hi + 1)
    log_mass = rel[: k_hi - k_lo + 1]
    log_mass = log_mass - (log_mass.max() + math.log(np.exp(log_mass - log_mass.max()).sum()))
    keep = (k + s <= n_trials) & (log_mass > _LOG_MASS_TRUNCATION)
    kept = np.flatnonzero(keep)
    loss = rel[kept] - rel[kept + s]
    mass = np.exp(log_mass[kept]) * (1.0 - outside)
    infinity_mass = min(1.0, outside + float(np.exp(log_mass[~keep]).sum()) * (1.0 - outside))
    return loss, mass, infinity_mass


def _rounded_pld(loss: np.ndarray, mass: np.ndarray, infinity_mass: float,
                 interval: float) -> pld_lib.PrivacyLossDistribution:
    """The pessimistic PLD of one shift pair: losses rounded up to multiples of ``interval``."""
    rounded = np.ceil(loss / interval).astype(np.int64)
    keys, inverse = np.unique(rounded, return_inverse=True)
    sums = np.bincount(inverse, weights=mass)
    return pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
        dict(zip(keys.tolist(), sums.tolist(), strict=True)), infinity_mass, interval, pessimistic_estimate=True
    )


def _check_vector_args(n: int, noise_bits: int, levels: int, coordinates: int) -> tuple[int, int, int, int]:
    return (
        check_int("n", n, 1),
        check_int("noise_bits", noise_bits, 1),
        check_int("levels", levels, 1),
        check_int("coordinates", coordinates, 1),
    )


def vector_sum_pld(
    n: int, noise_bits: int, levels: int, coordinates: int = 1, *, interval: float = _PLD_INTERVAL,
    max_shift: float = 2.0, l2_shift: float | None = None,
) -> pld_lib.PrivacyLossDistribution:
    """Pessimistic PLD dominating the shuffled vector summation (module docstring: derivation).

    The composition over ranks ``i`` of the pairs ``(Bin(n * noise_bits, 1/2) + K_i,
    Bin(n * noise_bits, 1/2))``, ``K = level_shifts(levels, coordinates, max_shift, l2_shift)``;
    with the defaults (no l2 bound) the ``coordinates``-fold self-composition of the shift ``2g``.

    Parameters
    ----------
    n : int
        Number of users, >= 1.
    noise_bits : int
        Fair noise bits each user adds per coordinate, >= 1.
    levels : int
        Rounding resolution g (a value in [-L, L] becomes a level in {0, ..., 2g}), >= 1.
    coordinates : int
        Number of coordinates released (d for a vector, d(d+1)/2 for a symmetric matrix), >= 1.
    interval : float
        Width of the (pessimistic) privacy-loss bins, > 0 (widened, for every coordinate alike,
        if a coordinate's losses would need more than ``_MAX_BINS`` bins).
    max_shift, l2_shift : float
        The input set's shift bounds in units of L (:func:`level_shifts`, :data:`INPUT_SHIFTS`).
    """
    n, noise_bits, levels, coordinates = _check_vector_args(n, noise_bits, levels, coordinates)
    interval = check_real("interval", interval, 0.0, 1.0, low_open=True)
    counts = collections.Counter(level_shifts(levels, coordinates, max_shift=max_shift, l2_shift=l2_shift))
    ordered = sorted(counts.items(), reverse=True)
    # One bin width for all pairs, so the PLDs compose: the widest any pair needs. The pairs are
    # made one at a time, largest shift first (it needs the widest bins), so only one pair's
    # arrays are held (they grow as sqrt(n·noise_bits): 10 pairs at n = 3·10⁴ held 80 MB,
    # issue 32); a later pair needing wider bins than those already rounded starts the
    # composition again at its width. Same width, same order: the same PLD as holding all pairs.
    while True:
        total = None
        for shift, count in ordered:
            loss, mass, infinity_mass = _shift_pair_losses(n * noise_bits, shift)
            needed = float(loss.max() - loss.min()) / _MAX_BINS
            if needed > interval:
                interval = needed
                if total is not None:
                    break
            pld = _rounded_pld(loss, mass, infinity_mass, interval)
            del loss, mass
            pld = pld if count == 1 else pld.self_compose(count)
            total = pld if total is None else total.compose(pld)
        else:
            assert total is not None  # coordinates >= 1
            return total


def vector_sum_delta(n: int, noise_bits: int, levels: int, epsilon: float, coordinates: int = 1, *,
                     max_shift: float = 2.0, l2_shift: float | None = None) -> float:
    """Certified delta(eps) of the shuffled vector summation (pessimistic PLD, dp-accounting).

    Bins of width ``1e-4 * max(1, epsilon)`` (``_pld_interval``); ``max_shift``, ``l2_shift``
    as in :func:`vector_sum_pld`.
    """
    epsilon = check_real("epsilon", epsilon, 0.0)
    pld = vector_sum_pld(n, noise_bits, levels, coordinates, interval=_pld_interval(epsilon),
                         max_shift=max_shift, l2_shift=l2_shift)
    return float(pld.get_delta_for_epsilon(epsilon))


def vector_sum_epsilon(n: int, noise_bits: int, levels: int, delta: float, coordinates: int = 1, *,
                       max_shift: float = 2.0, l2_shift: float | None = None) -> float:
    """Certified eps(delta) of the shuffled vector summation (pessimistic PLD, dp-accounting)."""
    delta = check_probability("delta", delta)
    pld = vector_sum_pld(n, noise_bits, levels, coordinates, max_shift=max_shift, l2_shift=l2_shift)
    return float(pld.get_epsilon_for_delta(delta))


@functools.lru_cache(maxsize=256)
def calibrate_noise_bits(n: int, epsilon: float, delta: float, levels: int, coordinates: int = 1, *,
                         max_shift: float = 2.0, l2_shift: float | None = None) -> int:
    """Smallest number of fair noise bits per user and coordinate meeting (eps, delta).

    delta(eps) decreases in the number of bits (more bits add independent noise:
    post-processing), so a bracketing then binary search over integers finds
    the smallest ``b`` with :func:`vector_sum_delta` ``<= delta``, the
    ``coordinates`` coordinates composed as in :func:`vector_sum_pld`. Results are cached.

    Parameters
    ----------
    n : int
        Number of users, >= 1.
    epsilon : float
        Target epsilon > 0.
    delta : float
        Target delta in (0, 1).
    levels : int
        Rounding resolution g, >= 1.
    coordinates : int
        Number of coordinates composed, >= 1.
    max_shift, l2_shift : float
        The input set's shift bounds in units of L (:func:`level_shifts`).
    """
    n = check_int("n", n, 1)
    epsilon, delta = check_positive("epsilon", epsilon), check_probability("delta", delta)
    shifts = level_shifts(levels, coordinates, max_shift=max_shift, l2_shift=l2_shift)

    def meets(bits: int) -> bool:
        return vector_sum_delta(n, bits, levels, epsilon, coordinates, max_shift=max_shift, l2_shift=l2_shift) <= delta

    def search() -> int:
        return _search_noise_bits(meets, epsilon, delta, shifts, n)

    arguments = {"n": n, "epsilon": epsilon, "delta": delta, "levels": levels, "coordinates": coordinates,
                 "max_shift": max_shift, "l2_shift": l2_shift}
    return cached_calibration("vector_sum_noise_bits", arguments, search, meets)  # verified on load by meets


def _search_noise_bits(meets: Callable[[int], bool], epsilon: float, delta: float, shifts: Any, n: int) -> int:
    """The bracketing and binary search of :func:`calibrate_noise_bits`."""
    # Start at the analytic-Gaussian analogue (Balle & Wang 2018): the count noise
    # Bin(nb, 1/2) has sd sqrt(nb)/2 and the shifts K_i have l2 norm ||K||.
    # It lands within a fraction of a percent of the answer, so the bracket is narrow.
    sigma = convert.analytic_gaussian_sigma(epsilon, delta, math.sqrt(sum(k * k for k in shifts)))
    guess = max(1, math.ceil(4.0 * sigma**2 / n))
    if meets(guess):
        hi, lo = guess, int(guess * 0.99)
        while lo > 0 and meets(lo):
            hi, lo = lo, int(lo * 0.95)
    else:
        lo, hi = guess, math.ceil(guess * 1.01) + 1
        while not meets(hi):
            lo, hi = hi, math.ceil(hi * 1.05) + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi
