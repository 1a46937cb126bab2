"""The means behind the Top Two sampling and stopping rules: private or exact, one interface.

:class:`PrivateEstimator` wraps :class:`mechanisms.geometric.GeometricBatchMean`
(geometric batches with Laplace noise, Jourdan & Azize 2025, §4; ``forget=True``:
AdaP-TT's last-episode mean, Azize's thesis Alg. 10 lines 5–10), with one pure-ε
ledger per run. :class:`ExactEstimator` is the non-private empirical mean,
refreshed at every pull (EB-TCI). The engine in :mod:`dpglm.bai.top_two` reads
only the attributes of :class:`MeanEstimator` (``docs/bai-threshold.md``, "Setting").
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from accounting import Ledger, PureDP
from accounting.costs import as_fraction
from mechanisms.geometric import GeometricBatchMean

__all__ = ["ExactEstimator", "MeanEstimator", "PrivateEstimator"]


class MeanEstimator(ABC):
    """Per-(run, arm) counts and estimates; arrays are indexed ``[run, arm]``.

    Attributes read by the engine: ``counts`` (rewards fed), ``next_refresh``
    (count at which the estimate next changes), ``phase_counts`` (Ñ, the samples
    behind the estimate), ``phases`` (k, the refreshes so far), ``noisy_sum``
    (the released sum behind the estimate) and ``ledgers`` (one per run; empty
    when exact). ``private`` tells whether rewards are read only through releases.
    """

    private: bool
    ledgers: list[Ledger]
    noisy_sum: np.ndarray

    @property
    @abstractmethod
    def counts(self) -> np.ndarray: ...

    @property
    @abstractmethod
    def next_refresh(self) -> np.ndarray: ...

    @property
    @abstractmethod
    def phase_counts(self) -> np.ndarray: ...

    @property
    @abstractmethod
    def phases(self) -> np.ndarray: ...

    @abstractmethod
    def observe(self, counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
        """Feed ``counts[r, a]`` rewards summing to ``sums[r, a]``; return the (R, K) mask of refreshed estimates."""

    def means(self) -> np.ndarray:
        """Estimates clipped to [0, 1]; 0.5 where nothing was released yet."""
        with np.errstate(invalid="ignore", divide="ignore"):
            m = self.noisy_sum / self.phase_counts
        return np.clip(np.nan_to_num(m, nan=0.5), 0.0, 1.0)


class PrivateEstimator(MeanEstimator):
    """Geometric-batch Laplace means (ε-DP per run; the policy reads Release values only)."""

    private = True

    def __init__(self, n_runs: int, n_arms: int, epsilon: float, rng: np.random.Generator, *,
                 eta: float, forget: bool) -> None:
        self.ledgers = [Ledger(PureDP(as_fraction(epsilon, "epsilon"))) for _ in range(n_runs)]
        self.mech = GeometricBatchMean([ledger.root for ledger in self.ledgers], n_arms, epsilon, rng,
                                       eta=eta, forget=forget)
        self.noisy_sum = np.zeros((n_runs, n_arms))

    @property
    def counts(self) -> np.ndarray:
        return self.mech.counts

    @property
    def next_refresh(self) -> np.ndarray:
        return self.mech.next_refresh

    @property
    def phase_counts(self) -> np.ndarray:
        return self.mech.phase_counts

    @property
    def phases(self) -> np.ndarray:
        return self.mech.batches

    def observe(self, counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
        released = self.mech.observe(counts, sums)
        mask = np.zeros(counts.shape, dtype=bool)
        for r, a, release in released:
            self.noisy_sum[r, a] = release.value
            mask[r, a] = True
        return mask


class ExactEstimator(MeanEstimator):
    """Exact empirical means, refreshed at every pull (no privacy)."""

    private = False

    def __init__(self, n_runs: int, n_arms: int) -> None:
        self.ledgers = []
        self._counts = np.zeros((n_runs, n_arms), dtype=np.int64)
        self._sums = np.zeros((n_runs, n_arms))
        self.noisy_sum = np.zeros((n_runs, n_arms))

    @property
    def counts(self) -> np.ndarray:
        return self._counts

    @property
    def next_refresh(self) -> np.ndarray:
        return self._counts + 1

    @property
    def phase_counts(self) -> np.ndarray:
        return self._counts

    @property
    def phases(self) -> np.ndarray:
        return np.maximum(self._counts, 1)

    def observe(self, counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
        if np.any(sums < 0) or np.any(sums > counts):
            raise ValueError("rewards must lie in [0, 1]")
        self._counts += counts
        self._sums += sums
        self.noisy_sum = self._sums.copy()
        return counts > 0
