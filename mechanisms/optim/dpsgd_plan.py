"""What a DP-SGD run costs, from public quantities only: blocks, epochs, noise and the one charge.

:class:`mechanisms.optim.dpsgd.DPSGD` charges the plan computed here before it draws
anything. This module needs neither torch nor the data: it is the privacy argument
of the optimiser, written down once.

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
  epoch, never a lower cost (:mod:`mechanisms.optim.poisson_dpsgd` does claim it,
  in RDP).

Public normaliser (neighbours replace, add or remove one row; n need not be public)
-------------------------------------------------------------------------------------
In the joint-DP bandit the refit data (the exploration rounds T_o) of two
neighbouring user sequences may differ by adding or removing a row, since
whether user t explores depends on user t's context, so n = |T_o| is private.
The derivation above then fails: it divides by n and |B_t|, and with minibatches
the block count k = ⌈n/b⌉, hence the epoch count E and the charge itself, are
functions of n. A public ``normalizer`` N ≥ 1 (e.g. the round count) therefore
means full batch only (every step sums all rows; ``batch_size`` must be None); the
objective is (1/N)[Σ_i ℓ(⟨x_i, θ⟩, y_i) + (λ/2)‖θ‖²], whose minimiser is that of
L(θ; λ), whatever N. Step t releases

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

Add/remove neighbours only (``relation="add_remove"``: an add/remove ledger)
----------------------------------------------------------------------------
With a public normaliser and full batch, as above, let D' = D ∪ {x} (or D minus
one row). The steps' sums differ by the one summand clip_C(∇ℓ_x(θ_t)), of norm
≤ C, and every other summand is the same function of θ_t: the sensitivity is
Δ = C, not 2C. Each step is a Gaussian mechanism with D_α ≤ αC²/(2σ²) =
α/(2z²), and the chain rule over the E = ``steps`` steps gives

    ρ = E·C²/(2σ²) = E/(2z²)   (zCDP, exact; a quarter of the replace-one charge),

charged with ``relation="add_remove"``; the float-safe noise is calibrated on the
lattice for Δ = C (the rounded sum moves by ≤ C + g√d, ``docs/float-safe-noise.md``).
In a gdp account the charge is E·μ′² with μ′ of that lattice. A replace-one ledger
restates it by group privacy (k = 2: 4ρ, 2μ; ``docs/accounting.md``, "Neighbouring
relations"), which is the 2C charge above again. What is *not* covered under
add/remove: a divisor that is n or a block size |B_t| (an added row changes it, so
every coordinate of the released mean moves), and shuffled fixed-size minibatches
(the partition of n rows into blocks of size b: an added row displaces one row per
block along a chain, so every block of the epoch may change, not one). Those runs
are refused before the charge with a message naming what works: a public
``normalizer`` (full batch), :class:`mechanisms.optim.poisson_dpsgd.PoissonDPSGD`
(Poisson minibatches, amplified, add/remove) or a replace-one ledger.

The charge
----------
In a zcdp account the charge is ``ZCDP(ρ)``; given a cost, σ is the smallest float
(rounded up) with 2E·C²/σ² ≤ ρ exactly, and the plan's σ (the float product z·C,
which the noise is calibrated to) is checked against it. Given ``noise_multiplier`` z,
the charge is ρ(z·C) rounded up to 15 significant digits. In a gdp account it is
``GDP`` with μ² = E·μ′², μ′ of one step's float-safe discrete noise on d coordinates
for sensitivity 2C (:func:`mechanisms.lattice.gdp_mu_squared`; steps compose in GDP as
√(Σμᵢ²), Dong, Roth & Su 2022, Cor. 3.3). The noise itself is float-safe
(``docs/float-safe-noise.md``): its variance covers the rounded sum's sensitivity.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from accounting import GDP, ZCDP
from accounting.validation import check_int, check_positive, check_real, check_size
from mechanisms.lattice import gdp_mu_squared, gdp_sigma
from mechanisms.noise import gaussian_rho, gaussian_sigma_for, round_up

if TYPE_CHECKING:
    from dp_accounting import DpEvent

__all__ = ["MAX_LR", "DPSGDPlan", "charge_note", "check_lr", "check_normalizer", "plan_run"]


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
    cost : accounting.ZCDP, accounting.GDP or dp_accounting.DpEvent
        The charge: ρ ≥ 2E/z² = E·(2C)²/(2σ²) in zCDP, μ² = E·μ′² in GDP (module
        docstring), or the Poisson-sampled event of :mod:`mechanisms.optim.poisson_dpsgd`.
    normalizer : float or None
        The public N dividing the noisy gradient sum (full batch), or ``None``:
        divide by the block size (replace-one neighbours only, n public).
    sensitivity : float
        Δ of one step's clipped sum, which the noise is calibrated to: 2C under replace-one
        (also covering add/remove with a normaliser), C under add/remove alone.
    """

    n: int
    steps: int
    batch_size: int
    n_batches: int
    epochs: int
    noise_multiplier: float
    sigma: float
    cost: ZCDP | GDP | DpEvent
    normalizer: float | None
    sensitivity: float


#: Largest step size accepted: lr times a gradient plus its noise must stay a finite float before the
#: projection brings the iterate back (lr = 1e308, drawn by the fuzz test, overflowed after the charge).
MAX_LR = 1e100


def check_lr(value: object) -> float:
    """The step size, a real in (0, :data:`MAX_LR`], checked before any charge."""
    return check_real("lr", value, 0.0, MAX_LR, low_open=True)


def check_normalizer(value: object) -> float:
    """The public divisor N of the noisy gradient sum: a finite number ≥ 1 (module docstring)."""
    return check_real("normalizer", value, 1.0)


def plan_run(
    currency: str,
    clip: float,
    n: int,
    *,
    steps: int,
    cost: ZCDP | GDP | None = None,
    noise_multiplier: float | None = None,
    batch_size: int | None = None,
    normalizer: float | None = None,
    dim: int | None = None,
    relation: str = "replace_one",
) -> DPSGDPlan:
    """The plan of ``steps`` steps on n rows with clipping norm C = ``clip``, charged in ``currency``.

    Exactly one of ``cost`` (a ``ZCDP(rho > 0, delta=0)``, or a ``GDP`` in a gdp
    account, to spend exactly; noise rounded up) and ``noise_multiplier`` (z = σ/C > 0)
    must be given; a gdp account needs ``dim`` = d. With a public ``normalizer``
    (float ≥ 1) the run is full batch (``batch_size`` must be None), n may be 0, and the
    plan's epochs, noise and cost do not depend on n (module docstring). Under
    ``relation="add_remove"`` the normaliser is required and the sensitivity is C.
    """
    steps = check_size("steps", steps)
    n, batch_size, n_batches, normalizer = _blocks(n, batch_size, normalizer, relation)
    epochs = -(-steps // n_batches)
    # replace-one: ‖clip(a) − clip(a')‖ ≤ 2C; add/remove (full batch, public N): one summand, ‖clip(a)‖ ≤ C
    sensitivity = clip if relation == "add_remove" else 2.0 * clip
    if (cost is None) == (noise_multiplier is None):
        raise ValueError("give exactly one of cost (a ZCDP to spend) and noise_multiplier (sigma / clip > 0)")
    charged: ZCDP | GDP
    if currency == "gdp":
        multiplier, charged = _gdp_noise(clip, cost, noise_multiplier, sensitivity, epochs, dim)
    else:
        multiplier, charged = _zcdp_noise(clip, cost, noise_multiplier, sensitivity, epochs)
    return DPSGDPlan(
        n=n,
        steps=steps,
        batch_size=batch_size,
        n_batches=n_batches,
        epochs=epochs,
        noise_multiplier=multiplier,
        sigma=multiplier * clip,
        cost=charged,
        normalizer=normalizer,
        sensitivity=sensitivity,
    )


def _blocks(n: int, batch_size: int | None, normalizer: float | None,
            relation: str) -> tuple[int, int, int, float | None]:
    """(n, b, k, N): checked sizes and k = ⌈n/b⌉ blocks per epoch; one block with a public normaliser.

    Under add/remove, a run without a public normaliser or with minibatches is refused here, before
    any charge, with the one message that names what works (module docstring).
    """
    if relation == "add_remove" and (normalizer is None or batch_size is not None):
        raise ValueError(
            "DPSGD under relation='add_remove' (an add/remove ledger) must be full batch with a public "
            "normalizer: give normalizer=N (a public N >= 1, e.g. the round count) and batch_size=None; "
            "dividing by n or |B| and shuffled fixed-size minibatches are covered only for replace-one "
            "neighbours. For minibatches under add/remove use mechanisms.optim.PoissonDPSGD (rdp or approx "
            "account); for fixed-size minibatches charge an account of a replace_one ledger "
            "(docs/mechanisms.md, \"DP-SGD and the neighbouring relation\")"
        )
    if normalizer is None:
        n = check_int("n", n, 1)
        batch_size = n if batch_size is None else check_int("batch_size", batch_size, 1, n)
        return n, batch_size, -(-n // batch_size), None
    normalizer = check_normalizer(normalizer)
    n = check_int("n", n, 0)
    if batch_size is not None:
        raise ValueError(
            "batch_size must be None (full batch) when normalizer is given: a minibatch "
            f"partition would depend on the private n, got batch_size={batch_size!r}"
        )
    return n, n, 1, normalizer


def _multiplier_for(sigma: float, clip: float) -> float:
    """The smallest float z with the float product z·C ≥ σ: the noise is never below the calibrated σ."""
    multiplier = sigma / clip
    while multiplier * clip < sigma:
        multiplier = float(np.nextafter(multiplier, np.inf))
    return multiplier


def _zcdp_noise(clip: float, cost: object, noise_multiplier: float | None, sensitivity: float,
                epochs: int) -> tuple[float, ZCDP]:
    """(z, ZCDP charge) of a run in a zcdp account: see :func:`plan_run`."""
    if cost is None:
        multiplier = check_positive("noise_multiplier", noise_multiplier)
        return multiplier, ZCDP(round_up(gaussian_rho(multiplier * clip, sensitivity, epochs)))
    if not isinstance(cost, ZCDP):
        raise TypeError(f"cost must be an accounting.ZCDP, got {type(cost).__name__}")
    if cost.delta != 0 or cost.rho <= 0:
        raise ValueError(f"cost must be ZCDP(rho > 0, delta=0) for Gaussian noise, got {cost}")
    return _multiplier_for(gaussian_sigma_for(cost.rho, sensitivity, epochs), clip), cost


def _gdp_noise(clip: float, cost: object, noise_multiplier: float | None, sensitivity: float, epochs: int,
               dim: int | None) -> tuple[float, GDP]:
    """(z, GDP charge) of a run in a gdp account: see :func:`plan_run`."""
    dim = check_int("dim", dim, 1)
    if cost is None:
        multiplier = check_positive("noise_multiplier", noise_multiplier)
        return multiplier, GDP.from_mu_squared(epochs * gdp_mu_squared(multiplier * clip, sensitivity, dim))
    if not isinstance(cost, GDP):
        raise TypeError(f"cost must be an accounting.GDP for a gdp account, got {type(cost).__name__}")
    return _multiplier_for(gdp_sigma(cost.mu_squared, sensitivity, dim, Fraction(epochs)), clip), cost


def charge_note(plan: DPSGDPlan, clip: float, note: str) -> str:
    """The text recorded with a run's charge: the neighbours it covers, σ, and the blocks and steps paid for."""
    if plan.normalizer is None:
        covered = f"replace_one sensitivity 2C={plan.sensitivity!r}"
    elif plan.sensitivity == clip:  # relation='add_remove'
        covered = (
            f"add/remove one row: full batch, clipped sum divided by public normalizer={plan.normalizer!r}, "
            f"sensitivity C={plan.sensitivity!r}"
        )
    else:
        covered = (
            f"add/remove-or-replace one row covered: full batch, clipped sum over a private n "
            f"divided by public normalizer={plan.normalizer!r}, sensitivity 2C={plan.sensitivity!r}"
        )
    return (
        f"{covered}, sigma={plan.sigma!r} (z={plan.noise_multiplier!r}), "
        f"{plan.epochs} epochs x {plan.n_batches} blocks, {plan.steps} steps. {note}"
    ).strip()
