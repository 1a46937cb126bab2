"""The means behind the Top Two sampling and stopping rules: private or exact, one interface.

:class:`PrivateEstimator` wraps :class:`mechanisms.geometric.GeometricBatchMean`
(geometric batches with Laplace noise, Jourdan & Azize 2025, §4; ``forget=True``:
AdaP-TT's last-episode mean, Azize's thesis Alg. 10 lines 5–10), with one pure-ε
ledger per run. :class:`NoiselessBatchEstimator` is the same batching without noise
(ε = ∞). :class:`WeightedEstimator` re-weights the released batch sums of either
with public weights (docs/bai-threshold.md, "Weighted"). :class:`ExactEstimator`
is the non-private empirical mean, refreshed at every pull (EB-TCI). The engine in :mod:`dpglm.bai.top_two` reads
only the attributes of :class:`MeanEstimator` (``docs/bai-threshold.md``, "Setting").
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from accounting import Ledger, PureDP
from accounting.costs import as_fraction
from dpglm.bai.mixture_threshold import batch_weights
from mechanisms.geometric import GeometricBatchMean, RefreshPoints

__all__ = ["ExactEstimator", "MeanEstimator", "NoiselessBatchEstimator", "PrivateEstimator", "WeightedEstimator"]


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
    """Geometric-batch Laplace means (ε-DP per run; the policy reads Release values only).

    ``ledger``: the ledger of a single run (``n_runs`` = 1), e.g. on a journal; None: a new
    in-memory ``PureDP(ε)`` ledger per run.
    """

    private = True

    def __init__(self, n_runs: int, n_arms: int, epsilon: float, rng: np.random.Generator, *,
                 eta: float, forget: bool, ledger: Ledger | None = None) -> None:
        if ledger is not None and n_runs != 1:
            raise ValueError(f"ledger= is one run's ledger; got n_runs={n_runs}")
        self.ledgers = [ledger] if ledger is not None else [Ledger(PureDP(as_fraction(epsilon, "epsilon")))
                                                            for _ in range(n_runs)]
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


class NoiselessBatchEstimator(MeanEstimator):
    """Geometric batches without noise (ε = ∞): the cumulative sum refreshed at ⌈(1+η)^k⌉, no ledger.

    The limit of :class:`PrivateEstimator` as ε → ∞: same refresh points and phase
    counts, so DP-TT at ε = ∞ keeps its phase lag (docs/bai-threshold.md, "ε = ∞").
    """

    private = True  # rewards are read only at batch ends (the engine plans blocks between them)

    def __init__(self, n_runs: int, n_arms: int, *, eta: float) -> None:
        self.ledgers = []
        self.refresh = RefreshPoints(eta)
        shape = (n_runs, n_arms)
        self._counts = np.zeros(shape, dtype=np.int64)
        self._next = np.ones(shape, dtype=np.int64)
        self._phase_counts = np.zeros(shape, dtype=np.int64)
        self._phases = np.zeros(shape, dtype=np.int64)
        self._pending = np.zeros(shape)
        self.noisy_sum = np.zeros(shape)

    @property
    def counts(self) -> np.ndarray:
        return self._counts

    @property
    def next_refresh(self) -> np.ndarray:
        return self._next

    @property
    def phase_counts(self) -> np.ndarray:
        return self._phase_counts

    @property
    def phases(self) -> np.ndarray:
        return self._phases

    def observe(self, counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
        new = self._counts + counts
        if np.any(new > self._next) or np.any(sums < 0) or np.any(sums > counts):
            raise ValueError("counts must stop at the next refresh point and rewards lie in [0, 1]")
        self._counts, self._pending = new, self._pending + sums
        done = new == self._next
        self.noisy_sum[done] += self._pending[done]
        self._pending[done] = 0.0
        self._phase_counts[done] = new[done]
        self._phases[done] += 1
        self._next[done] = [self.refresh.after(int(c)) for c in new[done]]
        return done


class WeightedEstimator(MeanEstimator):
    """Batch j's released sum B_j weighted by w_j = m_j/(m_j + 8/ε²): μ̃ = Σ w_j B_j / Σ w_j m_j (clipped).

    Post-processing of the inner estimator's releases (B_j is the difference of two
    consecutive cumulative releases), so privacy is the inner one's. The weights are
    public (batch size, ε, σ² = 1/4) and fixed per batch, which the time-uniform
    threshold needs. ``phase_counts`` is the effective count W_k = Σ_j m_j w_j / max_{i≤k} w_i
    (:meth:`dpglm.bai.mixture_threshold.MixtureThreshold.phase`; docs/bai-threshold.md, "Weighted").
    """

    def __init__(self, inner: MeanEstimator, epsilon: float) -> None:
        self.inner, self.epsilon = inner, epsilon
        self.private, self.ledgers = inner.private, inner.ledgers
        shape = inner.counts.shape
        self._last = np.zeros(shape)  # the inner cumulative release seen last
        self._weighted = np.zeros(shape)  # Σ w_j B_j
        self._mass = np.zeros(shape)  # Σ w_j m_j
        self._top = np.zeros(shape)  # max_j w_j
        self._w_counts = np.zeros(shape)
        self.noisy_sum = self._weighted

    @property
    def counts(self) -> np.ndarray:
        return self.inner.counts

    @property
    def next_refresh(self) -> np.ndarray:
        return self.inner.next_refresh

    @property
    def phase_counts(self) -> np.ndarray:
        return self._w_counts

    @property
    def phases(self) -> np.ndarray:
        return self.inner.phases

    @property
    def mech(self) -> object:
        """The inner estimator's mechanism (the threshold matches its noise)."""
        return getattr(self.inner, "mech", None)

    def observe(self, counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
        before = self.inner.phase_counts.copy()
        done = self.inner.observe(counts, sums)
        size = (self.inner.phase_counts - before)[done].astype(float)
        w = batch_weights(size, self.epsilon)
        released = self.inner.noisy_sum[done]
        self._weighted[done] += w * (released - self._last[done])
        self._last[done] = released
        self._mass[done] += w * size
        self._top[done] = np.maximum(self._top[done], w)
        self._w_counts[done] = self._mass[done] / self._top[done]
        return done

    def means(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            m = self._weighted / self._mass
        return np.clip(np.nan_to_num(m, nan=0.5), 0.0, 1.0)
