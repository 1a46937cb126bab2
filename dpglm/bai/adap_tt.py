r"""AdaP-TT and AdaP-TT⋆ (Azize et al. 2023/2024): private Top Two with doubling episodes and forgetting.

Both run on :class:`~dpglm.bai.top_two.TopTwoEngine` with the estimator
``GeometricBatchMean(forget=True, eta=1)``: the last episode's mean plus
Lap(1/(εÑ)) (Azize's thesis, Alg. 10 lines 5–10). Their stopping rules are
small objects, chosen by ``threshold=``, each called as ``rule(m, nt, k, lead)``
(private means, phase counts Ñ, phases k, candidate ã per row) and returning the
rows that stop.

:class:`AdaPTT` follows the authors' public experiment code (read for facts
only; ``docs/references.md``); :class:`AdaPTTStar` follows the thesis' §5.4.3
exactly (:mod:`dpglm.bai.gaussian_thresholds`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dpglm.bai.gaussian_thresholds import (
    gaussian_cost,
    private_gaussian_cost,
    private_gaussian_threshold,
    star_threshold,
)
from dpglm.bai.thresholds import ZETA2
from dpglm.bai.top_two import TopTwoEngine

__all__ = ["AdaPTT", "AdaPTTStar", "EmpiricalStopping", "ThesisStopping", "UnionBoundStopping"]


def _others(margin: np.ndarray, lead: np.ndarray) -> np.ndarray:
    """Rows where ``margin`` holds for every arm but ã."""
    margin = margin.copy()
    margin[np.arange(lead.size), lead] = True
    return np.all(margin, axis=1)


class UnionBoundStopping:
    """Provable (derived here): stop when μ̃_ã − h_ã − l_ã > max_{a≠ã} μ̃_a + h_a + l_a.

    h = √(log(4/δ_k)/(2Ñ)) (Hoeffding), l = log(2/δ_k)/(εÑ) (Laplace tail),
    δ_k = δ/(K ζ(2) k²) per arm and episode k: a union bound, δ-correct.
    """

    provable = True

    def __init__(self, n_arms: int, delta: float, epsilon: float) -> None:
        self.n_arms, self.delta, self.epsilon = n_arms, delta, epsilon

    def __call__(self, m: np.ndarray, nt: np.ndarray, k: np.ndarray, lead: np.ndarray) -> np.ndarray:
        i = np.arange(lead.size)
        dk = self.delta / (self.n_arms * ZETA2 * k.astype(float) ** 2)
        width = np.sqrt(np.log(4 / dk) / (2 * nt)) + np.log(2 / dk) / (self.epsilon * nt)
        ucb = m + width
        ucb[i, lead] = -np.inf
        return np.asarray(m[i, lead] - width[i, lead] > ucb.max(axis=1))


class EmpiricalStopping:
    """Heuristic (the AdaP-TT authors' experiment code, no guarantee): ½Δ̃²/(1/Ñ_ã + 1/Ñ_a) > emp_c.

    emp_c = log(1/δ) + log(1 + log Ñ_ã) + log(1 + log Ñ_a) + (1/Ñ_ã + 1/Ñ_a)·log(1/δ)²/ε².
    Δ̃ = (μ̃_ã − μ̃_a)₊ (a GLR: 0 if a looks better); ``clip_gap=False`` squares μ̃_ã − μ̃_a
    as it is, as the authors' ``check_stopping`` does, so an arm far *above* the
    candidate counts as separated too.
    """

    provable = False

    def __init__(self, n_arms: int, delta: float, epsilon: float, *, clip_gap: bool = True) -> None:
        self.delta, self.epsilon, self.clip_gap = delta, epsilon, clip_gap

    def __call__(self, m: np.ndarray, nt: np.ndarray, k: np.ndarray, lead: np.ndarray) -> np.ndarray:
        i = np.arange(lead.size)
        inv = 1.0 / nt[i, lead][:, None] + 1.0 / nt
        gap = m[i, lead][:, None] - m
        glr = 0.5 * (np.maximum(gap, 0.0) if self.clip_gap else gap) ** 2 / inv
        log_d = np.log(1 / self.delta)
        c = log_d + np.log1p(np.log(nt[i, lead]))[:, None] + np.log1p(np.log(nt)) + inv * log_d**2 / self.epsilon**2
        return _others(glr > c, lead)


class ThesisStopping:
    """The thesis' GLR rules (Alg. 10, line 12): stop when W_{ã,b}(μ̃, Ñ) ≥ c_{ã,b} for every b ≠ ã.

    ``star=False``: W^G (5.9) against c^{G,ε} (5.11), AdaP-TT's (Lemma 5.18);
    ``star=True``: W^{G,ε} (5.12) against c̃^{G,ε} (5.14), AdaP-TT⋆'s (Lemma 5.21).
    Both are δ-correct for σ-sub-Gaussian rewards with continuous Laplace noise; our
    estimator draws its discrete Laplace on a lattice (``mechanisms.lattice``), whose
    tail P(Z ≥ z) exceeds the continuous one by the factor 2/(1 + e^{−1/t}) ≤ 1 + 2^{−41}
    (t ≥ 2^40 grid units): a difference far below the thresholds' rounding.
    """

    provable = True

    def __init__(self, n_arms: int, delta: float, epsilon: float, *, star: bool, s: float = 2.0) -> None:
        self.n_arms, self.delta, self.epsilon, self.star, self.s = n_arms, delta, epsilon, star, s

    def __call__(self, m: np.ndarray, nt: np.ndarray, k: np.ndarray, lead: np.ndarray) -> np.ndarray:
        i = np.arange(lead.size)
        m_lead, n_lead = m[i, lead][:, None], nt[i, lead][:, None]
        if self.star:
            cost = private_gaussian_cost(m_lead, m, n_lead, nt, self.epsilon)
            c = star_threshold(m_lead, m, n_lead, nt, self.n_arms, self.delta, self.epsilon, self.s)
        else:
            cost = gaussian_cost(m_lead, m, n_lead, nt)
            c = private_gaussian_threshold(n_lead, nt, self.n_arms, self.delta, self.epsilon, self.s)
        return _others(cost >= c, lead)


class AdaPTT(TopTwoEngine):
    """AdaP-TT (Azize et al. 2023): doubling episodes with forgetting, Laplace noise, a private UCB leader.

    The algorithm as run in the authors' experiments (their public code). Estimator: the
    last episode's mean + Lap(1/(ε·Ñ)) (``GeometricBatchMean(forget=True)``, η = 1).
    Leader: the private UCB index μ̃_a + log t_c/(εÑ_a) + √(log t_c/(2Ñ_a)), t_c the
    samples behind completed episodes (the empirical best until every arm has one).
    Challenger: argmin_{a≠B} (μ̃_B − μ̃_a + κ(t))/√(1/N_B + 1/N_a), κ(t) = 1/(1 + √t),
    true counts N. Recommendation: the empirical best ã. Stopping, ``threshold=``:
    ``"provable"`` (default) :class:`UnionBoundStopping`; ``"thesis"`` the thesis' W^G
    against c^{G,ε} (eqs. 5.9, 5.11; :class:`ThesisStopping`); ``"heuristic"``
    :class:`EmpiricalStopping`.

    ``candidate=`` the arm the stopping rule tests. ``"empirical-best"`` (default): ã,
    a proper GLR. ``"ucb-leader"``: the private-UCB leader B as the authors' code tests it
    (``check_stopping`` reads the leader computed at the last episode end), and with
    ``"heuristic"`` the gap is squared unclipped, as there. The recommendation stays ã
    (the authors return ``argmax`` of the private means). The provable rules stay
    δ-correct with either candidate: they stop only if the candidate's lower bound
    clears every other arm's upper bound (or its clipped cost is positive against every
    arm), which makes it ã.

    Deviations from the authors' code: the leader/challenger mix is the engine's
    β-tracking rather than a β-coin (same allocation in the limit); κ(t) takes the round t
    at the block start (the authors pass t_c, at most a factor 2 smaller); the means are
    clipped to [0, 1] (theirs are not); τ counts every pull made, where the authors report
    ``counts.sum()``, the pulls of completed episodes only (1.14–1.26× fewer on μ1; it is
    :attr:`BAIResult.completed_pulls`).
    """

    forget = True
    THRESHOLDS = ("provable", "thesis", "heuristic")
    CANDIDATES = ("empirical-best", "ucb-leader")

    def __init__(self, mu: ArrayLike, epsilon: float, delta: float, *, beta: float = 0.5,
                 threshold: str = "provable", block_fraction: float = 1 / 32,
                 candidate: str = "empirical-best") -> None:
        if isinstance(beta, str):  # IDS needs DP-TT's transport cost; AdaP-TT's challengers use other costs
            raise ValueError(f"beta must be a probability in [0, 1] for AdaP-TT ('ids' is DP-TT's), got {beta!r}")
        if candidate not in self.CANDIDATES:
            raise ValueError(f"candidate must be one of {self.CANDIDATES}, got {candidate!r}")
        self.candidate = candidate
        super().__init__(mu, epsilon, delta, beta=beta, eta=1.0, threshold=threshold, block_fraction=block_fraction)
        self.stopping = threshold

    def _candidates(self, est: Any, rows: np.ndarray, runs: Any) -> np.ndarray:
        """ã, or with ``candidate="ucb-leader"`` the UCB leader B set at the last refresh."""
        return runs.leader[rows] if self.candidate == "ucb-leader" else runs.best[rows]

    def _build_threshold(self, name: str) -> Any:
        k = self.mu.size
        if name == "heuristic":
            return EmpiricalStopping(k, self.delta, self.epsilon, clip_gap=self.candidate != "ucb-leader")
        if name == "thesis":
            return ThesisStopping(k, self.delta, self.epsilon, star=False)
        return UnionBoundStopping(k, self.delta, self.epsilon)

    def _leaders(self, est: Any, rows: np.ndarray, best: np.ndarray) -> np.ndarray:
        m = est.means()[rows]
        nt = est.phase_counts[rows].astype(float)
        t_c = np.maximum(est.counts[rows].sum(axis=1, keepdims=True), 2).astype(float)
        log_t = np.log(t_c)
        with np.errstate(divide="ignore"):
            index = m + log_t / (self.epsilon * nt) + np.sqrt(log_t / (2 * nt))
        ucb = np.argmax(index, axis=1)
        return np.where(np.all(nt > 0, axis=1), ucb, best[rows])

    def _challenger_keys(self, m: np.ndarray, n: np.ndarray, lead: np.ndarray,
                         t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        i = np.arange(lead.size)
        kappa = 1.0 / (1.0 + np.sqrt(t))[:, None]
        num = m[i, lead][:, None] - m + kappa
        inv = 1.0 / n[i, lead][:, None] + 1.0 / n
        key = num / np.sqrt(inv)
        return key, num * 0.5 * inv**-1.5 / n**2  # d key / d N_a

    def _should_stop(self, est: Any, rows: np.ndarray, lead: np.ndarray) -> np.ndarray:
        m = est.means()[rows]
        nt = est.phase_counts[rows].astype(float)
        return np.asarray(self.threshold(m, nt, est.phases[rows], lead))


class AdaPTTStar(AdaPTT):
    r"""AdaP-TT⋆ exactly as Azize's thesis defines it (§5.4.3, Alg. 10 with eqs. (5.12) and (5.14)).

    Estimator as :class:`AdaPTT`. Leader (Alg. 10, line 16): the private UCB
    argmax_a μ̃_a + √(k_a/Ñ_a) + k_a/(εÑ_a), k_a the arm's phase. Challenger
    (line 17): the transportation-cost challenger argmin_{a≠B} W^{G,ε}_{B,a}(μ̃, N),
    W^{G,ε} = (μ̃_B − μ̃_a)₊ min{3ε, (μ̃_B − μ̃_a)₊}/(2σ²(1/N_B + 1/N_a)), σ = 1/2, with the
    pull counts N (the thesis writes N_{k_a,a}; we read it as the current count, as in
    TTUCB). β-tracking (line 18). Stopping (line 12), ``threshold="provable"`` (default):
    W^{G,ε}_{ã,b}(μ̃, Ñ) ≥ c̃^{G,ε}_{ã,b}(μ̃, Ñ, δ) for all b ≠ ã, the two-regime threshold
    (5.14) (:func:`~dpglm.bai.gaussian_thresholds.star_threshold`, s = 2); ``"union"``:
    :class:`UnionBoundStopping`; ``"heuristic"``: :class:`EmpiricalStopping`.

    Source: the thesis PDF (``docs/references.md``, "AdaP-TT⋆"). Differences from it:
    our estimator releases the first sample's mean at initialisation (the thesis has no
    mean before the first doubling), and the leader/challenger mix is β-tracking, as written.
    """

    THRESHOLDS = ("provable", "union", "heuristic")

    def _build_threshold(self, name: str) -> Any:
        k = self.mu.size
        if name == "heuristic":
            return EmpiricalStopping(k, self.delta, self.epsilon)
        if name == "union":
            return UnionBoundStopping(k, self.delta, self.epsilon)
        return ThesisStopping(k, self.delta, self.epsilon, star=True)

    def _leaders(self, est: Any, rows: np.ndarray, best: np.ndarray) -> np.ndarray:
        m = est.means()[rows]
        nt = est.phase_counts[rows].astype(float)
        k = est.phases[rows].astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            index = m + np.sqrt(k / nt) + k / (self.epsilon * nt)
        return np.where(np.all(nt > 0, axis=1), np.argmax(index, axis=1), best[rows])

    def _challenger_keys(self, m: np.ndarray, n: np.ndarray, lead: np.ndarray,
                         t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """W^{G,ε}_{B,a}(μ̃, N) and its derivative in N_a (the TC challenger, no log N_a term)."""
        i = np.arange(lead.size)
        n = n.astype(float)
        n_lead = n[i, lead][:, None]
        key = private_gaussian_cost(m[i, lead][:, None], m, n_lead, n, self.epsilon)
        inv = 1.0 / n_lead + 1.0 / n
        return key, key / (inv * n**2)  # d/dN_a of C/inv = C/(inv² N_a²) with C = key·inv
