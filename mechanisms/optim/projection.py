"""Exact Euclidean projections onto the constraint sets of the private GLM refits.

Algorithm 2 of the paper constrains its optimiser to the ball
Θ_I = {θ : ‖θ‖₂ ≤ S} (Criterion I) and to the ellipsoid
Θ_II = {θ : ‖θ − θ̂_o‖_V ≤ γκ} (Criterion II) (paper: §6, "Optimizer and loss
details"; Alg. 2). Projected (DP-)SGD maps every iterate back onto the set with
the Euclidean projection Π(y) = argmin_{x ∈ Θ} ‖x − y‖₂, computed here exactly:
in closed form for the ball, by a monotone Newton iteration on the Lagrange
multiplier for the ellipsoid. ``MetricProjection`` projects in the norm
‖·‖_{M⁻¹} of a public preconditioner M instead (the projection that keeps
preconditioned projected gradient descent a projected gradient method).
Projections touch only public quantities (the set, M and the already-privatised
iterate), so they are post-processing.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from accounting.validation import check_positive

__all__ = ["BallProjection", "EllipsoidProjection", "MetricProjection"]

_EPS = float(np.finfo(float).eps)

FloatArray = npt.NDArray[np.float64]


def _as_vector(theta: npt.ArrayLike, dim: int | None, name: str = "theta") -> FloatArray:
    array = np.asarray(theta, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D vector, got shape {array.shape}")
    if dim is not None and array.shape[0] != dim:
        raise ValueError(f"{name} must have length {dim}, got {array.shape[0]}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite")
    return array


def _spd(given: npt.ArrayLike, dim: int, name: str) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Validate a symmetric positive definite (dim, dim) matrix; return it and its eigendecomposition."""
    raw = np.asarray(given, dtype=np.float64)
    if raw.shape != (dim, dim):
        raise ValueError(f"{name} must have shape ({dim}, {dim}), got {raw.shape}")
    if not np.all(np.isfinite(raw)):
        raise ValueError(f"{name} must be finite")
    scale = max(float(np.max(np.abs(raw))), np.finfo(float).tiny)
    if not np.allclose(raw, raw.T, rtol=0.0, atol=1e-10 * scale):
        raise ValueError(f"{name} must be symmetric")
    matrix: FloatArray = 0.5 * (raw + raw.T)
    eigenvalues, eigenvectors = np.linalg.eigh(matrix)
    if eigenvalues[0] <= 0:
        raise ValueError(f"{name} must be positive definite, its smallest eigenvalue is {eigenvalues[0]:.3e}")
    return matrix, eigenvalues, eigenvectors


class BallProjection:
    """Euclidean projection onto the ball {θ : ‖θ − c‖₂ ≤ S}.

    paper: §6, Θ_I := {θ : ‖θ‖₂ ≤ S} (the default centre c = 0).

    Parameters
    ----------
    radius : float
        S > 0.
    center : array_like of shape (d,), optional
        The centre c; ``None`` means the origin in whatever dimension the
        projected vector has.
    """

    def __init__(self, radius: float, center: npt.ArrayLike | None = None) -> None:
        self.radius = check_positive("radius", radius)
        if center is None:
            self.center: FloatArray | None = None
        else:
            center = _as_vector(center, None, "center").copy()
            center.setflags(write=False)
            self.center = center

    @property
    def dim(self) -> int | None:
        """Dimension fixed by the centre, or ``None`` for a centre at the origin."""
        return None if self.center is None else int(self.center.shape[0])

    def center_for(self, dim: int) -> FloatArray:
        """The centre as a vector of length ``dim`` (zeros when none was given)."""
        if self.center is None:
            return np.zeros(dim)
        if self.center.shape[0] != dim:
            raise ValueError(f"the ball's center has length {self.center.shape[0]}, not {dim}")
        return self.center.copy()

    def distance(self, theta: npt.ArrayLike) -> float:
        """‖θ − c‖₂, the quantity the constraint bounds by ``radius``."""
        theta = _as_vector(theta, self.dim)
        offset = theta if self.center is None else theta - self.center
        return float(np.linalg.norm(offset))

    def contains(self, theta: npt.ArrayLike, *, rtol: float = 1e-9) -> bool:
        """Whether ‖θ − c‖₂ ≤ S(1 + rtol)."""
        return self.distance(theta) <= self.radius * (1.0 + rtol)

    def __call__(self, theta: npt.ArrayLike) -> FloatArray:
        """Π(θ) = c + (θ − c)·min(1, S/‖θ − c‖₂) (a new array)."""
        theta = _as_vector(theta, self.dim)
        center = np.zeros_like(theta) if self.center is None else self.center
        offset = theta - center
        norm = float(np.linalg.norm(offset))
        if norm <= self.radius:
            return theta.copy()
        return center + offset * (self.radius / norm)

    def __repr__(self) -> str:
        return f"BallProjection(radius={self.radius!r}, center={self.center!r})"


class EllipsoidProjection:
    """Exact Euclidean projection onto the ellipsoid {θ : ‖θ − θ₀‖_V ≤ r}.

    paper: §6, Θ_II := {θ : ‖θ − θ̂_o‖_V ≤ γκ}, with ‖u‖_V = √(uᵀVu).

    For y = θ − θ₀ outside the set, the KKT conditions of
    min ‖x − y‖² s.t. xᵀVx ≤ r² give x(μ) = (I + μV)⁻¹y with the unique
    multiplier μ > 0 solving ‖x(μ)‖_V = r. With V = QΛQᵀ (eigendecomposition,
    computed once at construction) and ŷ = Qᵀy this is the 1-D secular equation

        ‖w(μ)‖₂ = r,   w_i(μ) = (ŷ_i/√λ_i) / (1/λ_i + μ),

    the trust-region form ‖(B + μI)⁻¹g‖ = r with B = Λ⁻¹. h(μ) = 1/‖w(μ)‖ − 1/r
    is increasing and concave on μ ≥ 0 (Moré & Sorensen 1983), so Newton's
    method started at μ = 0 (where h < 0) increases monotonically to the root
    and converges quadratically; a bisection bracket guards against rounding.
    The result is finally rescaled radially by at most a few ulps so that it is
    feasible to machine precision.

    Parameters
    ----------
    center : array_like of shape (d,)
        θ₀.
    V : array_like of shape (d, d)
        Symmetric positive definite matrix defining the norm.
    radius : float
        r > 0.
    """

    _MAX_ITER = 200

    def __init__(self, center: npt.ArrayLike, V: npt.ArrayLike, radius: float) -> None:
        center = _as_vector(center, None, "center").copy()
        dim = center.shape[0]
        V, eigenvalues, eigenvectors = _spd(V, dim, "V")
        self.radius = check_positive("radius", radius)
        center.setflags(write=False)
        V.setflags(write=False)
        self.center = center
        self.V = V
        self._eigenvalues = eigenvalues
        self._eigenvectors = eigenvectors
        self._inverse_eigenvalues = 1.0 / eigenvalues
        self._min_inverse_eigenvalue = float(1.0 / eigenvalues[-1])
        self._sqrt_eigenvalues = np.sqrt(eigenvalues)

    @property
    def dim(self) -> int:
        """Dimension d of the ellipsoid."""
        return int(self.center.shape[0])

    def center_for(self, dim: int) -> FloatArray:
        """The centre θ₀ (a copy), checking the requested dimension."""
        if dim != self.dim:
            raise ValueError(f"the ellipsoid has dimension {self.dim}, not {dim}")
        return self.center.copy()

    def distance(self, theta: npt.ArrayLike) -> float:
        """‖θ − θ₀‖_V, the quantity the constraint bounds by ``radius``."""
        offset = _as_vector(theta, self.dim) - self.center
        return float(math.sqrt(max(float(offset @ self.V @ offset), 0.0)))

    def contains(self, theta: npt.ArrayLike, *, rtol: float = 1e-9) -> bool:
        """Whether ‖θ − θ₀‖_V ≤ r(1 + rtol)."""
        return self.distance(theta) <= self.radius * (1.0 + rtol)

    def multiplier(self, theta: npt.ArrayLike) -> float:
        """The Lagrange multiplier μ ≥ 0 of the projection of ``theta`` (0 inside)."""
        offset = _as_vector(theta, self.dim) - self.center
        rotated = self._eigenvectors.T @ offset
        return self._solve_multiplier(rotated / self._sqrt_eigenvalues)

    def _solve_multiplier(self, g: FloatArray) -> float:
        """Root μ ≥ 0 of 1/‖g/(b + μ)‖ = 1/r with b = 1/λ (0 if ‖g/b‖ ≤ r)."""
        b = self._inverse_eigenvalues
        target = 1.0 / self.radius
        g_squared = g * g
        norm_squared = float(g_squared @ (self._eigenvalues * self._eigenvalues))
        if norm_squared <= self.radius * self.radius:
            return 0.0
        # At μ = ‖g‖/r − min(b), every b_i + μ ≥ ‖g‖/r, hence ‖w(μ)‖ ≤ r: μ* lies below.
        low = 0.0
        high = max(0.0, math.sqrt(float(g_squared.sum())) / self.radius - self._min_inverse_eigenvalue)
        mu = 0.0
        for _ in range(self._MAX_ITER):
            inverse_shifted = 1.0 / (b + mu)
            weighted = g_squared * (inverse_shifted * inverse_shifted)
            norm_squared = float(weighted.sum())
            norm = math.sqrt(norm_squared)
            h = 1.0 / norm - target
            if h < 0:
                low = mu
            else:
                high = mu
            if abs(h) <= 4 * _EPS * target or high - low <= 4 * _EPS * high:
                break
            # d(1/‖w‖)/dμ = Σ g²/(b + μ)³ / ‖w‖³ > 0
            slope = float(weighted @ inverse_shifted) / (norm_squared * norm)
            candidate = mu - h / slope
            mu = candidate if low < candidate < high else 0.5 * (low + high)
        return mu

    def __call__(self, theta: npt.ArrayLike) -> FloatArray:
        """Π(θ) = θ₀ + (I + μV)⁻¹(θ − θ₀) with the multiplier μ solving ‖·‖_V = r."""
        theta = _as_vector(theta, self.dim)
        offset = theta - self.center
        rotated = self._eigenvectors.T @ offset
        mu = self._solve_multiplier(rotated / self._sqrt_eigenvalues)
        if mu == 0.0:
            return theta.copy()
        projected_rotated = rotated / (1.0 + mu * self._eigenvalues)
        v_norm = math.sqrt(float(self._eigenvalues @ (projected_rotated * projected_rotated)))
        if v_norm > self.radius:
            projected_rotated *= self.radius / v_norm
        return self.center + self._eigenvectors @ projected_rotated

    def __repr__(self) -> str:
        return f"EllipsoidProjection(dim={self.dim}, radius={self.radius!r})"


class MetricProjection:
    """Projection onto a ball or ellipsoid in the norm of a public preconditioner M:

        Π_M(y) = argmin_{x ∈ Θ} (x − y)ᵀ M⁻¹ (x − y).

    Preconditioned projected gradient descent θ ← Π_M(θ − ηM∇F(θ)) is plain
    projected gradient descent in the coordinates u = M^{-1/2}θ, so it keeps its
    convergence to the constrained optimum when the projection is taken in this
    metric (a Euclidean projection after a preconditioned step need not). In
    those coordinates Θ = {‖x − c‖_A ≤ r} (A = I for a ball, V for an ellipsoid)
    becomes the ellipsoid {‖u − u_c‖_{M^{1/2} A M^{1/2}} ≤ r}, projected exactly
    by :class:`EllipsoidProjection` (its eigendecomposition cached here).

    Parameters
    ----------
    projection : BallProjection or EllipsoidProjection
        The constraint set Θ.
    M : array_like of shape (d, d)
        Symmetric positive definite preconditioner.
    """

    def __init__(self, projection: BallProjection | EllipsoidProjection, M: npt.ArrayLike) -> None:
        if not isinstance(projection, (BallProjection, EllipsoidProjection)):
            raise TypeError(
                f"projection must be a BallProjection or EllipsoidProjection, got {type(projection).__name__}"
            )
        M = np.asarray(M, dtype=np.float64)
        if M.ndim != 2:
            raise ValueError(f"M must be a (d, d) matrix, got shape {M.shape}")
        dim = projection.dim if projection.dim is not None else M.shape[0]
        M, eigenvalues, eigenvectors = _spd(M, dim, "M")
        self.set = projection
        self.M = M
        self.center = projection.center_for(dim)
        self._root = (eigenvectors * np.sqrt(eigenvalues)) @ eigenvectors.T
        self._inverse_root = (eigenvectors / np.sqrt(eigenvalues)) @ eigenvectors.T
        metric = M if isinstance(projection, BallProjection) else self._root @ projection.V @ self._root
        self._inner = EllipsoidProjection(np.zeros(dim), 0.5 * (metric + metric.T), projection.radius)

    @property
    def dim(self) -> int:
        """Dimension d."""
        return int(self.center.shape[0])

    def contains(self, theta: npt.ArrayLike, *, rtol: float = 1e-9) -> bool:
        """Whether θ lies in Θ (the set does not depend on the metric)."""
        return self.set.contains(theta, rtol=rtol)

    def __call__(self, theta: npt.ArrayLike) -> FloatArray:
        """Π_M(θ) = c + M^{1/2} Π_E(M^{-1/2}(θ − c)), radially rescaled onto Θ against rounding."""
        theta = _as_vector(theta, self.dim)
        if self.set.contains(theta, rtol=0.0):
            return theta.copy()
        offset = self._root @ self._inner(self._inverse_root @ (theta - self.center))
        distance = self.set.distance(self.center + offset)
        if distance > self.set.radius:
            offset *= self.set.radius / distance
        return self.center + offset

    def __repr__(self) -> str:
        return f"MetricProjection({self.set!r}, dim={self.dim})"
