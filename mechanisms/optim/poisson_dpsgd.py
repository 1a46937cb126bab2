"""DP-SGD on Poisson-subsampled batches, with privacy amplification accounted by dp-accounting.

Step t draws, after the charge, a batch B_t ∋ i independently with probability q
(Poisson sampling, independent of the data) and releases the float-safe noisy
clipped sum of :class:`mechanisms.optim.dpsgd.DPSGD` (same loop, same lattice
noise), divided by a public ``normalizer`` N (e.g. the expected batch size q·n for
a public n): θ ← Π(θ − η(g̃_t/N + (λ/N)θ)). The fixed-batch / shuffled path of
``DPSGD`` claims no amplification; this one does.

Privacy (add/remove neighbours: D' = D ∪ {x}; docs/accounting.md, "Poisson DP-SGD")
----------------------------------------------------------------------------------
Fix the other rows' batch B. Without x the step's output is P₀ = the rounded sum of
B plus discrete Gaussian noise; with x it is (1 − q)P₀ + qP₁, P₁ the same with
clip(x) added: its rounded integer vector moves by ≤ C/g + √d. That pair (P₀, P₁)
is μ′-GDP with μ′ = ``GaussianLattice.gdp_mu(C, d)`` (docs/float-safe-noise.md), so
by Blackwell's theorem (Blackwell 1953; Dong, Roth & Su 2022, §2) a Markov kernel K maps
N(0, 1) to P₀ and N(μ′, 1) to P₁; by linearity K maps the continuous pair
(N(0,1), (1 − q)N(0,1) + qN(μ′,1)) to (P₀, (1 − q)P₀ + qP₁) — in both orders. So
every divergence of the step (Rényi, hockey-stick) is at most that of
dp-accounting's ``PoissonSampledDpEvent(q, GaussianDpEvent(1/μ′))``; mixing over B
keeps the bound (joint convexity), and the T steps compose adaptively. The charge
is ``SelfComposedDpEvent`` of that step, T times, through
:meth:`accounting.ledger.Account.charge_event` with ``relation="add_remove"``: an rdp
account (its RDP curve) or an approx account (PLD ε at ``delta``), in an
**add/remove ledger only** — replace-one would need the triple (P₀, P₁, P₂) to be
dominated jointly, which pairwise GDP does not give.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import dp_accounting
import numpy as np
import numpy.typing as npt

from accounting import EventChargeable
from accounting.validation import check_real, check_size, check_text
from mechanisms.lattice import GaussianLattice
from mechanisms.optim.dpsgd import DPSGD, Projection
from mechanisms.optim.dpsgd_plan import DPSGDPlan, check_lr, check_normalizer
from mechanisms.release import Release, check_positive

if TYPE_CHECKING:
    from accounting import Chargeable, Receipt
    from accounting.chargeable import PartitionKey
    from mechanisms.optim.glm_losses import PerSampleLoss

__all__ = ["PoissonDPSGD"]


class _EventPayer:
    """Forwards the mechanism's one charge to ``charge_event`` (the cost is a dp-accounting event)."""

    def __init__(self, account: EventChargeable, delta: float | None) -> None:
        self.account, self.delta = account, delta
        self.currency = account.currency

    def charge(self, cost: Any, *, mechanism: str, relation: str = "add_remove", partition: PartitionKey = None,
               note: str = "") -> Receipt:
        """``charge_event(cost, ...)`` under ``add_remove`` whatever ``relation`` says (module docstring)."""
        return self.account.charge_event(cost, mechanism=mechanism, relation="add_remove", delta=self.delta,
                                         partition=partition, note=note)


class PoissonDPSGD(DPSGD):
    """Projected DP-SGD on Poisson-sampled batches, charged as a dp-accounting event (amplified).

    Parameters
    ----------
    account : accounting.Account
        An ``"rdp"`` or ``"approx"`` account of an add/remove ledger (module docstring).
    loss, rng, clip
        As :class:`~mechanisms.optim.dpsgd.DPSGD`; the engine (batches may be empty) is ``"numpy"`` for a
        built-in loss or one with a numpy ``derivative(z, y)``, else the torch ``"vectorised"`` one.
    """

    account: EventChargeable

    def __init__(self, account: EventChargeable, loss: str | PerSampleLoss, rng: np.random.Generator, *,
                 clip: float) -> None:
        numpy = isinstance(loss, str) or callable(getattr(loss, "derivative", None))
        engine = "numpy" if numpy else "vectorised"
        super().__init__(account, loss, rng, clip=clip, relation="add_remove", engine=engine)

    @staticmethod
    def _check_account(account: Chargeable) -> None:
        currency = getattr(account, "currency", None)
        if currency not in ("rdp", "approx"):
            raise TypeError(f"account must charge in 'rdp' or 'approx' for Poisson DP-SGD, got currency {currency!r}")
        if not isinstance(account, EventChargeable) or account.relation != "add_remove":
            raise TypeError("Poisson DP-SGD needs an add_remove ledger (module docstring: replace-one is not covered)")

    @staticmethod
    def _check_relation(relation: str) -> None:
        if relation != "add_remove":
            raise ValueError(f"relation must be 'add_remove' for Poisson DP-SGD, got {relation!r}")

    def event(self, *, sample_rate: float, noise_multiplier: float, steps: int, dim: int) -> dp_accounting.DpEvent:
        """The dp-accounting event charged for ``steps`` steps on d = ``dim`` coordinates (module docstring)."""
        q = check_real("sample_rate", sample_rate, 0.0, 1.0, low_open=True)
        sigma = check_positive("noise_multiplier", noise_multiplier) * self.clip
        mu = GaussianLattice(sigma, 2 * self.clip, dim).gdp_mu(self.clip, dim)
        z = float(np.nextafter(1.0 / mu, 0.0))  # ≤ 1/μ′: never less privacy loss
        step = dp_accounting.GaussianDpEvent(z)
        if q < 1:
            step = dp_accounting.PoissonSampledDpEvent(q, step)
        return dp_accounting.SelfComposedDpEvent(step, check_size("steps", steps))

    def fit(  # type: ignore[override]  # a Poisson run takes sample_rate and delta, never cost or batch_size
        self, X: npt.ArrayLike, y: npt.ArrayLike, *, steps: int, lr: float, projection: Projection,
        sample_rate: float, noise_multiplier: float, normalizer: float, delta: float | None = None,
        theta0: npt.ArrayLike | None = None, lam: float = 0.0, note: str = "",
    ) -> Release:
        """Charge the planned run as one event, then run ``steps`` Poisson-sampled noisy steps.

        ``normalizer`` N ≥ 1 is public (never n itself if n is private); ``delta`` is
        required by an approx account and refused by an rdp one.

        Raises
        ------
        accounting.BudgetExceeded
            If the account cannot pay; nothing is drawn from ``rng``.
        """
        X, y, theta_start = self._check_data(X, y, projection, theta0, allow_empty=True)
        lr, lam = check_lr(lr), check_real("lam", lam, 0.0)
        note = check_text("note", note, required=False)
        normalizer = check_normalizer(normalizer)
        n, dim = X.shape
        event = self.event(sample_rate=sample_rate, noise_multiplier=noise_multiplier, steps=steps, dim=dim)
        multiplier = float(noise_multiplier)
        plan = DPSGDPlan(n=n, steps=int(steps), batch_size=n, n_batches=1, epochs=int(steps),
                         noise_multiplier=multiplier, sigma=multiplier * self.clip, cost=event, normalizer=normalizer,
                         sensitivity=2 * self.clip)  # the lattice of event(): its μ′ is for a shift of C
        self._sample_rate = float(sample_rate)
        self._check_noise_memory(plan.steps, dim)
        receipt = self._charge(event, account=_EventPayer(self.account, delta), mechanism="PoissonDPSGD",
                               partition=None,
                               note=(f"Poisson q={float(sample_rate)!r}, sigma={plan.sigma!r} (z={multiplier!r}), "
                                     f"{plan.steps} steps, add/remove sensitivity C={self.clip!r}, "
                                     f"normalizer={normalizer!r}. {note}").strip())
        self._check_values_after_charge(X, y)
        theta = self._run((X,), (y,), theta_start, plan, lr, projection, lam / normalizer, None)
        return self._release(theta, receipt)

    def fit_blocks(self, *args: Any, **kwargs: Any) -> Release:
        """Refused: a Poisson run's charge is its own event (:meth:`fit`), not DP-SGD's plan."""
        raise TypeError("PoissonDPSGD takes its rows as one array (X, y): use fit, whose charge is a Poisson event")

    def _blocks(self, n: int, plan: DPSGDPlan) -> Iterator[npt.NDArray[np.int64] | None]:
        """Each step's batch: every row independently with probability q, drawn after the charge."""
        for _ in range(plan.steps):
            yield np.flatnonzero(self.rng.random(n) < self._sample_rate)
