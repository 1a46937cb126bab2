"""Audit of the geometric-batch Laplace mean (``mechanisms/geometric.py``).

Worst-case pair (docs/references.md, privacy auditing): one arm's reward stream is
all zeros except its first reward — the smallest batch, of size one — which
is 0 on ``D0`` and 1 on ``D1`` (rewards in [0, 1], replace-one). The auditor
observes every release of the arm (the cumulative noisy sums after batches
1, 2, 4, …) and differences them into the per-batch noisy sums d_k.

Two candidate statistics, chosen between on held-out runs:

* ``first batch``: d₁ — the likelihood ratio of the correct mechanism, where
  only batch 1 holds the changed reward (Laplace location pair, monotone);
* ``all batches``: Σ_k (|d_k| − |d_k − 1|), the Laplace log-likelihood ratio of
  a unit shift in every batch — what a reward that leaks into later batches
  would produce.

Runs are vectorised by the mechanism itself, exactly as DP-TT and AdaP-TT
(``dpglm.bai.top_two``) drive it: one ``Ledger(PureDP(ε))`` per run, one
estimator over ``[run, arm]`` arrays for K arms (the audited arm is arm 0, the
others see the same all-zero rewards), refresh points of growth η, cumulative
sums (DP-TT) or the last batch only (``forget=True``, AdaP-TT). Every batch of
every run is charged to its run's ledger, which would refuse a charge beyond
ε; the claim is what one run's ledger reports spent for the whole stream.
"""

from __future__ import annotations

import numpy as np

from accounting.validation import check_int, check_positive
from audits.base import CLOPPER_PEARSON, Audit, Claim

__all__ = ["GeometricBatchAudit"]


class GeometricBatchAudit(Audit):
    """Change the first reward (batch of size 1), observe all releases of the arm.

    Parameters
    ----------
    epsilon : float
        ε of the estimator (each batch gets Lap(1/ε); the stream claims ε).
    samples : int
        Rewards fed to the arm: a refresh point of the estimator, so that the
        last batch is complete (η = 1: 1, 2, 4, 8, 16, …).
    eta : float
        Geometric growth of the batches.
    mechanism_class : type
        ``mechanisms.geometric.GeometricBatchMean`` or a subclass (planted bugs).
    """

    mechanism = "GeometricBatchMean"
    method = CLOPPER_PEARSON
    statistics = ("first batch", "all batches")
    chunk = 20_000

    def __init__(self, epsilon: float, *, samples: int = 16, eta: float = 1.0, arms: int = 2, forget: bool = False,
                 mechanism_class: type | None = None, name: str = "geometric") -> None:
        from mechanisms.geometric import GeometricBatchMean, refresh_points

        self.epsilon = check_positive("epsilon", epsilon)
        self.eta = check_positive("eta", eta)
        points = refresh_points(self.eta, limit=max(int(samples), 1))
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 2 or points[-1] != samples:
            raise ValueError(f"samples must be a refresh point ≥ 2 of the batches (η={self.eta}), "
                             f"e.g. {refresh_points(self.eta, limit=64)[1:].tolist()}; got {samples!r}")
        check_int("arms", arms)
        self.samples, self.arms, self.forget = samples, arms, bool(forget)
        self.points = points
        self.mechanism_class = GeometricBatchMean if mechanism_class is None else mechanism_class
        self.name = name

    def parameters(self) -> dict:
        return {"epsilon": self.epsilon, "samples": self.samples, "eta": self.eta, "arms": self.arms,
                "forget": self.forget,
                "batches": int(self.points.size), "mechanism_class": self.mechanism_class.__name__}

    def _accounts(self, runs: int) -> list:
        """One fresh ``Ledger(PureDP(ε))`` per run, as ``dpglm.bai.top_two`` builds them."""
        from fractions import Fraction

        from accounting import Ledger, PureDP

        return [Ledger(PureDP(Fraction(repr(self.epsilon)))).root for _ in range(runs)]

    def claim(self) -> Claim:
        account = self._accounts(1)[0]
        self._releases([account], np.zeros(1), np.random.default_rng(0))
        spent = account.spent
        return Claim(epsilon=float(spent.eps), delta=0.0, cost=str(spent), ledger_epsilon=float(spent.eps))

    def _releases(self, accounts: list, first_reward: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Run the estimator over the stream; the released noisy sums, shape (runs, batches)."""
        runs = len(accounts)
        estimator = self.mechanism_class(accounts, self.arms, self.epsilon, rng, eta=self.eta, forget=self.forget)
        released = np.empty((runs, self.points.size))
        previous = 0
        for k, point in enumerate(self.points):
            counts = np.full((runs, self.arms), point - previous, dtype=np.int64)
            sums = np.zeros((runs, self.arms))
            if k == 0:
                sums[:, 0] = first_reward
            out = estimator.observe(counts, sums)
            if len(out) != runs * self.arms:
                raise RuntimeError(f"expected one release per run and arm at count {point}, got {len(out)}")
            arm0 = [(run, release.value) for run, arm, release in out if arm == 0]
            released[[run for run, _ in arm0], k] = [value for _, value in arm0]
            previous = point
        return released

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        released = self._releases(self._accounts(runs), np.full(runs, float(neighbour)), rng)
        batch_sums = released if self.forget else np.diff(released, axis=1, prepend=0.0)
        all_batches = (np.abs(batch_sums) - np.abs(batch_sums - 1.0)).sum(axis=1)
        return np.column_stack([batch_sums[:, 0], all_batches])
