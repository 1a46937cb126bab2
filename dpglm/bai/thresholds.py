"""Stopping thresholds for the GLR stopping rule of private best-arm identification.

:class:`LaplaceTailThreshold` is the provably δ-correct default and
:class:`GammaThreshold` a looser closed form of the same lemma (derived here,
see the docstrings); :func:`worst_case_quantile` is the exact per-phase
quantile that no threshold of this form can go below (its worst case is an arm
with mean 0), so the default is shown to be within a nat or two of optimal.
:class:`ChernoffThreshold` is the same lemma without Laplace noise, for the
non-private EB-TCI. :class:`HeuristicThreshold` is a heuristic used only to
compare with the paper's figure, named as such, with no guarantee.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import integrate, optimize
from scipy.special import gammaincc, gammainccinv, gammaln

from accounting.validation import check_int, check_probability

__all__ = ["ChernoffThreshold", "GammaThreshold", "HeuristicThreshold", "LaplaceTailThreshold", "ZETA2",
           "laplace_sum_tail", "laplace_tail", "worst_case_quantile"]

ZETA2 = np.pi**2 / 6


def _check_delta(delta: float) -> float:
    return check_probability("delta", delta)


class GammaThreshold:
    r"""Provably δ-correct per-arm threshold c(k) = Q⁻¹(k + 1, δ / (K ζ(2) k²)).

    Q(s, ·) is the regularised upper incomplete gamma function (the tail of a
    Gamma(s, 1) variable) and k the number of Laplace batches behind the arm's
    estimate (its phase). The GLR rule stops when, for every a ≠ ã,
    C*_ε(ã, a, μ̃, Ñ) > c(k_ã) + c(k_a) (paper §4, docs/references.md "Stopping").

    Lemma (derived here; the paper's own threshold was not available).
    Fix arm a, its k-th refresh at the deterministic count n = n_k, its
    reward stack sum S_n and noises L_1..L_k ~ Lap(1/ε) i.i.d., μ̃ = (S_n + ΣL_j)/n.
    (i) d⁻_ε(m, μ) = sup_{0≤λ≤ε} [λm − log(1 − μ + μe^λ)] (Chernoff form;
    equals docs/references.md's d⁻_ε on [0, 1] and extends it monotonically), so
    n·d⁻_ε(μ̃, μ) ≤ sup_{λ≥0}[λS_n − n log(1 − μ + μe^λ)] + ε Σ_j |L_j|
    = n·kl⁺(S_n/n, μ) + G with G = ε Σ|L_j| ~ Gamma(k, 1). Clipping μ̃ to
    [0, 1] only lowers d⁻_ε.
    (ii) P[n·kl⁺(S_n/n, μ) ≥ x] ≤ e^{−x} (Chernoff), so n·kl⁺ is stochastically
    below E ~ Exp(1), independent of G; hence
    P[n·d⁻_ε(μ̃, μ) > c] ≤ P[E + G > c] = Q(k + 1, c). The same holds for d⁺.
    (iii) If the rule stops with ã ≠ a*, take x ∈ [μ_ã, μ_{a*}] in the
    infimum defining C*_ε(ã, a*, μ̃, Ñ): monotonicity of d^± gives
    Ñ_ã d⁻_ε(μ̃_ã, μ_ã) > c(k_ã) or Ñ_{a*} d⁺_ε(μ̃_{a*}, μ_{a*}) > c(k_{a*}).
    These are K one-sided events (overestimation of a sub-optimal arm,
    underestimation of a*), each at some phase k; a union bound over arms
    and phases gives P[error] ≤ K Σ_k δ/(K ζ(2) k²) = δ. The events concern
    fixed sample sizes of i.i.d. stacks, so adaptivity of the sampling does
    not matter.

    Parameters
    ----------
    n_arms : int
        K ≥ 2.
    delta : float
        Confidence δ ∈ (0, 1).
    """

    provable = True

    def __init__(self, n_arms: int, delta: float, *, max_phase: int = 256) -> None:
        check_int("n_arms", n_arms, 2)
        self.n_arms, self.delta = int(n_arms), _check_delta(delta)
        k = np.arange(1, max_phase + 1, dtype=float)
        table = gammainccinv(k + 1, self.delta / (self.n_arms * ZETA2 * k**2))
        self._table = np.concatenate([[np.inf], table])  # phase 0: no estimate yet

    def __call__(self, phase: ArrayLike, count: ArrayLike | None = None) -> np.ndarray:
        """c(k) for phases k ≥ 1 (array; ``count`` is ignored)."""
        k = np.asarray(phase)
        if np.any(k < 1) or np.any(k >= len(self._table)):
            raise ValueError(f"phase must be in [1, {len(self._table) - 1}]")
        return self._table[k]


def laplace_tail(c: float, k: int) -> float:
    """P[E + (W)⁺ > c] for E ~ Exp(1) independent of W = sum of k standard Laplace variables.

    With W = G₁ − G₂ (G₁, G₂ ~ Gamma(k, 1) i.i.d.) and conditioning on G₂ = g:
    P = ½e^{−c} + ∫ f_k(g) [e^{−(c+g)}((g + c)^k − g^k)/k! + Q(k, c + g)] dg.
    """
    if c <= 0:
        return 1.0

    def integrand(g: float) -> float:
        if g <= 0:
            dens = 1.0 if k == 1 else 0.0
            low = 0.0
        else:
            dens = np.exp((k - 1) * np.log(g) - g - gammaln(k))
            low = np.exp(k * np.log(g) - (c + g) - gammaln(k + 1))
        high = np.exp(k * np.log(g + c) - (c + g) - gammaln(k + 1))
        return dens * (high - low + gammaincc(k, c + g))

    value, _ = integrate.quad(integrand, 0, np.inf, limit=200, epsabs=1e-14, epsrel=1e-10)
    return 0.5 * np.exp(-c) + value


class LaplaceTailThreshold(GammaThreshold):
    r"""Provably δ-correct per-arm threshold, the default: c(k) solves T_k(c) = δ/(K ζ(2) k²).

    T_k(c) = P[E + W⁺ > c] (:func:`laplace_tail`), E ~ Exp(1), W a sum of k
    standard Laplace variables. Same lemma as :class:`GammaThreshold` with a
    sharper step (i): for λ ∈ [0, ε], λ·ΣL_j ≤ (εΣL_j)⁺, so
    n·d⁻_ε(μ̃, μ) ≤ n·kl⁺(S_n/n, μ) + (εΣ_j L_j)⁺ ≤_st E + W⁺ (and
    symmetrically for d⁺ with −ΣL_j, which has the same law). W⁺ ≤ Σ|εL_j|,
    so c(k) is below the Gamma threshold; it is about 0.7·k nats lower for
    large k (the sum of k Laplace tails is ~2^{−k} times the Gamma(k) tail).
    Values are computed on demand (quadrature + bracketing root) and cached.
    """

    _cache: dict[tuple[int, float, int], float] = {}

    def __init__(self, n_arms: int, delta: float) -> None:
        super().__init__(n_arms, delta, max_phase=1)

    def _value(self, k: int) -> float:
        key = (self.n_arms, self.delta, k)
        if key not in self._cache:
            target = self.delta / (self.n_arms * ZETA2 * k**2)
            upper = float(gammainccinv(k + 1, target))  # T_k ≤ Gamma(k + 1) tail
            self._cache[key] = optimize.brentq(lambda c: laplace_tail(c, k) - target, 1e-9, upper, xtol=1e-10)
        return self._cache[key]

    def __call__(self, phase: ArrayLike, count: ArrayLike | None = None) -> np.ndarray:
        """c(k) for phases k ≥ 1 (array; ``count`` is ignored)."""
        k = np.asarray(phase)
        if np.any(k < 1):
            raise ValueError("phase must be >= 1")
        uniq, inv = np.unique(k, return_inverse=True)
        vals = np.array([self._value(int(u)) for u in uniq])
        return vals[inv].reshape(k.shape)


def laplace_sum_tail(x: float, k: int) -> float:
    """P[W > x], x ≥ 0, for W the sum of k i.i.d. standard Laplace variables (exact).

    The density of W is e^{−|x|} Σ_{j<k} (k−1+j)! |x|^{k−1−j} / (j! (k−1−j)! (k−1)! 2^{k+j}),
    so its tail is the mixture Σ_{j<k} C(k−1+j, j) 2^{−(k+j)} Q(k − j, x) of Gamma tails.
    """
    if x < 0:
        raise ValueError(f"x must be >= 0, got {x!r}")
    j = np.arange(k, dtype=float)
    log_w = gammaln(k + j) - gammaln(j + 1) - gammaln(k) - (k + j) * np.log(2.0)
    return float(np.sum(np.exp(log_w) * gammaincc(k - j, x)))


def worst_case_quantile(k: int, target: float) -> float:
    """The smallest c with P[n·d⁻_ε(μ̃, μ) > c] ≤ ``target`` for *every* μ, at phase k (any n, ε with εn > c).

    At μ = 0 the rewards are all 0, μ̃ = clip(ΣL_j / n, 0, 1) and d⁻_ε(m, 0) = εm,
    so n·d⁻_ε(μ̃, 0) = min(W⁺, εn) with W = εΣL_j a sum of k standard Laplace
    variables: exactly, whatever ε. Any per-phase threshold allotted ``target``
    is therefore at least the (1 − target)-quantile of W⁺, which this returns;
    :class:`LaplaceTailThreshold` (the quantile of E + W⁺) can exceed it by at
    most the contribution of the Bernoulli term E.
    """
    if not 0 < target < 0.5:
        raise ValueError(f"target must be in (0, 1/2), got {target!r}")
    upper = float(gammainccinv(k, target)) + 1.0  # P[W > x] ≤ P[Gamma(k) > x]
    return optimize.brentq(lambda c: laplace_sum_tail(c, k) - target, 0.0, upper, xtol=1e-10)


class ChernoffThreshold:
    r"""Provably δ-correct per-arm threshold for non-private means: c(n) = log(K ζ(2) n² / δ).

    The lemma of :class:`GammaThreshold` without Laplace noise: for a fixed count
    n, P[n·kl⁺(S_n/n, μ) > c] ≤ e^{−c} (Chernoff), and a union over the K arms and
    every count n ≥ 1 (a non-private estimate refreshes at every pull) spends
    K Σ_n δ/(K ζ(2) n²) = δ. Used by :class:`~dpglm.bai.top_two.EBTopTwo` with
    ``threshold="provable"``.
    """

    provable = True

    def __init__(self, n_arms: int, delta: float) -> None:
        check_int("n_arms", n_arms, 2)
        self.n_arms, self.delta = int(n_arms), _check_delta(delta)

    def __call__(self, phase: ArrayLike, count: ArrayLike) -> np.ndarray:
        """c(n) for counts n ≥ 1 (``phase`` is ignored)."""
        n = np.asarray(count, dtype=float)
        if np.any(n < 1):
            raise ValueError("count must be >= 1")
        return np.log(self.n_arms * ZETA2 / self.delta) + 2 * np.log(n)


class HeuristicThreshold:
    """Heuristic per-arm threshold c(n) = ½·log((1 + log n)/δ): NOT proven δ-correct.

    The summed threshold c(Ñ_ã) + c(Ñ_a) ≈ log((1 + log n)/δ) is the heuristic
    commonly used in Top Two experiments (e.g. Jourdan et al. 2022) and is used
    here only to compare with the paper's figure; its error rate is measured,
    not guaranteed.
    """

    provable = False

    def __init__(self, n_arms: int, delta: float) -> None:
        self.n_arms, self.delta = int(n_arms), _check_delta(delta)

    def __call__(self, phase: ArrayLike, count: ArrayLike) -> np.ndarray:
        n = np.maximum(np.asarray(count, dtype=float), 1.0)
        return 0.5 * np.log((1.0 + np.log(n)) / self.delta)
