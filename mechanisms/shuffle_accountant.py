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

*Vector summation.* Per coordinate, the changed user's rounded level moves within
``{0, ..., 2 * levels}``; its rounding randomness is a mixture over level pairs,
and the other users' rounding is independent noise added to the count
(post-processing). By joint convexity the pair of count laws is a mixture of
shift pairs ``(Bin(N, 1/2) + s, Bin(N, 1/2))``, ``N = n * noise_bits``,
``|s| <= 2 * levels``. The binomial is log-concave, so the shift family has a
monotone likelihood ratio and (Neyman–Pearson) the trade-off curve of shift
``2 * levels`` lies below that of every smaller shift of the same sign; with a
fair coin the family is symmetric (``c -> N + s - c`` swaps the pair), so the
single symmetric pair ``(Bin(N,1/2) + 2*levels, Bin(N,1/2))`` dominates every
coordinate's pair for all hockey-stick orders ``alpha >= 0``. Coordinates are
noised independently, so the protocol is dominated by the ``coordinates``-fold
product of that pair (Zhu, Dong & Wang 2022, Thm. 10), whose privacy loss
distribution is composed numerically with dp-accounting's pessimistic PLD.
This composition treats every coordinate as able to move by its full range
(an l_inf view of the input); it does not exploit an l2 bound on the vector, so
it is conservative for l2-bounded inputs.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import stats

from accounting import convert

__all__ = [
    "bitsum_delta",
    "bitsum_delta_for_configuration",
    "bitsum_epsilon",
    "calibrate_bitsum_gamma",
    "bitsum_local_epsilon",
    "fmt_epsilon",
    "fmt_max_local_epsilon",
    "vector_sum_pld",
    "vector_sum_delta",
    "vector_sum_epsilon",
    "calibrate_noise_bits",
    "default_levels",
    "paper_noise_bits",
]

#: Weights of M (bit sum) below this are left out; their total mass is added
#: to delta in full (a divergence never exceeds 1), so truncation stays conservative.
_TAIL = 1e-20
#: Log-mass below which a count outcome is moved to the PLD's infinity mass
#: (pessimistic: counted as if it revealed everything).
_LOG_MASS_TRUNCATION = math.log(1e-30)
#: Discretization of privacy-loss values in the PLD (rounded up: pessimistic), for
#: eps <= 1; at a larger target eps it is scaled by eps (see ``_pld_interval``).
_PLD_INTERVAL = 1e-4
#: Most privacy-loss bins per coordinate before the bin width is widened.
_MAX_BINS = 100_000
#: Bisection tolerance on epsilon; the upper end of the final bracket is returned.
_EPS_TOL = 1e-7


def _check_users(n: int, minimum: int = 2) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n < minimum:
        raise ValueError(f"n must be an int >= {minimum}, got {n}")
    return int(n)


def _check_int(name: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value}")
    return int(value)


def _check_real(name: str, value: float, low: float, high: float, *, low_open: bool, high_open: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    x = float(value)
    ok = math.isfinite(x) and (x > low if low_open else x >= low) and (x < high if high_open else x <= high)
    if not ok:
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        raise ValueError(f"{name} must be in {lo}{low}, {high}{hi}, got {value!r}")
    return x


def _check_gamma(gamma: float) -> float:
    """The randomization probability of the bit randomizer, in (0, 1]."""
    return _check_real("gamma", gamma, 0.0, 1.0, low_open=True, high_open=False)


def _check_delta(delta: float) -> float:
    """A target delta, in (0, 1)."""
    return _check_real("delta", delta, 0.0, 1.0, low_open=True, high_open=True)


def _check_epsilon(epsilon: float, *, target: bool) -> float:
    """An epsilon: a target (> 0) or a point at which delta is evaluated (>= 0)."""
    return _check_real("epsilon", epsilon, 0.0, math.inf, low_open=target, high_open=True)


def _check_target(epsilon: float, delta: float) -> tuple[float, float]:
    """The (eps > 0, delta in (0, 1)) target a calibration must meet."""
    return _check_epsilon(epsilon, target=True), _check_delta(delta)


def _check_bitsum_point(n: int, gamma: float, epsilon: float) -> tuple[int, float, float]:
    """Users (>= 2), randomization probability and the epsilon (>= 0) of a bit-sum delta(eps)."""
    return _check_users(n), _check_gamma(gamma), _check_epsilon(epsilon, target=False)


def _hockey_stick(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    """``sum max(p - e^eps q, 0)``: the eps-hockey-stick divergence of two pmfs on one support."""
    return float(np.maximum(p - math.exp(epsilon) * q, 0.0).sum())


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
    for m, w in zip(m_values, weights):
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
    ones = _check_int("ones", ones, 0)
    if ones > n - 1:
        raise ValueError(f"ones must be in [0, n - 1] = [0, {n - 1}], got {ones}")
    a = gamma / 2.0
    zeros = n - 1 - ones
    others = np.convolve(
        stats.binom.pmf(np.arange(zeros + 1), zeros, a),
        stats.binom.pmf(np.arange(ones + 1), ones, 1.0 - a),
    )
    p = np.convolve(others, [1.0 - a, a])
    q = np.convolve(others, [a, 1.0 - a])
    return max(_hockey_stick(p, q, epsilon), _hockey_stick(q, p, epsilon))


def _bisect_epsilon(delta_at, delta: float, upper: float) -> float:
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
    rtol = _check_real("rtol", rtol, 0.0, 1.0, low_open=True, high_open=True)

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
    local_epsilon = _check_real("local_epsilon", local_epsilon, 0.0, math.inf, low_open=True, high_open=True)
    if local_epsilon > bound:
        raise ValueError(
            f"local_epsilon must be <= ln(n / (16 ln(2/delta))) = {bound:.4g} for the FMT bound, got {local_epsilon!r}"
        )
    e0 = math.exp(local_epsilon)
    factor = (e0 - 1.0) / (e0 + 1.0)
    return math.log1p(factor * (8.0 * math.sqrt(e0 * math.log(4.0 / delta) / n) + 8.0 * e0 / n))


# ---------------------------------------------------------------------------
# Vector summation (Cheu et al. 2022; seed paper App. T)
# ---------------------------------------------------------------------------


def default_levels(n: int, dimension: int) -> int:
    """The rounding resolution ``g = max(ceil(2 sqrt(n)), dimension, 4)`` (docs/references.md, Cheu et al. 2022)."""
    n = _check_users(n, 1)
    dimension = _check_int("dimension", dimension, 1)
    return max(math.ceil(2.0 * math.sqrt(n)), dimension, 4)


def paper_noise_bits(n: int, epsilon: float, delta: float, dimension: int, levels: int | None = None) -> float:
    """The recalled closed-form noise-bit count ``b = 24e4 g^2 ln^2(4 d^2 / delta) / (eps^2 n)``.

    Only for comparison with :func:`calibrate_noise_bits` (docs/references.md marks the
    constant as recalled, to verify; it is not used to certify anything).
    """
    n = _check_users(n, 1)
    epsilon, delta = _check_target(epsilon, delta)
    dimension = _check_int("dimension", dimension, 1)
    g = default_levels(n, dimension) if levels is None else _check_int("levels", levels, 1)
    return 24e4 * g**2 * math.log(4.0 * dimension**2 / delta) ** 2 / (epsilon**2 * n)


def _pld_interval(epsilon: float) -> float:
    """PLD bin width for a delta evaluated at ``epsilon``: ``1e-4 * max(1, epsilon)``.

    Pessimistic rounding moves each coordinate's loss up by less than one bin, so
    the certified delta(eps) lies between the exact delta(eps) and the exact
    delta(eps - coordinates * bin): a relative slack of ``coordinates * 1e-4`` in eps.
    """
    return _PLD_INTERVAL * max(1.0, epsilon)


def _shift_pair_rounded_pmf(trials: int, shift: int, interval: float) -> tuple[dict[int, float], float, float]:
    """Rounded (pessimistic) PLD pmf of the pair (Bin(trials,1/2) + shift, Bin(trials,1/2)).

    Returns the pmf over bin indices, the infinity mass, and the bin width used:
    ``interval``, widened to span the losses in at most ``_MAX_BINS`` bins (only
    when the shift is many standard deviations, i.e. the noise is far too small;
    wider bins stay pessimistic).

    Loss at count c = k + s: ``ln C(N, k) - ln C(N, k + s)``, weighted by the upper law
    ``Bin(N,1/2) + s`` at c. Outcomes the lower law cannot produce (c > N), outcomes of
    upper mass below ``exp(_LOG_MASS_TRUNCATION)``, and (Hoeffding) the mass outside a
    window of 13 sd around the mean go to the infinity mass. For N up to ~1e9 the
    direct ``gammaln`` difference loses ~1e-6 to cancellation, so log-probabilities are
    taken relative to the window's start, as cumulative sums of
    ``ln((N - t + 1)/t) = log1p((N - 2t + 1)/t)`` (accurate to ~1e-10).
    """
    n_trials, s = trials, shift
    sigma = math.sqrt(n_trials) / 2.0
    half_width = int(math.ceil(13.0 * sigma)) + 2
    k_lo = max(0, n_trials // 2 - half_width)
    k_hi = min(n_trials, n_trials // 2 + half_width)
    outside = 0.0 if (k_lo == 0 and k_hi == n_trials) else 2.0 * math.exp(-2.0 * half_width**2 / n_trials)
    t = np.arange(k_lo + 1, min(k_hi + s, n_trials) + 1, dtype=float)
    # rel[j] = ln C(N, k_lo + j) - ln C(N, k_lo)
    rel = np.concatenate([[0.0], np.cumsum(np.log1p((n_trials - 2.0 * t + 1.0) / t))])
    k = np.arange(k_lo, k_hi + 1)
    log_mass = rel[: k_hi - k_lo + 1]
    log_mass = log_mass - (log_mass.max() + math.log(np.exp(log_mass - log_mass.max()).sum()))
    inside = k + s <= n_trials
    keep = inside & (log_mass > _LOG_MASS_TRUNCATION)
    kept = np.flatnonzero(keep)
    loss = rel[kept] - rel[kept + s]
    mass = np.exp(log_mass[kept]) * (1.0 - outside)
    infinity_mass = min(1.0, outside + float(np.exp(log_mass[~keep]).sum()) * (1.0 - outside))
    interval = max(interval, float(loss.max() - loss.min()) / _MAX_BINS)
    rounded = np.ceil(loss / interval).astype(np.int64)
    keys, inverse = np.unique(rounded, return_inverse=True)
    sums = np.bincount(inverse, weights=mass)
    return dict(zip(keys.tolist(), sums.tolist())), infinity_mass, interval


def _check_vector_args(n: int, noise_bits: int, levels: int, coordinates: int) -> tuple[int, int, int, int]:
    return (
        _check_users(n, 1),
        _check_int("noise_bits", noise_bits, 1),
        _check_int("levels", levels, 1),
        _check_int("coordinates", coordinates, 1),
    )


def vector_sum_pld(
    n: int, noise_bits: int, levels: int, coordinates: int = 1, *, interval: float = _PLD_INTERVAL
) -> pld_lib.PrivacyLossDistribution:
    """Pessimistic PLD dominating the shuffled vector summation (module docstring: derivation).

    The ``coordinates``-fold self-composition of the symmetric pair
    ``(Bin(n * noise_bits, 1/2) + 2 * levels, Bin(n * noise_bits, 1/2))``.

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
        Width of the (pessimistic) privacy-loss bins, > 0 (widened if the losses
        would need more than ``_MAX_BINS`` bins).
    """
    n, noise_bits, levels, coordinates = _check_vector_args(n, noise_bits, levels, coordinates)
    interval = _check_real("interval", interval, 0.0, 1.0, low_open=True, high_open=False)
    rounded, infinity_mass, interval = _shift_pair_rounded_pmf(n * noise_bits, 2 * levels, interval)
    pld = pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
        rounded, infinity_mass, interval, pessimistic_estimate=True
    )
    return pld if coordinates == 1 else pld.self_compose(coordinates)


def vector_sum_delta(n: int, noise_bits: int, levels: int, epsilon: float, coordinates: int = 1) -> float:
    """Certified delta(eps) of the shuffled vector summation (pessimistic PLD, dp-accounting).

    Bins of width ``1e-4 * max(1, epsilon)`` (``_pld_interval``).
    """
    epsilon = _check_epsilon(epsilon, target=False)
    pld = vector_sum_pld(n, noise_bits, levels, coordinates, interval=_pld_interval(epsilon))
    return float(pld.get_delta_for_epsilon(epsilon))


def vector_sum_epsilon(n: int, noise_bits: int, levels: int, delta: float, coordinates: int = 1) -> float:
    """Certified eps(delta) of the shuffled vector summation (pessimistic PLD, dp-accounting)."""
    delta = _check_delta(delta)
    return float(vector_sum_pld(n, noise_bits, levels, coordinates).get_epsilon_for_delta(delta))


@functools.lru_cache(maxsize=256)
def calibrate_noise_bits(n: int, epsilon: float, delta: float, levels: int, coordinates: int = 1) -> int:
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
    """
    n = _check_users(n, 1)
    epsilon, delta = _check_target(epsilon, delta)
    levels = _check_int("levels", levels, 1)
    coordinates = _check_int("coordinates", coordinates, 1)

    def meets(bits: int) -> bool:
        return vector_sum_delta(n, bits, levels, epsilon, coordinates) <= delta

    # Start at the analytic-Gaussian analogue (Balle & Wang 2018): the count noise
    # Bin(nb, 1/2) has sd sqrt(nb)/2 and the m shifts of 2g have l2 norm 2g sqrt(m).
    # It lands within a fraction of a percent of the answer, so the bracket is narrow.
    sigma = convert.analytic_gaussian_sigma(epsilon, delta, 2 * levels * math.sqrt(coordinates))
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
