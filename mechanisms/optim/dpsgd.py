"""Projected DP-SGD for GLM losses, on opacus, charged to the ledger in zCDP before it runs.

The private refits of the paper's Algorithm 2 minimise a regularised GLM loss
L(θ; λ) = Σ_i ℓ(⟨x_i, θ⟩, y_i) + (λ/2)‖θ‖² over a ball (Criterion I) or an
ellipsoid (Criterion II) with a DP convex optimiser whose zCDP cost is fixed in
advance (paper: §6 "Optimizer and loss details"; Lemma J.6). ``DPSGD`` is that
optimiser: per-sample gradients from opacus's ``GradSampleModule``, per-sample
clipping and summing by opacus's ``DPOptimizer``, float-safe discrete Gaussian
noise of our own ("Float-safe noise" below), the exact Euclidean
projection of :mod:`mechanisms.optim.projection` after every step, and one
zCDP charge for the whole run, made before anything is sampled. The
``engine="vectorised"`` path performs the same operations written out for GLMs
(per-sample gradient ℓ'(z_i)·x_i) on the same noise stream, 3–5× faster per step;
a test checks it reproduces the opacus path to rounding.

Privacy (neighbours replace one user's row (x_i, y_i); the data size n is public)
-----------------------------------------------------------------------------------
Let k = ⌈n / b⌉ minibatches (b = ``batch_size``; b = n is full batch). Each epoch
draws (after the charge) a uniformly random partition of [n] into k blocks of
sizes ⌊n/k⌋ or ⌈n/k⌉ (public), independent of the data, and takes one step per
block; ``steps`` steps use E = ⌈steps / k⌉ epochs (a partial last epoch counts
as a whole one). Step t releases

    g̃_t = Σ_{j ∈ B_t} clip_C(∇ℓ_j(θ_t)) + N(0, σ² I_d),   σ = z·C,

and θ_{t+1} = Π_M(θ_t − ηM(g̃_t/|B_t| + (λ/n)θ_t)) is post-processing of
g̃_1, …, g̃_t (the regulariser, the public preconditioner M — the identity
unless given — and the projection touch no data).

* Sensitivity. Replacing row i changes one summand of the step whose block holds
  i, from a to a' with ‖a‖, ‖a'‖ ≤ C, so ‖a − a'‖ ≤ 2C. (Under add/remove it
  would be C; the authors' code uses σ = z·C with the add/remove accounting and
  is 2× under-noised for replace-one neighbours.) Steps whose block does not
  hold i have identical conditional laws under both data sets.
* Composition. Conditionally on the past, the step holding i is a Gaussian
  mechanism: D_α ≤ α(2C)²/(2σ²) = 2α/z² for every α > 1 (Bun & Steinke 2016,
  Prop. 1.6); every other step contributes 0. By the chain rule for Rényi
  divergences under adaptive composition (Mironov 2017, Prop. 1; Bun & Steinke
  2016, Lemma 2.3), the whole transcript satisfies, for every α > 1,

      D_α ≤ E · 2α/z²,   i.e.   ρ = E·(2C)²/(2σ²) = 2E/z²   (zCDP, exact).

  Row i sits in exactly one block per epoch, so within an epoch the blocks
  compose in parallel; across epochs the costs add. The random partition is
  independent of the data, so conditioning on it changes nothing.
* No amplification by subsampling is claimed: a Poisson-subsampled Gaussian has
  no finite zCDP bound that a few Rényi orders could certify, and shuffled
  fixed-size batches are not Poisson samples. So minibatches buy more steps per
  epoch, never a lower cost.

Public normaliser (neighbours replace, add or remove one row; n need not be public)
-------------------------------------------------------------------------------------
In the joint-DP bandit the refit data (the exploration rounds T_o) of two
neighbouring user sequences may differ by adding or removing a row, since
whether user t explores depends on user t's context, so n = |T_o| is private.
The derivation above then fails: it divides by n and |B_t|, and with minibatches
the block count k = ⌈n/b⌉, hence the epoch count E and the charge itself, are
functions of n. ``fit(..., normalizer=N)`` therefore runs full batch only (every
step sums all rows; ``batch_size`` must be None) and minimises
(1/N)[Σ_i ℓ(⟨x_i, θ⟩, y_i) + (λ/2)‖θ‖²] for a public N ≥ 1 (e.g. the round
count); the minimiser is that of L(θ; λ), whatever N. Step t releases

    g̃_t = Σ_{j ∈ D} clip_C(∇ℓ_j(θ_t)) + N(0, σ² I_d),   σ = z·C,

and θ_{t+1} = Π_M(θ_t − ηM(g̃_t/N + (λ/N)θ_t)) is post-processing with public
N, λ, η, M and projection; ``steps`` = E, the block count 1 and σ (from the cost
or z) are public, so neither the charge nor the noise depends on n.

* Sensitivity. Let D' be D with row i replaced (‖clip(a) − clip(a')‖ ≤ 2C),
  added (the sum gains clip(a'), norm ≤ C) or removed (it loses clip(a), norm
  ≤ C). In every case the conditional means of g̃_t given the past differ by at
  most Δ = 2C, and all other summands are the same functions of θ_t.
* Composition. Each step is then a Gaussian mechanism with D_α ≤ α(2C)²/(2σ²)
  = 2α/z², and the chain rule over the E = ``steps`` adaptive steps gives
  ρ = 2E/z², the same closed form as above with one block per epoch. It holds
  for all three neighbour kinds at once, so one ``ZCDP(ρ)`` charge stated under
  ``replace_one`` (the project ledger's relation) is valid, and the charge's note
  records that the add/remove-or-replace relation is covered. An empty data set
  (n = 0, a neighbour of every one-row set) is accepted: its steps are pure noise.
* Minibatches are refused with a normaliser: a partition of [n] reveals n
  through the block sizes, and a block count from n makes the cost data-dependent.

Float-safe noise (``docs/float-safe-noise.md``)
-----------------------------------------------
Each step's clipped sum s is released as fl(g·rint(s/g) + g·Z_t) with Z_t ∈ ℤᵈ
discrete Gaussian on the power-of-two grid g of ``mechanisms.lattice`` (σ/g ∈
[2²⁸, 2²⁹)), its variance raised so that the rounded sum's sensitivity 2C + g√d
costs exactly the ρ above (Canonne, Kamath & Steinke 2020, Thm 4). All steps' noise
is drawn once, after the charge, from ``rng``. In the opacus engine the
``DPOptimizer`` runs with ``noise_multiplier=0`` (it clips and sums) and the step
hook replaces its gradient by this noisy sum over the same divisor. Noise that
opacus draws in a user's own training loop (its ``PrivacyEngine``) is opacus's,
float Gaussian, and not covered by this.

The charge is ``ZCDP(ρ)``; given a cost, σ is the smallest float (rounded up)
with 2E·C²/σ² ≤ ρ exactly, and the plan's σ (the float product z·C, which the
noise is calibrated to) is checked against it. Given ``noise_multiplier`` z, the charge is ρ(z·C)
rounded up to 15 significant digits.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Union

import numpy as np
import torch
from opacus import GradSampleModule
from opacus.optimizers import DPOptimizer

from accounting import GDP, ZCDP
from mechanisms.base import Mechanism
from mechanisms.lattice import GaussianLattice, gdp_mu_squared, gdp_sigma
from mechanisms.noise import gaussian_rho, gaussian_sigma_for, round_up
from mechanisms.optim.projection import (
    BallProjection,
    EllipsoidProjection,
    MetricProjection,
)
from mechanisms.release import Release, check_generator, check_positive

__all__ = ["DPSGD", "ENGINES", "LOSSES", "DPSGDPlan", "chain_step_hook", "logistic_loss", "probit_loss"]

Projection = Union[BallProjection, EllipsoidProjection]
StepProjection = Union[BallProjection, EllipsoidProjection, MetricProjection]
PerSampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def logistic_loss(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample logistic GLM loss ℓ(z, y) = b(z) − yz with b(z) = log(1 + eᶻ) (paper §4).

    For y ∈ {0, 1} this is the Bernoulli negative log-likelihood. Its derivative
    μ(z) − y lies in [−1, 1] for y ∈ [0, 1], so with ‖x‖ ≤ 1 the per-sample
    gradient norm is at most 1 (clip = 1 then never binds). torch's ``softplus``
    returns z itself above z = 20 (relative error below 10⁻¹⁰).
    """
    return torch.nn.functional.softplus(z) - y * z


_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def probit_loss(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample probit GLM loss ℓ(z, y) = b(z) − yz with b(z) = zΦ(z) + φ(z) (paper §4).

    b' = Φ = μ, so ℓ' = Φ(z) − y ∈ [−1, 1] for y ∈ [0, 1] and the per-sample
    gradient (Φ(z) − y)x has norm at most ‖x‖: the same objective as
    :data:`dpglm.glm.PROBIT` and the non-private refits, and clip = 1 never binds
    for ‖x‖ ≤ 1. (The Bernoulli negative log-likelihood −y log Φ(z) − (1 − y) log Φ(−z)
    is a different objective whose gradient grows like |z|, so clipping biases it.)
    """
    return z * torch.special.ndtr(z) + torch.exp(-0.5 * z * z) * _INV_SQRT_2PI - y * z


LOSSES: dict[str, PerSampleLoss] = {"logistic": logistic_loss, "probit": probit_loss}
ENGINES = ("opacus", "vectorised")


def chain_step_hook(optimizer: DPOptimizer, hook: Callable[[DPOptimizer], None]) -> None:
    """Attach ``hook`` to an opacus ``DPOptimizer`` after whatever hook it already holds.

    ``DPOptimizer.attach_step_hook`` keeps a single hook and silently replaces the
    previous one (e.g. a ``PrivacyEngine`` accountant's); this runs the previous
    hook first, then ``hook``, on every noisy step.
    """
    previous = optimizer.step_hook
    if previous is None:
        optimizer.attach_step_hook(hook)
        return

    def chained(opt: DPOptimizer) -> None:
        previous(opt)
        hook(opt)

    optimizer.attach_step_hook(chained)


@dataclass(frozen=True)
class _StepNoise:
    """Every step's float-safe noise, drawn after the charge: grid g and rows g·Z_t (exact floats)."""

    grid: float
    rows: torch.Tensor

    def release(self, clipped_sum: torch.Tensor, step: int) -> torch.Tensor:
        """fl(g·round(s/g) + g·Z_t): the noisy clipped sum of step ``step`` (round half to even, as rint)."""
        return torch.round(clipped_sum / self.grid) * self.grid + self.rows[step]


@dataclass(frozen=True)
class DPSGDPlan:
    """What a run will do and cost, computed from public quantities only.

    Attributes
    ----------
    n, steps, batch_size : int
        Data size, noisy steps, block size (``batch_size == n``: full batch).
    n_batches, epochs : int
        k = ⌈n/b⌉ blocks per epoch and E = ⌈steps/k⌉ epochs charged.
    noise_multiplier : float
        z = σ/C (opacus's convention); the noise std on a clipped gradient sum is z·C.
    sigma : float
        The std the noise is calibrated to (before the grid's rounding allowance), the float z·C.
    cost : accounting.ZCDP
        The charge, ρ ≥ 2E/z² = E·(2C)²/(2σ²) (see the module docstring).
    normalizer : float or None
        The public N dividing the noisy gradient sum (full batch), or ``None``:
        divide by the block size (replace-one neighbours only, n public).
    """

    n: int
    steps: int
    batch_size: int
    n_batches: int
    epochs: int
    noise_multiplier: float
    sigma: float
    cost: ZCDP
    normalizer: float | None = None


def _check_per_sample(loss: PerSampleLoss) -> None:
    """Reject a loss that is not per-sample: ℓ_i must depend on (z_i, y_i) only.

    Per-sample clipping bounds the sensitivity only if changing row j leaves every
    other row's gradient unchanged; a loss mixing rows (e.g. through a batch mean)
    would void the privacy analysis. Probed on fixed public inputs.
    """
    z = torch.tensor([-1.5, -0.2, 0.4, 2.0], dtype=torch.float64)
    y = torch.tensor([0.0, 1.0, 0.3, 1.0], dtype=torch.float64)
    base = loss(z, y)
    if not isinstance(base, torch.Tensor) or base.shape != (4,):
        raise ValueError("loss must map (z, y) tensors of shape (b,) to per-sample losses of shape (b,)")
    for j in range(4):
        z_changed, y_changed = z.clone(), y.clone()
        z_changed[j] += 0.7
        y_changed[j] = 1.0 - y_changed[j]
        others = [i for i in range(4) if i != j]
        for changed in (loss(z_changed, y), loss(z, y_changed)):
            if not torch.equal(changed[others], base[others]):
                raise ValueError("loss must be per-sample: loss(z, y)[i] may depend on z[i] and y[i] only")


def _check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = int(value)
    if value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return value


def _check_normalizer(value: object) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"normalizer must be a real number, got {type(value).__name__}")
    value = float(value)
    if not (math.isfinite(value) and value >= 1):
        raise ValueError(f"normalizer must be a finite public number >= 1, got {value!r}")
    return value


class DPSGD(Mechanism):
    """Projected DP-SGD for a GLM loss, ρ-zCDP under replace-one neighbours (one charge per fit).

    paper: §6 "Optimizer and loss details" and Lemma J.6 (the DP convex optimiser of
    Alg. 2's refits, zCDP budget fixed per call); privacy derivation in the module
    docstring: ρ = E·(2C)²/(2σ²) for E epochs, clipping norm C, noise std σ.

    Parameters
    ----------
    account : accounting.Account
        Charged once per ``fit`` before any noise is drawn; its currency must be ``"zcdp"``.
    loss : {"logistic", "probit"} or callable
        Per-sample loss ℓ(z, y) of the linear predictor z = ⟨x, θ⟩, as a torch
        function mapping tensors of shape (b,) to per-sample losses of shape (b,).
    rng : numpy.random.Generator
        Drives everything random (a torch generator for the noise is seeded from
        it after the charge, and the minibatch partitions): same seed, same θ.
    clip : float
        Per-sample gradient norm bound C > 0 (opacus's ``max_grad_norm``).
    relation : {"replace_one"}
        The neighbouring relation the charge is stated under. Without a
        ``normalizer`` the gradient sum is averaged by the public n and batch
        sizes, which add/remove neighbours would not keep fixed; with one
        (full batch) the same charge also covers adding or removing a row (module
        docstring, "Public normaliser").
    engine : {"opacus", "vectorised"}
        ``"opacus"``: per-sample gradients by opacus's ``GradSampleModule``, clipping
        and noise by its ``DPOptimizer``. ``"vectorised"``: the same operations
        written out for a GLM (per-sample gradient ℓ'(z_i)·x_i), with the same noise
        stream, several times faster per step; the two agree to rounding (tested).
        The privacy analysis is the same for both.
    """

    def __init__(
        self,
        account: object,
        loss: str | PerSampleLoss,
        rng: np.random.Generator,
        *,
        clip: float,
        relation: str = "replace_one",
        engine: str = "opacus",
    ) -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        self._check_account(account)
        if isinstance(loss, str):
            if loss not in LOSSES:
                raise ValueError(f"loss must be one of {sorted(LOSSES)} or a callable, got {loss!r}")
            self.loss_name: str | None = loss
            self.loss: PerSampleLoss = LOSSES[loss]
        elif callable(loss):
            _check_per_sample(loss)
            self.loss_name = None
            self.loss = loss
        else:
            raise TypeError(f"loss must be a name in {sorted(LOSSES)} or a callable, got {type(loss).__name__}")
        self._check_relation(relation)
        self.account = account
        self.rng = check_generator(rng)
        self.clip = check_positive("clip", clip)
        self.relation = relation
        self.engine = engine

    @staticmethod
    def _check_account(account: object) -> None:
        if getattr(account, "currency", None) not in ("zcdp", "gdp"):
            raise TypeError(
                "account must charge in zCDP or GDP (currency 'zcdp' or 'gdp') for DP-SGD, "
                f"got currency {getattr(account, 'currency', None)!r}"
            )

    @staticmethod
    def _check_relation(relation: str) -> None:
        if relation != "replace_one":
            raise ValueError(
                f"relation must be 'replace_one' (neighbours replace one user's row; n is public), got {relation!r}"
            )

    def plan(
        self,
        n: int,
        *,
        steps: int,
        cost: ZCDP | GDP | None = None,
        noise_multiplier: float | None = None,
        batch_size: int | None = None,
        normalizer: float | None = None,
        dim: int | None = None,
    ) -> DPSGDPlan:
        """The noise and the charge of a run on n rows, without charging or sampling.

        In a gdp account (``dim`` = d required) the charge is GDP with μ² = E·μ′², μ′
        of one step's float-safe discrete noise on d coordinates for sensitivity 2C
        (:func:`mechanisms.lattice.gdp_mu_squared`; each row is in one step per epoch
        and steps compose in GDP as √(Σμᵢ²), Dong, Roth & Su 2022, Cor. 3.3), and
        ``cost`` is a GDP.

        Exactly one of ``cost`` (a ``ZCDP(rho > 0, delta=0)`` to spend exactly, noise
        rounded up) and ``noise_multiplier`` (z = σ/C > 0) must be given. With a
        public ``normalizer`` (float ≥ 1) the run is full batch (``batch_size`` must
        be None), n may be 0, and the plan's epochs, noise and cost do not depend on n.
        """
        steps = _check_int("steps", steps, 1)
        if normalizer is None:
            n = _check_int("n", n, 1)
            batch_size = n if batch_size is None else _check_int("batch_size", batch_size, 1, n)
            n_batches = -(-n // batch_size)
        else:
            normalizer = _check_normalizer(normalizer)
            n = _check_int("n", n, 0)
            if batch_size is not None:
                raise ValueError(
                    "batch_size must be None (full batch) when normalizer is given: a minibatch "
                    f"partition would depend on the private n, got batch_size={batch_size!r}"
                )
            batch_size, n_batches = n, 1
        epochs = -(-steps // n_batches)
        sensitivity = 2.0 * self.clip  # replace-one: ‖clip(a) − clip(a')‖ ≤ 2C
        if (cost is None) == (noise_multiplier is None):
            raise ValueError("give exactly one of cost (a ZCDP to spend) and noise_multiplier (sigma / clip > 0)")
        if self.account.currency == "gdp":
            multiplier, charged = self._gdp_plan(cost, noise_multiplier, sensitivity, epochs, dim)
        elif cost is not None:
            if not isinstance(cost, ZCDP):
                raise TypeError(f"cost must be an accounting.ZCDP, got {type(cost).__name__}")
            if cost.delta != 0 or cost.rho <= 0:
                raise ValueError(f"cost must be ZCDP(rho > 0, delta=0) for Gaussian noise, got {cost}")
            sigma = gaussian_sigma_for(cost.rho, sensitivity, epochs)
            multiplier = sigma / self.clip
            while multiplier * self.clip < sigma:
                multiplier = float(np.nextafter(multiplier, np.inf))
            charged = cost
        else:
            multiplier = check_positive("noise_multiplier", noise_multiplier)
            charged = ZCDP(round_up(gaussian_rho(multiplier * self.clip, sensitivity, epochs)))
        return DPSGDPlan(
            n=n,
            steps=steps,
            batch_size=batch_size,
            n_batches=n_batches,
            epochs=epochs,
            noise_multiplier=multiplier,
            sigma=multiplier * self.clip,
            cost=charged,
            normalizer=normalizer,
        )

    def _gdp_plan(self, cost: object, noise_multiplier: float | None, sensitivity: float, epochs: int,
                  dim: int | None) -> tuple[float, GDP]:
        """(z, GDP charge) of a run in a gdp account: see :meth:`plan`."""
        dim = _check_int("dim", dim, 1)
        if cost is not None:
            if not isinstance(cost, GDP):
                raise TypeError(f"cost must be an accounting.GDP for a gdp account, got {type(cost).__name__}")
            sigma = gdp_sigma(cost.mu_squared, sensitivity, dim, Fraction(epochs))
            multiplier = sigma / self.clip
            while multiplier * self.clip < sigma:
                multiplier = float(np.nextafter(multiplier, np.inf))
            return multiplier, cost
        multiplier = check_positive("noise_multiplier", noise_multiplier)
        return multiplier, GDP.from_mu_squared(epochs * gdp_mu_squared(multiplier * self.clip, sensitivity, dim))

    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        *,
        steps: int,
        lr: float,
        projection: Projection,
        cost: ZCDP | None = None,
        noise_multiplier: float | None = None,
        batch_size: int | None = None,
        theta0: np.ndarray | None = None,
        lam: float = 0.0,
        preconditioner: np.ndarray | None = None,
        note: str = "",
        normalizer: float | None = None,
    ) -> Release:
        """Charge the whole run, then minimise (1/n)[Σ_i ℓ(⟨x_i, θ⟩, y_i) + (λ/2)‖θ‖²] privately.

        With ``normalizer`` N the objective is (1/N)[Σ_i ℓ(⟨x_i, θ⟩, y_i) + (λ/2)‖θ‖²]
        (same minimiser), full batch, private also when neighbours add or remove a row.

        paper: Alg. 2 refits of θ̂_o (ball Θ_I) and θ̂_τ (ellipsoid Θ_II); §6 loss L(θ; λ).

        Parameters
        ----------
        X : numpy.ndarray of shape (n, d)
            Contexts (finite). Not clipped: the per-sample gradients are. n ≥ 1, or
            n ≥ 0 with a ``normalizer``.
        y : numpy.ndarray of shape (n,)
            Responses (finite; in [0, 1] for the built-in losses).
        steps : int
            Number of noisy projected gradient steps (≥ 1); charged as ⌈steps/k⌉ epochs.
        lr : float
            Step size η > 0 on the mean objective.
        projection : BallProjection or EllipsoidProjection
            Constraint set; every iterate is projected onto it.
        cost, noise_multiplier : see :meth:`plan` (exactly one).
        batch_size : int, optional
            Block size b ∈ [1, n] of the per-epoch random partition; ``None`` is full batch.
        theta0 : numpy.ndarray of shape (d,), optional
            Starting point (public, must be feasible); default the set's centre.
        lam : float
            Ridge weight λ ≥ 0 of the cumulative loss (data-independent, added after the noise).
        preconditioner : numpy.ndarray of shape (d, d), optional
            A public symmetric positive definite M (e.g. the inverse of a released
            Hessian or design matrix). Steps become θ ← Π_M(θ − ηM(g̃/|B| + (λ/n)θ))
            with the projection in the M⁻¹-norm (:class:`MetricProjection`), i.e.
            projected gradient descent in the coordinates M^{-1/2}θ: fewer steps for
            ill-conditioned losses, hence less noise per step at the same ρ.
            Post-processing of the noisy sums: the privacy analysis is unchanged.
        note : str
            Free text recorded with the charge.
        normalizer : float, optional
            A public N ≥ 1 (e.g. the round count, never a data-dependent count like
            n) replacing n and the block sizes as the divisor: steps are
            θ ← Π_M(θ − ηM(g̃/N + (λ/N)θ)) with g̃ the noisy clipped sum over all
            rows, so the noise std on the normalised gradient is z·C/N. Requires
            ``batch_size=None``. The charge ρ = 2·steps/z² then holds for neighbours
            that replace, add or remove one row (module docstring), as its note says.

        Returns
        -------
        Release
            The last iterate θ (read-only) and the receipt of the charge.

        Raises
        ------
        accounting.BudgetExceeded
            If the account cannot pay; nothing is drawn from ``rng``.
        """
        X, y, theta_start = self._check_data(X, y, projection, theta0, allow_empty=normalizer is not None)
        lr = check_positive("lr", lr)
        if isinstance(lam, (bool, np.bool_)) or not isinstance(lam, numbers.Real):
            raise TypeError(f"lam must be a real number, got {type(lam).__name__}")
        lam = float(lam)
        if not (math.isfinite(lam) and lam >= 0):
            raise ValueError(f"lam must be finite and >= 0, got {lam!r}")
        n, dim = X.shape
        if preconditioner is None:
            step_projection: StepProjection = projection
        else:
            step_projection = MetricProjection(projection, preconditioner)
            if step_projection.dim != dim:
                raise ValueError(f"preconditioner must have shape ({dim}, {dim}), got {step_projection.M.shape}")
        plan = self.plan(
            n, steps=steps, cost=cost, noise_multiplier=noise_multiplier, batch_size=batch_size, normalizer=normalizer,
            dim=dim,
        )
        if plan.normalizer is None:
            covered = f"replace_one sensitivity 2C={2 * self.clip!r}"
        else:
            covered = (
                f"add/remove-or-replace one row covered: full batch, clipped sum over a private n "
                f"divided by public normalizer={plan.normalizer!r}, sensitivity 2C={2 * self.clip!r}"
            )
        receipt = self._charge(  # one charge covers the planned steps and their one release, the last iterate
            plan.cost,
            mechanism="DPSGD",
            relation=self.relation,
            partition=None,
            note=(
                f"{covered}, sigma={plan.sigma!r} (z={plan.noise_multiplier!r}), "
                f"{plan.epochs} epochs x {plan.n_batches} blocks, {plan.steps} steps. {note}"
            ).strip(),
        )
        metric = None if preconditioner is None else torch.from_numpy(step_projection.M)
        ridge = lam / (n if plan.normalizer is None else plan.normalizer)
        theta = self._run(X, y, theta_start, plan, lr, step_projection, ridge, metric)
        return self._release(theta, receipt)

    def _check_data(
        self,
        X: np.ndarray,
        y: np.ndarray,
        projection: Projection,
        theta0: np.ndarray | None,
        *,
        allow_empty: bool = False,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # Private, contiguous, writeable copies (torch shares their memory; inputs may be read-only releases).
        X = np.array(X, dtype=np.float64, order="C")
        y = np.array(y, dtype=np.float64, order="C")
        min_rows = 0 if allow_empty else 1
        if X.ndim != 2 or X.shape[0] < min_rows or X.shape[1] < 1:
            raise ValueError(f"X must have shape (n, d) with n >= {min_rows}, d >= 1, got {X.shape}")
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
            raise ValueError("X and y must be finite")
        if self.loss_name is not None and (np.any(y < 0) or np.any(y > 1)):
            raise ValueError(f"y must lie in [0, 1] for the {self.loss_name} loss")
        if not isinstance(projection, (BallProjection, EllipsoidProjection)):
            raise TypeError(
                f"projection must be a BallProjection or EllipsoidProjection, got {type(projection).__name__}"
            )
        dim = X.shape[1]
        if theta0 is None:
            start = projection.center_for(dim)
        else:
            start = np.array(theta0, dtype=np.float64)
            if start.shape != (dim,) or not np.all(np.isfinite(start)):
                raise ValueError(f"theta0 must be a finite vector of shape ({dim},)")
            if not projection.contains(start):
                raise ValueError("theta0 must lie in the projection's set (it is the public starting point)")
        return X, y, start

    def _blocks(self, n: int, plan: DPSGDPlan) -> Iterator[np.ndarray | None]:
        """The row indices of each step (``None``: all rows), a fresh random partition per epoch.

        Drawn from ``rng`` lazily, after the charge; the partition is independent of the data.
        """
        if plan.n_batches == 1:
            for _ in range(plan.steps):
                yield None
            return
        taken = 0
        while taken < plan.steps:
            for block in np.array_split(self.rng.permutation(n), plan.n_batches)[: plan.steps - taken]:
                yield block
            taken += plan.n_batches

    def _batches(self, X: np.ndarray, y: np.ndarray, plan: DPSGDPlan) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The (X, y) rows of each step as torch tensors (sharing X's and y's memory), in :meth:`_blocks` order."""
        X_torch, y_torch = torch.from_numpy(X), torch.from_numpy(y)
        for index in self._blocks(X.shape[0], plan):
            if index is None:
                yield X_torch, y_torch
            else:
                rows = torch.from_numpy(index)
                yield X_torch[rows], y_torch[rows]

    def _run(
        self,
        X: np.ndarray,
        y: np.ndarray,
        theta_start: np.ndarray,
        plan: DPSGDPlan,
        lr: float,
        projection: StepProjection,
        ridge: float,
        metric: torch.Tensor | None,
    ) -> np.ndarray:
        """The noisy loop; called only after the charge was granted.

        Every step's noise is drawn here at once (one charge covers all planned steps):
        float-safe, on the power-of-two grid of ``mechanisms.lattice`` for the clipped
        sum's sensitivity 2C in d coordinates (module docstring, "Float-safe noise").
        """
        lattice = GaussianLattice(plan.sigma, 2 * self.clip, X.shape[1])
        units = lattice.integers(self.rng, plan.steps * X.shape[1])
        noise = _StepNoise(lattice.grid, torch.from_numpy(lattice.scale(units, (plan.steps, X.shape[1]))))
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # d is small: intra-op threads only add contention
        try:
            loop = self._loop_opacus if self.engine == "opacus" else self._loop_vectorised
            theta, noisy_steps = loop(X, y, theta_start, plan, lr, projection, ridge, metric, noise)
        finally:
            torch.set_num_threads(threads)
        if noisy_steps != plan.steps:
            raise RuntimeError(f"DP-SGD took {noisy_steps} noisy steps, {plan.steps} were charged")
        return theta

    def _loop_opacus(
        self,
        X: np.ndarray,
        y: np.ndarray,
        theta_start: np.ndarray,
        plan: DPSGDPlan,
        lr: float,
        projection: StepProjection,
        ridge: float,
        metric: torch.Tensor | None,
        noise: _StepNoise,
    ) -> tuple[np.ndarray, int]:
        """Per-sample gradients by ``GradSampleModule``, clipping and summing by ``DPOptimizer``.

        opacus draws no noise here (``noise_multiplier=0``): the step hook replaces its
        gradient by the float-safe noisy clipped sum (``_StepNoise``) over the divisor,
        then adds the ridge gradient and applies the preconditioner (after the noise,
        before the update), chained after any hook it holds.
        """
        dim = X.shape[1]
        linear = torch.nn.Linear(dim, 1, bias=False, dtype=torch.float64)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(theta_start).view(1, dim))
        module = GradSampleModule(linear, loss_reduction="sum")
        optimizer = DPOptimizer(
            torch.optim.SGD(module.parameters(), lr=lr),
            noise_multiplier=0.0,  # the noise is ours, float-safe (hook below)
            max_grad_norm=self.clip,
            expected_batch_size=plan.batch_size if plan.normalizer is None else plan.normalizer,
            loss_reduction="mean",
        )
        weight = linear.weight
        theta = weight.detach().numpy().reshape(dim)  # shares memory with the parameter
        noisy_steps = 0

        def after_noise(opt: DPOptimizer) -> None:
            # Runs after clipping + summing (+ zero noise + averaging), before the SGD update.
            nonlocal noisy_steps
            if noisy_steps >= plan.steps:
                raise RuntimeError(f"DP-SGD took more noisy steps than the {plan.steps} charged")
            divisor = opt.expected_batch_size * opt.accumulated_iterations
            weight.grad.copy_((noise.release(weight.summed_grad.view(dim), noisy_steps) / divisor).view(1, dim))
            noisy_steps += 1
            if ridge > 0:
                weight.grad.add_(weight.detach(), alpha=ridge)
            if metric is not None:
                weight.grad.copy_((metric @ weight.grad.view(dim)).view(1, dim))

        chain_step_hook(optimizer, after_noise)
        with warnings.catch_warnings():
            # opacus's full backward hook warns when the inputs do not require grad.
            warnings.filterwarnings("ignore", message="Full backward hook is firing", category=UserWarning)
            for X_batch, y_batch in self._batches(X, y, plan):
                optimizer.zero_grad()
                self.loss(module(X_batch).view(-1), y_batch).sum().backward()
                if plan.normalizer is None:
                    optimizer.expected_batch_size = int(y_batch.shape[0])
                optimizer.step()
                theta[:] = projection(theta)
        return theta.copy(), noisy_steps

    def _loop_vectorised(
        self,
        X: np.ndarray,
        y: np.ndarray,
        theta_start: np.ndarray,
        plan: DPSGDPlan,
        lr: float,
        projection: StepProjection,
        ridge: float,
        metric: torch.Tensor | None,
        noise: _StepNoise,
    ) -> tuple[np.ndarray, int]:
        """The same steps as :meth:`_loop_opacus`, written out for a GLM.

        ℓ_i depends on θ only through z_i = ⟨x_i, θ⟩, so one backward pass through
        Σ_i ℓ(z_i, y_i) gives every ℓ'(z_i) and the per-sample gradient is ℓ'(z_i)·x_i.
        Clipping factor min(1, C/(‖g_i‖ + 10⁻⁶)), the same float-safe noisy sum
        (``_StepNoise``, the same draws), and the division by the block size (or
        the public normaliser) follow opacus's ``DPOptimizer`` operation by operation
        (tested to agree with it).
        """
        dim = X.shape[1]
        theta = np.array(theta_start, dtype=np.float64)
        theta_torch = torch.from_numpy(theta)  # shares memory with theta
        noisy_steps = 0
        for X_batch, y_batch in self._batches(X, y, plan):
            z = (X_batch @ theta_torch).requires_grad_(True)
            (derivative,) = torch.autograd.grad(self.loss(z, y_batch).sum(), z)
            per_sample = derivative[:, None] * X_batch
            factor = (self.clip / (per_sample.norm(dim=1) + 1e-6)).clamp(max=1.0)
            divisor = y_batch.shape[0] if plan.normalizer is None else plan.normalizer
            gradient = noise.release(factor @ per_sample, noisy_steps) / divisor
            noisy_steps += 1
            if ridge > 0:
                gradient += ridge * theta_torch
            if metric is not None:
                gradient = metric @ gradient
            theta -= lr * gradient.numpy()
            theta[:] = projection(theta)
        return theta, noisy_steps
