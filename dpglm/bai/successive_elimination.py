"""DP-SE: ε-DP successive elimination for best-arm identification (Sajed & Sheffet 2019).

Epoch e = 1, 2, …: Δ_e = 2^{−e}; every active arm is pulled
R_e = ⌈max{32 log(8|S|e²/δ)/Δ_e², 8 log(4|S|e²/δ)/(εΔ_e)}⌉ + 1 fresh times; the
vector of the active arms' epoch sums is released once with Laplace noise of
scale 1/ε (L1 sensitivity 1 under replace_one: one user's reward moves one
sum by at most 1), i.e. each mean gets Lap(1/(εR_e)); arm a is eliminated when
max_b μ̃_b − μ̃_a > 2(h_e + c_e), h_e = √(log(8|S|e²/δ)/(2R_e)),
c_e = log(4|S|e²/δ)/(R_e ε) (``../shared/BAI.md``, "Baselines"). Epochs use
disjoint samples, so each epoch's release is charged ``PureDP(ε)`` with the
partition key ``"epoch=e"``: the whole run costs ε by parallel composition.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from accounting import Ledger, PureDP
from dpglm.bai.top_two import BAIResult, _check_mu
from mechanisms import LaplaceMechanism

__all__ = ["DPSE"]


class DPSE:
    """DP-SE of Sajed & Sheffet (2019), simulated for many runs at once.

    Parameters
    ----------
    mu : array_like
        Bernoulli means (unique best arm).
    epsilon : float
        Privacy budget ε > 0 of each run.
    delta : float
        Confidence δ ∈ (0, 1).
    """

    def __init__(self, mu: ArrayLike, epsilon: float, delta: float) -> None:
        self.mu = _check_mu(mu)
        if not (isinstance(epsilon, (int, float, np.floating)) and 0 < epsilon < np.inf):
            raise ValueError(f"epsilon must be in (0, inf), got {epsilon!r}")
        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        self.epsilon, self.delta = float(epsilon), float(delta)

    def epoch_length(self, epoch: np.ndarray, n_active: np.ndarray) -> np.ndarray:
        """R_e for epoch e with |S| active arms (Sajed & Sheffet 2019, Alg. DP-SE)."""
        e = np.asarray(epoch, dtype=float)
        s = np.asarray(n_active, dtype=float)
        gap = 2.0**-e
        a = 32 * np.log(8 * s * e**2 / self.delta) / gap**2
        b = 8 * np.log(4 * s * e**2 / self.delta) / (self.epsilon * gap)
        return np.ceil(np.maximum(a, b)).astype(np.int64) + 1

    def run(self, n_runs: int, rng: np.random.Generator, *, max_steps: int = 10**10) -> BAIResult:
        """Simulate ``n_runs`` independent runs; pull counts are exact, sums Binomial."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        if isinstance(n_runs, bool) or not isinstance(n_runs, (int, np.integer)) or n_runs < 1:
            raise ValueError(f"n_runs must be an integer >= 1, got {n_runs!r}")
        env_rng, noise_rng = rng.spawn(2)
        R, K = int(n_runs), self.mu.size
        ledgers = [Ledger(PureDP(self.epsilon)) for _ in range(R)]
        mechs = [LaplaceMechanism(l.root, 1.0, noise_rng, cost=PureDP(self.epsilon)) for l in ledgers]
        active = np.ones((R, K), dtype=bool)
        t = np.zeros(R, dtype=np.int64)
        running = np.ones(R, dtype=bool)
        e = 0
        while running.any():
            e += 1
            rows = np.nonzero(running)[0]
            size = active[rows].sum(axis=1)
            r_e = self.epoch_length(np.full(rows.size, e), size)
            sums = env_rng.binomial(np.where(active[rows], r_e[:, None], 0), self.mu).astype(float)
            noisy = np.empty_like(sums)
            for j, r in enumerate(rows):  # one Laplace release of the epoch's sums per run
                arms = np.nonzero(active[r])[0]
                rel = mechs[r].release(sums[j, arms], partition=f"epoch={e}", note="DP-SE epoch sums")
                noisy[j] = -np.inf
                noisy[j, arms] = np.asarray(rel.value) / r_e[j]
            t[rows] += size * r_e
            log_s = np.log(size * e**2 / self.delta)
            width = 2 * (np.sqrt((np.log(8) + log_s) / (2 * r_e)) + (np.log(4) + log_s) / (r_e * self.epsilon))
            best = noisy.max(axis=1)
            keep = active[rows] & (best[:, None] - noisy <= width[:, None])
            active[rows] = keep
            finished = (keep.sum(axis=1) == 1) | (t[rows] >= max_steps)
            running[rows[finished]] = False
        one = active.sum(axis=1) == 1
        rec = np.where(one, np.argmax(active, axis=1), -1)
        return BAIResult(np.minimum(t, max_steps), rec, one, int(np.argmax(self.mu)), ledgers)
