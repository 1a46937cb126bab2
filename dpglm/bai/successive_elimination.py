"""DP-SE: ε-DP successive elimination for best-arm identification (Sajed & Sheffet 2019).

Epoch e = 1, 2, …: Δ_e = 2^{−e}; every active arm is pulled
R_e = ⌈max{32 log(8|S|e²/δ)/Δ_e², 8 log(4|S|e²/δ)/(εΔ_e)}⌉ + 1 fresh times; the
vector of the active arms' epoch sums is released once with Laplace noise of
scale 1/ε (L1 sensitivity 1 under replace_one: one user's reward moves one
sum by at most 1), i.e. each mean gets Lap(1/(εR_e)); arm a is eliminated when
max_b μ̃_b − μ̃_a > 2(h_e + c_e), h_e = √(log(8|S|e²/δ)/(2R_e)),
c_e = log(4|S|e²/δ)/(R_e ε) (``docs/references.md``, "Baselines"). Epochs use
disjoint samples, so each epoch's release is charged ``PureDP(ε)`` with the
partition key ``"epoch=e"``: the whole run costs ε by parallel composition.

``mean="cumulative-count"`` is the variant in the authors' public experiment
code (achraf-azize/DP-BAI, ``algorithms/dp_se.py``, read for facts only): the
epoch's sums are reset but divided by the arm's *cumulative* count n_e = Σ_{j≤e} R_j,
and the noise stays Lap(1/(εR_e)), i.e. μ̃ = S_e/n_e + Lap(1/(εR_e)). Since R_e
roughly doubles per epoch (ε-dominated regime), S_e/n_e ≈ μ/2: every gap is
about halved while the width 2(h_e + c_e) is not, so elimination comes about
one to two epochs later. It is released here as the vector (R_e/n_e)·S_e of
sensitivity R_e/n_e ≤ 1 with Lap(1/ε) per coordinate and divided by R_e — the
same distribution, and still ε-DP per epoch (over-noised, as in the authors' code).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from accounting import Ledger, PureDP
from accounting.costs import as_fraction
from accounting.validation import check_generator, check_positive, check_probability
from dpglm._validation import check_max_steps, check_n_runs
from dpglm.bai.top_two import BAIResult, check_mu
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
    mean : {"fresh", "cumulative-count"}, default "fresh"
        ``"fresh"``: the epoch's fresh sum over R_e, as specified by Sajed &
        Sheffet (2019). ``"cumulative-count"``: the fresh sum over the cumulative
        count, as in the authors' public experiment code (module docstring).
    """

    MEANS = ("fresh", "cumulative-count")

    def __init__(self, mu: ArrayLike, epsilon: float, delta: float, *, mean: str = "fresh") -> None:
        self.mu = check_mu(mu)
        self.epsilon, self.delta = check_positive("epsilon", epsilon), check_probability("delta", delta)
        if mean not in self.MEANS:
            raise ValueError(f"mean must be one of {self.MEANS}, got {mean!r}")
        self.mean = mean

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
        check_generator(rng)
        n_runs = check_n_runs(n_runs, self.mu.size)
        env_rng, noise_rng = rng.spawn(2)
        R, K = int(n_runs), self.mu.size
        max_steps = check_max_steps(max_steps, K)
        cost = PureDP(as_fraction(self.epsilon, "epsilon"))
        ledgers = [Ledger(cost) for _ in range(R)]
        mechs = [LaplaceMechanism(ledger.root, 1.0, noise_rng, cost=cost) for ledger in ledgers]
        active = np.ones((R, K), dtype=bool)
        t = np.zeros(R, dtype=np.int64)
        pulled = np.zeros(R, dtype=np.int64)  # per active arm: Σ_{j≤e} R_j (the same for every active arm)
        running = np.ones(R, dtype=bool)
        e = 0
        while running.any():
            e += 1
            rows = np.nonzero(running)[0]
            size = active[rows].sum(axis=1)
            r_e = self.epoch_length(np.full(rows.size, e), size)
            sums = env_rng.binomial(np.where(active[rows], r_e[:, None], 0), self.mu).astype(float)
            pulled[rows] += r_e
            # "cumulative-count": release (R_e/n_e)·S_e (sensitivity R_e/n_e ≤ 1),
            # so that /R_e gives S_e/n_e + Lap(1/(εR_e))
            scaled = sums if self.mean == "fresh" else sums * (r_e / pulled[rows])[:, None]
            noisy = np.empty_like(sums)
            for j, r in enumerate(rows):  # one Laplace release of the epoch's sums per run
                arms = np.nonzero(active[r])[0]
                rel = mechs[r].release(scaled[j, arms], partition=f"epoch={e}", note=f"DP-SE epoch sums ({self.mean})")
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
