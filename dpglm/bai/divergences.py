"""Divergences and transport costs of ε-global-DP best-arm identification.

Bernoulli means throughout. ``kl`` is the Kullback–Leibler divergence, ``d_eps``
the privacy-aware divergence of Jourdan & Azize (2025, §3)
``d_ε(x, y) = inf_{z ∈ [x∧y, x∨y]} ε|z − x| + kl(z, y)``, and ``d_plus`` /
``d_minus`` its signed one-sided forms (paper §3; ``docs/references.md``).
``transport_cost`` is the GLR transport cost C*_ε (paper §4), solved in closed
form: its objective is convex and C¹ in the meeting point x, and on each of the
four branch combinations (kl / linear for either arm) the stationarity equation
is linear or quadratic in x. All functions broadcast over numpy arrays and
accept ε ∈ (0, ∞] (ε = ∞ gives the non-private kl forms).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import xlogy

from accounting.validation import check_array, short_repr

__all__ = ["kl", "d_plus", "d_minus", "d_eps", "transport_cost", "g_minus", "ids_leader_share"]


def _check_eps(eps: ArrayLike) -> np.ndarray:
    e = check_array("eps", eps)
    if np.any(~(e > 0)):
        raise ValueError(f"eps must be in (0, inf], got {short_repr(eps)}")
    return e


def _check_mean(name: str, x: ArrayLike) -> np.ndarray:
    a = check_array(name, x)
    if np.any(~((a >= 0) & (a <= 1))):
        raise ValueError(f"{name} must lie in [0, 1] (Bernoulli means), got {short_repr(x)}")
    return a


def _kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = xlogy(p, p) - xlogy(p, q) + xlogy(1 - p, 1 - p) - xlogy(1 - p, 1 - q)
    return np.where(p == q, 0.0, np.maximum(out, 0.0))


def kl(p: ArrayLike, q: ArrayLike) -> np.ndarray:
    """Bernoulli KL divergence kl(p, q), with 0·log 0 = 0 (inf when q ∈ {0, 1} ≠ p)."""
    return _kl(_check_mean("p", p), _check_mean("q", q))


def g_minus(mu: ArrayLike, eps: ArrayLike) -> np.ndarray:
    """g⁻_ε(μ) = μ / (μ + (1 − μ)e^{−ε}): end of the kl branch of d⁺_ε(μ, ·) (paper §3)."""
    mu = np.asarray(mu, dtype=float)
    e = np.exp(-np.asarray(eps, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        g = mu / (mu + (1 - mu) * e)
    return np.where(mu == 0, 0.0, g)


def _d_plus(mu: np.ndarray, x: np.ndarray, eps: np.ndarray) -> np.ndarray:
    q = -np.expm1(-eps)  # 1 − e^{−ε}, exact for tiny ε
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        # log(1 − x(1 − e^{−ε})) = log((1 − x) + x e^{−ε}): log1p for small ε, the sum of
        # exponentials for large ε, where 1 − e^{−ε} rounds to 1 (ε ≳ 37) and x = 1 gave inf
        log_rest = np.where(eps < 1, np.log1p(-x * q), np.logaddexp(np.log1p(-x), np.log(x) - eps))
        # ε·μ with 0·∞ = 0: at ε = ∞ this branch is reached only for μ = 0, where it is kl(0, x)
        lin = -log_rest - np.where(mu > 0, eps * mu, 0.0)
        # x ≤ g⁻_ε(μ) ⟺ x(1 − μ)e^{−ε} ≤ μ(1 − x), in logs: free of the rounding of g⁻ to 1
        kl_branch = np.log(x) + np.log1p(-mu) - eps <= np.log(mu) + np.log1p(-x)
    val = np.where(kl_branch, _kl(mu, x), lin)
    return np.where(x <= mu, 0.0, np.maximum(val, 0.0))


def d_plus(mu: ArrayLike, x: ArrayLike, eps: ArrayLike) -> np.ndarray:
    """Signed divergence d⁺_ε(μ, x): the ε-DP cost of moving mean μ *up* to x.

    0 if x ≤ μ; kl(μ, x) if μ < x ≤ g⁻_ε(μ); −log(1 − x(1 − e^{−ε})) − εμ beyond
    (paper §3, the minimiser z* = x e^{−ε}/(1 − x(1 − e^{−ε})) of ε|z − μ| + kl(z, x)).
    """
    return _d_plus(_check_mean("mu", mu), _check_mean("x", x), _check_eps(eps))


def d_minus(mu: ArrayLike, x: ArrayLike, eps: ArrayLike) -> np.ndarray:
    """Signed divergence d⁻_ε(μ, x) = d⁺_ε(1 − μ, 1 − x): cost of moving μ *down* to x."""
    mu = _check_mean("mu", mu)
    x = _check_mean("x", x)
    return _d_plus(1 - mu, 1 - x, _check_eps(eps))


def d_eps(x: ArrayLike, y: ArrayLike, eps: ArrayLike) -> np.ndarray:
    """d_ε(x, y) = inf_{z between x and y} ε|z − x| + kl(z, y) (paper §3, Bernoulli form)."""
    x = _check_mean("x", x)
    y = _check_mean("y", y)
    eps = _check_eps(eps)
    return np.where(y >= x, _d_plus(x, y, eps), _d_plus(1 - x, 1 - y, eps))


def _quadratic_roots(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both real roots of a x² + b x + c (nan where none), cancellation-free."""
    with np.errstate(invalid="ignore", divide="ignore"):
        disc = np.sqrt(b * b - 4 * a * c)
        t = -0.5 * (b + np.copysign(disc, b))
        r1 = t / a
        r2 = c / t
    return r1, r2


def _objective(x, m1, m2, w1, w2, eps):
    return w1 * _d_plus(1 - m1, 1 - x, eps) + w2 * _d_plus(m2, x, eps)


def _transport_cost(m1, m2, w1, w2, eps, *, return_argmin: bool = False):
    """Unvalidated closed-form C*_ε; inputs broadcast, means in [0, 1], weights ≥ 0.

    With ``return_argmin`` also the minimiser x* (m₁ when m₁ ≤ m₂), whose
    d⁺_ε(m₂, x*) is ∂C*/∂w₂ by the envelope theorem.
    """
    if np.ndim(eps) == 0 and np.isinf(eps):  # non-private: x* is the weighted mean (kl branch)
        m1, m2, w1, w2 = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (m1, m2, w1, w2)))
        with np.errstate(invalid="ignore"):
            x = np.where(m1 > m2, (w1 * m1 + w2 * m2) / (w1 + w2), m1)
        cost = np.where(m1 > m2, w1 * _kl(m1, x) + w2 * _kl(m2, x), 0.0)
        return (cost, x) if return_argmin else cost
    m1, m2, w1, w2, eps = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (m1, m2, w1, w2, eps))
    )
    shape = m1.shape  # work on ≥ 1-d arrays (the boundary repair below indexes them)
    m1, m2, w1, w2, eps = (np.atleast_1d(v) for v in (m1, m2, w1, w2, eps))
    e = np.exp(-eps)
    q = -np.expm1(-eps)
    s = w1 + w2
    with np.errstate(invalid="ignore", divide="ignore"):
        cands = [
            m1,
            m2,
            (w1 * m1 + w2 * m2) / s,  # both arms on their kl branch
            (w1 - w2 * e) / (q * s),  # both on the linear (TV) branch
        ]
        # leader kl, challenger linear: w1(x − m1)(1 − qx) + w2 q x(1 − x) = 0
        cands += _quadratic_roots(-q * s, w1 * (1 + m1 * q) + w2 * q, -w1 * m1)
        # leader linear, challenger kl: w2(x − m2)(e + qx) − w1 q x(1 − x) = 0
        cands += _quadratic_roots(q * s, w2 * e - w2 * m2 * q - w1 * q, -w2 * m2 * e)
    lo, hi = np.minimum(m1, m2), m1
    # branch of each arm at x: leader on kl iff x ≥ h1, challenger on kl iff x ≤ g2;
    # the minimiser is interior (the derivative is < 0 at m2 and > 0 at m1)
    with np.errstate(invalid="ignore", divide="ignore"):
        h1 = np.where(m1 == 1, 1.0, m1 * e / ((1 - m1) + m1 * e))
    g2 = g_minus(m2, eps)
    kinds = [(None, None), (None, None), (True, True), (False, False), (True, False), (True, False),
             (False, True), (False, True)]  # (leader on kl, challenger on kl) per candidate
    chosen = np.full(m1.shape, np.nan)
    for x, (lead_kl, ch_kl) in zip(cands, kinds, strict=True):
        if lead_kl is None:
            continue
        ok = (x > lo) & (x < hi) & ((x >= h1) == lead_kl) & ((x <= g2) == ch_kl)
        chosen = np.where(np.isnan(chosen) & ok, x, chosen)
    arg = chosen
    with np.errstate(invalid="ignore"):
        best = _objective(np.nan_to_num(chosen, nan=0.5), m1, m2, w1, w2, eps)
    best = np.where(np.isnan(chosen), np.inf, best)
    miss = np.isnan(chosen) & (m1 > m2)
    if np.any(miss):  # rounding at a branch boundary: take the best of all candidates there
        idx = np.nonzero(miss)
        arg = np.where(miss, m1, arg)
        for x in cands:
            xi = np.clip(np.nan_to_num(x[idx], nan=0.5), lo[idx], hi[idx])
            with np.errstate(invalid="ignore"):
                val = _objective(xi, m1[idx], m2[idx], w1[idx], w2[idx], eps[idx])
            better = val < best[idx]
            best[idx] = np.where(better, val, best[idx])
            arg[idx] = np.where(better, xi, arg[idx])
    cost = np.where(m1 <= m2, 0.0, best).reshape(shape)
    if return_argmin:
        return cost, np.where(m1 <= m2, m1, arg).reshape(shape)
    return cost


def transport_cost(
    m_leader: ArrayLike, m_challenger: ArrayLike, w_leader: ArrayLike, w_challenger: ArrayLike, eps: ArrayLike
) -> np.ndarray:
    """GLR transport cost C*_ε(1, 2, ν, w) = inf_x w₁ d⁻_ε(m₁, x) + w₂ d⁺_ε(m₂, x).

    paper §4 (GLR stopping statistic, docs/references.md "Transport cost"). Zero when
    m₁ ≤ m₂; otherwise the objective is convex and C¹ on [m₂, m₁], so its
    minimum is the best of the (closed-form) stationary points of the four
    branch combinations and the two end points, evaluated on the true
    objective. Vectorised: every argument broadcasts (arm pairs × runs).
    """
    m1 = _check_mean("m_leader", m_leader)
    m2 = _check_mean("m_challenger", m_challenger)
    w1 = np.asarray(w_leader, dtype=float)
    w2 = np.asarray(w_challenger, dtype=float)
    if np.any(~(w1 >= 0)) or np.any(~(w2 >= 0)) or np.any(~np.isfinite(w1)) or np.any(~np.isfinite(w2)):
        raise ValueError("w_leader and w_challenger must be finite and >= 0")
    return _transport_cost(m1, m2, w1, w2, _check_eps(eps))


def _ids_leader_share(m1, m2, w1, w2, eps):
    """Unvalidated :func:`ids_leader_share`; inputs broadcast."""
    _, x = _transport_cost(m1, m2, w1, w2, eps, return_argmin=True)
    gain1 = w1 * _d_plus(1 - np.asarray(m1, dtype=float), 1 - x, np.asarray(eps, dtype=float))
    gain2 = w2 * _d_plus(np.asarray(m2, dtype=float), x, np.asarray(eps, dtype=float))
    total = gain1 + gain2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, gain1 / np.where(total > 0, total, 1.0), 0.5)


def ids_leader_share(
    m_leader: ArrayLike, m_challenger: ArrayLike, w_leader: ArrayLike, w_challenger: ArrayLike, eps: ArrayLike
) -> np.ndarray:
    """IDS leader share β = w₁d⁻_ε(m₁, x*) / (w₁d⁻_ε(m₁, x*) + w₂d⁺_ε(m₂, x*)), x* the minimiser of C*_ε.

    Information-directed selection (You, Qin, Wang & Yang, COLT 2023; for Top Two with
    any divergence, Jourdan et al. 2022): the two terms of the transport cost
    :func:`transport_cost` at its minimiser, the leader's share of it. Gaussian costs
    give w₂/(w₁ + w₂). 1/2 where both terms vanish (m₁ ≤ m₂). ``docs/bai-threshold.md``, "IDS".
    """
    m1 = _check_mean("m_leader", m_leader)
    m2 = _check_mean("m_challenger", m_challenger)
    w1 = check_array("w_leader", w_leader)
    w2 = check_array("w_challenger", w_challenger)
    if np.any(~(w1 > 0)) or np.any(~(w2 > 0)) or np.any(~np.isfinite(w1)) or np.any(~np.isfinite(w2)):
        raise ValueError("w_leader and w_challenger must be finite and > 0")
    return _ids_leader_share(m1, m2, w1, w2, _check_eps(eps))
