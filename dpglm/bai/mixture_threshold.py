r"""Time-uniform pair threshold for DP-TT's GLR stopping rule (mixture martingales, Ville).

The proof is ``docs/bai-threshold.md``; this module computes its bound.
For a pair of arms (a, b) at phases (k_a, k_b), with phase counts n_k fixed
by the refresh schedule, :class:`MixtureThreshold` returns c(k_a, k_b) such
that, for any sampling rule,

    P[∃t: Ñ_a d⁻_ε(μ̃_a, μ_a) + Ñ_b d⁺_ε(μ̃_b, μ_b) > c(k_a, k_b)] ≤ δ/(K − 1).

Per arm, Φ = w₀ + (1 − w₀)∫ exp(λ(S_n + W_k) − nψ_μ(λ) − kφ(λ)) ρ(dλ) is a
nonnegative martingale in global time (w₀ = 0.1; ψ_μ the Bernoulli log-MGF, φ the
per-batch noise log-MGF, ρ a prior on λ = εθ ∈ (0, ε) with density
1/(θ(1 + log(1/θ))²)); the product over the two arms of a pair is too, and Ville's
inequality bounds its crossing of (K − 1)/δ once for all times (Kaufmann &
Koolen 2021, "Mixture martingales revisited", §2; Howard et al. 2021 for the
Ville step), instead of a union over phases. The statistic F = sup_{λ∈[0,ε]}
[λ(S + W) − nψ(λ)] is concave in λ, so log Φ ≥ Ĝ_k(F) (lower-bounded
numerically by one-sided Riemann sums, see :meth:`MixtureThreshold.log_phi_lower`),
and c is the largest F_a + F_b with Ĝ(F_a) + Ĝ(F_b) ≤ log((K − 1)/δ).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from mechanisms.geometric import refresh_points

__all__ = ["MixtureThreshold", "discrete_laplace_log_mgf", "laplace_log_mgf"]

_W0 = 0.1  # prior atom at λ = 0: Φ ≥ w₀ whatever the data, so one arm's luck cannot hide the other's


def laplace_log_mgf(kappa: float = 1.0) -> Callable[[np.ndarray], np.ndarray]:
    """φ(θ) = log E exp(εθ·L) for L ~ Lap(b), κ = εb ≥ 1: −log(1 − (κθ)²), +inf for κθ ≥ 1."""
    if not kappa >= 1.0:
        raise ValueError(f"kappa = epsilon * scale must be >= 1, got {kappa!r}")

    def phi(theta: np.ndarray) -> np.ndarray:
        x = kappa * np.asarray(theta, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x < 1, -np.log1p(-x * x), np.inf)

    return phi


def discrete_laplace_log_mgf(t: int, kappa: float = 1.0) -> Callable[[np.ndarray], np.ndarray]:
    """φ(θ) for discrete Laplace noise P(z) ∝ e^{−|z|/t} on a lattice of step h, with ε·h·t = κ ≥ 1.

    E e^{sZ} = (1 − p)²/((1 − pe^s)(1 − pe^{−s})), p = e^{−1/t}, |s| < 1/t; at λ = εθ, s = κθ/t.
    """
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1:
        raise ValueError(f"t must be an integer >= 1, got {t!r}")
    if not kappa >= 1.0:
        raise ValueError(f"kappa must be >= 1, got {kappa!r}")
    p = np.exp(-1.0 / t)

    def phi(theta: np.ndarray) -> np.ndarray:
        s = kappa * np.asarray(theta, dtype=float) / t
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            val = 2 * np.log1p(-p) - np.log1p(-p * np.exp(s)) - np.log1p(-p * np.exp(-s))
        return np.where(kappa * np.asarray(theta) < 1, val, np.inf)

    return phi


class MixtureThreshold:
    r"""Provably δ-correct *pair* threshold c(k_a, k_b) for DP-TT (time-uniform; ``docs/bai-threshold.md``).

    Stop when C*_ε(ã, a, μ̃, Ñ) > c(k_ã, k_a) for every a ≠ ã. Replaces the sum
    c(k_ã) + c(k_a) of two per-arm thresholds, each a union over phases
    (:class:`~dpglm.bai.thresholds.LaplaceTailThreshold`): the pair pays
    log((K − 1)/δ) once and no union over phases.

    Parameters
    ----------
    n_arms : int
        K ≥ 2.
    delta : float
        Confidence δ ∈ (0, 1).
    epsilon : float
        ε of each batch (ε = ∞: no noise).
    eta : float
        Refresh growth; the phase-k count is the k-th point ⌈(1 + η)^j⌉.
    noise_log_mgf : callable, optional
        φ(θ), the log-MGF of one batch's noise at λ = εθ; default
        :func:`laplace_log_mgf` (κ = 1). It must be the noise actually drawn.
    f_max, f_step : float
        Grid of statistic values F on which Ĝ is tabulated.
    """

    provable = True
    pairwise = True

    def __init__(self, n_arms: int, delta: float, epsilon: float, eta: float = 1.0, *,
                 noise_log_mgf: Callable[[np.ndarray], np.ndarray] | None = None,
                 f_max: float = 400.0, f_step: float = 0.25) -> None:
        if isinstance(n_arms, bool) or not isinstance(n_arms, (int, np.integer)) or n_arms < 2:
            raise ValueError(f"n_arms must be an integer >= 2, got {n_arms!r}")
        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        if not 0 < epsilon < np.inf:
            raise ValueError(f"epsilon must be in (0, inf), got {epsilon!r}")
        self.n_arms, self.delta, self.epsilon, self.eta = int(n_arms), float(delta), float(epsilon), float(eta)
        self.phi = noise_log_mgf if noise_log_mgf is not None else laplace_log_mgf()
        self.level = np.log((self.n_arms - 1) / self.delta)
        self.points = refresh_points(self.eta)
        self.f = np.arange(0.0, f_max + f_step / 2, f_step)
        # v grid (s = e^{−v} = λ/λ*): cells growing by 1% from 1e-4 up to v = 45
        widths = 1e-4 * 1.01 ** np.arange(1200)
        self._v = np.concatenate([[0.0], np.cumsum(widths)])
        self._v = self._v[self._v <= 45.0]
        dv = np.diff(self._v)
        # lower Riemann sum: exp(F e^{−v}) at the cell's right end (decreasing in v)
        with np.errstate(under="ignore"):
            self._e = np.exp(self.f[:, None] * (np.exp(-self._v[1:])[None, :] - 1.0)) * dv[None, :]
        self._g: dict[int, np.ndarray] = {}
        self._pair: dict[tuple[int, int], float] = {}

    def log_phi_lower(self, k: int) -> np.ndarray:
        """Ĝ_k on the grid ``self.f``: a lower bound of log Φ for an arm at phase k whose statistic is F.

        Φ ≥ w₀ + (1 − w₀) inf_{u ∈ [u_min, 1]} J(u, F),
        J(u, F) = ∫_0^∞ exp(F e^{−v} − kφ(u e^{−v})) / (1 + log(1/u) + v)² dv,
        u = λ*/ε, u_min = min(1, √(8F/n_k)/ε) (docs/bai-threshold.md, Lemma 2).
        Each u-cell [u_j, u_{j+1}] and v-cell takes every factor at its worst end,
        so the table is a rigorous lower bound (up to float rounding).
        """
        if k in self._g:
            return self._g[k]
        if k < 1 or k > len(self.points):
            raise ValueError(f"phase must be in [1, {len(self.points)}], got {k}")
        n = float(self.points[k - 1])
        eps = self.epsilon
        u_lo = max(1e-300, min(1.0, np.sqrt(8 * 1e-3 / n) / eps))
        u = np.unique(np.concatenate([np.geomspace(u_lo, 1.0, 120), [1.0]]))
        u_left, u_right = (u[:-1], u[1:]) if u.size > 1 else (u, u)  # u_min = 1 for every F: only u = 1
        theta = u_right[None, :] * np.exp(-self._v[:-1])[:, None]  # worst (largest) θ of each cell
        with np.errstate(over="ignore", invalid="ignore"):
            pen = np.exp(-k * self.phi(theta))
        prior = 1.0 / (1.0 + np.log(1.0 / u_left)[None, :] + self._v[1:, None]) ** 2  # worst: smallest u
        h = np.nan_to_num(pen, nan=0.0) * prior  # (nv, nu)
        j = self._e @ h  # (nF, nu): J without the factor e^F
        # cell j counts for F iff it meets [u_min(F), 1]
        u_min = np.minimum(1.0, np.sqrt(8 * self.f / n) / eps)
        valid = u_right[None, :] >= u_min[:, None]
        jmin = np.where(valid, j, np.inf).min(axis=1)
        with np.errstate(divide="ignore", over="ignore"):
            log_j = self.f + np.log(jmin)
        g = np.logaddexp(np.log(_W0), np.log1p(-_W0) + log_j)
        g[self.f < 1e-3] = np.log(_W0)  # below the u grid only the atom is counted
        if np.any(np.diff(g) < 0):
            raise RuntimeError("Ĝ is not monotone; please report this bug")
        self._g[k] = g
        return g

    def pair(self, k_a: int, k_b: int) -> float:
        """c(k_a, k_b): sup F_a + F_b over Ĝ_{k_a}(F_a) + Ĝ_{k_b}(F_b) ≤ log((K − 1)/δ), rounded outward."""
        key = (min(k_a, k_b), max(k_a, k_b))
        if key not in self._pair:
            ga, gb = self.log_phi_lower(key[0]), self.log_phi_lower(key[1])
            rest = self.level - ga  # budget left for arm b after F_a = f[j]
            # sup{F_b : Ĝ_b(F_b) ≤ y} ≤ the first grid point where Ĝ_b > y
            idx = np.searchsorted(gb, rest, side="right")
            ok = rest >= gb[0]
            if np.any(ok & (idx >= len(self.f))):
                raise RuntimeError("MixtureThreshold grid too short; raise f_max")
            fa_hi = np.append(self.f[1:], self.f[-1])  # F_a ∈ [f_j, f_{j+1}]
            cand = fa_hi[ok] + self.f[np.minimum(idx[ok], len(self.f) - 1)]
            self._pair[key] = float(cand.max())
        return self._pair[key]

    def __call__(self, phase_a: ArrayLike, phase_b: ArrayLike) -> np.ndarray:
        """c(k_a, k_b) elementwise for broadcastable integer phase arrays (k ≥ 1)."""
        ka, kb = np.broadcast_arrays(np.asarray(phase_a), np.asarray(phase_b))
        if np.any(ka < 1) or np.any(kb < 1):
            raise ValueError("phases must be >= 1")
        pairs = np.stack([np.minimum(ka, kb).ravel(), np.maximum(ka, kb).ravel()], axis=1)
        uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
        vals = np.array([self.pair(int(a), int(b)) for a, b in uniq])
        return vals[inv.ravel()].reshape(ka.shape)
