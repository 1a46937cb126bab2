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

from accounting.validation import check_int, check_positive, check_probability
from mechanisms.geometric import refresh_points

__all__ = ["ESTIMATORS", "MixtureThreshold", "batch_weights", "discrete_laplace_log_mgf", "laplace_log_mgf"]

_W0 = 0.1  # prior atom at λ = 0: Φ ≥ w₀ whatever the data, so one arm's luck cannot hide the other's
#: "cumulative": every batch weighs 1 (the paper's estimator); "weighted": batch j weighs batch_weights(m_j, ε)
ESTIMATORS = ("cumulative", "weighted")
_U_TOP_INF = 64.0  # ε = ∞: the λ* range covered by cells (beyond it only the atom w₀ is counted)


def batch_weights(sizes: ArrayLike, epsilon: float) -> np.ndarray:
    """Weight of a batch of ``sizes`` rewards: w = m/(m + 8/ε²) ∈ (0, 1] (docs/bai-threshold.md, "Weighted").

    The inverse variance of the batch's noisy mean (B_j/m_j), m_j²/(m_jσ² + 2/ε²), taken per
    unit of B_j and scaled by σ² = 1/4 (the largest Bernoulli variance, never the unknown
    one): it is a function of public quantities only (the batch size and ε). ε = ∞: 1.
    """
    m = np.asarray(sizes, dtype=float)
    if not np.isfinite(epsilon):
        return np.ones_like(m)
    return m / (m + 8.0 / float(epsilon) ** 2)


def laplace_log_mgf(kappa: float = 1.0) -> Callable[[np.ndarray], np.ndarray]:
    """φ(θ) = log E exp(εθ·L) for L ~ Lap(b), κ = εb > 0: −log(1 − (κθ)²), +inf for κθ ≥ 1."""
    kappa = check_positive("kappa", kappa)  # kappa = epsilon * scale

    def phi(theta: np.ndarray) -> np.ndarray:
        x = kappa * np.asarray(theta, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x < 1, -np.log1p(-x * x), np.inf)

    return phi


def discrete_laplace_log_mgf(t: int, kappa: float = 1.0) -> Callable[[np.ndarray], np.ndarray]:
    """φ(θ) for noise g·Y, Y discrete Laplace P(y) ∝ e^{−|y|/t} on ℤ, with κ = ε·g·t > 0 (scale in reward units × ε).

    E e^{sY} = (1 − p)²/((1 − pe^s)(1 − pe^{−s})), p = e^{−1/t}, |s| < 1/t, at s = λg = κθ/t;
    written with expm1 (1 − pe^{±s} = −expm1(±s − 1/t)) so that t up to 2^52 stays exact.
    This is the noise :class:`mechanisms.lattice.LaplaceLattice` draws.
    """
    t = check_int("t", t)
    kappa = check_positive("kappa", kappa)
    inv_t = 1.0 / float(t)

    def phi(theta: np.ndarray) -> np.ndarray:
        th = np.asarray(theta, dtype=float)
        s = np.minimum(kappa * th, 1.0) * inv_t
        with np.errstate(divide="ignore", invalid="ignore"):
            val = 2 * np.log(-np.expm1(-inv_t)) - np.log(-np.expm1(s - inv_t)) - np.log(-np.expm1(-s - inv_t))
        return np.where(kappa * th < 1, val, np.inf)

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
    estimator : {"cumulative", "weighted"}
        The estimator whose deviations are bounded: every batch sum with weight 1
        (the paper's), or batch j with the public weight :func:`batch_weights` (the
        phase count is then the effective count W_k; docs/bai-threshold.md, "Weighted").
    schedule : {"refresh", "every-count"}
        Phase k ends at the k-th refresh point, or (``"every-count"``, an estimator
        refreshed at every pull, ε = ∞ only: EB-TCI with this threshold) at count k.

    ε = ∞ (no noise): λ is unbounded, the prior is two-sided on λ itself, and the
    threshold exists only in its data-dependent form (:meth:`pair_data`).
    """

    provable = True
    pairwise = True
    data_dependent = True

    def __init__(self, n_arms: int, delta: float, epsilon: float, eta: float = 1.0, *,
                 noise_log_mgf: Callable[[np.ndarray], np.ndarray] | None = None,
                 f_max: float = 400.0, f_step: float = 0.25, estimator: str = "cumulative",
                 schedule: str = "refresh") -> None:
        self.n_arms, self.delta = check_int("n_arms", n_arms, 2), check_probability("delta", delta)
        self.finite = not (isinstance(epsilon, (float, np.floating)) and epsilon == np.inf)
        self.epsilon = check_positive("epsilon", epsilon) if self.finite else np.inf
        self.eta = float(eta)
        if estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
        if schedule not in ("refresh", "every-count") or (schedule == "every-count" and self.finite):
            raise ValueError(f"schedule must be 'refresh', or 'every-count' with epsilon = inf, got {schedule!r}")
        self.estimator, self.schedule = estimator, schedule
        self.two_sided = estimator == "weighted" or not self.finite  # prior on θ ∈ (0, ∞) (docs: "Weighted")
        # the two-sided prior's centre log θ₀ (public: ε only): where log(1/max w) sits once batches
        # hold m ≈ 20/(0.1ε) rewards (c ≈ 20 nats, a gap of 0.1), i.e. log(1 + 1/(25ε))
        self.centre = float(np.log1p(1.0 / (25.0 * self.epsilon))) if estimator == "weighted" and self.finite else 0.0
        self.phi = noise_log_mgf if noise_log_mgf is not None else laplace_log_mgf()
        self.level = np.log((self.n_arms - 1) / self.delta)
        self.points = refresh_points(self.eta) if schedule == "refresh" else None  # every-count: n_k = k
        self.f = np.arange(0.0, f_max + f_step / 2, f_step)
        # v grid (s = e^{−v} = λ/λ*): cells growing by 1% from 1e-4 up to v = 45
        widths = 1e-4 * 1.01 ** np.arange(1200)
        self._v = np.concatenate([[0.0], np.cumsum(widths)])
        self._v = self._v[self._v <= 45.0]
        dv = np.diff(self._v)
        # lower Riemann sum: exp(F e^{−v}) at the cell's right end (decreasing in v)
        with np.errstate(under="ignore"):
            self._e = np.exp(self.f[:, None] * (np.exp(-self._v[1:])[None, :] - 1.0)) * dv[None, :]
        self._g: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
        self._pair: dict[tuple[int, int], float] = {}
        self._j_inf: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def phase(self, k: int) -> tuple[float, np.ndarray, float]:
        """Phase k's effective count n_k, the batch weights v_j = w_j/max_{i≤k} w_i (j ≤ k) and log(1/max w).

        Cumulative: n_k is the k-th refresh point and every v_j = 1 (shift 0). Weighted:
        n_k = W_k = Σ_j v_j m_j with m_j the batch sizes (docs/bai-threshold.md, "Weighted").
        """
        if self.points is None:  # every count is a phase (ε = ∞): no noise, so the weights do not matter
            return float(check_int("phase", k, 1)), np.ones(1), 0.0
        if k < 1 or k > len(self.points):
            raise ValueError(f"phase must be in [1, {len(self.points)}], got {k}")
        if self.estimator == "cumulative" or not self.finite:
            return float(self.points[k - 1]), np.ones(k), 0.0
        sizes = np.diff(np.concatenate([[0], self.points[:k]])).astype(float)
        w = batch_weights(sizes, self.epsilon)
        top = float(w.max())
        v = w / top
        return float(np.sum(v * sizes)), v, float(np.log(1.0 / top))

    def _prior(self, u_left: np.ndarray, u_right: np.ndarray, shift: float) -> np.ndarray:
        """The prior factor of each (v, u) cell at its smallest value (docs/bai-threshold.md, Lemma 4).

        One-sided (cumulative, finite ε): ρ(θ) = 1/(θ(1 + log(1/θ))²) on (0, 1), factor
        1/(1 + log(1/u) + v)². Two-sided: ρ(θ) = 1/(2θ(1 + |log θ|)²) on (0, ∞) with
        log θ = shift + log u − v, factor 1/(2(1 + |log θ|)²) at the cell's largest |log θ|.
        """
        v_lo, v_hi = self._v[:-1, None], self._v[1:, None]
        if not self.two_sided:
            return 1.0 / (1.0 + np.log(1.0 / u_left)[None, :] + v_hi) ** 2
        lo = shift + np.log(u_left)[None, :] - v_hi
        hi = shift + np.log(u_right)[None, :] - v_lo
        return 0.5 / (1.0 + np.maximum(np.abs(lo), np.abs(hi))) ** 2

    def _table(self, k: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Per phase k: prefix minima PM[m, i] = min_{i_lo(m) ≤ i' ≤ i} J(cell i', f_m) (no e^F), and u-cell left ends.

        J(u, F) = ∫_0^∞ exp(F e^{−v} − Σ_j φ(u e^{−v} v_j)) ρ-factor dv (k noise terms
        φ(θ) for the cumulative estimator), a lower Riemann sum on cells (every factor at
        its worst end); cell i counts for the F-cell [f_m, f_{m+1}] if it meets
        [u_min(f_m), u_max], u_min(F) = min(1, √(8F/n_k)/ε) (docs/bai-threshold.md, Lemma 2).
        """
        n, v, shift = self.phase(k)
        shift -= self.centre
        if self.points is None:  # every count a phase: one table per count bucket (below)
            k = int(np.ceil(np.log(n) / np.log(1.25) - 1e-9))
        if k in self._g:
            return self._g[k]
        if not self.finite:
            # every-count: the table for the bucket's largest count 1.25^k ≥ n. A larger n only lowers
            # u_min (more u-cells, a smaller infimum), so the table stays a lower bound.
            self._g[k] = self._table_inf(1.25**k if self.points is None else n)
            return self._g[k]
        eps = self.epsilon
        u_lo = max(1e-300, min(1.0, np.sqrt(8 * 1e-3 / n) / eps))
        u = np.unique(np.concatenate([np.geomspace(u_lo, 1.0, 120), [1.0]]))
        u.setflags(write=False)  # cached with views of it (a checkpoint saves read-only views as copies)
        u_left, u_right = (u[:-1], u[1:]) if u.size > 1 else (u, u)  # u_min = 1 for every F: only u = 1
        theta = u_right[None, :] * np.exp(-self._v[:-1])[:, None]  # worst (largest) θ of each cell
        with np.errstate(over="ignore", invalid="ignore"):
            if self.estimator == "cumulative":
                pen = np.exp(-k * self.phi(theta))
            else:
                pen = np.exp(-sum(self.phi(theta * vj) for vj in v))
        h = np.nan_to_num(pen, nan=0.0) * self._prior(u_left, u_right, shift)  # (nv, nu)
        j = self._e @ h  # (nF, nu)
        u_min = np.minimum(1.0, np.sqrt(8 * self.f / n) / eps)
        j = np.where(u_right[None, :] >= u_min[:, None], j, np.inf)
        pm = np.minimum.accumulate(j, axis=1)
        self._g[k] = (pm, u_left, n)
        return self._g[k]

    def _table_inf(self, n: float) -> tuple[np.ndarray, np.ndarray, float]:
        """ε = ∞: λ* = u ∈ [√(8F/n), Λ(F, m)] on one fixed u grid [1e-6, 64]; no noise, so J is computed once.

        A u below the grid is not covered: its F-cells get J = 0 (only the atom counts).
        """
        if self._j_inf is None:
            u = np.geomspace(1e-6, _U_TOP_INF, 240)
            u.setflags(write=False)  # cached with views of it (a checkpoint saves read-only views as copies)
            u_left, u_right = u[:-1], u[1:]
            self._j_inf = (self._e @ self._prior(u_left, u_right, 0.0), u_left, u_right)
        j, u_left, u_right = self._j_inf
        u_min = np.sqrt(8 * self.f / n)
        j = np.where(u_right[None, :] >= u_min[:, None], j, np.inf)
        j = np.where((u_min < u_left[0])[:, None], 0.0, j)
        return np.minimum.accumulate(j, axis=1), u_left, n

    def _cell_lower(self, k: int, side_mean: np.ndarray | None = None) -> np.ndarray:
        """Lower bounds of log Φ over each F-cell [f_m, f_{m+1}] (m = 0..len(f) − 2), for an arm at phase k.

        ``side_mean`` (optional, any shape): the arm's clipped private mean seen from
        the deviation's side (μ̃ for over-, 1 − μ̃ for under-estimation). For it in
        (0, 1), λ*/ε ≤ u_max(F) = (F/n − log(1 − m))/(mε) (Lemma 2b), which removes
        the noise penalty of large u when ε is large; without it, u_max = 1.
        Returns shape side_mean.shape + (len(f) − 1,).
        """
        pm, u_left, _ = self._table(k)
        n = self.phase(k)[0]  # the exact count for u_max (it grows as n shrinks)
        f_lo, f_hi = self.f[:-1], self.f[1:]
        scale, top = (self.epsilon, 1.0) if self.finite else (1.0, _U_TOP_INF)
        if side_mean is None:
            lb = pm[:-1, -1] if self.finite else np.zeros(len(f_lo))  # ε = ∞: λ* unbounded without the mean
        else:
            m = np.asarray(side_mean, dtype=float)[..., None]
            with np.errstate(divide="ignore", invalid="ignore"):
                u_max = np.where((m > 0) & (m < 1), (f_hi / n - np.log1p(-m)) / (m * scale), np.inf)
            u_max = u_max * (1 + 1e-9)
            i_hi = np.searchsorted(u_left, np.minimum(top, u_max), side="right") - 1
            rows = np.broadcast_to(np.arange(len(f_lo)), i_hi.shape)
            lb = np.where(i_hi >= 0, pm[rows, np.maximum(i_hi, 0)], np.inf)  # inf: no consistent F in the cell
            if not self.finite:  # λ* may lie beyond the grid: count the atom only
                lb = np.where(u_max > top, 0.0, lb)
        with np.errstate(divide="ignore", over="ignore"):
            g = np.logaddexp(np.log(_W0), np.log1p(-_W0) + f_lo + np.log(lb))
        return np.where(f_lo < 1e-3, np.log(_W0), g)  # below the u grid only the atom is counted

    def _sup(self, ga: np.ndarray, gb: np.ndarray) -> np.ndarray:
        """sup F_a + F_b over cells with ga[.., j] + gb[.., m] ≤ level: max f_{j+1} + f_{m+1} (rows batched).

        ga, gb: (..., nf) cell lower bounds. A row-offset searchsorted does every row at
        once; values are clipped to ±1e4 first (they are logs of Φ; the budget
        level − ga lies in [level − 1e4, level + log(1/w₀)]), which keeps every comparison.
        """
        shape = np.broadcast_shapes(ga.shape, gb.shape)
        ga = np.broadcast_to(ga, shape).reshape(-1, shape[-1])
        gb = np.broadcast_to(gb, shape).reshape(-1, shape[-1])
        p, nf = gb.shape
        rb = np.minimum.accumulate(np.clip(gb, -1e4, 1e4)[:, ::-1], axis=1)[:, ::-1]  # non-decreasing rows
        y = np.clip(self.level - ga, -1e4, 1e4)
        off = (np.arange(p) * 1e5)[:, None]
        idx = np.searchsorted((rb + off).ravel(), (y + off).ravel(), side="right").reshape(p, nf)
        idx -= (np.arange(p) * nf)[:, None] + 1  # last feasible cell of b, per row (−1: none)
        ok = idx >= 0
        unbounded = ok & (idx >= nf - 1) | (ga[:, -1] + rb[:, 0] <= self.level)[:, None]
        if self.finite and np.any(unbounded):
            raise RuntimeError("MixtureThreshold grid too short; raise f_max")
        f_hi = self.f[1:]
        val = np.where(ok, f_hi[None, :] + f_hi[np.maximum(idx, 0)], -np.inf)
        val = np.where(unbounded.any(axis=1), np.inf, val.max(axis=1))  # ε = ∞: only the atom bounds it
        return val.reshape(shape[:-1])

    def log_phi_lower(self, k: int) -> np.ndarray:
        """Data-free lower bounds of log Φ per F-cell for an arm at phase k (u_max = 1)."""
        return self._cell_lower(k)

    def pair(self, k_a: int, k_b: int) -> float:
        """Data-free c(k_a, k_b): sup F_a + F_b over Ĝ_{k_a}(F_a) + Ĝ_{k_b}(F_b) ≤ log((K − 1)/δ)."""
        key = (min(k_a, k_b), max(k_a, k_b))
        if key not in self._pair:
            self._pair[key] = float(self._sup(self._cell_lower(key[0]), self._cell_lower(key[1])))
        return self._pair[key]

    def pair_data(self, k_lead: np.ndarray, m_lead: np.ndarray, k: np.ndarray, m: np.ndarray,
                  lead: np.ndarray | None = None) -> np.ndarray:
        """c(k_ã, k_a; μ̃_ã, μ̃_a) for R rows: lead (R,) over-estimated, every arm (R, K) under-estimated.

        The threshold may depend on the private means (the Ville event does not), so
        it is valid pointwise (docs/bai-threshold.md, "Data-dependent form").
        Returns (R, K); the entries of column ``lead[r]`` (if given) are +inf.
        """
        k_lead, m_lead = np.asarray(k_lead), np.asarray(m_lead, dtype=float)
        k, m = np.asarray(k), np.asarray(m, dtype=float)
        nf = len(self.f) - 1
        g_lead = np.empty((k_lead.size, nf))
        for kk in np.unique(k_lead):
            sel = k_lead == kk
            g_lead[sel] = self._cell_lower(int(kk), m_lead[sel])
        g_arm = np.empty(k.shape + (nf,))
        for kk in np.unique(k):
            sel = k == kk
            g_arm[sel] = self._cell_lower(int(kk), 1.0 - m[sel])
        out = np.full(k.shape, np.inf)
        mask = np.ones(k.shape, dtype=bool)
        if lead is not None:
            mask[np.arange(k.shape[0]), np.asarray(lead)] = False
        r_idx, a_idx = np.nonzero(mask)
        out[r_idx, a_idx] = self._sup(g_lead[r_idx], g_arm[r_idx, a_idx])
        return out

    def __call__(self, phase_a: ArrayLike, phase_b: ArrayLike) -> np.ndarray:
        """c(k_a, k_b) elementwise for broadcastable integer phase arrays (k ≥ 1)."""
        ka, kb = np.broadcast_arrays(np.asarray(phase_a), np.asarray(phase_b))
        if np.any(ka < 1) or np.any(kb < 1):
            raise ValueError("phases must be >= 1")
        pairs = np.stack([np.minimum(ka, kb).ravel(), np.maximum(ka, kb).ravel()], axis=1)
        uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
        vals = np.array([self.pair(int(a), int(b)) for a, b in uniq])
        return vals[inv.ravel()].reshape(ka.shape)
