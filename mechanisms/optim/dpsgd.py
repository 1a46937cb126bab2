"""Projected DP-SGD for GLM losses, on numpy, opacus or a vectorised torch engine, charged before it runs.

The private refits of the paper's Algorithm 2 minimise a regularised GLM loss
L(θ; λ) = Σ_i ℓ(⟨x_i, θ⟩, y_i) + (λ/2)‖θ‖² over a ball (Criterion I) or an
ellipsoid (Criterion II) with a DP convex optimiser whose zCDP cost is fixed in
advance (paper: §6 "Optimizer and loss details"; Lemma J.6). ``DPSGD`` is that
optimiser: per-sample gradients from opacus's ``GradSampleModule``, per-sample
clipping and summing by opacus's ``DPOptimizer``, float-safe discrete Gaussian
noise of our own (``docs/float-safe-noise.md``), the exact Euclidean projection of
:mod:`mechanisms.optim.projection` after every step, and one charge for the whole
run, made before anything is sampled. The ``engine="vectorised"`` path performs the
same operations written out for GLMs (per-sample gradient ℓ'(z_i)·x_i) on the same
noise stream, 3–5× faster per step, and ``engine="numpy"`` (the default everywhere) the
same again in plain numpy, without importing torch; a test checks both reproduce the
opacus path to rounding.

The concepts live in their own modules, which this one wires together:

* :mod:`mechanisms.optim.dpsgd_plan` — the plan (blocks, epochs, σ) and the charge,
  from public quantities only, with the privacy derivation: ρ = E·(2C)²/(2σ²) = 2E/z²
  under replace-one neighbours, the public-normaliser variant that also covers
  adding or removing a row, and ρ = E/(2z²) (sensitivity C) for an add/remove ledger;
* :mod:`mechanisms.optim.dpsgd_steps` — the step noise, the step rule and the numpy
  engine with the built-in losses' derivatives (no torch);
* :mod:`mechanisms.optim.dpsgd_loops` — the noisy loops of the torch engines;
* :mod:`mechanisms.optim.glm_losses` — the per-sample losses (torch).

torch and opacus are imported when a torch engine's run starts (or a torch loss is
resolved), not with this module: constructing a ``DPSGD``, planning its charge and
running it on the numpy engine (the default) need neither.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from accounting import GDP, ZCDP
from accounting.costs import RELATIONS
from accounting.validation import check_array, check_memory, check_real, check_text
from mechanisms.base import Mechanism
from mechanisms.optim.dpsgd_plan import DPSGDPlan, charge_note, check_lr, plan_run
from mechanisms.optim.dpsgd_steps import (
    DERIVATIVES,
    StepRule,
    check_per_sample_derivative,
    draw_step_noise,
    noise_table_bytes,
    run_numpy,
    split_rows,
)
from mechanisms.optim.projection import BallProjection, EllipsoidProjection, MetricProjection
from mechanisms.release import Release, check_generator, check_positive

if TYPE_CHECKING:
    from accounting import Chargeable
    from mechanisms.optim.dpsgd_loops import chain_step_hook as chain_step_hook
    from mechanisms.optim.glm_losses import LOSSES as LOSSES
    from mechanisms.optim.glm_losses import PerSampleLoss
    from mechanisms.optim.glm_losses import logistic_loss as logistic_loss
    from mechanisms.optim.glm_losses import probit_loss as probit_loss

__all__ = ["DPSGD", "ENGINES", "LOSSES", "LOSS_NAMES", "DPSGDPlan", "chain_step_hook", "logistic_loss",
           "probit_loss"]

ENGINES = ("numpy", "opacus", "vectorised")
#: The built-in losses' names (the keys of :data:`mechanisms.optim.glm_losses.LOSSES`).
LOSS_NAMES = ("logistic", "probit")

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float64]
Projection = BallProjection | EllipsoidProjection
StepProjection = BallProjection | EllipsoidProjection | MetricProjection

# Names kept importable from here (the public paths before the split), loaded with torch on first use.
_TORCH_NAMES = {"LOSSES": "glm_losses", "logistic_loss": "glm_losses", "probit_loss": "glm_losses",
                "chain_step_hook": "dpsgd_loops"}


def __getattr__(name: str) -> object:
    if name in _TORCH_NAMES:
        return getattr(importlib.import_module(f"mechanisms.optim.{_TORCH_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class DPSGD(Mechanism):
    """Projected DP-SGD for a GLM loss, ρ-zCDP under the ledger's neighbouring relation (one charge per fit).

    paper: §6 "Optimizer and loss details" and Lemma J.6 (the DP convex optimiser of
    Alg. 2's refits, zCDP budget fixed per call); privacy derivation in the module
    derivation in :mod:`mechanisms.optim.dpsgd_plan`: ρ = E·(2C)²/(2σ²) for E epochs, clipping
    norm C, noise std σ, under replace-one; ρ = E·C²/(2σ²) under add/remove (full batch, public
    normaliser).

    Examples
    --------
    One add/remove ledger pays a full-batch run (public normaliser) and a Poisson run side by side:

    >>> import numpy as np
    >>> from accounting import Ledger, ApproxDP
    >>> from mechanisms.optim import DPSGD, BallProjection, PoissonDPSGD
    >>> ledger = Ledger(ApproxDP(4, 1e-6), relation="add_remove")
    >>> parts = ledger.split({"full": 1, "poisson": 1}, currency={"full": "zcdp", "poisson": "rdp"})
    >>> X, y, ball = np.eye(3), np.array([1.0, 0.0, 1.0]), BallProjection(2.0)
    >>> full = DPSGD(parts["full"], "logistic", np.random.default_rng(0), clip=1.0).fit(
    ...     X, y, noise_multiplier=20.0, steps=10, lr=0.5, projection=ball, normalizer=100)
    >>> print(full.receipt.cost)  # E/(2z²) = 10/800
    ZCDP(rho=0.0125)
    >>> sampled = PoissonDPSGD(parts["poisson"], "logistic", np.random.default_rng(1), clip=1.0).fit(
    ...     X, y, sample_rate=0.1, noise_multiplier=4.0, steps=10, lr=0.5, projection=ball, normalizer=100)
    >>> full.receipt.relation, sampled.receipt.relation
    ('add_remove', 'add_remove')

    Parameters
    ----------
    account : accounting.Account
        Charged once per ``fit`` before any noise is drawn; its currency must be ``"zcdp"``
        or ``"gdp"``.
    loss : {"logistic", "probit"} or callable
        Per-sample loss ℓ(z, y) of the linear predictor z = ⟨x, θ⟩, as a torch
        function mapping tensors of shape (b,) to per-sample losses of shape (b,).
    rng : numpy.random.Generator
        Drives everything random (a torch generator for the noise is seeded from
        it after the charge, and the minibatch partitions): same seed, same θ.
    clip : float
        Per-sample gradient norm bound C > 0 (opacus's ``max_grad_norm``).
    relation : {"replace_one", "add_remove"}, optional
        The neighbouring relation the charge is stated under; default the account's
        (``account.relation``, ``"replace_one"`` if it has none). ``"replace_one"``:
        sensitivity 2C; without a ``normalizer`` the gradient sum is averaged by the
        public n and batch sizes, and with one (full batch) the same charge also covers
        adding or removing a row (:mod:`mechanisms.optim.dpsgd_plan`, "Public normaliser").
        ``"add_remove"``: every ``fit`` must be full batch with a public ``normalizer``
        (sensitivity C, a quarter of the replace-one ρ); minibatches are refused before
        the charge, naming :class:`~mechanisms.optim.poisson_dpsgd.PoissonDPSGD`.
    engine : {"numpy", "opacus", "vectorised"}
        ``"opacus"``: per-sample gradients by opacus's ``GradSampleModule``, clipping
        and noise by its ``DPOptimizer``. ``"vectorised"``: the same operations
        written out for a GLM (per-sample gradient ℓ'(z_i)·x_i) in torch, with the same
        noise stream, several times faster per step. ``"numpy"``: the same again in
        numpy (:mod:`mechanisms.optim.dpsgd_steps`), no torch imported; its loss is a
        built-in name or an object with a numpy ``derivative(z, y)`` (ℓ'). The default
        is ``"numpy"`` whatever is installed. The three agree to rounding (tested); the
        privacy analysis is the same for all.
    """

    def __init__(
        self,
        account: Chargeable,
        loss: str | PerSampleLoss,
        rng: np.random.Generator,
        *,
        clip: float,
        relation: str | None = None,
        engine: str = "numpy",
    ) -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        if engine != "numpy" and not all(_installed(name) for name in ("torch", "opacus")):
            raise ImportError(f'engine={engine!r} needs torch and opacus: pip install "dpglm[opacus]" '
                              '(with the CPU build of torch, README), or use engine="numpy"')
        self._check_account(account)
        if isinstance(loss, str):
            if loss not in LOSS_NAMES:
                raise ValueError(f"loss must be one of {sorted(LOSS_NAMES)} or a callable, got {loss!r}")
            self.loss_name: str | None = loss
            self._loss: PerSampleLoss | None = None  # resolved (with torch) when a run needs it
        elif engine == "numpy":
            derivative = getattr(loss, "derivative", None)
            if not callable(derivative):
                raise TypeError("loss: engine='numpy' takes a built-in loss name or an object with a numpy "
                                "derivative(z, y) method; a torch loss needs engine='vectorised' or 'opacus'")
            check_per_sample_derivative(derivative)
            self.loss_name, self._loss = None, loss
        elif callable(loss):
            from mechanisms.optim.glm_losses import check_per_sample

            check_per_sample(loss)
            self.loss_name, self._loss = None, loss
        else:
            raise TypeError(f"loss must be a name in {sorted(LOSS_NAMES)} or a callable, got {type(loss).__name__}")
        if relation is None:
            relation = getattr(account, "relation", "replace_one")
        self._check_relation(relation)
        self.account = account
        self.rng = check_generator(rng)
        self.clip = check_positive("clip", clip)
        self.relation = relation
        self.engine = engine

    @property
    def loss(self) -> PerSampleLoss:
        """The per-sample loss ℓ(z, y): the callable given, or the built-in one named ``loss_name``."""
        if self._loss is not None:
            return self._loss
        from mechanisms.optim.glm_losses import LOSSES

        return LOSSES[str(self.loss_name)]

    @staticmethod
    def _check_account(account: Chargeable) -> None:
        if getattr(account, "currency", None) not in ("zcdp", "gdp"):
            raise TypeError(
                "account must charge in zCDP or GDP (currency 'zcdp' or 'gdp') for DP-SGD, "
                f"got currency {getattr(account, 'currency', None)!r}"
            )

    @staticmethod
    def _check_relation(relation: str) -> None:
        if relation not in RELATIONS:
            raise ValueError(f"relation must be one of {RELATIONS} (default: the account's), got {relation!r}")

    def plan(self, n: int, *, steps: int, cost: ZCDP | GDP | None = None, noise_multiplier: float | None = None,
             batch_size: int | None = None, normalizer: float | None = None, dim: int | None = None) -> DPSGDPlan:
        """The noise and the charge of a run on n rows, without charging or sampling.

        Exactly one of ``cost`` (a ``ZCDP(rho > 0, delta=0)`` to spend exactly, noise
        rounded up; in a gdp account a ``GDP``, and ``dim`` = d is required) and
        ``noise_multiplier`` (z = σ/C > 0) must be given. With a public ``normalizer``
        (float ≥ 1) the run is full batch (``batch_size`` must be None), n may be 0, and
        the plan's epochs, noise and cost do not depend on n. The derivation, in zCDP and
        in GDP: :mod:`mechanisms.optim.dpsgd_plan` (:func:`~mechanisms.optim.dpsgd_plan.plan_run`).
        """
        return plan_run(
            self.account.currency, self.clip, n, steps=steps, cost=cost, noise_multiplier=noise_multiplier,
            batch_size=batch_size, normalizer=normalizer, dim=dim, relation=self.relation,
        )

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike, *, steps: int, lr: float, projection: Projection,
            cost: ZCDP | GDP | None = None, noise_multiplier: float | None = None, batch_size: int | None = None,
            theta0: npt.ArrayLike | None = None, lam: float = 0.0, preconditioner: npt.ArrayLike | None = None,
            note: str = "", normalizer: float | None = None) -> Release:
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
        xs, ys = split_rows(X, y)
        return self._fit_rows(xs, ys, theta_start, steps=steps, lr=lr, projection=projection, cost=cost,
                              noise_multiplier=noise_multiplier, batch_size=batch_size, lam=lam,
                              preconditioner=preconditioner, note=note, normalizer=normalizer)

    def fit_blocks(self, xs: Sequence[npt.ArrayLike], ys: Sequence[npt.ArrayLike], *, projection: Projection,
                   theta0: npt.ArrayLike | None = None, normalizer: float | None = None, **options: Any) -> Release:
        """:meth:`fit` on rows given as consecutive blocks ``xs[i]`` (n_i, d), ``ys[i]`` (n_i,), never concatenated.

        For the rows a bandit keeps in blocks (``dpglm.policies.running.Rows``): on the numpy
        engine the blocks are read where they are (no copy), and a full-batch step sums
        them a block at a time (:func:`~mechanisms.optim.dpsgd_steps.run_numpy`), so a
        refit holds O(block·d) floats beyond the rows themselves (docs/design.md, memory
        flat in T). Blocks of :data:`~mechanisms.optim.dpsgd_steps.BLOCK_ROWS` rows (all
        but the last) give the same θ, float for float, as :meth:`fit` on their
        concatenation. The torch engines take one private copy of the concatenation.
        ``options`` are :meth:`fit`'s other keywords.
        """
        allow_empty = normalizer is not None
        if not isinstance(xs, (list, tuple)) or not isinstance(ys, (list, tuple)) or len(xs) != len(ys) or not xs:
            raise TypeError("xs and ys must be lists or tuples of the same positive number of row blocks")
        blocks = [self._check_shapes(check_array("xs", x), check_array("ys", v), 0, (f"xs[{i}]", f"ys[{i}]"))
                  for i, (x, v) in enumerate(zip(xs, ys, strict=True))]
        dims = {x.shape[1] for x, _ in blocks}
        rows = sum(x.shape[0] for x, _ in blocks)
        if len(dims) != 1 or rows < (0 if allow_empty else 1):
            raise ValueError(f"xs must be row blocks of one width d with {0 if allow_empty else 1}+ rows in all")
        theta_start = self._check_start(projection, theta0, dims.pop())
        x_blocks, y_blocks = tuple(x for x, _ in blocks), tuple(v for _, v in blocks)
        if self.engine != "numpy":  # torch shares the arrays' memory: one private contiguous copy
            x_blocks, y_blocks = (np.concatenate(x_blocks),), (np.concatenate(y_blocks),)
        return self._fit_rows(x_blocks, y_blocks, theta_start, projection=projection, normalizer=normalizer,
                              **options)

    def _fit_rows(self, xs: tuple[Matrix, ...], ys: tuple[Vector, ...], theta_start: Vector, *, steps: int,
                  lr: float, projection: Projection, cost: ZCDP | GDP | None = None,
                  noise_multiplier: float | None = None, batch_size: int | None = None, lam: float = 0.0,
                  preconditioner: npt.ArrayLike | None = None, note: str = "",
                  normalizer: float | None = None) -> Release:
        """:meth:`fit`'s charge and run on checked row blocks (their shapes checked, their values not yet)."""
        lr, lam = check_lr(lr), check_real("lam", lam, 0.0)
        note = check_text("note", note, required=False)
        n, dim = sum(y.shape[0] for y in ys), xs[0].shape[1]
        step_projection = _step_projection(projection, preconditioner, dim)
        plan = self.plan(n, steps=steps, cost=cost, noise_multiplier=noise_multiplier, batch_size=batch_size,
                         normalizer=normalizer, dim=dim)
        self._check_noise_memory(plan.steps, dim)
        receipt = self._charge(  # one charge covers the planned steps and their one release, the last iterate
            plan.cost, mechanism="DPSGD", relation=self.relation, partition=None,
            note=charge_note(plan, self.clip, note),
        )
        for X, y in zip(xs, ys, strict=True):
            self._check_values_after_charge(X, y)
        metric = step_projection.M if isinstance(step_projection, MetricProjection) else None
        ridge = lam / (n if plan.normalizer is None else plan.normalizer)
        theta = self._run(xs, ys, theta_start, plan, lr, step_projection, ridge, metric)
        return self._release(theta, receipt)

    def _check_data(self, X_in: npt.ArrayLike, y_in: npt.ArrayLike, projection: Projection,
                    theta0: npt.ArrayLike | None, *, allow_empty: bool = False) -> tuple[Matrix, Vector, Vector]:
        """(X, y, θ₀) as private float copies, their public checks made: kinds, shapes, θ₀ feasible."""
        # Private, contiguous, writeable copies (torch shares their memory; inputs may be read-only releases).
        X = np.array(check_array("X", X_in), dtype=np.float64, order="C")
        y = np.array(check_array("y", y_in), dtype=np.float64, order="C")
        self._check_shapes(X, y, 0 if allow_empty else 1)
        return X, y, self._check_start(projection, theta0, X.shape[1])

    @staticmethod
    def _check_noise_memory(steps: int, dim: int) -> None:
        """Refuse, before the charge and naming ``steps``, a run whose noise table cannot fit in memory.

        Every step's noise is drawn up front (:func:`~mechanisms.optim.dpsgd_steps.draw_step_noise`).
        """
        check_memory("steps", steps, noise_table_bytes(steps, dim), f"the noise of its steps in {dim} coordinates")

    @staticmethod
    def _check_shapes(X: Matrix, y: Vector, min_rows: int, names: tuple[str, str] = ("X", "y"),
                      ) -> tuple[Matrix, Vector]:
        """``(X, y)`` if X is (n, d) with n ≥ ``min_rows``, d ≥ 1, and y is (n,); errors say ``names``."""
        x_name, y_name = names
        if X.ndim != 2 or X.shape[0] < min_rows or X.shape[1] < 1:
            raise ValueError(f"{x_name} must have shape (n, d) with n >= {min_rows}, d >= 1, got {X.shape}")
        if y.shape != (X.shape[0],):
            raise ValueError(f"{y_name} must have shape ({X.shape[0]},) to match {x_name}, got {y.shape}")
        return X, y

    @staticmethod
    def _check_start(projection: Projection, theta0: npt.ArrayLike | None, dim: int) -> Vector:
        """The public starting point: ``theta0`` (finite, shape (d,), inside the set) or the set's centre."""
        if not isinstance(projection, (BallProjection, EllipsoidProjection)):
            raise TypeError(
                f"projection must be a BallProjection or EllipsoidProjection, got {type(projection).__name__}"
            )
        if theta0 is None:
            return projection.center_for(dim)
        start = np.array(theta0, dtype=np.float64)
        if start.shape != (dim,) or not np.all(np.isfinite(start)):
            raise ValueError(f"theta0 must be a finite vector of shape ({dim},)")
        if not projection.contains(start):
            raise ValueError("theta0 must lie in the projection's set (it is the public starting point)")
        return start

    def _check_values_after_charge(self, X: Matrix, y: Vector) -> None:
        """The checks of the private values, made once the run is charged: a refusal stays charged.

        X and y finite, y in [0, 1] for a built-in loss. Refusing these for free would
        tell the caller about the data (docs/mechanisms.md, "Refusals that depend on the data").
        """
        problem = None
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
            problem = "X and y must be finite"
        elif self.loss_name is not None and (np.any(y < 0) or np.any(y > 1)):
            problem = f"y must lie in [0, 1] for the {self.loss_name} loss"
        if problem is not None:
            raise ValueError(f"{problem} (refused after the charge, which stays spent: the check depends on the data)")

    def _blocks(self, n: int, plan: DPSGDPlan) -> Iterator[npt.NDArray[np.int64] | None]:
        """The row indices of each step (``None``: all rows), a fresh random partition per epoch.

        Drawn from ``rng`` lazily, after the charge; the partition is independent of the data.
        """
        if plan.n_batches == 1:
            for _ in range(plan.steps):
                yield None
            return
        taken = 0
        while taken < plan.steps:
            yield from np.array_split(self.rng.permutation(n), plan.n_batches)[: plan.steps - taken]
            taken += plan.n_batches

    def _run(self, xs: tuple[Matrix, ...], ys: tuple[Vector, ...], theta_start: Vector, plan: DPSGDPlan,
             lr: float, projection: StepProjection, ridge: float, metric: Matrix | None) -> Vector:
        """The noisy loop (:mod:`mechanisms.optim.dpsgd_loops`); called only after the charge was granted.

        Every step's noise is drawn here at once (one charge covers all planned steps):
        float-safe, on the power-of-two grid of ``mechanisms.lattice`` for the clipped
        sum's sensitivity (2C, or C under add/remove) in d coordinates (``docs/float-safe-noise.md``); the
        blocks of :meth:`_blocks` are drawn after it, as the loop consumes them. The rows
        are consecutive blocks (:func:`~mechanisms.optim.dpsgd_steps.split_rows`); the
        torch engines get one block.
        """
        n, dim = sum(y.shape[0] for y in ys), xs[0].shape[1]
        noise = draw_step_noise(self.rng, plan.sigma, plan.sensitivity, plan.steps, dim)
        if self.engine == "numpy":
            derivative = (DERIVATIVES[self.loss_name] if self.loss_name is not None
                          else self._loss.derivative)  # type: ignore[union-attr]  # checked in __init__
            rule = StepRule(derivative, self.clip, lr, projection, ridge, metric, plan, noise)
            return run_numpy(rule, xs, ys, theta_start, self._blocks(n, plan))
        from mechanisms.optim import dpsgd_loops  # torch and opacus: only once a torch engine's run starts

        rule = StepRule(self.loss, self.clip, lr, projection, ridge, metric, plan, noise)
        X, y = (xs[0], ys[0]) if len(xs) == 1 else (np.concatenate(xs), np.concatenate(ys))
        return dpsgd_loops.run_steps(self.engine, rule, X, y, theta_start, self._blocks(n, plan))


def _installed(name: str) -> bool:
    """Whether ``name`` can be imported, without importing it (a finder that refuses it counts as absent)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _step_projection(projection: Projection, preconditioner: npt.ArrayLike | None, dim: int) -> StepProjection:
    """The projection of every step: ``projection`` itself, or in the M⁻¹-norm of a public preconditioner M."""
    if preconditioner is None:
        return projection
    metric = MetricProjection(projection, preconditioner)
    if metric.dim != dim:
        raise ValueError(f"preconditioner must have shape ({dim}, {dim}), got {metric.M.shape}")
    return metric
