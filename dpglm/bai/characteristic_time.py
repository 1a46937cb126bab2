"""Characteristic time T*_ε(ν) and the optimal allocation w*_ε(ν).

paper §3 (lower bound): T*_ε(ν)⁻¹ = max_{w ∈ Σ_K} min_{a ≠ a*} C*_ε(a*, a, ν, w)
and E[τ] ≥ T*_ε(ν)·log(1/(3δ)) for every δ-correct ε-global-DP algorithm.

Solved as in Garivier & Kaufmann (2016, Thm. 5) with d_ε in place of kl:
with w_{a*} = 1 and r_a = w_a / w_{a*}, C*_ε(a*, a, ν, (1, r_a)) = g_a(r_a) is
concave increasing in r_a; at the optimum all transport costs are equal to a
common y, so r_a = g_a⁻¹(y) and T*⁻¹ = max_y y / (1 + Σ_a g_a⁻¹(y)), a
one-dimensional quasi-concave maximisation (ratio of a linear function to a
convex one). Inner inversions are vectorised bisections over the arms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize_scalar

from accounting.validation import check_array, check_real
from dpglm.bai.divergences import _check_mean, _d_plus, _transport_cost

__all__ = ["CharacteristicTime", "characteristic_time"]


@dataclass(frozen=True)
class CharacteristicTime:
    """T*_ε(ν) and the allocation w*_ε(ν) attaining it (sums to 1)."""

    value: float
    allocation: np.ndarray
    best_arm: int

    def lower_bound(self, delta: float) -> float:
        """The sample-complexity lower bound T*_ε(ν)·log(1/(3δ)) (paper §3)."""
        delta = check_real("delta", delta, 0.0, 1 / 3, low_open=True, high_open=True)
        return self.value * float(np.log(1 / (3 * delta)))


def _invert(m1: float, m: np.ndarray, y: float, eps: float, cap: np.ndarray) -> np.ndarray:
    """r_a with g_a(r_a) = y (g_a(r) = C*_ε(1, a, ν, (1, r))), by bisection on log r."""
    lo = np.full(m.shape, -40.0)
    hi = np.full(m.shape, 40.0)
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        g = _transport_cost(m1, m, 1.0, np.exp(mid), eps)
        up = g < y
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    r = np.exp(0.5 * (lo + hi))
    return np.where(y >= cap, np.inf, r)


def characteristic_time(mu: ArrayLike, eps: float = np.inf) -> CharacteristicTime:
    """T*_ε(ν) for Bernoulli means ``mu`` (unique best arm) and ε ∈ (0, ∞].

    paper §3, Thm. (lower bound); ε = ∞ gives the non-private T*(ν) of
    Garivier & Kaufmann (2016).
    """
    mu = _check_mean("mu", check_array("mu", mu).ravel())
    eps = math.inf if isinstance(eps, float) and eps == math.inf else check_real("eps", eps, 0.0, low_open=True)
    if mu.size < 2:
        raise ValueError("mu must hold at least two arms")
    best = int(np.argmax(mu))
    others = np.delete(np.arange(mu.size), best)
    if np.any(mu[others] == mu[best]):
        raise ValueError("mu must have a unique best arm")
    m1, m = float(mu[best]), mu[others]
    cap = _d_plus(np.asarray(1 - m1), 1 - m, np.asarray(eps))  # g_a(∞) = d⁻_ε(μ*, μ_a)
    ymax = float(cap.min())

    def neg_ratio(s: float) -> float:
        y = s * ymax
        return -y / (1.0 + _invert(m1, m, y, eps, cap).sum())

    res = minimize_scalar(neg_ratio, bounds=(1e-9, 1 - 1e-12), method="bounded", options={"xatol": 1e-10})
    y = res.x * ymax
    r = _invert(m1, m, y, eps, cap)
    w = np.empty(mu.size)
    w[best] = 1.0
    w[others] = r
    w /= w.sum()
    return CharacteristicTime(value=float(-1.0 / res.fun), allocation=w, best_arm=best)
