"""Audit of the shuffled bit sum (``mechanisms/shuffle.py``).

Worst-case pair (REFERENCES.md, privacy auditing): every user holds 0 except
user 0, whose bit is 0 on ``D0`` and 1 on ``D1`` (replace-one). The
shuffle-model adversary sees the shuffler's output, the message list; the
audit observes exactly that.

Two candidate statistics, chosen between on held-out runs:

* ``count``: the number of ones — the likelihood ratio is increasing in it
  (one Ber(1 − γ/2) versus Ber(γ/2) message among Bin(n − 1, γ/2) others), and
  it is all a correct shuffler leaves;
* ``message at position 0``: where user 0's message lands when the shuffler
  does not shuffle (position-aware; uninformative under a uniform permutation).

Runs replay the mechanism's message path: the calibrated γ of a real
``ShuffleBitSum`` (whose receipt is the claim), its local randomizer
``bitsum_randomize`` applied to R·n users at once (i.i.d. per user, so R
independent runs), and the shuffler — ``shuffle_messages`` by default, or a
planted one — applied to each run's n messages. The charged ``release`` stops
at the analyzer's debiased sum, which hides the message list; the audit
therefore composes the same module functions and stops before the analyzer.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from audits.base import CLOPPER_PEARSON, Audit, Claim, huge_budget_account
from audits.noise import _check_delta, _check_positive

__all__ = ["ShuffleBitSumAudit"]


class ShuffleBitSumAudit(Audit):
    """Flip user 0's bit with all others at 0; observe the shuffled message list.

    Parameters
    ----------
    epsilon, delta : float
        The (ε, δ) the bit sum is calibrated to by the exact shuffle accountant.
    n_users : int
        Users per release, ≥ 2.
    shuffler : callable, optional
        ``(messages, rng) -> messages``; default ``mechanisms.shuffle.shuffle_messages``.
    """

    mechanism = "ShuffleBitSum"
    method = CLOPPER_PEARSON
    statistics = ("count", "message at position 0")

    def __init__(self, epsilon: float, delta: float = 1e-5, *, n_users: int = 1000,
                 shuffler: Callable[[np.ndarray, np.random.Generator], np.ndarray] | None = None,
                 name: str = "shuffle") -> None:
        from mechanisms.shuffle import ShuffleBitSum, bitsum_randomize, shuffle_messages

        self.epsilon = _check_positive("epsilon", epsilon)
        self.delta = _check_delta(delta)
        if isinstance(n_users, bool) or not isinstance(n_users, int) or n_users < 2:
            raise ValueError(f"n_users must be an int ≥ 2, got {n_users!r}")
        self.n_users = n_users
        self.shuffler = shuffle_messages if shuffler is None else shuffler
        self.name = name
        self._randomize = bitsum_randomize
        self._single = ShuffleBitSum(huge_budget_account("approx"), n_users, np.random.default_rng(0),
                                     epsilon=self.epsilon, delta=self.delta)
        self.gamma = self._single.gamma
        self.chunk = max(100, 10_000_000 // n_users)

    def parameters(self) -> dict:
        return {"epsilon": self.epsilon, "delta": self.delta, "n_users": self.n_users, "gamma": self.gamma,
                "shuffler": getattr(self.shuffler, "__name__", type(self.shuffler).__name__)}

    def claim(self) -> Claim:
        receipt = self._single.release(np.zeros(self.n_users, dtype=np.int64)).receipt
        return Claim(epsilon=float(receipt.cost.eps), delta=float(receipt.cost.delta), cost=str(receipt.cost),
                     ledger_epsilon=float(receipt.cost.eps))

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        bits = np.zeros((runs, self.n_users), dtype=np.int64)
        bits[:, 0] = neighbour
        messages = self._randomize(bits.ravel(), self.gamma, rng).reshape(runs, self.n_users)
        shuffled = np.stack([self.shuffler(row, rng) for row in messages])
        return np.column_stack([shuffled.sum(axis=1), shuffled[:, 0]])
