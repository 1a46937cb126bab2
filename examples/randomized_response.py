"""A mechanism of your own in a few lines: a randomized-response count on the ``mechanisms.Mechanism`` base class.

Randomized response (Warner 1965; Dwork & Roth 2014, §3.2): every user reports
its bit flipped with probability p < 1/2. One user's report has
P(report = r | bit = b) / P(report = r | bit = b') ≤ (1 − p)/p, so the reports —
and their count, post-processing — are ε = ln((1 − p)/p)-DP when one user's bit
is replaced. The flip is drawn with integers (``rng.integers(0, den) < num`` for
p = num/den), so its probability is p exactly; ε is charged rounded up
(``PureDP``), before anything is drawn. The count is unbiased for
k(1 − p) + (n − k)p with k the number of ones; :meth:`RandomizedResponseCount.estimate`
debiases it. How to write a mechanism: docs/mechanisms.md.

Run ``python examples/randomized_response.py`` for a short demo and the ledger report.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from accounting import Account, BudgetExceeded, Ledger, PureDP
from mechanisms import Mechanism, Release
from mechanisms.noise import round_up
from mechanisms.release import check_account, check_generator


class RandomizedResponseCount(Mechanism):
    """Release the number of users whose randomized-response report is 1; ε = ln((1 − p)/p) per release.

    Parameters
    ----------
    account : accounting.Account
        Charged ``PureDP(ε)`` before every release (any currency: a pure charge converts).
    p : float or fractions.Fraction
        Flip probability in (0, 1/2), read as the decimal it prints as (0.25 is 1/4).
    rng : numpy.random.Generator
        Source of the flips.
    """

    def __init__(self, account: Account, p: float | Fraction, rng: np.random.Generator) -> None:
        self.account = check_account(account, ("pure", "approx", "zcdp"), "randomized response (pure-DP cost)")
        self.p = Fraction(repr(p)) if isinstance(p, float) else Fraction(p)
        if not (0 < self.p < Fraction(1, 2)) or self.p.denominator >= 2**62:
            raise ValueError(f"p must be a flip probability in (0, 1/2) with a denominator below 2**62, got {p!r}")
        self.rng = check_generator(rng)
        # ln is irrational: the float log is within an ulp, so a 1e-12 relative margin, rounded up, is above it.
        self.cost = PureDP(round_up(Fraction(math.log((1 - self.p) / self.p)) * (1 + Fraction(1, 10**12))))

    def release(self, bits: np.ndarray) -> Release:
        """Charge ε, then flip every bit with probability p and release the count of ones."""
        bits = np.asarray(bits)
        if bits.ndim != 1 or not np.isin(bits, (0, 1)).all():
            raise ValueError(f"bits must be a 1-D array of 0/1 values, got shape {bits.shape}")
        receipt = self._charge(self.cost, mechanism="RandomizedResponseCount", relation="replace_one",
                               note=f"p={self.p}, n={bits.size}")  # 1. charge: BudgetExceeded before any draw
        flips = self.rng.integers(0, self.p.denominator, size=bits.size) < self.p.numerator
        reports = np.where(flips, 1 - bits, bits)
        return self._release(float(reports.sum()), receipt)  # 2. the one value the charge covers

    def estimate(self, count: float, n: int) -> float:
        """Unbiased number of ones from a released count of n reports: (count − n·p)/(1 − 2p)."""
        p = float(self.p)
        return (count - n * p) / (1 - 2 * p)


def main(n: int = 1000, ones: int = 300, p: float = 0.25, budget: float = 2.5, seed: int = 0) -> list[float]:
    """Release the count until the budget refuses; print the estimates and the ledger report."""
    ledger = Ledger(PureDP(budget))
    mechanism = RandomizedResponseCount(ledger.root, p, np.random.default_rng(seed))
    bits = np.zeros(n, dtype=int)
    bits[:ones] = 1
    estimates = []
    while True:
        try:
            release = mechanism.release(bits)
        except BudgetExceeded as refused:
            print(f"refused: {refused}")
            break
        estimates.append(mechanism.estimate(release.value, n))
        print(f"release {len(estimates)}: count {release.value:.0f}, estimate {estimates[-1]:.1f} (true {ones})")
    print(ledger.report())
    return estimates


if __name__ == "__main__":
    main()
