"""Shuffle-model summation: local randomizers, a uniform shuffler, analyzers, and charged mechanisms.

In the shuffle model each user runs a local randomizer on its own data and sends
messages to a trusted shuffler, which permutes all messages uniformly; the
analyzer sees only the shuffled multiset. Two protocols:

* **Bit sum** (Cheu et al. 2019): user ``i`` sends one bit, ``Ber(1/2)`` with
  probability ``gamma`` and its own bit otherwise; the analyzer debiases the count,
  ``(sum y - gamma n / 2) / (1 - gamma)``.
* **Vector summation** (Cheu et al. 2022, the seed paper's App. T via Chowdhury &
  Zhou 2022): per coordinate, ``w = v + L`` in ``[0, 2L]`` is rounded at random to
  the level ``floor(w g / L) + Ber(frac(w g / L))`` in ``{0, ..., 2g}`` (unbiased:
  ``E = w g / L``); the user sends, for that coordinate, ``level`` one-messages,
  ``2g - level`` zero-messages and ``b`` fair noise bits (a fixed number of messages,
  so the message count reveals nothing). The analyzer counts ones per coordinate and
  returns ``(L / g)(count - b n / 2) - n L``. Symmetric ``d x d`` matrices are sent
  as their ``d(d + 1)/2`` upper-triangle entries and rebuilt symmetric.

The noise bits are fair (``p = 1/2``), not the recalled ``p = 1/4`` of docs/references.md:
a fair bit has the largest variance per message, and the symmetric binomial makes a
single dominating pair cover both neighbour orders in the accountant
(:mod:`mechanisms.shuffle_accountant`, whose docstring holds the privacy derivations).

Two execution paths give the same output law: ``method="messages"`` builds every
message, shuffles them with a uniform permutation and counts (small ``n`` only);
``method="counts"`` (default) samples the per-coordinate counts directly, which is
exactly equal in distribution (a count is invariant to the permutation, and a sum of
independent fair bits is binomial).

Neighbouring relation: ``"replace_one"`` (one user's data replaced); the add/remove
relation is not analysed for these protocols and is refused. The shuffler and the
charged base the two mechanisms share are :mod:`mechanisms.shuffle_base`.
"""

from __future__ import annotations

import numpy as np

from accounting.validation import (
    check_array,
    check_int,
    check_positive,
    check_probability,
    check_real,
)
from mechanisms.release import Release, check_generator
from mechanisms.shuffle_accountant import bitsum_delta, calibrate_bitsum_gamma
from mechanisms.shuffle_base import MAX_MESSAGES, _ChargedShuffleSum, check_method, shuffle_messages
from mechanisms.shuffle_vector_accountant import INPUT_SHIFTS, calibrate_noise_bits, default_levels, vector_sum_delta

__all__ = [
    "bitsum_randomize",
    "shuffle_messages",
    "bitsum_analyze",
    "ShuffleBitSum",
    "vector_randomize",
    "vector_analyze",
    "run_vector_summation",
    "ShuffleVectorSum",
]

# ---------------------------------------------------------------------------
# Bit sum
# ---------------------------------------------------------------------------


def _bits_shape(bits: object) -> tuple[int, ...]:
    """The public shape of ``bits``, a bool or real array (ragged lists, strings, objects: TypeError)."""
    try:
        arr = np.asarray(bits)
    except (TypeError, ValueError):
        raise TypeError("bits must be a rectangular array of 0/1 values") from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"bits must be an array of 0/1 values (bool, int or float dtype), got dtype {arr.dtype}")
    return arr.shape


def _check_bits(bits: np.ndarray, n_users: int | None = None) -> np.ndarray:
    arr = np.asarray(bits)
    if arr.ndim != 1:
        raise ValueError(f"bits must be a 1-D array of 0/1 values, got shape {arr.shape}")
    if n_users is not None and arr.shape[0] != n_users:
        raise ValueError(f"bits must hold one bit per user ({n_users}), got {arr.shape[0]}")
    if arr.dtype == bool:
        return arr.astype(np.int64)
    if not np.issubdtype(arr.dtype, np.number) or not np.all(np.isin(arr, (0, 1))):
        raise ValueError("bits must contain only 0 and 1")
    return arr.astype(np.int64)


def bitsum_randomize(bits: np.ndarray, gamma: float, rng: np.random.Generator) -> np.ndarray:
    """Local randomizer of the bit sum, applied to every user: one message (a bit) per user.

    With probability ``gamma`` user ``i`` sends ``Ber(1/2)``, otherwise its bit
    (Cheu et al. 2019, bit randomizer). Does not charge anything: callers charge first.
    """
    x = _check_bits(bits)
    gamma = check_real("gamma", gamma, 0.0, 1.0, low_open=True)
    rng = check_generator(rng)
    randomize = rng.random(x.shape[0]) < gamma
    coin = rng.integers(0, 2, size=x.shape[0])
    return np.asarray(np.where(randomize, coin, x), dtype=np.int64)


def bitsum_analyze(messages: np.ndarray, gamma: float) -> float:
    """Analyzer of the bit sum: ``(sum y - gamma n / 2) / (1 - gamma)``, unbiased for the sum of bits.

    Variance ``n (gamma/2)(1 - gamma/2) / (1 - gamma)^2`` for every input.
    """
    y = _check_bits(messages)
    gamma = check_real("gamma", gamma, 0.0, 1.0, low_open=True, high_open=True)  # (0, 1): the analyzer debiases
    return (float(y.sum()) - gamma * float(len(y)) / 2.0) / (1.0 - gamma)


class ShuffleBitSum(_ChargedShuffleSum):
    """Shuffled bit sum charged to an account: each release costs ApproxDP(epsilon, delta).

    Neighbouring relation ``replace_one``: one user's bit replaced (sensitivity 1 of
    the sum). ``gamma`` is calibrated with the exact accountant
    (:func:`mechanisms.shuffle_accountant.calibrate_bitsum_gamma`) unless given, in
    which case it is checked to meet (epsilon, delta).

    Parameters
    ----------
    account : accounting.Account
        Account in the ``"approx"`` currency (a zCDP account refuses an ApproxDP charge).
    n_users : int
        Number of users per release, >= 2.
    rng : numpy.random.Generator
        Source of all randomness.
    epsilon, delta : float
        Privacy of one release, epsilon > 0, delta in (0, 1).
    gamma : float, optional
        Randomization probability; must meet (epsilon, delta).
    relation : str
        Only ``"replace_one"``.
    """

    _MECHANISM = "ShuffleBitSum"

    def __init__(
        self,
        account: object,
        n_users: int,
        rng: np.random.Generator,
        *,
        epsilon: float,
        delta: float,
        gamma: float | None = None,
        relation: str = "replace_one",
    ) -> None:
        self._open(account, n_users, rng, epsilon, delta, relation)
        if gamma is None:
            try:
                gamma = calibrate_bitsum_gamma(self.n_users, *self._certified)
            except OverflowError:  # scipy's binomial tails at an astronomically large epsilon
                raise ValueError(f"epsilon={self.epsilon!r} is beyond what the bit-sum accountant can evaluate; "
                                 "give a smaller epsilon (every gamma meets it) or an explicit gamma") from None
        elif bitsum_delta(self.n_users, check_probability("gamma", gamma), self._certified[0]) > self._certified[1]:
            raise ValueError(
                f"gamma={gamma!r} does not meet (epsilon={self.epsilon}, delta={self.delta}) for n={self.n_users}"
            )
        self.gamma = float(gamma)
        if self.gamma >= 1.0:
            raise ValueError(
                f"the calibrated gamma is 1 (pure noise) at epsilon={self.epsilon!r}, delta={self.delta!r}, "
                f"n_users={self.n_users}: the analyzer cannot debias; raise epsilon, delta or n_users"
            )

    @property
    def variance(self) -> float:
        """Variance of the released estimate, ``n (gamma/2)(1 - gamma/2) / (1 - gamma)^2``."""
        a = self.gamma / 2.0
        return self.n_users * a * (1.0 - a) / (1.0 - self.gamma) ** 2

    def _flip_probability(self) -> float:
        """γ/2: the probability that a message is not its sender's bit (the counts path's test seam, docs/audits.md)."""
        return self.gamma / 2.0

    def release(self, bits: np.ndarray, *, method: str = "counts", partition: str | None = None) -> Release:
        """Charge ApproxDP(epsilon, delta), then run the protocol on ``bits``; the debiased sum.

        ``method="counts"`` samples the count ``Bin(#ones, 1 - gamma/2) + Bin(#zeros, gamma/2)``
        (exactly the law of the shuffled count); ``"messages"`` runs randomizer, shuffler, analyzer.
        ``partition`` is passed to the charge: releases on disjoint users under different
        keys compose by max in the ledger.
        """
        shape = _bits_shape(bits)
        if shape != (self.n_users,):
            raise ValueError(f"bits must be a 1-D array holding one bit per user ({self.n_users}), got shape {shape}")
        method = check_method(method)
        receipt = self._charge_release(partition, f"n={self.n_users}, gamma={self.gamma:.6g}; exact shuffle accountant")
        x = self._after_charge(lambda: _check_bits(bits, self.n_users))
        if method == "messages":
            shuffled = shuffle_messages(bitsum_randomize(x, self.gamma, self.rng), self.rng)
            return self._release(bitsum_analyze(shuffled, self.gamma), receipt)
        a = self._flip_probability()
        ones = int(x.sum())
        count = self.rng.binomial(ones, 1.0 - a) + self.rng.binomial(self.n_users - ones, a)
        return self._release((count - self.gamma * self.n_users / 2.0) / (1.0 - self.gamma), receipt)


# ---------------------------------------------------------------------------
# Vector summation
# ---------------------------------------------------------------------------


def _check_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``(d,)`` or ``(d, d)`` with ``d >= 1``."""
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"shape must be a tuple (d,) or (d, d) of ints, got {type(shape).__name__}")
    shape = tuple(shape)
    if not (len(shape) in (1, 2) and all(isinstance(s, (int, np.integer)) and s >= 1 for s in shape)):
        raise ValueError(f"shape must be (d,) or (d, d) with d >= 1, got {shape!r}")
    if len(shape) == 2 and shape[0] != shape[1]:
        raise ValueError(f"shape must be square (d, d) for a symmetric matrix, got {shape!r}")
    return tuple(int(s) for s in shape)


def _check_values(values: np.ndarray, bound: float) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 2:
        raise ValueError(f"values must be a 2-D array (users, coordinates), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("values must be finite (no NaN or infinity)")
    if np.any(np.abs(arr) > bound):
        raise ValueError(f"every coordinate of values must lie in [-bound, bound] = [-{bound}, {bound}]")
    return arr


def _round_levels(values: np.ndarray, bound: float, levels: int, rng: np.random.Generator) -> np.ndarray:
    """Randomized rounding of ``w = v + L`` to ``floor(w g/L) + Ber(frac)`` in ``{0, ..., 2g}`` (unbiased)."""
    scaled = (values + bound) * (levels / bound)
    floor = np.floor(scaled)
    up = rng.random(values.shape) < (scaled - floor)
    return np.minimum(floor.astype(np.int64) + up, 2 * levels)


def vector_randomize(
    values: np.ndarray, bound: float, levels: int, noise_bits: int, rng: np.random.Generator
) -> np.ndarray:
    """Local randomizer of vector summation for every user: an array of ``(coordinate, bit)`` messages.

    Each user sends, per coordinate, ``2 * levels + noise_bits`` messages: its rounded
    level as one-messages, the rest of ``2 * levels`` as zero-messages, and
    ``noise_bits`` fair bits. Returns shape ``(n * m * (2 levels + noise_bits), 2)``,
    user-major (the unshuffled order). Does not charge anything: callers charge first.
    """
    rng = check_generator(rng)
    arr = _check_values(values, bound)
    n, m = arr.shape
    per_coord = 2 * levels + noise_bits
    total = n * m * per_coord
    if total > MAX_MESSAGES:
        raise ValueError(f"the message-level path would build {total} messages (> {MAX_MESSAGES}); use method='counts'")
    level = _round_levels(arr, bound, levels, rng)
    slot = np.arange(2 * levels)
    data_bits = (slot[None, None, :] < level[:, :, None]).astype(np.int64)
    noise = rng.integers(0, 2, size=(n, m, noise_bits))
    bits = np.concatenate([data_bits, noise], axis=2)
    coords = np.broadcast_to(np.arange(m)[None, :, None], bits.shape)
    return np.stack([coords.reshape(-1), bits.reshape(-1)], axis=1)


def _debias(ones: np.ndarray, n_users: int, bound: float, levels: int, noise_bits: int) -> np.ndarray:
    """``(L/g)(ones - b n / 2) - n L`` per coordinate: the analyzer's unbiased sum from the counts of ones."""
    return np.asarray((bound / levels) * (ones - noise_bits * n_users / 2.0) - n_users * bound, dtype=float)


def vector_analyze(
    messages: np.ndarray, n_users: int, coordinates: int, bound: float, levels: int, noise_bits: int
) -> np.ndarray:
    """Analyzer of vector summation: per coordinate ``(L/g)(ones - b n / 2) - n L``, unbiased for the sum."""
    msgs = np.asarray(messages)
    ones = np.bincount(msgs[:, 0], weights=msgs[:, 1], minlength=coordinates)
    return _debias(ones, n_users, bound, levels, noise_bits)


def run_vector_summation(
    values: np.ndarray,
    bound: float,
    levels: int,
    noise_bits: int,
    rng: np.random.Generator,
    *,
    method: str = "counts",
) -> np.ndarray:
    """One run of the shuffled vector-summation protocol on ``values`` (users x coordinates).

    The protocol only; it charges nothing. A mechanism calling it must charge its
    account first (:class:`ShuffleVectorSum`, :class:`mechanisms.optim.shuffle_pgd.ShufflePGD`).

    Returns
    -------
    numpy.ndarray
        The estimate of the per-coordinate sums, shape ``(coordinates,)``.
    """
    rng = check_generator(rng)
    method = check_method(method)
    arr = _check_values(values, bound)
    n, m = arr.shape
    if method == "messages":
        shuffled = shuffle_messages(vector_randomize(arr, bound, levels, noise_bits, rng), rng)
        return vector_analyze(shuffled, n, m, bound, levels, noise_bits)
    ones = _round_levels(arr, bound, levels, rng).sum(axis=0) + rng.binomial(n * noise_bits, 0.5, size=m)
    return _debias(ones, n, bound, levels, noise_bits)


#: What ``ShuffleVectorSum(inputs=...)`` accepts, and the accountant's input set for vectors / matrices.
_INPUT_SETS = {"l2": ("l2_ball", "psd_trace"), "box": ("box", "box")}
#: Users whose leaves ``ShuffleVectorSum.release_outer`` forms at a time.
_OUTER_CHUNK = 4096
#: Relative tolerance of the input-set checks (float rounding of ||x|| = 1, x x^T); the
#: accountant's shift bounds carry a larger slack (mechanisms.shuffle_vector_accountant).
_INPUT_TOLERANCE = 1e-12


def _check_inputs(inputs: str) -> str:
    if inputs not in _INPUT_SETS:
        raise ValueError(f"inputs must be one of {tuple(_INPUT_SETS)}, got {inputs!r}")
    return inputs


def _check_input_set(arr: np.ndarray, input_set: str, bound: float) -> None:
    """Raise ValueError unless every user's input lies in its set (``arr``: (n, d) or (n, d, d), symmetric)."""
    limit = bound * (1.0 + _INPUT_TOLERANCE)
    if input_set == "l2_ball" and np.any(np.linalg.norm(arr, axis=1) > limit):
        raise ValueError(f"every user's vector must have l2 norm <= bound = {bound} (inputs='l2')")
    if input_set == "psd_trace":
        traces = np.trace(arr, axis1=1, axis2=2)
        lowest = np.linalg.eigvalsh(arr).min(axis=1)
        if np.any(traces > limit) or np.any(lowest < -_INPUT_TOLERANCE * bound):
            raise ValueError(
                f"every user's matrix must be positive semidefinite with trace <= bound = {bound} (inputs='l2')"
            )


class ShuffleVectorSum(_ChargedShuffleSum):
    """Shuffled sum of bounded vectors or symmetric matrices, charged ApproxDP(epsilon, delta) per release.

    Neighbouring relation ``replace_one``: one user's vector (matrix) replaced. What one
    user may send is declared by ``inputs``, and the noise is calibrated to it by the
    exact accountant (:mod:`mechanisms.shuffle_vector_accountant`, docs/shuffle-accounting.md):

    * ``"l2"`` (default): a vector of l2 norm <= ``bound``, or a symmetric positive
      semidefinite matrix of trace <= ``bound`` (``x x^T`` with ``||x||^2 <= bound``, or
      ``w x x^T`` with ``w ||x||^2 <= bound``: the shuffle bandit's leaves). One user's change
      then moves each coordinate by at most ``2 bound`` (vectors) or ``bound`` (matrices) and
      has l2 norm at most ``2 bound`` or ``sqrt(2) bound`` over the sent coordinates; the
      accountant composes the coordinates under a per-rank bound on the level shifts
      (l2-aware composition; at d = 5 the matrix's noise sd is ~3.1x below ``"box"``'s).
    * ``"box"``: every coordinate in ``[-bound, bound]`` and nothing else; every coordinate's
      level may move by ``2 * levels`` and the coordinates are composed at that shift (the
      coordinate-wise composition, about the noise of a Gaussian mechanism of l2
      sensitivity ``2 * bound * sqrt(coordinates)``; benchmarks/shuffle.py).

    Every release checks its inputs against the declared set (a privacy precondition).
    Symmetric matrices are sent as their ``d(d+1)/2`` upper-triangle entries; a real
    (scalar) summation is ``shape=(1,)``.
    paper: App. T (vector summation R_2, S_2, A_2 of Cheu et al. 2022).

    Parameters
    ----------
    account : accounting.Account
        Account in the ``"approx"`` currency.
    n_users : int
        Number of users per release, >= 2.
    shape : tuple
        ``(d,)`` for vectors or ``(d, d)`` for symmetric matrices.
    bound : float
        ``L`` > 0: the bound on every coordinate (``"box"``), on the norm or the trace (``"l2"``).
    rng : numpy.random.Generator
        Source of all randomness.
    epsilon, delta : float
        Privacy of one release.
    levels : int, optional
        Rounding resolution g; default ``max(ceil(2 sqrt(n)), d, 4)``.
    noise_bits : int, optional
        Fair noise bits per user and coordinate; default: the smallest meeting
        (epsilon, delta) (:func:`mechanisms.shuffle_vector_accountant.calibrate_noise_bits`).
        If given it is checked to meet (epsilon, delta).
    inputs : {"l2", "box"}
        The input set (above).
    relation : str
        Only ``"replace_one"``.
    """

    _MECHANISM = "ShuffleVectorSum"

    def __init__(
        self,
        account: object,
        n_users: int,
        shape: tuple[int, ...],
        bound: float,
        rng: np.random.Generator,
        *,
        epsilon: float,
        delta: float,
        levels: int | None = None,
        noise_bits: int | None = None,
        inputs: str = "l2",
        relation: str = "replace_one",
    ) -> None:
        self._open(account, n_users, rng, epsilon, delta, relation)
        self.shape = _check_shape(shape)
        d = self.shape[0]
        self.coordinates = d if len(self.shape) == 1 else d * (d + 1) // 2
        self.bound = check_positive("bound", bound)
        self.inputs = _check_inputs(inputs)
        self.input_set = _INPUT_SETS[self.inputs][len(self.shape) - 1]
        self.max_shift, self.l2_shift = INPUT_SHIFTS[self.input_set]
        self.levels = default_levels(self.n_users, d) if levels is None else check_int("levels", levels, 1)
        if noise_bits is None:
            noise_bits = calibrate_noise_bits(self.n_users, *self._certified, self.levels, self.coordinates,
                                              max_shift=self.max_shift, l2_shift=self.l2_shift)
        elif vector_sum_delta(self.n_users, check_int("noise_bits", noise_bits, 1), self.levels, self._certified[0],
                              self.coordinates, max_shift=self.max_shift, l2_shift=self.l2_shift) > self._certified[1]:
            raise ValueError(
                f"noise_bits={noise_bits} does not meet (epsilon={self.epsilon}, delta={self.delta}) "
                f"for n={self.n_users}, levels={self.levels}, coordinates={self.coordinates}, inputs={self.inputs!r}"
            )
        self.noise_bits = int(noise_bits)
        if len(self.shape) == 2:
            self._rows, self._cols = np.triu_indices(d)

    def variance_bound(self) -> float:
        """Upper bound on each coordinate's variance: ``(L/g)^2 (n/4 + n b/4)`` (rounding + noise bits).

        The exact variance is ``(L/g)^2 (sum_i f_i (1 - f_i) + n b / 4)`` with ``f_i`` the
        fractional part of user i's scaled value; ``f(1 - f) <= 1/4``.
        """
        return (self.bound / self.levels) ** 2 * self.n_users * (1.0 + self.noise_bits) / 4.0

    def _flatten(self, values: np.ndarray) -> np.ndarray:
        arr = np.asarray(values, dtype=float)
        if arr.shape != (self.n_users, *self.shape):
            raise ValueError(f"values must have shape {(self.n_users, *self.shape)}, got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError("values must be finite (no NaN or infinity)")
        if len(self.shape) == 2 and not np.allclose(arr, np.swapaxes(arr, 1, 2), rtol=0.0, atol=1e-12):
            raise ValueError("values must be symmetric matrices")
        _check_input_set(arr, self.input_set, self.bound)
        return arr if len(self.shape) == 1 else arr[:, self._rows, self._cols]

    def release(self, values: np.ndarray, *, weights: np.ndarray | None = None, method: str = "counts",
                partition: str | None = None) -> Release:
        """Charge ApproxDP(epsilon, delta), then run the protocol; the estimated sum of ``values``.

        Parameters
        ----------
        values : numpy.ndarray
            Shape ``(n_users, d)`` or ``(n_users, d, d)`` (symmetric), each user's input in
            the declared set (``inputs``), entries in ``[-bound, bound]``. With ``weights``:
            the factors ``x`` (shape ``(n_users, d)``) of the leaves ``w_i x_i x_iᵀ``.
        weights : numpy.ndarray, optional
            ``(n_users,)``, for a ``(d, d)`` mechanism with ``inputs="l2"`` on the ``"counts"``
            path: the release of the leaves ``w_i x_i x_iᵀ``, formed (``w_i·(x_ij x_ik)``) and
            rounded 4096 users at a time (O(4096·d²) memory, not O(n·d²); issue 32). Same
            entries, draws and output, to the last bit, as passing the formed leaves. Each
            leaf is checked on its factors: ``w_i ≥ 0`` makes the formed leaf PSD up to the
            rounding :class:`mechanisms.outer_product.OuterProduct` bounds (inside the
            tolerance of the eigenvalue check), and its formed trace must be at most
            ``bound``; every user is checked before anything is drawn.
        method : str
            ``"counts"`` (exact-in-distribution count simulation) or ``"messages"``.
        partition : str, optional
            Passed to the charge: releases on disjoint users under different keys
            compose by max in the ledger (e.g. the batches of Algorithm 1).
        """
        shape = check_array("values", values).shape
        method = check_method(method)
        if weights is not None:
            self._check_factor_shapes(shape, check_array("weights", weights).shape, method)
        elif shape != (self.n_users, *self.shape):
            raise ValueError(f"values must have shape {(self.n_users, *self.shape)}, got {shape}")
        receipt = self._charge_release(
            partition,
            f"n={self.n_users}, coordinates={self.coordinates}, levels={self.levels}, "
            f"noise_bits={self.noise_bits}, inputs={self.input_set}; exact shuffle accountant (PLD over coordinates)",
        )
        if weights is not None:
            return self._release(self._symmetric(self._outer_sums(values, weights)), receipt)
        flat = self._after_charge(lambda: _check_values(self._flatten(values), self.bound))
        sums = run_vector_summation(flat, self.bound, self.levels, self.noise_bits, self.rng, method=method)
        if len(self.shape) == 1:
            return self._release(sums, receipt)
        return self._release(self._symmetric(sums), receipt)

    def _check_factor_shapes(self, x_shape: tuple[int, ...], w_shape: tuple[int, ...], method: str) -> None:
        """The public checks of ``release(x, weights=w)``, before the charge."""
        if self.shape[1:] != self.shape[:1] or self.input_set != "psd_trace" or method != "counts":
            raise ValueError(f"weights need a (d, d) mechanism with inputs='l2' on method='counts', got "
                             f"shape={self.shape}, inputs={self.inputs!r}, method={method!r}")
        if x_shape != (self.n_users, self.shape[0]) or w_shape != (self.n_users,):
            raise ValueError(f"with weights, values must have shape {(self.n_users, self.shape[0])} and weights "
                             f"{(self.n_users,)}, got {x_shape} and {w_shape}")

    def _outer_sums(self, x: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The protocol's sums of the leaves ``w_i x_i x_iᵀ``, a chunk of users at a time (after the charge)."""
        xs, ws = np.asarray(x, dtype=float), np.asarray(weights, dtype=float)
        chunks = [slice(start, start + _OUTER_CHUNK) for start in range(0, self.n_users, _OUTER_CHUNK)]
        for chunk in chunks:  # every user checked before any draw
            self._after_charge(lambda: self._outer_entries(xs[chunk], ws[chunk]))  # noqa: B023 - called at once
        ones = np.zeros(self.coordinates, dtype=np.int64)
        for chunk in chunks:
            ones += _round_levels(self._outer_entries(xs[chunk], ws[chunk]), self.bound, self.levels,
                                  self.rng).sum(axis=0)
        ones += self.rng.binomial(self.n_users * self.noise_bits, 0.5, size=self.coordinates)
        return _debias(ones, self.n_users, self.bound, self.levels, self.noise_bits)

    def _symmetric(self, sums: np.ndarray) -> np.ndarray:
        """The symmetric matrix whose upper triangle is ``sums``."""
        d = self.shape[0]
        matrix = np.zeros((d, d))
        matrix[self._rows, self._cols] = sums
        matrix[self._cols, self._rows] = sums
        return matrix

    def _outer_entries(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """The checked upper-triangle entries ``w_i·(x_{ij} x_{ik})`` of a chunk of leaves (release_outer)."""
        entries = w[:, None] * (x[:, self._rows] * x[:, self._cols])
        diagonal = w[:, None] * (x * x)  # the formed diagonal, C-ordered: summed as np.trace sums a leaf's
        limit = self.bound * (1.0 + _INPUT_TOLERANCE)
        if not (np.all(w >= 0) and np.all(np.add.reduce(diagonal, axis=1) <= limit)):  # NaN fails both
            if not np.all(np.isfinite(entries)):
                raise ValueError("values must be finite (no NaN or infinity)")
            raise ValueError(f"every user's matrix must be positive semidefinite with trace <= bound = {self.bound} "
                             "(inputs='l2')")
        return _check_values(entries, self.bound)
