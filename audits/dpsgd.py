"""Audit of projected DP-SGD (``mechanisms/optim/dpsgd.py``) with a Dirac gradient canary.

Worst-case pair (docs/references.md, privacy auditing; Nasr et al. 2023, §5): the
data set holds one canary row whose per-sample gradient is a fixed vector of
norm C whatever θ is, and rows whose gradient is 0. With the linear loss
ℓ(z, y) = −y·z the gradient of a row (x, y) is −y·x; the canary is x = e
(‖e‖ = C = 1) with y = −1 on ``D0`` and y = +1 on ``D1`` (replace-one: the
clipped sum moves by 2C, the sensitivity DP-SGD charges for), the other rows
are x = 0. Full batch, a non-binding ball, η = n: each step adds
∓C·e + N(0, σ²) to θ.

Observable: ``DPSGD.fit`` releases only the last iterate θ_T (its API does not
expose the intermediate iterates). Here that loses nothing: θ_T − θ₀ = Σ_t
(±C e − noise_t) is the sum of the per-step observations, the sufficient
statistic of the whole transcript for this pair, N(±T C, T σ²) along e, so
μ = 2√T·C/σ = √(2ρ) for the ρ = T(2C)²/(2σ²) DP-SGD charges. The score is
the coordinate of θ_T along e.

Vectorised runs drive the real optimiser: with d = R coordinates and the
canary x = (1, …, 1), every coordinate is an independent one-dimensional run
(the noise is i.i.d. per coordinate, the zero rows and the canary's constant
gradient do not couple coordinates, the ball never binds). The bulk fit uses
clip √R and cost ρ·R, which gives each coordinate the single run's σ
(checked on the public plan before fitting), on a huge-budget ledger.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from accounting.validation import check_int, check_positive, check_probability
from audits.base import GAUSSIAN_DP, Audit, Claim, huge_budget_account
from audits.bounds import gdp_mu_for_epsilon
from audits.noise import (
    _same_noise,
    as_zcdp,
    gaussian_claim,
)

if TYPE_CHECKING:
    from accounting import GDP, ZCDP, Account
    from mechanisms.optim.dpsgd import DPSGD
    from mechanisms.release import Release

__all__ = ["DPSGDAudit", "linear_loss"]


class LinearLoss:
    """ℓ(z, y) = −y·z: per-sample gradient −y·x, independent of θ (the Dirac canary's loss).

    Callable on torch tensors (the opacus and vectorised engines) and numpy arrays; its
    ``derivative`` ℓ' = −y is what DP-SGD's numpy engine needs (``mechanisms/optim/dpsgd_steps.py``).
    """

    def __call__(self, z, y):
        return -y * z

    def derivative(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.negative(np.broadcast_to(y, np.shape(z)))


linear_loss = LinearLoss()


class DPSGDAudit(Audit):
    """Dirac gradient canary in full-batch DP-SGD; score = the last iterate along the canary.

    Parameters
    ----------
    epsilon, delta : float
        Target (ε, δ): the fit is charged ρ = μ²/2, μ the analytic-Gaussian parameter.
    steps : int
        Noisy full-batch steps T.
    rows : int
        Data size n (one canary and n − 1 zero rows).
    engine : {"opacus", "vectorised", "numpy"}
        DP-SGD's engine (``"numpy"``, the default everywhere, as in the bandits).
    mechanism_class : type
        ``mechanisms.optim.dpsgd.DPSGD`` or a subclass (planted bugs).
    cost : accounting.ZCDP, optional
        Charge each fit exactly this cost instead of the one for ``epsilon`` (in-situ audits).
    normalizer : bool
        Fit with the public ``normalizer=rows`` (as the bandits' refits do) instead of
        dividing by the batch size; the noise and the sensitivity are the same.
    """

    mechanism = "DPSGD"
    method = GAUSSIAN_DP
    statistics = ("last iterate along the canary",)

    def __init__(self, epsilon: float | None = None, delta: float = 1e-5, *, steps: int = 10, rows: int = 8,
                 engine: str = "numpy", mechanism_class: type[DPSGD] | None = None, cost: ZCDP | GDP | None = None,
                 normalizer: bool = False, name: str = "dpsgd") -> None:
        from accounting import ZCDP
        from mechanisms.optim.dpsgd import DPSGD

        self.delta = check_probability("delta", delta)
        self.steps, self.rows, self.engine = check_int("steps", steps), check_int("rows", rows, 2), engine
        self.mechanism_class = DPSGD if mechanism_class is None else mechanism_class
        self.name = name
        self.epsilon: float | None
        if cost is None:
            self.epsilon = check_positive("epsilon", epsilon)
            self.rho = Fraction(gdp_mu_for_epsilon(self.epsilon, self.delta) ** 2 / 2)
        else:
            self.epsilon, self.rho = None, Fraction(as_zcdp(cost).rho)
        self.normalizer = bool(normalizer)
        self._zcdp = ZCDP
        self.chunk = 50_000
        self._single = self._optimiser(huge_budget_account("zcdp"), 1.0, np.random.default_rng(0))
        self._single_plan = self._single.plan(rows, steps=steps, cost=ZCDP(self.rho),
                                              normalizer=float(rows) if self.normalizer else None)

    def _optimiser(self, account: Account, clip: float, rng: np.random.Generator) -> DPSGD:
        return self.mechanism_class(account, linear_loss, rng, clip=clip, engine=self.engine)

    def parameters(self) -> dict:
        return {"target_epsilon": self.epsilon, "delta": self.delta, "steps": self.steps, "rows": self.rows,
                "engine": self.engine, "normalizer": self.normalizer, "rho": float(self.rho),
                "sigma": self._single_plan.sigma, "mechanism_class": self.mechanism_class.__name__}

    def _fit(self, optimiser: DPSGD, canary_label: float, width: int, cost: ZCDP) -> Release:
        """One fit on the canary data set with ``width`` coordinates; the ``Release`` of θ_T."""
        from mechanisms.optim import BallProjection

        X = np.zeros((self.rows, width))
        X[0] = 1.0
        y = np.zeros(self.rows)
        y[0] = canary_label
        return optimiser.fit(X, y, steps=self.steps, lr=float(self.rows), cost=cost,
                             projection=BallProjection(1e12), theta0=np.zeros(width),
                             normalizer=float(self.rows) if self.normalizer else None,
                             note="audit: Dirac gradient canary")

    def claim(self) -> Claim:
        receipt = self._fit(self._single, 1.0, 1, self._zcdp(self.rho)).receipt
        return gaussian_claim(receipt, self.delta)

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        clip = math.sqrt(runs)
        cost = self._zcdp(self.rho * Fraction(clip) ** 2)
        bulk = self._optimiser(huge_budget_account("zcdp"), clip, rng)
        normalizer = float(self.rows) if self.normalizer else None
        plan = bulk.plan(self.rows, steps=self.steps, cost=cost, normalizer=normalizer)
        _same_noise("sigma", plan.sigma, self._single_plan.sigma)
        release = self._fit(bulk, 1.0 if neighbour else -1.0, runs, cost)
        return np.asarray(release.value)
