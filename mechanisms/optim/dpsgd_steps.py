"""DP-SGD's steps without torch: the float-safe step noise, the public step rule and the numpy engine.

:class:`mechanisms.optim.dpsgd.DPSGD` draws every step's noise here
(:func:`draw_step_noise`, only after its charge was granted) and, with
``engine="numpy"`` (the default of the bandits' refits), runs its steps here too
(:func:`run_numpy`), so a bandit run imports neither torch nor opacus (issue 26).
The torch engines (``"opacus"``, ``"vectorised"``) are in
:mod:`mechanisms.optim.dpsgd_loops` and use the same noise and rule.

The numpy engine performs the vectorised engine's operations in numpy: ℓ_i depends
on θ only through z_i = ⟨x_i, θ⟩, so the per-sample gradient is ℓ'(z_i)·x_i, with
ℓ' in closed form (:data:`DERIVATIVES`, written as torch's autograd evaluates the
built-in losses of :mod:`mechanisms.optim.glm_losses`); clipping factor
min(1, C/(‖g_i‖ + 10⁻⁶)) (known to be exactly 1 without the per-sample norms where
|ℓ'_i|·‖x_i‖ is below a bound, :func:`_unclipped_bound`), the float-safe noisy sum fl(g·rint(s/g) + g·Z_t)
(``docs/float-safe-noise.md``), division by the block size or the public
normaliser, then ridge, preconditioner and projection, as opacus's ``DPOptimizer``
orders them. A test checks all three engines agree to rounding on the same noise
stream. The privacy argument is the plan's (:mod:`mechanisms.optim.dpsgd_plan`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mechanisms.lattice import GaussianLattice
from mechanisms.optim.dpsgd_plan import DPSGDPlan
from mechanisms.optim.projection import BallProjection, EllipsoidProjection, MetricProjection

__all__ = ["DERIVATIVES", "StepNoise", "StepRule", "check_per_sample_derivative", "draw_step_noise",
           "logistic_derivative", "probit_derivative", "run_numpy",
           "split_rows", "BLOCK_ROWS", "NOISE_CHUNK", "noise_table_bytes"]

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float64]
StepProjection = BallProjection | EllipsoidProjection | MetricProjection
Block = npt.NDArray[np.int64] | None
#: ℓ'(z, y) of a per-sample GLM loss, on numpy arrays of shape (b,).
Derivative = Callable[[Vector, Vector], Vector]

#: Above this z torch's softplus returns z itself, so its derivative is 1 (torch's default threshold).
_SOFTPLUS_THRESHOLD = 20.0


def logistic_derivative(z: Vector, y: Vector) -> Vector:
    """ℓ'(z, y) = μ(z) − y of the logistic loss softplus(z) − yz (paper §4), as torch's autograd computes it:
    softplus' = eᶻ/(eᶻ + 1) for z ≤ 20, and 1 above (where torch's softplus returns z)."""
    e = np.exp(np.minimum(z, _SOFTPLUS_THRESHOLD))
    slope: Vector = np.where(z > _SOFTPLUS_THRESHOLD, 1.0, e / (e + 1.0))
    return slope - y


def probit_derivative(z: Vector, y: Vector) -> Vector:
    """ℓ'(z, y) = Φ(z) − y of the probit loss zΦ(z) + φ(z) − yz (paper §4; b' = Φ)."""
    from scipy.special import ndtr  # scipy.special is on every bandit's import path already

    cdf: Vector = ndtr(z)
    return cdf - y


#: The built-in losses' derivatives, by the names :class:`~mechanisms.optim.dpsgd.DPSGD` accepts.
DERIVATIVES: dict[str, Derivative] = {"logistic": logistic_derivative, "probit": probit_derivative}


def check_per_sample_derivative(derivative: Derivative) -> None:
    """Reject a derivative that is not per-sample: ℓ'_i must depend on (z_i, y_i) only.

    Per-sample clipping bounds a step's sensitivity only if changing row j leaves every
    other row's gradient unchanged (the torch losses' check,
    :func:`mechanisms.optim.glm_losses.check_per_sample`, on the derivative). Probed on
    fixed public inputs.

    Raises
    ------
    ValueError
        If ``derivative`` does not map shape (b,) to shape (b,), or a changed (z_j, y_j)
        moves another row's value.
    """
    z = np.array([-1.5, -0.2, 0.4, 2.0])
    y = np.array([0.0, 1.0, 0.3, 1.0])
    base = np.asarray(derivative(z.copy(), y.copy()))
    if base.shape != (4,):
        raise ValueError("loss.derivative must map (z, y) arrays of shape (b,) to per-sample values of shape (b,)")
    for j in range(4):
        z_changed, y_changed = z.copy(), y.copy()
        z_changed[j] += 0.7
        y_changed[j] = 1.0 - y_changed[j]
        others = [i for i in range(4) if i != j]
        for changed in (derivative(z_changed, y.copy()), derivative(z.copy(), y_changed)):
            if not np.array_equal(np.asarray(changed)[others], base[others]):
                raise ValueError("loss must be per-sample: loss.derivative(z, y)[i] may depend on z[i] and y[i] only")


@dataclass(frozen=True)
class StepNoise:
    """Every step's float-safe noise, drawn after the charge: grid g and rows g·Z_t (exact floats), numpy."""

    grid: float
    rows: Any  # (steps, d) numpy array (a torch tensor is accepted too)

    def release(self, clipped_sum: Any, step: int) -> Any:
        """fl(g·round(s/g) + g·Z_t): the noisy clipped sum of step ``step`` (round half to even, as rint).

        A numpy sum gives a numpy array; a torch tensor (the torch engines) a tensor, with the same values.
        """
        row = self.rows[step]
        if isinstance(clipped_sum, np.ndarray):
            return np.rint(clipped_sum / self.grid) * self.grid + np.asarray(row)
        import torch  # only the torch engines pass tensors

        if isinstance(row, np.ndarray):
            row = torch.from_numpy(row)
        return torch.round(clipped_sum / self.grid) * self.grid + row


#: Noise coordinates per sampler call. The exact sampler's temporaries peak near 165 bytes a
#: value (tracemalloc), so a run's table is drawn in chunks of this many: its memory is the table,
#: 8·steps·d bytes, plus one chunk's temporaries (about 170 MB), not 165·steps·d bytes.
NOISE_CHUNK = 2**20


def noise_table_bytes(steps: int, dim: int) -> int:
    """Bytes :func:`draw_step_noise` holds for a run of ``steps`` steps in d = ``dim`` coordinates (at most)."""
    return 8 * steps * dim + 165 * min(steps * dim, NOISE_CHUNK)


def draw_step_noise(rng: np.random.Generator, sigma: float, sensitivity: float, steps: int, dim: int) -> StepNoise:
    """All ``steps`` rows of discrete Gaussian noise on the lattice for a sensitivity Δ in d coordinates.

    Δ = ``sensitivity`` is the plan's (2C under replace-one, C under add/remove:
    :mod:`mechanisms.optim.dpsgd_plan`). steps·d integers from ``rng``, drawn up front
    (call it only after the charge) in chunks of :data:`NOISE_CHUNK` (one call, as before
    chunking, for a run of at most that many coordinates: the same draws); the lattice
    raises the variance so that the rounded sum's sensitivity Δ + g√d costs the charged ρ
    (``docs/float-safe-noise.md``).
    """
    lattice = GaussianLattice(sigma, sensitivity, dim)
    rows = np.empty((steps, dim))
    flat = rows.reshape(-1)
    for start in range(0, steps * dim, NOISE_CHUNK):
        stop = min(start + NOISE_CHUNK, steps * dim)
        flat[start:stop] = lattice.scale(lattice.integers(rng, stop - start), (stop - start,))
    return StepNoise(lattice.grid, rows)


@dataclass(frozen=True)
class StepRule:
    """The public rule of one run's steps: θ ← Π_M(θ − ηM(g̃/divisor + ridge·θ)).

    ``loss`` is the torch per-sample loss (torch engines) or its numpy derivative ℓ'(z, y)
    (numpy engine); ``plan`` holds the charged steps and the public divisor N
    (``plan.normalizer``; ``None``: divide by the block size); ``metric`` is the public
    preconditioner M (``None``: the identity).
    """

    loss: Callable[..., Any]
    clip: float
    lr: float
    projection: StepProjection
    ridge: float
    metric: Matrix | None
    plan: DPSGDPlan
    noise: StepNoise


def _unclipped_bound(X: Matrix, clip: float) -> tuple[Vector, float]:
    """Row norms ``‖x_i‖`` (float) and a bound b: if ``|ℓ'_i|·‖x_i‖ ≤ b`` (as computed) the clipping
    factor ``min(C/(‖ℓ'_i x_i‖ + 10⁻⁶), 1)`` that :func:`run_numpy` would compute is exactly 1.

    Per-sample norms cost more than the rest of a step, and in the bandits' refits clipping
    never binds (``|ℓ'| < 1`` on the ball, ``‖x‖ ≤ 1``). Rounding: the computed ``‖ℓ'_i x_i‖``
    exceeds the computed product ``|ℓ'_i|·‖x_i‖`` by a relative (d + 6)·2⁻⁵³ at most (d
    products, squares and a sum of d terms, a square root, on both sides), covered here
    by (2d + 16)·2⁻⁵²; then ``+ 10⁻⁶`` and the division are rounded once each, covered by
    the ``C(1 − 2⁻⁵⁰)``. Below b, ``fl(‖·‖ + 10⁻⁶) ≤ C``, so ``C/(…) ≥ 1`` and the minimum is 1.
    """
    row_norms: Vector = np.sqrt(np.einsum("ij,ij->i", X, X))
    slack = 1.0 + (2 * X.shape[1] + 16) * 2.0**-52
    return row_norms, (clip * (1.0 - 2.0**-50) - 1e-6) / slack


#: Rows per block of a full-batch step's sums: temporaries O(block·d), not O(n·d) (docs/design.md,
#: memory flat in T). The bandits' refit rows arrive in blocks of this size (dpglm.policies.running.Rows).
BLOCK_ROWS = 16384


def split_rows(X: Matrix, y: Vector, size: int | None = None) -> tuple[tuple[Matrix, ...], tuple[Vector, ...]]:
    """Views of ``X`` (n, d) and ``y`` (n,) in consecutive blocks of ``size`` rows (one if n ≤ that).

    ``size`` defaults to :data:`BLOCK_ROWS`; the GLM Newton fits (``dpglm.glm_newton.RowBlocks``)
    cut their rows with the same function and block size.
    """
    n, size = X.shape[0], BLOCK_ROWS if size is None else size
    if n <= size:
        return (X,), (y,)
    starts = range(0, n, size)
    return tuple(X[s: s + size] for s in starts), tuple(y[s: s + size] for s in starts)


def _clipped_sum(rule: StepRule, X: Matrix, y: Vector, norms: Vector, unclipped: float, theta: Vector) -> Vector:
    """Σ_i min(1, C/(‖g_i‖ + 10⁻⁶))·g_i over the rows, g_i = ℓ'(⟨x_i, θ⟩, y_i)·x_i."""
    derivative = np.asarray(rule.loss(X @ theta, y), dtype=np.float64)
    per_sample = derivative[:, None] * X
    if (np.abs(derivative) * norms).max(initial=0.0) <= unclipped:  # False for NaN
        factor = np.ones(per_sample.shape[0])  # every factor below is provably exactly 1
    else:
        factor = np.minimum(rule.clip / (np.linalg.norm(per_sample, axis=1) + 1e-6), 1.0)
    total: Vector = factor @ per_sample
    return total


def run_numpy(rule: StepRule, xs: tuple[Matrix, ...], ys: tuple[Vector, ...], theta_start: Vector,
              blocks: Iterable[Block]) -> Vector:
    """The last iterate of ``rule.plan.steps`` noisy steps over ``blocks``, in numpy (``rule.loss`` is ℓ').

    The rows are ``xs``, ``ys``: consecutive blocks (every block but the last of
    :data:`BLOCK_ROWS` rows, :func:`split_rows`). A full-batch step sums the clipped
    gradients a block at a time, in order, so its temporaries stay O(block·d) and rows
    given in blocks give the same floats as their concatenation split here. ``blocks``
    (row indices, ``None``: all rows) is consumed lazily (a minibatch partition is drawn
    after the charge); indices address the concatenated rows, formed once if needed.

    Raises
    ------
    RuntimeError
        If the loop took another number of noisy steps than was charged.
    """
    theta = np.array(theta_start, dtype=np.float64)
    noisy_steps = 0
    bounds = [_unclipped_bound(X, rule.clip) for X in xs]
    unclipped = bounds[0][1]  # the same for every block (it depends on d and C only)
    norms = [row_norms for row_norms, _ in bounds]
    rows = sum(y.shape[0] for y in ys)
    whole: tuple[Matrix, Vector, Vector] | None = None  # the rows as one array, for minibatch indices
    for index in blocks:
        if index is None:
            clipped = _clipped_sum(rule, xs[0], ys[0], norms[0], unclipped, theta)
            for X, y, row_norms in zip(xs[1:], ys[1:], norms[1:], strict=True):
                clipped = clipped + _clipped_sum(rule, X, y, row_norms, unclipped, theta)
            batch = rows
        else:
            if whole is None:
                whole = (xs[0], ys[0], norms[0]) if len(xs) == 1 else (np.concatenate(xs), np.concatenate(ys),
                                                                      np.concatenate(norms))
            X, y, row_norms = whole
            clipped = _clipped_sum(rule, X[index], y[index], row_norms[index], unclipped, theta)
            batch = index.shape[0]
        divisor = batch if rule.plan.normalizer is None else rule.plan.normalizer
        gradient = rule.noise.release(clipped, noisy_steps) / divisor
        noisy_steps += 1
        if rule.ridge > 0:
            gradient += rule.ridge * theta
        if rule.metric is not None:
            gradient = rule.metric @ gradient
        theta -= rule.lr * gradient
        theta[:] = rule.projection(theta)
    if noisy_steps != rule.plan.steps:
        raise RuntimeError(f"DP-SGD took {noisy_steps} noisy steps, {rule.plan.steps} were charged")
    return theta
