r"""AdaP-TT's and AdaP-TT⋆'s transportation costs and stopping thresholds, as Azize's thesis states them.

Source: A. Azize, PhD thesis (Université de Lille, 2024), §5.4.2–5.4.3, eqs. (5.9)–(5.14),
and Lemma C.32 / eq. (C.30) for 𝒞_G (Kaufmann & Koolen 2021, Theorem 9); the
proofs of δ-correctness (Lemmas 5.18, 5.21) are in Appendix D of Azize, Jourdan,
Al Marjani & Basu (2024) (``docs/references.md``, "AdaP-TT⋆"). σ = 1/2 (Bernoulli
rewards are 1/2-sub-Gaussian). ω are the phase counts Ñ (the last episode's
samples), k(x) = log₂ x + 2 bounds the phase index, and s > 1 is free (the
thesis does not fix it; we take s = 2 by default).

- (5.9)  W^G_{a,b}(μ̃, ω) = (μ̃_a − μ̃_b)₊² / (2σ²(1/ω_a + 1/ω_b))
- (5.12) W^{G,ε}_{a,b}(μ̃, ω) = (μ̃_a − μ̃_b)₊ min{3ε, (μ̃_a − μ̃_b)₊} / (2σ²(1/ω_a + 1/ω_b))
- (5.10) c^G_{a,b}(ω, δ) = 2𝒞_G(log((K − 1)/δ)/2) + 2 log(4 + ln ω_a) + 2 log(4 + ln ω_b)
- (5.11) c^{G,ε}_{a,b}(ω, δ) = 2 c^G_{a,b}(ω, δ/(2ζ(s)² k(ω_a)^s k(ω_b)^s))
  + (1/(ε²σ²)) Σ_{c∈{a,b}} (1/ω_c) log²(2Kζ(s)k(ω_c)^s/δ)
- (5.14) c̃^{G,ε}_{a,b}(μ̃, ω, δ) =
  ½ c^{G,ε}_{a,b}(ω, 2δ/3) + (√2/(εσ)) Σ_c √(h(ω_c, δ)/ω_c) log(3Kζ(s)k(ω_c)^s/δ)   if (μ̃_a − μ̃_b)₊ < 3ε,
  (3/σ²) log(3Kζ(s) max_c k(ω_c)/δ) + (3ε/(√2σ)) Σ_c √(ω_c h(ω_c, δ))                  otherwise,
  with h(x, δ) = W̄₋₁(2 log(3Kζ(s)k(x)^s/δ) + 4 log(4 + log x) + 1/2)/2 and W̄₋₁(x) = −W₋₁(−e^{−x}).
- (C.30) 𝒞_G(x) = min_{λ∈(1/2, 1]} (g_G(λ) + x)/λ, g_G(λ) = 2λ − 2λ log(4λ) + log ζ(2λ) − ½ log(1 − λ).

𝒞_G is computed by a bounded scalar minimisation; a numerical minimum is never
below the true one, so the thresholds are rounded up, never down.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

__all__ = ["cal_c_gaussian", "gaussian_cost", "gaussian_threshold", "lambert_bar", "private_gaussian_cost",
           "private_gaussian_threshold", "star_threshold", "star_h"]

SIGMA2 = 0.25  # σ² for rewards in [0, 1]
_CG_CACHE: dict[float, float] = {}


def gaussian_cost(m_a: np.ndarray, m_b: np.ndarray, w_a: np.ndarray, w_b: np.ndarray) -> np.ndarray:
    """W^G_{a,b} of thesis eq. (5.9): (μ̃_a − μ̃_b)₊²/(2σ²(1/ω_a + 1/ω_b))."""
    gap = np.maximum(np.asarray(m_a, dtype=float) - m_b, 0.0)
    return gap**2 / (2 * SIGMA2 * (1.0 / np.asarray(w_a, dtype=float) + 1.0 / np.asarray(w_b, dtype=float)))


def private_gaussian_cost(m_a: np.ndarray, m_b: np.ndarray, w_a: np.ndarray, w_b: np.ndarray,
                          epsilon: float) -> np.ndarray:
    """W^{G,ε}_{a,b} of thesis eq. (5.12): (μ̃_a − μ̃_b)₊ min{3ε, (μ̃_a − μ̃_b)₊}/(2σ²(1/ω_a + 1/ω_b))."""
    gap = np.maximum(np.asarray(m_a, dtype=float) - m_b, 0.0)
    inv = 1.0 / np.asarray(w_a, dtype=float) + 1.0 / np.asarray(w_b, dtype=float)
    return gap * np.minimum(3 * epsilon, gap) / (2 * SIGMA2 * inv)


def _g_gaussian(lam: float) -> float:
    return float(2 * lam - 2 * lam * math.log(4 * lam) + math.log(special.zeta(2 * lam)) - 0.5 * math.log1p(-lam))


def cal_c_gaussian(x: float) -> float:
    """𝒞_G(x) = min_{λ∈(1/2, 1]} (g_G(λ) + x)/λ (thesis eq. (C.30); Kaufmann & Koolen 2021, Thm. 9); ≈ x + log x."""
    key = float(x)
    if key not in _CG_CACHE:
        res = optimize.minimize_scalar(lambda lam: (_g_gaussian(lam) + key) / lam, bounds=(0.5 + 1e-12, 1 - 1e-15),
                                       method="bounded", options={"xatol": 1e-12})
        _CG_CACHE[key] = float(res.fun)
    return _CG_CACHE[key]


def _cg(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    uniq, inv = np.unique(x, return_inverse=True)
    return np.array([cal_c_gaussian(u) for u in uniq])[inv].reshape(x.shape)


def _k(x: np.ndarray) -> np.ndarray:
    """k(x) = log₂ x + 2, a bound on the phase index of an episode of x samples."""
    return np.log2(np.asarray(x, dtype=float)) + 2


def gaussian_threshold(w_a: np.ndarray, w_b: np.ndarray, n_arms: int, delta: np.ndarray | float) -> np.ndarray:
    """c^G_{a,b}(ω, δ) of thesis eq. (5.10) (δ may be an array, broadcast with ω)."""
    w_a, w_b = np.asarray(w_a, dtype=float), np.asarray(w_b, dtype=float)
    level = np.log((n_arms - 1) / np.asarray(delta, dtype=float)) / 2
    return 2 * _cg(np.broadcast_to(level, np.broadcast_shapes(level.shape, w_a.shape, w_b.shape))) \
        + 2 * np.log(4 + np.log(w_a)) + 2 * np.log(4 + np.log(w_b))


def private_gaussian_threshold(w_a: np.ndarray, w_b: np.ndarray, n_arms: int, delta: float, epsilon: float,
                               s: float = 2.0) -> np.ndarray:
    """c^{G,ε}_{a,b}(ω, δ) of thesis eq. (5.11): AdaP-TT's δ-correct threshold (Lemma 5.18)."""
    w_a, w_b = np.asarray(w_a, dtype=float), np.asarray(w_b, dtype=float)
    zeta = float(special.zeta(s))
    ka, kb = _k(w_a) ** s, _k(w_b) ** s
    base = 2 * gaussian_threshold(w_a, w_b, n_arms, delta / (2 * zeta**2 * ka * kb))
    noise = sum(np.log(2 * n_arms * zeta * kc / delta) ** 2 / wc for wc, kc in ((w_a, ka), (w_b, kb)))
    return base + noise / (epsilon**2 * SIGMA2)


def lambert_bar(x: np.ndarray) -> np.ndarray:
    """W̄₋₁(x) = −W₋₁(−e^{−x}) for x ≥ 1: the u ≥ 1 with u − log u = x (≈ x + log x)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore"):
        value = -np.real(special.lambertw(-np.exp(-x), k=-1))
    return np.where(x <= 1.0, 1.0, value)  # x = 1 is the branch point −1/e, where −e^{−x} may round past it


def star_h(x: np.ndarray, n_arms: int, delta: float, s: float = 2.0) -> np.ndarray:
    """h(x, δ) = W̄₋₁(2 log(3Kζ(s)k(x)^s/δ) + 4 log(4 + log x) + 1/2)/2 (thesis, after eq. (5.14))."""
    x = np.asarray(x, dtype=float)
    zeta = float(special.zeta(s))
    return lambert_bar(2 * np.log(3 * n_arms * zeta * _k(x) ** s / delta) + 4 * np.log(4 + np.log(x)) + 0.5) / 2


def star_threshold(m_a: np.ndarray, m_b: np.ndarray, w_a: np.ndarray, w_b: np.ndarray, n_arms: int,
                   delta: float, epsilon: float, s: float = 2.0) -> np.ndarray:
    """c̃^{G,ε}_{a,b}(μ̃, ω, δ) of thesis eq. (5.14): AdaP-TT⋆'s δ-correct two-regime threshold (Lemma 5.21).

    ``m_a`` is the candidate best arm's private mean; the regime is (μ̃_a − μ̃_b)₊ < 3ε.
    """
    w_a, w_b = np.asarray(w_a, dtype=float), np.asarray(w_b, dtype=float)
    sigma = math.sqrt(SIGMA2)
    zeta = float(special.zeta(s))
    ha, hb = star_h(w_a, n_arms, delta, s), star_h(w_b, n_arms, delta, s)
    log_a = np.log(3 * n_arms * zeta * _k(w_a) ** s / delta)
    log_b = np.log(3 * n_arms * zeta * _k(w_b) ** s / delta)
    gaussian = 0.5 * private_gaussian_threshold(w_a, w_b, n_arms, 2 * delta / 3, epsilon, s) \
        + math.sqrt(2) / (epsilon * sigma) * (np.sqrt(ha / w_a) * log_a + np.sqrt(hb / w_b) * log_b)
    k_max = np.maximum(_k(w_a), _k(w_b))
    linear = 3 / SIGMA2 * np.log(3 * n_arms * zeta * k_max / delta) \
        + 3 * epsilon / (math.sqrt(2) * sigma) * (np.sqrt(w_a * ha) + np.sqrt(w_b * hb))
    gap = np.maximum(np.asarray(m_a, dtype=float) - m_b, 0.0)
    return np.where(gap < 3 * epsilon, gaussian, linear)
