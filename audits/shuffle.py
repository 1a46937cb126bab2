"""Audits of the shuffled bit sum (``mechanisms/shuffle.py``), at message level and through its release.

Worst-case pair (docs/audits.md): every user holds 0 except user 0, whose bit
is 0 on ``D0`` and 1 on ``D1`` (replace-one). With a = γ/2 the number of ones
among the messages is ``Bin(n, a)`` on ``D0`` and ``Ber(1 − a) + Bin(n − 1, a)``
on ``D1``; the likelihood ratio of the two laws is increasing in the count
(the ratio ``P[Bin(n−1, a) = c−1]/P[Bin(n−1, a) = c]`` increases in c), so the
tests "count ≥ c" are exactly the likelihood-ratio tests on the count
(Neyman–Pearson), and the count is all a uniform shuffler leaves.

Two audits:

* :class:`ShuffleBitSumReleaseAudit` drives ``ShuffleBitSum.release`` by its
  default method (``"counts"``), one charged release per run, and inverts the
  released debiased sum to the count (an affine bijection for the public γ).
* :class:`ShuffleBitSumAudit` observes the shuffled message list itself: the
  local randomizer ``bitsum_randomize`` of a real ``ShuffleBitSum`` (its γ, its
  receipt) applied to R·n users at once, then the shuffler —
  ``shuffle_messages`` or a planted one. Two statistics: the count, and the
  message at position 0 (what a shuffler that does not shuffle leaks).

Both plan one test from public information before any run: the threshold c
that maximises the bound certified at the expected counts under the
mechanism's own γ (:func:`bitsum_ceiling`). At message level the held-out
runs add a second candidate (which may be the position-0 statistic), and
the two are certified together (Bonferroni); the release audit has one
statistic and certifies its planned test alone. The ceiling —
the best that test can certify at the run count — is printed beside the result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

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
    from mechanisms.shuffle import ShuffleBitSum

__all__ = ["ShuffleBitSumAudit", "ShuffleBitSumReleaseAudit", "bitsum_ceiling"]


def bitsum_ceiling(n_users: int, gamma: float, runs: int, delta: float,
                   confidence: float = 0.95) -> tuple[float, float]:
    """(bound, threshold): the most a test "count ≥ c" certifies at the expected counts of ``runs`` per side.

    The exact count laws of the module docstring, through
    :func:`audits.bounds.ceiling_from_tails`.
    """
    a = gamma / 2.0
    c = np.arange(0, n_users + 2)
    rest = stats.binom(n_users - 1, a)
    null_tail = stats.binom.sf(c - 1, n_users, a)  # P₀[C ≥ c]
    alternative_tail = (1 - a) * rest.sf(c - 2) + a * rest.sf(c - 1)  # P₁[C ≥ c]
    bound, index = ceiling_from_tails(null_tail, alternative_tail, runs, delta=delta, confidence=confidence)
    return bound, float(c[index])


class _BitSumPair(Audit):
    """What both bit-sum audits share: the real mechanism, its claim, the planned test and the ceiling."""

    mechanism = "ShuffleBitSum"
    method = CLOPPER_PEARSON

    def _open(self, epsilon: float, delta: float, n_users: int, mechanism_class: type | None, name: str) -> None:
        from mechanisms.shuffle import ShuffleBitSum

        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = check_probability("delta", delta)
        if isinstance(n_users, bool) or not isinstance(n_users, int) or n_users < 2:
            raise ValueError(f"n_users must be an int ≥ 2, got {n_users!r}")
        self.n_users, self.name = n_users, name
        self.mechanism_class: type[ShuffleBitSum] = ShuffleBitSum if mechanism_class is None else mechanism_class
        self._single = self._build(huge_budget_account("approx"), np.random.default_rng(0))
        self.gamma = self._single.gamma

    def _build(self, account: object, rng: np.random.Generator) -> ShuffleBitSum:
        return self.mechanism_class(account, self.n_users, rng, epsilon=self.epsilon, delta=self.delta)

    def claim(self) -> Claim:
        cost = self._single.release(np.zeros(self.n_users, dtype=np.int64)).receipt.cost
        if not isinstance(cost, ApproxDP):
            raise TypeError(f"the shuffle audits expect an ApproxDP charge, got {type(cost).__name__}")
        return Claim(epsilon=float(cost.eps), delta=float(cost.delta), cost=str(cost), ledger_epsilon=float(cost.eps))

    def planned_thresholds(self, claim: Claim, runs: int) -> list[tuple[int, float]]:
        """The count threshold optimal at the expected counts of ``runs`` under the mechanism's public γ."""
        return [(0, bitsum_ceiling(self.n_users, self.gamma, runs, claim.delta)[1])]

    def ceiling(self, claim: Claim, runs: int, confidence: float) -> float:
        return bitsum_ceiling(self.n_users, self.gamma, runs, claim.delta, confidence)[0]

    def parameters(self) -> dict:
        return {"epsilon": self.epsilon, "delta": self.delta, "n_users": self.n_users, "gamma": self.gamma,
                "mechanism_class": self.mechanism_class.__name__}


class ShuffleBitSumReleaseAudit(_BitSumPair):
    """Flip user 0's bit with all others at 0; one charged ``release`` (default method) per run.

    Parameters
    ----------
    epsilon, delta : float
        The (ε, δ) the bit sum is calibrated to by the exact shuffle accountant.
    n_users : int
        Users per release, ≥ 2.
    mechanism_class : type
        ``mechanisms.shuffle.ShuffleBitSum`` or a subclass (planted bugs).
    """

    statistics = ("count (likelihood ratio increasing in it)",)
    chunk = 20_000

    def __init__(self, epsilon: float, delta: float = 1e-5, *, n_users: int = 1000,
                 mechanism_class: type | None = None, name: str = "shuffle-release") -> None:
        self._open(epsilon, delta, n_users, mechanism_class, name)

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        bits = np.zeros(self.n_users, dtype=np.int64)
        bits[0] = neighbour
        accounts = approx_accounts(self.delta)
        current = next(accounts)
        mechanism = self._build(current, rng)
        released = np.empty(runs)
        for run in range(runs):
            account = current if run == 0 else next(accounts)
            if account is not current:  # a fresh account (δ composes): a fresh mechanism on it
                current, mechanism = account, self._build(account, rng)
            released[run] = mechanism.release(bits).value
        # release = (count − γn/2)/(1 − γ): invert with the mechanism's public γ.
        return np.rint(released * (1.0 - mechanism.gamma) + mechanism.gamma * self.n_users / 2.0)


class ShuffleBitSumAudit(_BitSumPair):
    """Flip user 0's bit with all others at 0; observe the shuffled message list.

    Parameters
    ----------
    epsilon, delta : float
        The (ε, δ) the bit sum is calibrated to by the exact shuffle accountant.
    n_users : int
        Users per release, ≥ 2.
    shuffler : callable, optional
        ``(messages, rng) -> messages``; default ``mechanisms.shuffle.shuffle_messages``.
    mechanism_class : type
        ``mechanisms.shuffle.ShuffleBitSum`` or a subclass (planted bugs): its γ is randomized with.
    """

    statistics = ("count", "message at position 0")

    def __init__(self, epsilon: float, delta: float = 1e-5, *, n_users: int = 1000,
                 shuffler: Callable[[np.ndarray, np.random.Generator], np.ndarray] | None = None,
                 mechanism_class: type | None = None, name: str = "shuffle") -> None:
        from mechanisms.shuffle import bitsum_randomize, shuffle_messages

        self._open(epsilon, delta, n_users, mechanism_class, name)
        self.shuffler = shuffle_messages if shuffler is None else shuffler
        self._randomize = bitsum_randomize
        self.chunk = max(100, 10_000_000 // n_users)

    def parameters(self) -> dict:
        return {**super().parameters(),
                "shuffler": getattr(self.shuffler, "__name__", type(self.shuffler).__name__)}

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        bits = np.zeros((runs, self.n_users), dtype=np.int64)
        bits[:, 0] = neighbour
        messages = self._randomize(bits.ravel(), self.gamma, rng).reshape(runs, self.n_users)
        shuffled = np.stack([self.shuffler(row, rng) for row in messages])
        return np.column_stack([shuffled.sum(axis=1), shuffled[:, 0]])
