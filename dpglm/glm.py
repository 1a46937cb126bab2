"""Generalized linear reward models: link functions, GLM loss, MLE, κ and κ*.

The paper (§4) writes rewards as an exponential family,
``P(r | x) = exp(r⟨x, θ*⟩ − b(⟨x, θ*⟩) + c(r))`` with link ``μ = ḃ``, and estimates
θ* by minimising the (regularised) negative log-likelihood

    L_t(θ; λ) = Σ_s ℓ(θ, x_s, r_s) + λ/2 ‖θ‖²,    ℓ(θ, x, r) = b(⟨x, θ⟩) − r⟨x, θ⟩

(paper §4, the display after Problem 2). Its gradient is Σ_s (μ(⟨x_s, θ⟩) − r_s) x_s and
its Hessian Σ_s μ̇(⟨x_s, θ⟩) x_s x_sᵀ + λI, so the loss is convex whenever μ is increasing.
For the logistic link this is the Bernoulli log-likelihood; for probit it is the
canonical-form (quasi-)likelihood whose score equation Σ (μ(z_s) − r_s) x_s = 0 is the
GLM-UCB estimating equation of Filippi et al. (2010, eq. (5)). Everything here is
vectorised over samples; a family is a frozen value and more families are added with
:func:`register_family`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import overload

import numpy as np
from scipy import special
from scipy.linalg.lapack import dposv as _posv

from accounting.validation import check_positive, check_real

__all__ = [
    "GLMFamily",
    "LOGISTIC",
    "PROBIT",
    "get_family",
    "register_family",
    "available_families",
    "kappa",
    "kappa_star",
    "kappa_support",
    "fit_mle",
]

ArrayFn = Callable[[np.ndarray], np.ndarray]

_SQRT_2PI = np.sqrt(2.0 * np.pi)
_SQRT_2PI_FLOAT = math.sqrt(2.0 * math.pi)


@overload
def _as_theta_xy(theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


@overload
def _as_theta_xy(theta: np.ndarray, X: np.ndarray, y: None) -> tuple[np.ndarray, np.ndarray, None]: ...


def _as_theta_xy(
    theta: np.ndarray, X: np.ndarray, y: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Check shapes at the boundary: θ is (d,), X is (n, d), y is (n,)."""
    theta = np.asarray(theta, dtype=float)
    X = np.asarray(X, dtype=float)
    if theta.ndim != 1:
        raise ValueError(f"theta must be a 1-D array of shape (d,), got shape {theta.shape}")
    if X.ndim != 2 or X.shape[1] != theta.shape[0]:
        raise ValueError(
            f"X must have shape (n, {theta.shape[0]}) to match theta, got {X.shape}"
        )
    if y is not None:
        y = np.asarray(y, dtype=float)
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
    return theta, X, y


def _check_lam(lam: float) -> float:
    return check_real("lam", lam, 0.0)


@dataclass(frozen=True)
class GLMFamily:
    """A GLM reward model given by its log-partition ``b`` and link ``μ = ḃ``.

    Parameters
    ----------
    name : str
        Registry key (``"logistic"``, ``"probit"``, ...).
    log_partition : callable
        ``b(z)``, vectorised; the loss is ``b(⟨x, θ⟩) − r⟨x, θ⟩`` (paper §4).
    mu, dmu, d2mu : callable
        ``μ(z) = ḃ(z)``, its derivative ``μ̇(z)`` and second derivative ``μ̈(z)``.
    reward_bound : float
        ``R``: rewards lie in ``[0, R]`` (paper §4.1; Bernoulli rewards: ``R = 1``).
    """

    name: str
    log_partition: ArrayFn
    mu: ArrayFn
    dmu: ArrayFn
    d2mu: ArrayFn
    reward_bound: float = 1.0
    joint: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
    """Optional ``z -> (b(z), μ(z), μ̇(z))`` sharing work between the three (speed only)."""

    scalar_dmu: Callable[[float], float] | None = None
    """Optional ``μ̇`` of one float in plain Python (speed only: a policy's per-round leaf weight)."""

    def dmu_at(self, z: float) -> float:
        """``μ̇(z)`` of one real ``z`` as a float."""
        if self.scalar_dmu is not None:
            return self.scalar_dmu(z)
        return float(self.dmu(np.asarray(z, dtype=float)))

    def evaluate(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(b(z), μ(z), μ̇(z))`` in one pass (the per-iteration work of Newton's method)."""
        if self.joint is not None:
            return self.joint(z)
        return self.log_partition(z), self.mu(z), self.dmu(z)

    # -- loss -------------------------------------------------------------------------
    def nll_per_sample(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per-sample loss ``ℓ(θ, x_s, r_s) = b(⟨x_s, θ⟩) − r_s⟨x_s, θ⟩``, shape (n,)."""
        theta, X, y = _as_theta_xy(theta, X, y)
        z = X @ theta
        return self.log_partition(z) - y * z

    def nll(
        self, theta: np.ndarray, X: np.ndarray, y: np.ndarray, lam: float = 0.0
    ) -> float:
        """Total loss ``L(θ; λ) = Σ_s ℓ(θ, x_s, r_s) + λ/2 ‖θ‖²`` (paper §4)."""
        lam = _check_lam(lam)
        theta = np.asarray(theta, dtype=float)
        return float(np.sum(self.nll_per_sample(theta, X, y)) + 0.5 * lam * theta @ theta)

    def grad(
        self, theta: np.ndarray, X: np.ndarray, y: np.ndarray, lam: float = 0.0
    ) -> np.ndarray:
        """Gradient ``Σ_s (μ(⟨x_s, θ⟩) − r_s) x_s + λθ``, shape (d,)."""
        lam = _check_lam(lam)
        theta, X, y = _as_theta_xy(theta, X, y)
        return X.T @ (self.mu(X @ theta) - y) + lam * theta

    def hessian(
        self, theta: np.ndarray, X: np.ndarray, y: np.ndarray | None = None, lam: float = 0.0
    ) -> np.ndarray:
        """Hessian ``Σ_s μ̇(⟨x_s, θ⟩) x_s x_sᵀ + λI``, shape (d, d); ``y`` is not needed."""
        lam = _check_lam(lam)
        theta, X, _ = _as_theta_xy(theta, X, None)
        w = self.dmu(X @ theta)
        H = (X * w[:, None]).T @ X
        H.flat[:: H.shape[0] + 1] += lam
        return H

    def fit_mle(
        self,
        X: np.ndarray,
        y: np.ndarray,
        *,
        lam: float = 0.0,
        radius: float | None = None,
        theta0: np.ndarray | None = None,
        tol: float = 1e-8,
        max_iter: int = 100,
    ) -> np.ndarray:
        """Regularised MLE, optionally constrained to the ball ``‖θ‖ ≤ radius``.

        See :func:`fit_mle`.
        """
        return fit_mle(
            self, X, y, lam=lam, radius=radius, theta0=theta0, tol=tol, max_iter=max_iter
        )


# -- links ------------------------------------------------------------------------------
def _logistic_dmu(z: np.ndarray) -> np.ndarray:
    m = special.expit(z)
    return m * (1.0 - m)


def _logistic_d2mu(z: np.ndarray) -> np.ndarray:
    m = special.expit(z)
    return m * (1.0 - m) * (1.0 - 2.0 * m)


def _phi(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=float)
    return np.exp(-0.5 * z * z) / _SQRT_2PI


def _probit_log_partition(z: np.ndarray) -> np.ndarray:
    # b(z) = ∫_{-∞}^z Φ(u) du = zΦ(z) + φ(z), so that ḃ = Φ and b̈ = φ.
    z = np.asarray(z, dtype=float)
    return z * special.ndtr(z) + _phi(z)


def _probit_joint(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    Phi = special.ndtr(z)
    phi = np.exp(-0.5 * z * z) / _SQRT_2PI
    return z * Phi + phi, Phi, phi


def _logistic_joint(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = special.expit(z)
    return np.logaddexp(0.0, z), m, m * (1.0 - m)


def _probit_dmu_scalar(z: float) -> float:
    return math.exp(-0.5 * z * z) / _SQRT_2PI_FLOAT


def _logistic_dmu_scalar(z: float) -> float:
    e = math.exp(-abs(z))  # μ̇ is even: e/(1 + e)² with e = exp(−|z|) ≤ 1 never overflows
    return e / (1.0 + e) ** 2


def _probit_d2mu(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=float)
    return -z * _phi(z)


LOGISTIC = GLMFamily(
    name="logistic",
    log_partition=lambda z: np.logaddexp(0.0, z),
    mu=special.expit,
    dmu=_logistic_dmu,
    d2mu=_logistic_d2mu,
    reward_bound=1.0,
    joint=_logistic_joint,
    scalar_dmu=_logistic_dmu_scalar,
)
"""Logistic link ``μ(z) = 1/(1 + e^{−z})``, Bernoulli rewards (R = 1)."""

PROBIT = GLMFamily(
    name="probit",
    log_partition=_probit_log_partition,
    mu=special.ndtr,
    dmu=_phi,
    d2mu=_probit_d2mu,
    reward_bound=1.0,
    joint=_probit_joint,
    scalar_dmu=_probit_dmu_scalar,
)
"""Probit link ``μ(z) = Φ(z)`` (standard normal cdf), Bernoulli rewards (R = 1)."""

_REGISTRY: dict[str, GLMFamily] = {"logistic": LOGISTIC, "probit": PROBIT}


def register_family(family: GLMFamily) -> None:
    """Add a family to the registry so :func:`get_family` finds it by name."""
    if not isinstance(family, GLMFamily):
        raise TypeError(f"family must be a GLMFamily, got {type(family).__name__}")
    if family.name in _REGISTRY and _REGISTRY[family.name] is not family:
        raise ValueError(f"a different family named {family.name!r} is already registered")
    _REGISTRY[family.name] = family


def available_families() -> tuple[str, ...]:
    """Names accepted by :func:`get_family`."""
    return tuple(sorted(_REGISTRY))


def get_family(family: str | GLMFamily) -> GLMFamily:
    """Return the family named ``family`` (or ``family`` itself if it already is one)."""
    if isinstance(family, GLMFamily):
        return family
    if not isinstance(family, str):
        raise TypeError(f"family must be a str or GLMFamily, got {type(family).__name__}")
    try:
        return _REGISTRY[family.lower()]
    except KeyError:
        raise ValueError(
            f"family must be one of {available_families()}, got {family!r}"
        ) from None


# -- estimation -------------------------------------------------------------------------
def _solve_pd(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``H⁻¹g`` for the symmetric Hessian ``H``: Cholesky (LAPACK ``posv``, a few µs), else least squares."""
    _, step, info = _posv(H, g, lower=1)
    if info != 0:  # not numerically positive definite (λ = 0 on rank-deficient data)
        step = np.linalg.lstsq(H, g, rcond=None)[0]
    return step


_GRAM_CHUNK = 16384  # rows per product in a Hessian: the temporary X·w stays O(chunk·d), not O(n·d)


def _weighted_gram(X: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``Σ_s w_s x_s x_sᵀ``, a chunk of rows at a time when there are many (memory flat in n)."""
    n = X.shape[0]
    if n <= _GRAM_CHUNK:
        gram: np.ndarray = (X * w[:, None]).T @ X
        return gram
    gram = np.zeros((X.shape[1], X.shape[1]))
    for start in range(0, n, _GRAM_CHUNK):
        rows = X[start: start + _GRAM_CHUNK]
        gram += (rows * w[start: start + _GRAM_CHUNK, None]).T @ rows
    return gram


def _newton_hessian(
    family: GLMFamily,
    X: np.ndarray,
    y: np.ndarray,
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
    if X.shape[0] > _GRAM_CHUNK:
        return _newton_chunked(family, X, y, lam, theta, tol, max_iter)
    d = theta.shape[0]
    z = X @ theta
    b, m, w = family.evaluate(z)
    loss = float(b.sum() - y @ z + 0.5 * lam * theta @ theta)
    H = np.eye(d) * lam
    for _ in range(max_iter):
        g = X.T @ (m - y) + lam * theta
        H = _weighted_gram(X, w)
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


def _chunked_terms(family: GLMFamily, X: np.ndarray, y: np.ndarray, lam: float, theta: np.ndarray,
                   derivatives: bool) -> tuple[float, np.ndarray, np.ndarray]:
    """L(θ; λ) and (if ``derivatives``) its gradient and Hessian, summed 16384 rows at a time."""
    d = theta.shape[0]
    loss = 0.5 * lam * float(theta @ theta)
    g, H = lam * theta, np.eye(d) * lam
    for start in range(0, X.shape[0], _GRAM_CHUNK):
        rows, targets = X[start: start + _GRAM_CHUNK], y[start: start + _GRAM_CHUNK]
        z = rows @ theta
        b, m, w = family.evaluate(z)
        loss += float(b.sum() - targets @ z)
        if derivatives:
            g = g + rows.T @ (m - targets)
            H += (rows * w[:, None]).T @ rows
    return loss, g, H


def _newton_chunked(family: GLMFamily, X: np.ndarray, y: np.ndarray, lam: float, theta: np.ndarray, tol: float,
                    max_iter: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_newton_hessian` for many rows: the same steps, every sum over rows taken a chunk at a time.

    A run's refit on n rows then needs O(chunk) temporaries instead of about ten n-vectors
    (memory flat in the horizon: issue 26); each accepted point is evaluated twice (loss
    in the line search, then gradient and Hessian), so it is used only above one chunk.
    """
    loss, g, H = _chunked_terms(family, X, y, lam, theta, True)
    for _ in range(max_iter):
        step = _solve_pd(H, g)
        decrement = float(g @ step)
        if decrement / 2.0 < tol:
            theta = theta - step
            break
        t = 1.0
        while True:
            candidate = theta - t * step
            new_loss = _chunked_terms(family, X, y, lam, candidate, False)[0]
            if new_loss <= loss - 0.25 * t * decrement or t < 1e-12:
                break
            t *= 0.5
        theta = candidate
        loss, g, H = _chunked_terms(family, X, y, lam, theta, True)
    return theta, H


def _newton(
    family: GLMFamily,
    X: np.ndarray,
    y: np.ndarray,
    lam: float,
    theta: np.ndarray,
    tol: float,
    max_iter: int,
) -> np.ndarray:
    """The minimiser of L(θ; λ) by damped Newton from ``theta`` (:func:`_newton_hessian`)."""
    return _newton_hessian(family, X, y, lam, theta, tol, max_iter)[0]


def fit_mle(
    family: GLMFamily,
    X: np.ndarray,
    y: np.ndarray,
    *,
    lam: float = 0.0,
    radius: float | None = None,
    theta0: np.ndarray | None = None,
    tol: float = 1e-8,
    max_iter: int = 100,
) -> np.ndarray:
    """Minimise ``L(θ; λ) = Σ ℓ(θ, x_s, r_s) + λ/2 ‖θ‖²`` over ``{‖θ‖ ≤ radius}``.

    Unconstrained (``radius=None``) it is damped Newton from ``theta0`` (warm start;
    zero by default). With a radius, if the unconstrained minimiser lies outside the
    ball the solution is on the sphere and satisfies the KKT condition
    ``∇L(θ) + νθ = 0``, ``‖θ‖ = radius`` for a multiplier ``ν > 0``: θ(ν), the minimiser
    of ``L(θ; λ + ν)``, has a norm that decreases in ν, so ν is the root of the secular
    equation ``1/‖θ(ν)‖ = 1/radius`` (:func:`fit_mle_ball`: safeguarded Newton on ν, each
    θ(ν) a warm-started Newton solve). This is the exact Euclidean-ball-constrained MLE
    (the set Θ_I = {‖θ‖ ≤ S} of paper §6).

    Parameters
    ----------
    family : GLMFamily
    X : ndarray, shape (n, d)
    y : ndarray, shape (n,)
    lam : float, >= 0
        Ridge weight λ. With ``lam = 0`` the loss must be strictly convex (full-rank X,
        non-separable data) or the estimate diverges; the ball then keeps it finite.
    radius : float > 0, optional
    theta0 : ndarray, shape (d,), optional
        Warm start.
    tol : float
        Stop when half the squared Newton decrement is below ``tol``.
    max_iter : int
        Newton iterations per solve.

    Returns
    -------
    ndarray, shape (d,)
    """
    family = get_family(family)
    lam = _check_lam(lam)
    X, y, theta = _fit_inputs(X, y, theta0)
    if radius is None:
        return np.zeros(X.shape[1]) if X.shape[0] == 0 else _newton(family, X, y, lam, theta, tol, max_iter)
    return fit_mle_ball(family, X, y, lam, check_positive("radius", radius), theta, None, tol, max_iter)[0]


def _fit_inputs(X: np.ndarray, y: np.ndarray, theta0: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, y, θ₀)`` as float arrays of shapes (n, d), (n,), (d,), all finite (θ₀ = 0 by default)."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n, d), got shape {X.shape}")
    theta = np.zeros(X.shape[1]) if theta0 is None else np.array(theta0, dtype=float)
    theta, X, y = _as_theta_xy(theta, X, y)
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y)) and np.all(np.isfinite(theta))):
        raise ValueError("X, y and theta0 must be finite (no NaN or inf)")
    return X, y, theta


def fit_mle_ball(family: GLMFamily, X: np.ndarray, y: np.ndarray, lam: float, radius: float, theta: np.ndarray,
                 nu0: float | None = None, tol: float = 1e-8, max_iter: int = 100) -> tuple[np.ndarray, float]:
    """The minimiser of L(θ; λ) over ``{‖θ‖ ≤ radius}`` and its KKT multiplier ν ≥ 0 (:func:`fit_mle`).

    Inputs are checked by the caller (float arrays, λ ≥ 0, radius > 0). ``theta`` warm-starts
    the Newton solves; ``nu0`` > 0, the multiplier of a previous fit on nearly the same
    data, warm-starts ν (a refit after one new row then needs two or three solves). With
    no hint, or when ν = 0 is reached, the unconstrained minimiser is tried first, as
    the constraint may be inactive.
    """
    norm0 = math.sqrt(float(theta @ theta))
    if norm0 > radius:
        theta = theta * (radius / norm0)
    d = X.shape[1]
    if X.shape[0] == 0:
        return np.zeros(d), 0.0
    if nu0 is None or not nu0 > 0 or not lam > 0:  # a hint only where ν = 0 is a well-posed solve
        if lam > 0 or np.linalg.matrix_rank(X) == d:
            # Strictly convex: the unconstrained solve is well defined (it may still run off
            # to a large norm on separable data; the sphere search below handles that).
            unconstrained = _newton(family, X, y, lam, theta, tol, max_iter)
            norm = math.sqrt(float(unconstrained @ unconstrained))
            if norm <= radius:
                return unconstrained, 0.0
            theta = unconstrained * (radius / norm)
        return _on_sphere(family, X, y, lam, radius, theta, 1.0, True, tol, max_iter)
    joint = _kkt_newton(family, X, y, lam, radius, theta, float(nu0), tol)
    if joint is not None:
        return joint
    return _on_sphere(family, X, y, lam, radius, theta, float(nu0), False, tol, max_iter)


def _kkt_newton(family: GLMFamily, X: np.ndarray, y: np.ndarray, lam: float, radius: float, theta: np.ndarray,
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
        z = X @ theta
        _, m, w = family.evaluate(z)
        g = X.T @ (m - y) + (lam + nu) * theta
        H = _weighted_gram(X, w)
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


def _on_sphere(family: GLMFamily, X: np.ndarray, y: np.ndarray, lam: float, radius: float, theta: np.ndarray,
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
                unconstrained = _newton(family, X, y, lam, theta, tol, max_iter)
                norm = math.sqrt(float(unconstrained @ unconstrained))
                if norm <= radius:
                    return unconstrained, 0.0
                active, theta = True, unconstrained
            nu = 0.5 * hi if lo == 0.0 else math.sqrt(lo * hi)
        theta, H = _newton_hessian(family, X, y, lam + nu, theta, tol, max_iter)
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


# -- instance parameters ----------------------------------------------------------------
def _links(family: GLMFamily | str, theta_star: np.ndarray, arms: np.ndarray) -> np.ndarray:
    family = get_family(family)
    theta_star = np.asarray(theta_star, dtype=float)
    arms = np.asarray(arms, dtype=float)
    if theta_star.ndim != 1:
        raise ValueError(f"theta_star must have shape (d,), got {theta_star.shape}")
    if arms.ndim < 2 or arms.shape[-1] != theta_star.shape[0]:
        raise ValueError(
            f"arms must have shape (..., K, {theta_star.shape[0]}), got {arms.shape}"
        )
    return family.dmu(arms @ theta_star)


def kappa(family: GLMFamily | str, theta_star: np.ndarray, arms: np.ndarray) -> float:
    """κ = max over the given arm sets and arms of ``1/μ̇(⟨x, θ*⟩)`` (paper §4.1).

    ``arms`` has shape (K, d) for one arm set or (T, K, d) for a sequence; the paper
    takes the max over supp(D), so passing every context of a run gives the oracle κ
    that the paper's Table 2 reports (see :func:`kappa_support` for the sup over the ball).
    """
    return float(1.0 / np.min(_links(family, theta_star, arms)))


def kappa_star(family: GLMFamily | str, theta_star: np.ndarray, arms: np.ndarray) -> float:
    """κ* with ``1/κ* = max over the arm sets and arms of μ̇(⟨x, θ*⟩)`` (paper §4.1).

    So κ* ≥ 1/max μ̇ (= 4 for logistic, √(2π) ≈ 2.5 for probit), the paper's "κ* ≥ 4
    for logistic". ``arms`` has shape (K, d) or (T, K, d).
    """
    return float(1.0 / np.max(_links(family, theta_star, arms)))


def kappa_support(family: GLMFamily | str, S: float) -> float:
    """κ over the whole unit ball with ``‖θ*‖ = S``: ``1 / min_{|z| ≤ S} μ̇(z)``.

    For a link whose μ̇ is symmetric and unimodal at 0 (logistic, probit) this is
    ``1/μ̇(S)``; evaluated on the fine grid of [−S, S] of :func:`dpglm.linalg.dmu_range`,
    so any registered family works.
    """
    from dpglm.linalg import dmu_range  # dpglm.linalg builds on this module

    low, _ = dmu_range(family, check_real("S", S, 0.0))
    if not low > 0.0 or not math.isfinite(1.0 / low):
        raise ValueError(f"S must be small enough that the link's slope at S is a positive float (kappa = 1/slope "
                         f"finite): got S={S!r}, where it underflows to {low!r}")
    return 1.0 / low
