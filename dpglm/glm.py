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

from accounting.validation import check_positive, check_real
from dpglm.glm_newton import RowBlocks, _kkt_newton, _newton, _on_sphere

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
def fit_mle(
    family: GLMFamily,
    X: np.ndarray | RowBlocks,
    y: np.ndarray | None,
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
    X : ndarray, shape (n, d), or :class:`dpglm.glm_newton.RowBlocks`
        The rows; as blocks (``y=None``) they are summed a block at a time with no
        contiguous copy (a policy's rows, issue 26).
    y : ndarray, shape (n,), or None with blocks
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
    data, theta = _fit_inputs(X, y, theta0)
    if radius is None:
        return np.zeros(data.d) if data.n == 0 else _newton(family, data, lam, theta, tol, max_iter)
    return fit_mle_ball(family, data, None, lam, check_positive("radius", radius), theta, None, tol, max_iter)[0]


def _fit_inputs(X: np.ndarray | RowBlocks, y: np.ndarray | None,
                theta0: np.ndarray | None) -> tuple[RowBlocks, np.ndarray]:
    """The rows as blocks of float arrays (n_i, d), (n_i,) and θ₀ of shape (d,), all finite (θ₀ = 0 by default)."""
    if not isinstance(X, RowBlocks):
        X = np.asarray(X, dtype=float)
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D array (n, d), got shape {X.shape}")
        if y is None:
            raise ValueError("y must be given with an array X (only RowBlocks carry their own y)")
    blocks = X if isinstance(X, RowBlocks) else RowBlocks((X,), (y,))  # type: ignore[arg-type]
    theta = np.zeros(blocks.d) if theta0 is None else np.array(theta0, dtype=float)
    xs, ys = [], []
    for block_x, block_y in zip(blocks.xs, blocks.ys, strict=True):
        theta, block_x, block_y = _as_theta_xy(theta, block_x, block_y)
        if not (np.all(np.isfinite(block_x)) and np.all(np.isfinite(block_y))):
            raise ValueError("X, y and theta0 must be finite (no NaN or inf)")
        xs.append(block_x)
        ys.append(block_y)
    if not np.all(np.isfinite(theta)):
        raise ValueError("X, y and theta0 must be finite (no NaN or inf)")
    if isinstance(X, RowBlocks):
        return RowBlocks(tuple(xs), tuple(ys)), theta
    return RowBlocks.split(xs[0], ys[0]), theta


def fit_mle_ball(family: GLMFamily, X: np.ndarray | RowBlocks, y: np.ndarray | None, lam: float, radius: float,
                 theta: np.ndarray, nu0: float | None = None, tol: float = 1e-8,
                 max_iter: int = 100) -> tuple[np.ndarray, float]:
    """The minimiser of L(θ; λ) over ``{‖θ‖ ≤ radius}`` and its KKT multiplier ν ≥ 0 (:func:`fit_mle`).

    Inputs are checked by the caller (float arrays, or :class:`RowBlocks` with ``y=None``;
    λ ≥ 0, radius > 0). ``theta`` warm-starts
    the Newton solves; ``nu0`` > 0, the multiplier of a previous fit on nearly the same
    data, warm-starts ν (a refit after one new row then needs two or three solves). With
    no hint, or when ν = 0 is reached, the unconstrained minimiser is tried first, as
    the constraint may be inactive.
    """
    data = X if isinstance(X, RowBlocks) else RowBlocks.split(X, y)  # type: ignore[arg-type]
    norm0 = math.sqrt(float(theta @ theta))
    if norm0 > radius:
        theta = theta * (radius / norm0)
    d = data.d
    if data.n == 0:
        return np.zeros(d), 0.0
    if nu0 is None or not nu0 > 0 or not lam > 0:  # a hint only where ν = 0 is a well-posed solve
        if lam > 0 or np.linalg.matrix_rank(data.arrays()[0]) == d:
            # Strictly convex: the unconstrained solve is well defined (it may still run off
            # to a large norm on separable data; the sphere search below handles that).
            unconstrained = _newton(family, data, lam, theta, tol, max_iter)
            norm = math.sqrt(float(unconstrained @ unconstrained))
            if norm <= radius:
                return unconstrained, 0.0
            theta = unconstrained * (radius / norm)
        return _on_sphere(family, data, lam, radius, theta, 1.0, True, tol, max_iter)
    joint = _kkt_newton(family, data, lam, radius, theta, float(nu0), tol)
    if joint is not None:
        return joint
    return _on_sphere(family, data, lam, radius, theta, float(nu0), False, tol, max_iter)


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
