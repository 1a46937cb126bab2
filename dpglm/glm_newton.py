"""Newton solvers of the regularised GLM loss (paper §4): unconstrained, on many rows, on the sphere.

:func:`dpglm.glm.fit_mle` and :func:`dpglm.glm.fit_mle_ball` (the checked entry points)
run these on checked rows, held as :class:`RowBlocks`. Damped Newton with backtracking
for ``L(θ; λ)``; above 16384 rows every sum over rows is taken a block of 16384 rows at a
time (memory flat in n), and a policy's rows arrive already in such blocks
(:class:`dpglm.policies.running.Rows`), so no contiguous copy is formed. On the sphere
``‖θ‖ = S`` the KKT multiplier ν is found by safeguarded Newton on the secular equation,
or, from a warm (θ, ν), by Newton on the KKT system itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.linalg.lapack import dposv as _posv

from mechanisms.optim.dpsgd_steps import BLOCK_ROWS, split_rows

if TYPE_CHECKING:
    from dpglm.glm import GLMFamily

__all__ = ["RowBlocks"]


def _solve_pd(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``H⁻¹g`` for the symmetric Hessian ``H``: Cholesky (LAPACK ``posv``, a few µs), else least squares."""
    _, step, info = _posv(H, g, lower=1)
    if info != 0:  # not numerically positive definite (λ = 0 on rank-deficient data)
        step = np.linalg.lstsq(H, g, rcond=None)[0]
    return step


_GRAM_CHUNK = BLOCK_ROWS  # rows per block (DP-SGD's too): a sum over rows keeps its temporaries O(block·d)


@dataclass(frozen=True)
class RowBlocks:
    """The rows (X, y) of one fit as consecutive blocks: every block but the last has ``_GRAM_CHUNK`` rows.

    Sums over rows are taken a block at a time, in order (docs/design.md, memory flat in T),
    so a fit on blocks is bit-identical to the fit on their concatenation (which
    :meth:`split` cuts into the same blocks). ``xs[i]`` has shape (n_i, d), ``ys[i]`` (n_i,).
    """

    xs: tuple[np.ndarray, ...]
    ys: tuple[np.ndarray, ...]

    @classmethod
    def split(cls, X: np.ndarray, y: np.ndarray) -> RowBlocks:
        """Views of ``X`` (n, d) and ``y`` (n,) cut into blocks of ``_GRAM_CHUNK`` rows (one block if n ≤ that)."""
        return cls(*split_rows(X, y, _GRAM_CHUNK))

    @property
    def n(self) -> int:
        """Number of rows."""
        return sum(x.shape[0] for x in self.xs)

    @property
    def d(self) -> int:
        """Number of columns."""
        return int(self.xs[0].shape[1])

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Contiguous ``(X, y)``: the one block itself, or a concatenation (a copy) of several."""
        if len(self.xs) == 1:
            return self.xs[0], self.ys[0]
        return np.concatenate(self.xs), np.concatenate(self.ys)


def _score_and_gram(family: GLMFamily, data: RowBlocks, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``Σ_s (μ(z_s) − y_s) x_s`` and ``Σ_s μ̇(z_s) x_s x_sᵀ`` at θ, a block of rows at a time."""
    if len(data.xs) == 1:
        X, y = data.xs[0], data.ys[0]
        _, m, w = family.evaluate(X @ theta)
        return X.T @ (m - y), (X * w[:, None]).T @ X
    d = theta.shape[0]
    g, H = np.zeros(d), np.zeros((d, d))
    for X, y in zip(data.xs, data.ys, strict=True):
        _, m, w = family.evaluate(X @ theta)
        g += X.T @ (m - y)
        H += (X * w[:, None]).T @ X
    return g, H


def _newton_hessian(
    family: GLMFamily,
    data: RowBlocks,
    lam: float,
    theta: np.ndarray,
    tol: float,
    max_iter: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Damped Newton on the strictly convex loss L(θ; λ) (λ > 0 or full-rank data); the minimiser and a Hessian.

    Backtracking (Armijo) on the loss; once the Newton decrement² / 2 < tol it takes a
    last full step (quadratic convergence) and stops. Each accepted point is evaluated
    once: (b, μ, μ̇) at the candidate serve both the line search and the next step. The
    Hessian returned is the last one formed (at the point before the last step): the
    ball solver's slope of ‖θ(ν)‖ needs no more than that.
    """
    if len(data.xs) > 1:
        return _newton_chunked(family, data, lam, theta, tol, max_iter)
    X, y = data.xs[0], data.ys[0]
    d = theta.shape[0]
    z = X @ theta
    b, m, w = family.evaluate(z)
    loss = float(b.sum() - y @ z + 0.5 * lam * theta @ theta)
    H = np.eye(d) * lam
    for _ in range(max_iter):
        g = X.T @ (m - y) + lam * theta
        H = (X * w[:, None]).T @ X
        H.flat[:: d + 1] += lam
        step = _solve_pd(H, g)
        decrement = float(g @ step)
        if decrement / 2.0 < tol:
            # Inside the quadratic-convergence region: one last full step.
            theta = theta - step
            break
        t = 1.0
        while True:
            candidate = theta - t * step
            zc = X @ candidate
            bc, mc, wc = family.evaluate(zc)
            new_loss = float(bc.sum() - y @ zc + 0.5 * lam * candidate @ candidate)
            if new_loss <= loss - 0.25 * t * decrement or t < 1e-12:
                break
            t *= 0.5
        theta, m, w, loss = candidate, mc, wc, new_loss
    return theta, H


def _chunked_terms(family: GLMFamily, data: RowBlocks, lam: float, theta: np.ndarray,
                   derivatives: bool) -> tuple[float, np.ndarray, np.ndarray]:
    """L(θ; λ) and (if ``derivatives``) its gradient and Hessian, summed a block of rows at a time."""
    d = theta.shape[0]
    loss = 0.5 * lam * float(theta @ theta)
    g, H = lam * theta, np.eye(d) * lam
    for rows, targets in zip(data.xs, data.ys, strict=True):
        z = rows @ theta
        b, m, w = family.evaluate(z)
        loss += float(b.sum() - targets @ z)
        if derivatives:
            g = g + rows.T @ (m - targets)
            H += (rows * w[:, None]).T @ rows
    return loss, g, H


def _newton_chunked(family: GLMFamily, data: RowBlocks, lam: float, theta: np.ndarray, tol: float,
                    max_iter: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_newton_hessian` for many rows: the same steps, every sum over rows taken a chunk at a time.

    A run's refit on n rows then needs O(chunk) temporaries instead of about ten n-vectors
    (memory flat in the horizon: issue 26); each accepted point is evaluated twice (loss
    in the line search, then gradient and Hessian), so it is used only above one chunk.
    """
    loss, g, H = _chunked_terms(family, data, lam, theta, True)
    for _ in range(max_iter):
        step = _solve_pd(H, g)
        decrement = float(g @ step)
        if decrement / 2.0 < tol:
            theta = theta - step
            break
        t = 1.0
        while True:
            candidate = theta - t * step
            new_loss = _chunked_terms(family, data, lam, candidate, False)[0]
            if new_loss <= loss - 0.25 * t * decrement or t < 1e-12:
                break
            t *= 0.5
        theta = candidate
        loss, g, H = _chunked_terms(family, data, lam, theta, True)
    return theta, H


def _newton(
    family: GLMFamily,
    data: RowBlocks,
    lam: float,
    theta: np.ndarray,
    tol: float,
    max_iter: int,
) -> np.ndarray:
    """The minimiser of L(θ; λ) by damped Newton from ``theta`` (:func:`_newton_hessian`)."""
    return _newton_hessian(family, data, lam, theta, tol, max_iter)[0]


def _kkt_newton(family: GLMFamily, data: RowBlocks, lam: float, radius: float, theta: np.ndarray,
                nu: float, tol: float, max_iter: int = 8) -> tuple[np.ndarray, float] | None:
    """Newton on the KKT system ``∇L(θ) + νθ = 0``, ``‖θ‖² = radius²`` from a warm (θ, ν); None if it fails.

    From the previous refit's (θ, ν) (one or a few rows ago) the solution is a Newton step
    or two away. Each step solves ``[[H + νI, θ], [θᵀ, 0]] (Δθ, Δν) = −(∇L + νθ, (‖θ‖² − r²)/2)``
    by two solves with ``H + νI``. It stops, like the inner Newton solves, once half the
    step's decrement ``ΔθᵀH_νΔθ`` is below ``tol`` and ``|‖θ‖ − r| ≤ 1e-9·r`` after the step
    (θ then scaled onto the sphere if outside). With ν > 0 and L convex a KKT point is the
    ball-constrained minimiser. ν ≤ 0, a non-finite step or no convergence in ``max_iter``
    steps return None: the caller falls back to the safeguarded search.
    """
    d = theta.shape[0]
    target = radius * radius
    for _ in range(max_iter):
        score, H = _score_and_gram(family, data, theta)
        g = score + (lam + nu) * theta
        H.flat[:: d + 1] += lam + nu
        _, solved, info = _posv(H, np.stack([g, theta], axis=1), lower=1)
        if info != 0:
            return None
        h_g, h_theta = solved[:, 0], solved[:, 1]
        curvature = float(theta @ h_theta)
        if not curvature > 0:
            return None
        dnu = (0.5 * (float(theta @ theta) - target) - float(theta @ h_g)) / curvature
        step = h_g + h_theta * dnu  # θ_new = θ − step
        theta, nu = theta - step, nu + dnu
        if not (nu > 0 and math.isfinite(nu)):
            return None
        norm = math.sqrt(float(theta @ theta))
        if float(step @ H @ step) / 2.0 < tol and abs(norm - radius) <= 1e-9 * radius:
            return (theta if norm <= radius else theta * (radius / norm)), nu
    return None


def _on_sphere(family: GLMFamily, data: RowBlocks, lam: float, radius: float, theta: np.ndarray,
               nu: float, active: bool, tol: float, max_iter: int) -> tuple[np.ndarray, float]:
    """The ball-constrained minimiser and its multiplier, searching ν from ``nu`` (:func:`fit_mle_ball`).

    Safeguarded Newton on the secular function ``φ(ν) = 1/‖θ(ν)‖ − 1/radius``, increasing
    and nearly linear in ν (Moré & Sorensen 1983 for the trust-region subproblem), with
    ``φ'(ν) = θᵀH_ν⁻¹θ/‖θ‖³`` since ``dθ/dν = −H_ν⁻¹θ``. A bracket ``[lo, hi]`` of ν is
    kept (``‖θ(lo)‖ > radius ≥ ‖θ(hi)‖``); a step leaving it is replaced by bisection on
    log ν. ``active`` says ν = 0 is already known to violate the constraint; otherwise
    reaching ν ≤ 0 tries the unconstrained minimiser, which is the answer if it lies in the
    ball. Stops when ``|‖θ‖ − radius| ≤ 1e-9·radius`` (θ then scaled onto the sphere if
    outside) or the bracket is narrower than 1e-12 relative; the answer is in the ball.
    """
    lo, hi = 0.0, math.inf
    best: np.ndarray | None = None
    for _ in range(200):
        if nu <= 0.0:
            if not active:
                unconstrained = _newton(family, data, lam, theta, tol, max_iter)
                norm = math.sqrt(float(unconstrained @ unconstrained))
                if norm <= radius:
                    return unconstrained, 0.0
                active, theta = True, unconstrained
            nu = 0.5 * hi if lo == 0.0 else math.sqrt(lo * hi)
        theta, H = _newton_hessian(family, data, lam + nu, theta, tol, max_iter)
        norm = math.sqrt(float(theta @ theta))
        if abs(norm - radius) <= 1e-9 * radius:
            return (theta if norm <= radius else theta * (radius / norm)), nu
        if norm > radius:
            lo = nu
        else:
            hi, best = nu, theta
        if hi - lo <= 1e-12 * hi < math.inf:
            break
        slope = float(theta @ _solve_pd(H, theta)) / norm**3
        step = (1.0 / norm - 1.0 / radius) / slope if slope > 0 else math.nan
        nu_next = nu - step
        if not lo < nu_next < hi:  # outside the bracket (or NaN): bisect on log ν, or grow ν tenfold
            if nu_next <= 0.0 and lo == 0.0 and not active:
                nu_next = 0.0  # ν = 0 not yet tried: the constraint may be inactive
            elif hi == math.inf:
                nu_next = 10.0 * nu
            else:
                nu_next = math.sqrt(lo * hi) if lo > 0 else 0.5 * hi
        nu = nu_next
    if best is None:  # pragma: no cover - hi is finite after the loop unless ν overflowed
        raise RuntimeError("the ball-constrained MLE did not converge")
    return best, hi
