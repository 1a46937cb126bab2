"""Charge a user's opacus training to a ledger account before it starts, and stop it at the plan.

opacus's ``PrivacyEngine.make_private`` turns an optimizer into a ``DPOptimizer``
that, at every step, clips per-sample gradients to C and adds N(0, (zC)²) to
their sum, on Poisson-sampled batches (rate q) by default. opacus (and its
accountants) assume add/remove neighbours, for which the clipped sum has
sensitivity C; T such steps are then dp-accounting's

    SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(z)), T)

(Abadi et al. 2016; Mironov, Talwar & Zhang 2019 for its RDP). :func:`charge_training`
charges that event — the whole planned run — with
:meth:`accounting.ledger.Account.charge_event` (``relation="add_remove"``) and
then guards the optimizer: its ``add_noise`` raises *before* drawing the
(T + 1)-th noise, so a step past the plan never runs. In a replace-one ledger
the event is restated or refused by the account (``docs/accounting.md``).

The guard counts noise draws, which is what opacus's own accountant counts
(one per ``step`` that is not skipped for gradient accumulation).

:func:`make_private_with_ledger` is opacus's ``make_private_with_epsilon``
charged through the ledger: the noise multiplier is the smallest whose planned
run fits what the account has left, costed as the account will charge it
(:func:`accounting.calibrate.calibrate_noise_multiplier`), and the run is then
charged with :func:`charge_training` before any step. opacus's own
``make_private_with_epsilon`` calibrates with its accountant (RDP: the ledger
charges 0.883 for a target of 1 in docs/accounting.md's measurement, z = 1.953
where 1.792 fits), not with the ledger's costing.
"""

from __future__ import annotations

from dataclasses import dataclass

import dp_accounting

from accounting import EventChargeable, Receipt
from accounting.validation import check_int, check_positive, check_real, check_size

__all__ = ["PlanExhausted", "TrainingCharge", "charge_training", "make_private_with_ledger", "training_event"]


class PlanExhausted(RuntimeError):
    """The optimizer tried a noisy step beyond the steps charged; nothing was drawn."""


def training_event(sample_rate: float, noise_multiplier: float, steps: int) -> dp_accounting.DpEvent:
    """The dp-accounting event of ``steps`` Poisson-sampled Gaussian steps (add/remove, z = σ/C)."""
    steps = check_size("steps", steps)
    rate = check_real("sample_rate", sample_rate, 0.0, 1.0, low_open=True)
    step = dp_accounting.GaussianDpEvent(check_positive("noise_multiplier", noise_multiplier))
    if rate < 1:
        step = dp_accounting.PoissonSampledDpEvent(rate, step)
    return dp_accounting.SelfComposedDpEvent(step, steps)


@dataclass
class TrainingCharge:
    """The receipt of a charged training run and its step counter."""

    receipt: Receipt
    event: dp_accounting.DpEvent
    steps: int
    taken: int = 0

    @property
    def remaining(self) -> int:
        """Noisy steps still allowed by the charge."""
        return self.steps - self.taken

    def __str__(self) -> str:
        return f"TrainingCharge({self.taken} of {self.steps} steps taken; {self.receipt})"

    __repr__ = __str__


def charge_training(account: EventChargeable, optimizer: object, *, sample_rate: float, steps: int,
                    delta: float | None = None, mechanism: str = "opacus DP-SGD", note: str = "") -> TrainingCharge:
    """Charge ``steps`` noisy steps of an opacus ``DPOptimizer`` to ``account``, then cap it at ``steps``.

    Parameters
    ----------
    account : accounting.Account or accounting.Ledger
        Pays the whole run now (``charge_event``): an rdp account (RDP curve),
        an approx account (PLD ε at ``delta``), or a gdp / zcdp account when
        ``sample_rate == 1`` (full batch).
    optimizer : opacus.optimizers.DPOptimizer
        From ``PrivacyEngine.make_private``; its ``noise_multiplier`` is read.
    sample_rate : float in (0, 1]
        Poisson rate q (opacus's ``data_loader.sample_rate``, 1/len(loader)).
    steps : int
        Planned noisy steps (e.g. epochs × len(data_loader)).
    delta : float, optional
        Required by an approx account, refused by others.

    Raises
    ------
    accounting.BudgetExceeded
        The run does not fit; the optimizer is left unguarded and untouched.
    """
    from opacus.optimizers import DPOptimizer

    if not isinstance(account, EventChargeable):
        raise TypeError(f"account must be an accounting.Account or Ledger (it charges a dp-accounting event), "
                        f"got {type(account).__name__}")
    if not isinstance(optimizer, DPOptimizer):
        raise TypeError(f"optimizer must be an opacus DPOptimizer (from make_private), got {type(optimizer).__name__}")
    if getattr(optimizer, "_dpglm_guarded", False):
        raise ValueError("optimizer is already charged and guarded by charge_training")
    event = training_event(sample_rate, optimizer.noise_multiplier, steps)
    receipt = account.charge_event(event, mechanism=mechanism, relation="add_remove", delta=delta,
                                   note=f"opacus: q={sample_rate!r}, z={optimizer.noise_multiplier!r}, "
                                        f"C={optimizer.max_grad_norm!r}, {steps} steps. {note}".strip())
    charge = TrainingCharge(receipt, event, int(steps))
    add_noise = optimizer.add_noise

    def guarded_add_noise() -> None:
        if charge.taken >= charge.steps:
            raise PlanExhausted(f"noisy step {charge.taken + 1} is past the {charge.steps} steps charged")
        if optimizer.noise_multiplier != charge_noise:
            raise PlanExhausted(f"noise_multiplier changed from the charged {charge_noise!r} to "
                                f"{optimizer.noise_multiplier!r}")
        charge.taken += 1
        add_noise()

    charge_noise = optimizer.noise_multiplier
    optimizer.add_noise = guarded_add_noise
    optimizer._dpglm_guarded = True
    return charge


def make_private_with_ledger(engine: object, account: EventChargeable, *, module: object, optimizer: object,
                             data_loader: object, epochs: int, max_grad_norm: float,
                             mechanism: str = "opacus DP-SGD", note: str = "",
                             **make_private: object) -> tuple[object, object, object, TrainingCharge]:
    """``engine.make_private`` with the noise calibrated to ``account``'s remaining budget, and the run charged.

    Parameters
    ----------
    engine : opacus.PrivacyEngine
    account : accounting.Account or accounting.Ledger
        An approx account (the run is charged at its whole remaining δ), an
        rdp account (its held orders), or a gdp/zcdp account for full-batch
        loaders only (:func:`accounting.calibrate_noise_multiplier`).
    module, optimizer, data_loader :
        As for ``make_private``; Poisson sampling at q = 1/len(data_loader).
    epochs : int
        The run's length: epochs × len(data_loader) noisy steps are charged.
    max_grad_norm : float
        Clipping norm C.
    make_private :
        Other keyword arguments of ``make_private`` (not ``noise_multiplier``).

    Returns
    -------
    (module, optimizer, data_loader, TrainingCharge)
        What ``make_private`` returns, and the charge (its receipt and step cap).

    Raises
    ------
    accounting.BudgetExceeded
        Never for a calibrated run unless another charge took the budget
        between calibration and charge; then nothing was drawn.
    """
    from accounting.calibrate import calibrate_noise_multiplier

    if "noise_multiplier" in make_private:
        raise TypeError("noise_multiplier is calibrated from the account; do not pass it")
    epochs = check_int("epochs", epochs, 1)
    clip = check_positive("max_grad_norm", max_grad_norm)
    batches = len(data_loader)  # type: ignore[arg-type]
    if batches < 1:
        raise ValueError("data_loader must have at least one batch")
    sample_rate, steps = 1 / batches, epochs * batches
    z = calibrate_noise_multiplier(account, sample_rate=sample_rate, steps=steps)
    remaining = getattr(account, "remaining", None)
    delta = getattr(remaining, "delta", None) if account.currency == "approx" else None
    model, private_optimizer, loader = engine.make_private(  # type: ignore[attr-defined]
        module=module, optimizer=optimizer, data_loader=data_loader, noise_multiplier=z, max_grad_norm=clip,
        **make_private)
    rate = getattr(loader, "sample_rate", sample_rate)
    if rate != sample_rate:
        raise ValueError(f"the private loader samples at {rate!r}, not the calibrated 1/len(data_loader) = "
                         f"{sample_rate!r}")
    charge = charge_training(account, private_optimizer, sample_rate=sample_rate, steps=steps, delta=delta,
                             mechanism=mechanism, note=note)
    return model, private_optimizer, loader, charge
