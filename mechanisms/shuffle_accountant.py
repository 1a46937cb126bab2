"""Exact numerical privacy accountant for the shuffle-model summation protocols.

Two protocols are accounted (their randomizers live in :mod:`mechanisms.shuffle`):

* **Bit sum** (Cheu et al. 2019): each user sends a uniform bit with probability
  ``gamma`` and its own bit otherwise; the analyzer sees the shuffled multiset of
  bits, i.e. only their count.
* **Vector summation** (Cheu et al. 2022, as used by the seed paper's Appendix T
  and Chowdhury & Zhou 2022): per coordinate, each user randomly rounds its value
  to one of ``2 * levels + 1`` integer levels, sends that many one-messages, and
  adds ``noise_bits`` fair Bernoulli bits; the analyzer sees, per coordinate, the
  count ``sum_i x_i + Binomial(n * noise_bits, 1/2)``.

The privacy of the shuffled output is computed numerically as a hockey-stick
divergence ``delta(eps) = sup_E P(E) - e^eps Q(E)`` between the output laws under
two neighbouring inputs (one user's data replaced), and ``eps(delta)`` is found by
bisection. No loose closed form is used to certify anything; the
Feldman–McMillan–Talwar bound is provided only for comparison.

Derivations (read these before trusting a number):

*Bit sum, certified bound.* Let ``a = gamma / 2``. The changed user's message is
``Ber(a)`` (bit 0) or ``Ber(1 - a)`` (bit 1). Give the analyzer, in addition to
the count, the set of other users who randomized and the bits of those who did
not (the others' data is fixed in the DP definition). This richer view is a
function of ``(M, Bin(M, 1/2) + Y)`` up to a known shift, where
``M ~ Bin(n - 1, gamma)`` is the number of other randomizers and ``Y`` is the
changed user's message; its law of ``M`` is the same under both neighbours, so
its divergence is ``E_M[H_eps(Bin(M,1/2)+Ber(a) || Bin(M,1/2)+Ber(1-a))]``,
the same for every configuration of the others. The count is a post-processing
of that view, so this is a valid bound for every configuration (and both
neighbour orders, by the reflection ``c -> M + 1 - c``). It reproduces
docs/references.md's data point (n = 1000, gamma*n = 60, delta = 1e-5: eps = 0.986).
The exact divergence of the count alone for a given configuration is also
provided (:func:`bitsum_delta_for_configuration`); it is smaller (eps = 0.84 at
that point, all others holding 0), but a worst case over configurations is not
proved, so it is not used to certify.

*Vector summation* is accounted in :mod:`mechanisms.shuffle_vector_accountant` (its
docstring and docs/shuffle-accounting.md hold the derivation, including the l2-aware
composition); its names are re-exported here.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from scipy import stats

from accounting.validation import check_int, check_probability, check_real
from mechanisms.shuffle_vector_accountant import (
    INPUT_SHIFTS,
    calibrate_noise_bits,
    default_levels,
    level_shifts,
    paper_noise_bits,
    vector_sum_delta,
    vector_sum_epsilon,
    vector_sum_pld,
)

__all__ = [
    "bitsum_delta",
    "bitsum_delta_for_configuration",
    "bitsum_epsilon",
    "calibrate_bitsum_gamma",
    "bitsum_local_epsilon",
    "fmt_epsilon",
    "fmt_max_local_epsilon",
    "vector_sum_pld",
    "level_shifts",
    "INPUT_SHIFTS",
    "vector_sum_delta",
    "vector_sum_epsilon",
    "calibrate_noise_bits",
    "default_levels",
    "paper_noise_bits",
]

#: Weights of M (bit sum) below this are left out; their total mass is added
#: to delta in full (a divergence never exceeds 1), so truncation stays conservative.
_TAIL = 1e-20
#: Bisection tolerance on epsilon; the upper end of the final bracket is returned.
_EPS_TOL = 1e-7


def _check_users(n: object, minimum: int = 2) -> int:
    return check_int("n", n, minimum)


def _check_gamma(gamma: float) -> float:
    """The randomization probability of the bit randomizer, in (0, 1]."""
    return check_real("gamma", gamma, 0.0, 1.0, low_open=True)


def _check_delta(delta: object) -> float:
    """A target delta, in (0, 1)."""
    return check_probability("delta", delta)


def _check_epsilon(epsilon: float, *, target: bool) -> float:
    """An epsilon: a target (> 0) or a point at which delta is evaluated (>= 0)."""
    return check_real("epsilon", epsilon, 0.0, low_open=target)


def _check_target(epsilon: float, delta: float) -> tuple[float, float]:
    """The (eps > 0, delta in (0, 1)) target a calibration must meet."""
    return _check_epsilon(epsilon, target=True), _check_delta(delta)


def _check_bitsum_point(n: int, gamma: float, epsilon: float) -> tuple[int, float, float]:
    """Users (>= 2), randomization probability and the epsilon (>= 0) of a bit-sum delta(eps)."""
    return _check_users(n), _check_gamma(gamma), _check_epsilon(epsilon, target=False)


def _hockey_stick(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    """``sum max(p - e^eps q, 0)``: the eps-hockey-stick divergence of two pmfs on one support.

    ε above 709 (e^ε beyond the float range) is read as 709: a smaller ε gives a larger δ,
    so the answer stays an upper bound.
    """
    return float(np.maximum(p - math.exp(min(epsilon, 709.0)) * q, 0.0).sum())


# ---------------------------------------------------------------------------
# Bit sum (Cheu et al. 2019)
# ---------------------------------------------------------------------------


def _bitsum_view(n: int, gamma: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Flattened laws of the view (M, count) under both neighbours, and the truncated mass.

    For each number ``M`` of other randomizers kept, the block is
    ``w(M) * (Bin(M,1/2) * Ber(a))`` and ``w(M) * (Bin(M,1/2) * Ber(1-a))``
    (``*`` = convolution), ``a = gamma / 2``, ``w = Bin(n - 1, gamma)`` pmf.
    """
    a = gamma / 2.0
    others = n - 1
    all_weights = stats.binom.pmf(np.arange(others + 1), others, gamma)
    kept = np.flatnonzero(all_weights > _TAIL)  # a contiguous run: the pmf is unimodal
    lo, hi = int(kept[0]), int(kept[-1])
    m_values = np.arange(lo, hi + 1)
    weights = all_weights[lo : hi + 1]
    tail = float(all_weights[:lo].sum() + all_weights[hi + 1 :].sum())
    p_blocks, q_blocks = [], []
    for m, w in zip(m_values, weights, strict=True):
        base = stats.binom.pmf(np.arange(m + 1), m, 0.5)
        p_blocks.append(w * np.convolve(base, [1.0 - a, a]))
        q_blocks.append(w * np.convolve(base, [a, 1.0 - a]))
    return np.concatenate(p_blocks), np.concatenate(q_blocks), tail


def bitsum_local_epsilon(gamma: float) -> float:
    """The local (one-message) privacy of the bit randomizer: ``ln((1 - gamma/2) / (gamma/2))``.

    Parameters
    ----------
    gamma : float
        Probability in (0, 1] that a user sends a uniform bit instead of its own.
    """
    gamma = _check_gamma(gamma)
    return math.log((1.0 - gamma / 2.0) / (gamma / 2.0))


def bitsum_delta(n: int, gamma: float, epsilon: float) -> float:
    """Certified delta(eps) of the shuffled bit sum, valid for every configuration of the others.

    ``E_M[H_eps(Bin(M,1/2) + Ber(gamma/2) || Bin(M,1/2) + Ber(1 - gamma/2))]`` with
    ``M ~ Bin(n - 1, gamma)`` (module docstring: the divergence of the view in which
    the analyzer also learns who randomized; the count is its post-processing).
    Neighbours: one user's bit replaced. Cheu et al. 2019, Sec. 4 (bit randomizer).

    Parameters
    ----------
    n : int
        Number of users, >= 2.
    gamma : float
        Randomization probability in (0, 1].
    epsilon : float
        The epsilon at which delta is evaluated, >= 0.
    """
    n, gamma, epsilon = _check_bitsum_point(n, gamma, epsilon)
    p, q, tail = _bitsum_view(n, gamma)
    return min(1.0, _hockey_stick(p, q, epsilon) + tail)


def bitsum_delta_for_configuration(n: int, gamma: float, epsilon: float, ones: int) -> float:
    """Exact delta(eps) of the shuffled count when the other ``n - 1`` users hold ``ones`` ones.

    The others' count is ``Bin(n - 1 - ones, a) + Bin(ones, 1 - a)``, ``a = gamma/2``;
    the changed user adds ``Ber(a)`` or ``Ber(1 - a)``. Returns the larger of the two
    directed hockey-stick divergences. Exact up to floating point (no truncation).

    Parameters
    ----------
    n : int
        Number of users, >= 2.
    gamma : float
        Randomization probability in (0, 1].
    epsilon : float
        The epsilon at which delta is evaluated, >= 0.
    ones : int
        Number of ones among the other users, in [0, n - 1].
    """
    n, gamma, epsilon = _check_bitsum_point(n, gamma, epsilon)
    ones = check_int("ones", ones, 0, n - 1, why="the other users' ones")
    a = gamma / 2.0
    zeros = n - 1 - ones
    others = np.convolve(
        stats.binom.pmf(np.arange(zeros + 1), zeros, a),
        stats.binom.pmf(np.arange(ones + 1), ones, 1.0 - a),
    )
    p = np.convolve(others, [1.0 - a, a])
    q = np.convolve(others, [a, 1.0 - a])
    return max(_hockey_stick(p, q, epsilon), _hockey_stick(q, p, epsilon))


def _bisect_epsilon(delta_at: Callable[[float], float], delta: float, upper: float) -> float:
    """Smallest eps in [0, upper] (to ``_EPS_TOL``, rounded up) with ``delta_at(eps) <= delta``.

    The caller guarantees ``delta_at(upper) <= delta``.
    """
    if delta_at(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, upper
    while hi - lo > _EPS_TOL:
        mid = 0.5 * (lo + hi)
        if delta_at(mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def bitsum_epsilon(n: int, gamma: float, delta: float) -> float:
    """Smallest eps (bisection, rounded up) with :func:`bitsum_delta` ``(n, gamma, eps) <= delta``.

    Parameters
    ----------
    n : int
        Number of users, >= 2.
    gamma : float
        Randomization probability in (0, 1].
    delta : float
        Target delta in (0, 1).
    """
    n = _check_users(n)
    gamma = _check_gamma(gamma)
    delta = _check_delta(delta)
    p, q, tail = _bitsum_view(n, gamma)
    if tail >= delta:
        raise ValueError(f"delta must exceed the truncated mass {tail:.3g}, got {delta!r}")
    # at the local eps0 every likelihood ratio is within e^eps0: the divergence is 0
    return _bisect_epsilon(lambda e: _hockey_stick(p, q, e) + tail, delta, bitsum_local_epsilon(gamma))


@functools.lru_cache(maxsize=256)
def calibrate_bitsum_gamma(n: int, epsilon: float, delta: float, *, rtol: float = 1e-4) -> float:
    """Smallest randomization probability gamma for which the shuffled bit sum is (eps, delta)-DP.

    delta(eps) decreases in gamma (raising gamma post-processes each message by
    re-randomizing it), so gamma is bisected; the returned gamma meets the target
    (upper end of a bracket of relative width ``rtol``). Results are cached.

    Parameters
    ----------
    n : int
        Number of users, >= 2.
    epsilon : float
        Target epsilon > 0.
    delta : float
        Target delta in (0, 1).
    rtol : float
        Relative width of the final bracket on gamma, in (0, 1).

    """
    n = _check_users(n)
    epsilon, delta = _check_target(epsilon, delta)
    rtol = check_real("rtol", rtol, 0.0, 1.0, low_open=True, high_open=True)

    def meets(gamma: float) -> bool:
        return bitsum_delta(n, gamma, epsilon) <= delta

    # gamma = 1 sends pure noise (delta = 0), so a bracket exists; grow it from the
    # cheap end (the accountant's work grows with gamma * n).
    lo, hi = 0.0, min(1.0, 1.0 / n)
    while not meets(hi):
        if hi >= 1.0:
            raise ValueError(f"even gamma = 1 does not meet (epsilon={epsilon}, delta={delta})")
        lo, hi = hi, min(1.0, 2.0 * hi)
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi


# ---------------------------------------------------------------------------
# Feldman–McMillan–Talwar 2021 (comparison only)
# ---------------------------------------------------------------------------


def fmt_max_local_epsilon(n: int, delta: float) -> float:
    """Largest local eps0 for which the FMT closed form applies: ``ln(n / (16 ln(2/delta)))``."""
    n = _check_users(n)
    delta = _check_delta(delta)
    return math.log(n / (16.0 * math.log(2.0 / delta)))


def fmt_epsilon(local_epsilon: float, n: int, delta: float) -> float:
    """Feldman–McMillan–Talwar 2021 amplification-by-shuffling bound for an eps0-LDP randomizer.

    ``eps <= ln(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 ln(4/delta) / n) + 8 e^eps0 / n))``,
    valid for ``eps0 <= ln(n / (16 ln(2/delta)))`` (FMT 2021, Thm. 3.1 / Cor. 4.3,
    as recorded in docs/references.md). Used only to show the exact accountant is tighter.

    Raises
    ------
    ValueError
        If ``local_epsilon`` is outside (0, ln(n / (16 ln(2/delta)))].
    """
    bound = fmt_max_local_epsilon(n, delta)
    local_epsilon = check_real("local_epsilon", local_epsilon, 0.0, low_open=True)
    if local_epsilon > bound:
        raise ValueError(
            f"local_epsilon must be <= ln(n / (16 ln(2/delta))) = {bound:.4g} for the FMT bound, got {local_epsilon!r}"
        )
    e0 = math.exp(local_epsilon)
    factor = (e0 - 1.0) / (e0 + 1.0)
    return math.log1p(factor * (8.0 * math.sqrt(e0 * math.log(4.0 / delta) / n) + 8.0 * e0 / n))
