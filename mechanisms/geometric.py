"""Geometric-batch Laplace mean estimator of private best-arm identification.

Jourdan & Azize (2025), §4 "private estimator with arm-dependent geometric
batching" (``docs/references.md``, "DP-TT private mean estimator"). Arm a's
rewards are cut into consecutive batches at the counts ⌈(1+η)^k⌉ (k = 0, 1, …,
duplicates removed); when arm a's count reaches its next refresh point, the
sum of the batch just completed is released with Laplace noise Lap(1/ε) and
added to the arm's running noisy sum (cumulative, "no forgetting"). With
``forget=True`` only the last batch is kept (the AdaP-TT estimator of Azize et
al. 2023: last-episode mean plus Lap(1/(ε·batch size))).

Privacy (replace_one: neighbours differ in one user's reward, rewards in
[0, 1]). Every reward belongs to exactly one (arm, batch) sum, whose
sensitivity is 1, so each release is ε-DP by the Laplace mechanism (Dwork &
Roth 2014, Thm. 3.6); batches are disjoint in the data, so they compose in
parallel (McSherry 2009) and the whole stream is ε-DP. Batch boundaries depend
only on the counts, i.e. on the already-released actions. Each release is
charged ``PureDP(ε)`` with its own partition key ``"arm=a,batch=k"``, so the
ledger's parallel composition reproduces this argument: the whole run costs ε.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_CEILING, Decimal, localcontext

import numpy as np

from accounting import Account, PureDP
from accounting.validation import check_exact, check_memory, check_size
from mechanisms.base import Mechanism
from mechanisms.lattice import LaplaceLattice
from mechanisms.noise import laplace_scale_for
from mechanisms.release import Release, check_generator, check_positive

__all__ = ["GeometricBatchMean", "RefreshPoints", "check_eta", "refresh_points"]

_MAX_COUNT = 2**53  # counts beyond this lose integer precision in float sums


def check_eta(eta: object) -> float:
    """Return η as a float if it is a finite number > 0 with 1 + η > 1 in floating point.

    Raises
    ------
    TypeError, ValueError
        Naming ``eta`` and its range (an η with 1 + η == 1 would never refresh).
    """
    eta = check_positive("eta", eta)
    if 1.0 + eta == 1.0:
        raise ValueError(f"eta must be > 0 with 1 + eta > 1 in floating point (eta > 1.1e-16), got {eta!r}")
    return eta


class RefreshPoints:
    """The distinct batch boundaries ⌈(1+η)^k⌉, k = 0, 1, …, computed on demand (paper §4; docs/references.md).

    The first point is 1: every arm's first reward is released on its own. η is
    read as the decimal it prints as (the ledger's convention) and powers are
    computed in 60-digit decimal arithmetic, so the ceilings are exact where a
    float power is not (with η = 1, exp(k·log 2) overshoots 2^25 and its ceiling
    is 2^25 + 1). The point after p is ⌈(1+η)^j⌉ for the least j with (1+η)^j > p
    (for an integer p, ⌈y⌉ > p ⇔ y > p), found from a float estimate of j and
    corrected exactly; each answer is memoised, so memory grows with the points
    actually reached, never with 1/η.
    """

    def __init__(self, eta: float) -> None:
        self.eta = check_eta(eta)
        self._base = Decimal(repr(self.eta)) + 1
        self._log_base = math.log1p(self.eta)
        self._after: dict[int, int] = {}

    def _power(self, j: int) -> Decimal:
        with localcontext() as context:
            context.prec = 60
            return self._base ** j

    def after(self, point: int) -> int:
        """The refresh point following the integer ``point`` ≥ 1."""
        point = int(point)
        cached = self._after.get(point)
        if cached is not None:
            return cached
        # Least j with (1+η)^j > point: bracket the float estimate, then bisect exactly.
        guess = int(math.log(point) / self._log_base)
        low, high = max(guess - 2, 0), guess + 2
        while low > 0 and self._power(low) > point:
            low = max(low - 2 * (high - low), 0)
        while self._power(high) <= point:
            high += 2 * (high - low) + 1
        while low < high:  # invariant: power(high) > point; power(j) ≤ point for j < low, or low = 0
            middle = (low + high) // 2
            if self._power(middle) > point:
                high = middle
            else:
                low = middle + 1
        j = high
        with localcontext() as context:
            context.prec = 60
            following = int(self._power(j).to_integral_value(rounding=ROUND_CEILING))
        self._after[point] = following
        return following

    def upto(self, limit: int) -> np.ndarray:
        """Every point ≤ ``limit``, in order."""
        points = [1]
        while True:
            following = self.after(points[-1])
            if following > limit:
                return np.array(points, dtype=np.int64)
            points.append(following)


def refresh_points(eta: float, limit: int = _MAX_COUNT) -> np.ndarray:
    """The distinct batch boundaries ⌈(1+η)^k⌉ ≤ ``limit``, k = 0, 1, … (see :class:`RefreshPoints`).

    Raises
    ------
    ValueError
        If η is not a finite number with 1 + η > 1, or the points up to ``limit``
        would number more than 10⁶ (use :class:`RefreshPoints` to walk them lazily).
    """
    points = RefreshPoints(eta)
    if math.log(max(int(limit), 2)) / points._log_base > 1e6 and limit > 1e6:
        raise ValueError(f"eta={eta!r} gives more than 10^6 refresh points up to limit={limit}; "
                         "use RefreshPoints(eta).after(point) to walk them lazily")
    return points.upto(limit)


def _array(name: str, value: object, kinds: str) -> np.ndarray:
    """``value`` as an array of a dtype kind in ``kinds`` (``"iu"``: integers), else a TypeError naming it."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):  # ragged nested sequences
        raise TypeError(f"{name} must be a rectangular array, got a ragged {type(value).__name__}") from None
    if array.dtype.kind not in kinds:
        wanted = "integers" if kinds == "iu" else "real numbers"
        raise TypeError(f"{name} must be an array of {wanted}, got dtype {array.dtype}")
    return array


class GeometricBatchMean(Mechanism):
    """Per-arm running Laplace sums refreshed at geometric counts, for one or many runs.

    Parameters
    ----------
    account : accounting.Account or sequence of Account
        A pure-ε account per run (one account: a single run). Each batch is
        charged ``PureDP(epsilon)`` on its run's account with partition key
        ``"arm=a,batch=k"`` *before* its noise is drawn.
    n_arms : int
        Number of arms K ≥ 1.
    epsilon : float
        Privacy budget ε > 0 of the whole stream (each batch gets Lap(1/ε)).
    rng : numpy.random.Generator
        Source of the Laplace noise; untouched by a refused charge.
    eta : float, default 1.0
        Geometric growth: refresh points ⌈(1+η)^k⌉ (η = 1: 1, 2, 4, 8, …).
    forget : bool, default False
        Keep only the last batch (AdaP-TT) instead of the cumulative sum (DP-TT).

    Notes
    -----
    Neighbouring relation ``"replace_one"``; sensitivity of every batch sum 1.
    Runs are independent (their own accounts, disjoint data); arrays are
    indexed ``[run, arm]``.
    """

    relation = "replace_one"
    sensitivity = 1.0
    #: Public run state advanced by ``observe`` (the counts are public: actions); the rest is read-only.
    _MUTABLE = ("counts", "batches", "phase_counts", "next_refresh")

    def __init__(
        self,
        account: Account | Sequence[Account],
        n_arms: int,
        epsilon: float,
        rng: np.random.Generator,
        *,
        eta: float = 1.0,
        forget: bool = False,
    ) -> None:
        accounts = [account] if isinstance(account, Account) else list(account)
        if not accounts or not all(isinstance(a, Account) for a in accounts):
            raise TypeError("account must be an accounting.Account or a non-empty sequence of them")
        for a in accounts:
            if a.currency != "pure":
                raise ValueError(f"account must charge pure ε (currency 'pure'), got {a.currency!r}")
        n_arms = check_size("n_arms", n_arms)
        check_memory("n_arms", n_arms, 8 * 8 * n_arms, "eight arrays of one entry per arm")
        self.epsilon = check_positive("epsilon", epsilon)
        if not math.isfinite(1.0 / self.epsilon):  # a subnormal ε: no float Laplace scale 1/ε exists
            raise ValueError(f"epsilon={self.epsilon!r} is too small: its Laplace scale 1/epsilon overflows a float")
        # The charge PureDP(ε) is ε read as the decimal it prints as (a numpy scalar in its own
        # precision, accounting.validation.check_exact); the noise scale is the smallest float b
        # with 1/b ≤ that ε exactly, so the real loss never exceeds it.
        self._cost = PureDP(check_exact("epsilon", epsilon, 0, low_open=True))
        self.scale = laplace_scale_for(self._cost.eps, 1.0)
        # Float-safe noise: the batch sum rounded to a power-of-two grid plus discrete Laplace
        # noise there, ε-DP exactly for the sum's sensitivity 1 plus one grid step (mechanisms.lattice).
        self._lattice = LaplaceLattice(self._cost.eps, self.scale, self.sensitivity, 1)
        self.refresh = RefreshPoints(eta)
        self.eta = self.refresh.eta
        self.rng = check_generator(rng)
        self.forget = bool(forget)
        self.accounts = tuple(accounts)
        self.n_runs, self.n_arms = len(accounts), int(n_arms)
        shape = (self.n_runs, self.n_arms)
        self.counts = np.zeros(shape, dtype=np.int64)  # rewards observed (public: actions)
        self.batches = np.zeros(shape, dtype=np.int64)  # batches released so far = phase k
        self.phase_counts = np.zeros(shape, dtype=np.int64)  # Ñ: samples behind the estimate
        self.next_refresh = np.ones(shape, dtype=np.int64)  # the first refresh point is 1
        self._batch_begin = np.zeros(shape, dtype=np.int64)  # count at the start of the current batch
        self._pending = np.zeros(shape)  # raw sum of the batch in progress (never released)
        self._noisy = np.zeros(shape)  # released noisy sums

    def observe(self, counts: np.ndarray, reward_sums: np.ndarray) -> list[tuple[int, int, Release]]:
        """Add ``counts[r, a]`` rewards summing to ``reward_sums[r, a]`` to each (run, arm).

        An entry may complete its current batch (count reaches the next refresh
        point exactly) but not run past it. Every completed batch is charged,
        then noised once with Lap(1/ε) (paper §4, docs/references.md). Returns, for each
        completed batch, ``(run, arm, Release)`` whose value is the arm's new
        noisy sum S̃ (cumulative, or the last batch's if ``forget``); the
        matching sample count Ñ is :attr:`phase_counts` (public).

        Raises
        ------
        TypeError, ValueError
            Shapes differ from (n_runs, n_arms) (or (n_arms,) for one run); counts not
            non-negative integers; a batch boundary would be skipped (all public). A sum
            outside [0, counts] (a reward outside [0, 1]) is private: it is saturated into
            [0, counts] (NaN as 0), not refused.
        accounting.BudgetExceeded
            A charge is refused: no noise is drawn and the estimator is unchanged
            (charges granted earlier in the same call stay spent: conservative).
        """
        shape = (self.n_runs, self.n_arms)
        c, s = _array("counts", counts, "iu"), _array("reward_sums", reward_sums, "iuf").astype(float)
        if self.n_runs == 1 and c.shape == (self.n_arms,):
            c = c[None, :]
        if self.n_runs == 1 and s.shape == (self.n_arms,):
            s = s[None, :]
        for name, array in (("counts", c), ("reward_sums", s)):
            if array.shape != shape:
                raise ValueError(f"{name} must have shape {shape} (runs, arms), or ({self.n_arms},) for one run, "
                                 f"got {array.shape}")
        if np.any(c < 0):
            raise ValueError("counts must be non-negative integers")
        # The sums are private: saturated into their domain [0, counts] (NaN read as 0), never refused
        # for free (docs/mechanisms.md, "Refusals that depend on the data"); the counts are public.
        s = np.clip(np.nan_to_num(s, nan=0.0), 0.0, c)
        new = self.counts + c
        if np.any(new > self.next_refresh):
            raise ValueError("counts would run past a batch boundary; observe up to the next refresh point")
        done = np.argwhere(new == self.next_refresh)  # row-major: deterministic order
        receipts = []
        for r, a in done:  # charge every completed batch before any noise is drawn
            receipts.append(
                self._charge(
                    self._cost,
                    account=self.accounts[r],
                    mechanism="GeometricBatchMean",
                    relation=self.relation,
                    partition=f"arm={a},batch={self.batches[r, a]}",
                    note=f"Laplace(1/eps) on a batch sum of sensitivity 1, counts ({self.counts[r, a]}, {new[r, a]}]",
                )
            )
        self.counts = new
        self._pending += s
        out: list[tuple[int, int, Release]] = []
        if len(done):
            r, a = done[:, 0], done[:, 1]
            batch = self._lattice.add(self.rng, self._pending[r, a])
            self._noisy[r, a] = batch if self.forget else self._noisy[r, a] + batch
            self.phase_counts[r, a] = new[r, a] - (self._batch_begin[r, a] if self.forget else 0)
            self._pending[r, a] = 0.0
            self.batches[r, a] += 1
            self._batch_begin[r, a] = new[r, a]
            reached = self.next_refresh[r, a]
            unique, inverse = np.unique(reached, return_inverse=True)
            following = np.array([self.refresh.after(p) for p in unique.tolist()], dtype=np.int64)
            self.next_refresh[r, a] = np.minimum(following[inverse.reshape(-1)], _MAX_COUNT)
            noisy = zip(r, a, self._noisy[r, a], receipts, strict=True)
            out = [(int(ri), int(ai), self._release(float(v), rc)) for ri, ai, v, rc in noisy]
        return out
