"""Audits of shuffled vector summation and of the shuffle-private P_GD built on it.

Vector summation (``mechanisms.shuffle.ShuffleVectorSum``), as the shuffle-DP
bandit calls it for its design matrices: symmetric d×d leaves sent as their
c = d(d+1)/2 upper-triangle coordinates. Every user holds 0 except user 0
(replace-one), whose matrix is, by the mechanism's input set:

* ``inputs="l2"`` (positive semidefinite, trace ≤ L; the default): ``L e₁e₁ᵀ`` on ``D0``
  and ``L e₂e₂ᵀ`` on ``D1`` (for d = 1: 0 against L). Two diagonal coordinates move by
  g levels in opposite directions, the largest change the set allows in l2
  (‖Δ‖² = 2L² over the sent entries). The accountant's dominating pair is the per-rank
  shift bound, which no single pair attains, so the ceiling sits below the claim.
* ``inputs="box"`` (every entry in [−L, L]): all −L on ``D0``, all +L on ``D1``: every
  coordinate moves by 2g, the accountant's dominating pair itself (docs/audits.md).

Those values are levels 0, g and 2g exactly (no rounding randomness), so each
moving coordinate's ones-count is ``g(n − 1) + level + Bin(n·b, ½)`` with b the
noise bits: the released sums are inverted to the counts, each moving
coordinate's count is centred (and reflected, ``N − count``, where it falls on
``D1``), and the score is their sum, ``Bin(J·n·b, ½)`` shifted by 0 or s·J (J moving
coordinates, s levels each) — the likelihood-ratio statistic up to the
(vanishing) curvature of the binomial's log-ratio. The threshold is planned
from that exact law with the mechanism's public noise bits, and the ceiling
printed beside the result.

P_GD (``mechanisms.optim.shuffle_pgd.ShufflePGD``), with a Dirac gradient
canary: d = 1, user 0's per-sample gradient is −L (``D0``) or +L (``D1``)
whatever θ, the others' 0, the ball never binds. The released average iterate
of T = 2 iterations is ``θ₀ − η ĝ₀/2``: it reveals round 0's noisy gradient
(and nothing of round 1's, which is taken but never used in the output),
while the charge composes both rounds — so the certified bound of the
correct mechanism sits well below the claim, and a bug that only halves the
noise is not refutable (its round 0 is about as private as the two-round
charge says); the catalogue's planted P_GD bug sends one noise bit per user. Score: −(average
iterate), increasing in round 0's ones-count; the threshold is planned from
the correct round's exact law.

Both drive the real ``release``/``fit`` — one charged call per run, on a
huge-budget ledger — by the default method (``"counts"``) or ``"messages"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from accounting import ApproxDP
from accounting.validation import check_positive, check_probability
from audits.base import (
    CLOPPER_PEARSON,
    Audit,
    Claim,
    approx_accounts,
    huge_budget_account,
)
from audits.bounds import ceiling_from_tails

if TYPE_CHECKING:
    from accounting import Receipt
    from mechanisms.optim.shuffle_pgd import ShufflePGD
    from mechanisms.release import Release
    from mechanisms.shuffle import ShuffleVectorSum

__all__ = ["ShufflePGDAudit", "ShuffleVectorSumAudit"]


def _check_users(n_users: object) -> int:
    if isinstance(n_users, bool) or not isinstance(n_users, int) or n_users < 2:
        raise ValueError(f"n_users must be an int ≥ 2, got {n_users!r}")
    return n_users


def _approx_claim(receipt: Receipt) -> Claim:
    if not isinstance(receipt.cost, ApproxDP):
        raise TypeError(f"the shuffle audits expect an ApproxDP charge, got {type(receipt.cost).__name__}")
    return Claim(epsilon=float(receipt.cost.eps), delta=float(receipt.cost.delta), cost=str(receipt.cost),
                 ledger_epsilon=float(receipt.cost.eps))


class ShuffleVectorSumAudit(Audit):
    """User 0's symmetric matrix, others 0 (module docstring: the pair per input set); one ``release`` per run.

    Parameters
    ----------
    epsilon, delta : float
        The (ε, δ) of one release (noise bits calibrated by the exact accountant).
    n_users : int
        Users per release, ≥ 2.
    d : int
        Leaves are d×d symmetric matrices (the bandit's design sums).
    bound : float
        L, the bound on every entry.
    method : {"counts", "messages"}
        The protocol path (``"counts"`` is the default the bandit uses).
    inputs : {"l2", "box"}
        The mechanism's input set (``ShuffleVectorSum(inputs=...)``), which picks the pair.
    mechanism_class : type
        ``mechanisms.shuffle.ShuffleVectorSum`` or a subclass (planted bugs).
    """

    mechanism = "ShuffleVectorSum"
    method = CLOPPER_PEARSON
    statistics = ("ones summed over the coordinates",)
    chunk = 10_000

    def __init__(self, epsilon: float, delta: float = 1e-5, *, n_users: int = 50, d: int = 2, bound: float = 1.0,
                 method: str = "counts", inputs: str = "l2", mechanism_class: type | None = None,
                 name: str = "shuffle-vector") -> None:
        from mechanisms.shuffle import ShuffleVectorSum

        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = check_probability("delta", delta)
        self.n_users = _check_users(n_users)
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"d must be an int ≥ 1, got {d!r}")
        if method not in ("counts", "messages"):
            raise ValueError(f"method must be 'counts' or 'messages', got {method!r}")
        if inputs not in ("l2", "box"):
            raise ValueError(f"inputs must be 'l2' or 'box', got {inputs!r}")
        self.d, self.bound, self.protocol, self.inputs = d, check_positive("bound", bound), method, inputs
        self.mechanism_class: type[ShuffleVectorSum] = ShuffleVectorSum if mechanism_class is None else mechanism_class
        self.name = name
        self._single = self._build(huge_budget_account("approx"), np.random.default_rng(0))
        self.levels, self.noise_bits = self._single.levels, self._single.noise_bits
        self.coordinates = self._single.coordinates
        self._pair = self._neighbours()

    def _build(self, account: object, rng: np.random.Generator) -> ShuffleVectorSum:
        return self.mechanism_class(account, self.n_users, (self.d, self.d), self.bound, rng,
                                    epsilon=self.epsilon, delta=self.delta, inputs=self.inputs)

    def _neighbours(self) -> tuple[np.ndarray, np.ndarray]:
        """User 0's matrix on ``D0`` and on ``D1`` (module docstring)."""
        if self.inputs == "box":
            return np.full((self.d, self.d), -self.bound), np.full((self.d, self.d), self.bound)
        first, second = np.zeros((self.d, self.d)), np.zeros((self.d, self.d))
        first[0, 0] = self.bound
        if self.d > 1:
            second[1, 1] = self.bound
        return (first, second) if self.d > 1 else (second, first)

    def _levels(self, matrix: np.ndarray) -> np.ndarray:
        """The exact levels of a matrix of entries in {−L, 0, L} (no rounding randomness), upper triangle."""
        rows, cols = np.triu_indices(self.d)
        return np.rint((matrix[rows, cols] + self.bound) * (self.levels / self.bound)).astype(np.int64)

    def _moving(self) -> tuple[np.ndarray, np.ndarray, int]:
        """Sign of each coordinate's level change from ``D0`` to ``D1`` (0: unmoved), ``D0``'s levels, the shift s."""
        low, high = (self._levels(m) for m in self._pair)
        sign = np.sign(high - low)
        shifts = np.abs(high - low)[sign != 0]
        if shifts.size == 0 or np.any(shifts != shifts[0]):
            raise AssertionError("the audit's pair must move its coordinates by one common shift")
        return sign, low, int(shifts[0])

    def parameters(self) -> dict:
        return {"epsilon": self.epsilon, "delta": self.delta, "n_users": self.n_users, "d": self.d,
                "bound": self.bound, "method": self.protocol, "inputs": self.inputs, "levels": self.levels,
                "noise_bits": self.noise_bits, "coordinates": self.coordinates,
                "mechanism_class": self.mechanism_class.__name__}

    def claim(self) -> Claim:
        return _approx_claim(self._single.release(np.zeros((self.n_users, self.d, self.d))).receipt)

    def _tails(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Thresholds on the centred score and P₀, P₁ of "score ≥ threshold" (exact binomial law)."""
        sign, _, step = self._moving()
        moving = int(np.count_nonzero(sign))
        trials = moving * self.n_users * self.noise_bits
        shift = step * moving
        spread = int(np.ceil(8 * np.sqrt(trials) / 2)) + shift
        c = np.arange(trials // 2 - spread, trials // 2 + shift + spread + 1)
        return c.astype(float), stats.binom.sf(c - 1, trials, 0.5), stats.binom.sf(c - 1 - shift, trials, 0.5)

    def planned_thresholds(self, claim: Claim, runs: int) -> list[tuple[int, float]]:
        c, null_tail, alternative_tail = self._tails()
        return [(0, float(c[ceiling_from_tails(null_tail, alternative_tail, runs, delta=claim.delta)[1]]))]

    def ceiling(self, claim: Claim, runs: int, confidence: float) -> float:
        _, null_tail, alternative_tail = self._tails()
        return ceiling_from_tails(null_tail, alternative_tail, runs, delta=claim.delta, confidence=confidence)[0]

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        values = np.zeros((self.n_users, self.d, self.d))
        values[0] = self._pair[1 if neighbour else 0]
        rows, cols = np.triu_indices(self.d)
        accounts = approx_accounts(self.delta)
        current = next(accounts)
        mechanism = self._build(current, rng)
        sums = np.empty((runs, rows.size))
        for run in range(runs):
            account = current if run == 0 else next(accounts)
            if account is not current:  # a fresh account (δ composes): a fresh mechanism on it
                current, mechanism = account, self._build(account, rng)
            sums[run] = np.asarray(mechanism.release(values, method=self.protocol).value)[rows, cols]
        # sum = (L/g)(ones − b n/2) − n L, inverted with the public L, g, b; minus the others' levels g(n − 1)
        # and user 0's level on D0: Bin(n b, ½) (+ s on D1) where the level rises, reflected where it falls.
        ones = np.rint((sums + self.n_users * self.bound) * (self.levels / self.bound)
                       + self.noise_bits * self.n_users / 2.0)
        sign, low, _ = self._moving()
        centred = ones - self.levels * (self.n_users - 1) - low
        trials = self.n_users * self.noise_bits
        moved = sign != 0
        return (sign[moved] * centred[:, moved] + np.where(sign[moved] < 0, trials, 0)).sum(axis=1)


def _canary_gradient(theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-sample gradient y·x, independent of θ: the Dirac canary (x₀ = L, y₀ = ±1; other rows 0)."""
    return y[:, None] * X


class ShufflePGDAudit(Audit):
    """Dirac gradient canary in P_GD (module docstring); one charged ``fit`` per run, score −θ̄.

    Parameters
    ----------
    epsilon, delta : float
        Target (ε, δ) of one fit. ``composition="exact"`` (the bandit's estimator): the fewest
        noise bits whose rounds' dominating PLD, composed exactly, meets it
        (``calibrate_run_noise_bits``); ``"rounds"``: the rounds get (ε₀, δ₀ = δ/(2T)) with ε₀
        the largest whose generic PLD composition meets it (``calibrate_round_epsilon``).
    n_users : int
        Rows (users) per fit, ≥ 2.
    iterations : int
        T ≥ 2 (with T = 1 the average iterate is θ₀ and reveals nothing).
    clip : float
        L, the clipping norm (and the summation's bound).
    round_epsilon, round_delta : float, optional
        The rounds' (ε₀, δ₀) as a caller chose them (in-situ audits, ``"rounds"``); ``epsilon`` is then unused.
    noise_bits : int, optional
        The rounds' noise bits as a caller chose them (in-situ audits, ``"exact"``); ``epsilon`` is then unused.
    composition : {"exact", "rounds"}
        How the fit is charged (above); planted noise-bit bugs act on ``"rounds"``.
    mechanism_class : type
        ``mechanisms.optim.shuffle_pgd.ShufflePGD`` or a subclass (planted bugs).
    """

    mechanism = "ShufflePGD"
    method = CLOPPER_PEARSON
    statistics = ("-average iterate",)
    chunk = 5_000

    def __init__(self, epsilon: float, delta: float = 1e-5, *, n_users: int = 20, iterations: int = 2,
                 clip: float = 1.0, method: str = "counts", round_epsilon: float | None = None,
                 round_delta: float | None = None, noise_bits: int | None = None, composition: str = "exact",
                 mechanism_class: type | None = None, name: str = "shuffle-pgd") -> None:
        from mechanisms.optim.shuffle_pgd import ShufflePGD, calibrate_round_epsilon, calibrate_run_noise_bits

        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = check_probability("delta", delta)
        self.n_users = _check_users(n_users)
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 2:
            raise ValueError(f"iterations must be an int ≥ 2, got {iterations!r}")
        if method not in ("counts", "messages"):
            raise ValueError(f"method must be 'counts' or 'messages', got {method!r}")
        self.iterations, self.clip, self.protocol = iterations, check_positive("clip", clip), method
        if composition not in ("exact", "rounds"):
            raise ValueError(f"composition must be 'exact' or 'rounds', got {composition!r}")
        self.composition = composition
        self.mechanism_class: type[ShufflePGD] = ShufflePGD if mechanism_class is None else mechanism_class
        self.name = name
        from mechanisms.shuffle_vector_accountant import INPUT_SHIFTS, calibrate_noise_bits, default_levels

        # The correct round's public protocol parameters (what the planned test assumes): the clipped
        # gradients' l2 ball, which for d = 1 is the box (one coordinate moving by 2g).
        self.levels = default_levels(self.n_users, 1)
        self.round_epsilon = self.round_delta = None
        if composition == "exact":
            self.noise_bits = calibrate_run_noise_bits(self.n_users, 1, iterations, self.epsilon, self.delta) \
                if noise_bits is None else int(noise_bits)
            return
        self.round_delta = self.delta / (2.0 * iterations) if round_delta is None else check_positive(
            "round_delta", round_delta)
        if round_epsilon is None:
            self.round_epsilon = calibrate_round_epsilon(self.epsilon, self.delta, iterations,
                                                         round_delta=self.round_delta)
        else:
            self.round_epsilon = check_positive("round_epsilon", round_epsilon)
        max_shift, l2_shift = INPUT_SHIFTS["l2_ball"]
        self.noise_bits = calibrate_noise_bits(self.n_users, float(self.round_epsilon), float(self.round_delta),
                                               self.levels, 1, max_shift=max_shift, l2_shift=l2_shift)

    def _tails(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Score thresholds half-way below each lattice point, and P₀, P₁ of "score ≥ threshold" (correct law).

        Round 0's ones-count is ``g(n − 1) + 2g·[D1] + Bin(n b, ½)``; the score −θ̄ = ĝ₀/2 is
        ``((L/g)(ones − b n/2) − n L)/(2n)``, increasing in the count.
        """
        trials, shift = self.n_users * self.noise_bits, 2 * self.levels
        spread = int(np.ceil(8 * np.sqrt(trials) / 2)) + shift
        k = np.arange(max(0, trials // 2 - spread), trials // 2 + shift + spread + 1)
        ones = k + self.levels * (self.n_users - 1) - 0.5
        score = ((self.clip / self.levels) * (ones - trials / 2.0) - self.n_users * self.clip) / (2 * self.n_users)
        return score, stats.binom.sf(k - 1, trials, 0.5), stats.binom.sf(k - 1 - shift, trials, 0.5)

    def planned_thresholds(self, claim: Claim, runs: int) -> list[tuple[int, float]]:
        score, null_tail, alternative_tail = self._tails()
        return [(0, float(score[ceiling_from_tails(null_tail, alternative_tail, runs, delta=claim.delta)[1]]))]

    def ceiling(self, claim: Claim, runs: int, confidence: float) -> float:
        _, null_tail, alternative_tail = self._tails()
        return ceiling_from_tails(null_tail, alternative_tail, runs, delta=claim.delta, confidence=confidence)[0]

    def parameters(self) -> dict:
        return {"epsilon": self.epsilon, "delta": self.delta, "n_users": self.n_users,
                "iterations": self.iterations, "round_epsilon": self.round_epsilon,
                "round_delta": self.round_delta, "composition": self.composition, "clip": self.clip,
                "method": self.protocol,
                "levels": self.levels, "noise_bits": self.noise_bits,
                "mechanism_class": self.mechanism_class.__name__}

    def _fit(self, account: object, rng: np.random.Generator, label: float) -> Release:
        pgd = self.mechanism_class(account, _canary_gradient, rng, clip=self.clip, radius=1e9)
        X = np.zeros((self.n_users, 1))
        X[0, 0] = self.clip
        y = np.zeros(self.n_users)
        y[0] = label
        privacy: dict[str, Any] = ({"noise_bits": self.noise_bits} if self.composition == "exact" else
                                   {"round_epsilon": self.round_epsilon, "round_delta": self.round_delta})
        return pgd.fit(X, y, iterations=self.iterations, delta=self.delta, lr=1.0, method=self.protocol, **privacy)

    def claim(self) -> Claim:
        return _approx_claim(self._fit(huge_budget_account("approx"), np.random.default_rng(0), 1.0).receipt)

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        accounts = approx_accounts(self.delta)
        label = 1.0 if neighbour else -1.0
        return np.array([-float(np.asarray(self._fit(next(accounts), rng, label).value)[0]) for _ in range(runs)])
