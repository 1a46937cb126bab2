"""Audits of the Gaussian and Laplace primitives (``mechanisms/noise.py``).

Worst-case pair: a scalar statistic of sensitivity Δ is 0 on ``D0`` and Δ on
``D1`` (replace-one: one user's contribution moves the statistic by at most
Δ). For a location family with a log-concave density the likelihood ratio is
monotone in the output, so the output itself is the optimal score
(Neyman–Pearson).

Vectorised runs drive the real mechanism: one release of an R-vector whose
coordinates each carry the pair's statistic is R independent runs, because
both mechanisms add i.i.d. noise per coordinate. The bulk mechanism is built
with sensitivity Δ·s and cost scaled so that its per-coordinate noise equals
the single-run mechanism's (s = √R in L2 for Gaussian, s = R in L1 for
Laplace), checked to 1e-9 relative before sampling, and charged to a
huge-budget ledger. The claim is read from the single-run mechanism's receipt.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from accounting.validation import check_positive, check_probability
from audits.base import CLOPPER_PEARSON, GAUSSIAN_DP, Audit, Claim, huge_budget_account
from audits.bounds import gdp_epsilon, gdp_mu_for_epsilon

if TYPE_CHECKING:
    from accounting import ZCDP, Cost, Receipt
    from mechanisms.noise import GaussianMechanism, LaplaceMechanism

__all__ = ["GaussianAudit", "LaplaceAudit", "gaussian_claim"]


def gaussian_claim(receipt: Receipt, delta: float) -> Claim:
    """Claim of a Gaussian-noise release charged ρ-zCDP: μ = √(2ρ), ε its exact Gaussian ε at δ.

    ρ-zCDP for Gaussian noise of sensitivity Δ and std σ means Δ/σ = √(2ρ),
    i.e. the mechanism is √(2ρ)-GDP (Dong, Roth, Su 2022, Cor. 2.13); the
    ledger's own (ε, δ) for the charge (Canonne–Kamath–Steinke) is recorded
    beside it.
    """
    from accounting import ZCDP, convert

    if not isinstance(receipt.cost, ZCDP):
        raise TypeError(f"a Gaussian claim is read from a zCDP charge, got {type(receipt.cost).__name__}")
    rho = float(receipt.cost.rho)
    mu = math.sqrt(2.0 * rho)
    return Claim(epsilon=gdp_epsilon(mu, delta), delta=delta, cost=str(receipt.cost), mu=mu,
                 ledger_epsilon=float(convert.zcdp_to_approx(rho, delta)))


def as_zcdp(cost: Cost) -> ZCDP:
    """A Gaussian release's cost as zCDP: ``ZCDP`` as is, ``GDP(μ)`` as ρ = μ²/2 (the same Δ/σ).

    For auditing a mechanism a policy charged in GDP: the audit rebuilds it on a
    zCDP ledger, where σ is calibrated continuously (Δ√k/μ); the GDP path calibrates
    σ for its float-safe lattice, larger by ~10⁻⁵ relative at most, so the audited
    copy is never noisier than the policy's (docs/audits.md).
    """
    from accounting import GDP, ZCDP

    if isinstance(cost, ZCDP):
        return cost
    if isinstance(cost, GDP):
        return ZCDP(Fraction(cost.mu_squared) / 2)
    raise TypeError(f"cost must be an accounting.ZCDP or GDP, got {type(cost).__name__}")


def _same_noise(name: str, bulk: float, single: float) -> None:
    if not math.isclose(bulk, single, rel_tol=1e-9):
        raise RuntimeError(f"bulk mechanism's {name} {bulk!r} differs from the single run's {single!r}: "
                           "the vectorised runs would not replicate the audited mechanism")


class GaussianAudit(Audit):
    """Gaussian mechanism: statistic 0 vs Δ, score = the noisy output; Gaussian-DP route.

    Parameters
    ----------
    epsilon : float
        Target ε at ``delta``: the mechanism is given ρ = μ²/2 with μ the
        analytic-Gaussian parameter of (ε, δ), so its exact ε is ``epsilon``.
    delta : float
        δ at which ε is stated, in (0, 1).
    sensitivity : float
        Δ of the audited statistic.
    mechanism_class : type
        ``mechanisms.noise.GaussianMechanism`` or a subclass (planted bugs).
    """

    mechanism = "GaussianMechanism"
    method = GAUSSIAN_DP
    statistics = ("noisy output",)

    def __init__(self, epsilon: float, delta: float = 1e-5, *, sensitivity: float = 1.0,
                 mechanism_class: type[GaussianMechanism] | None = None, name: str = "gaussian") -> None:
        from accounting import ZCDP
        from mechanisms.noise import GaussianMechanism

        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = check_probability("delta", delta)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.mechanism_class = GaussianMechanism if mechanism_class is None else mechanism_class
        self.name = name
        self.rho = Fraction(gdp_mu_for_epsilon(self.epsilon, self.delta) ** 2 / 2)
        self._zcdp = ZCDP
        self._single = self.mechanism_class(huge_budget_account("zcdp"), self.sensitivity,
                                            np.random.default_rng(0), cost=ZCDP(self.rho))

    def parameters(self) -> dict:
        return {"target_epsilon": self.epsilon, "delta": self.delta, "sensitivity": self.sensitivity,
                "rho": float(self.rho), "mechanism_class": self.mechanism_class.__name__}

    def claim(self) -> Claim:
        receipt = self._single.release(0.0, note="audit: claimed cost of one run").receipt
        return gaussian_claim(receipt, self.delta)

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        scale = math.sqrt(runs)
        bulk = self.mechanism_class(huge_budget_account("zcdp"), self.sensitivity * scale, rng,
                                    cost=self._zcdp(self.rho * Fraction(scale) ** 2))
        _same_noise("sigma", bulk.sigma, self._single.sigma)
        statistic = np.full(runs, neighbour * self.sensitivity)
        return np.asarray(bulk.release(statistic, note="audit: bulk runs").value)


class LaplaceAudit(Audit):
    """Laplace mechanism: statistic 0 vs Δ, score = the noisy output; Clopper–Pearson route, δ = 0.

    Parameters
    ----------
    epsilon : float
        Pure ε charged per release.
    sensitivity : float
        L1 sensitivity Δ of the audited statistic.
    mechanism_class : type
        ``mechanisms.noise.LaplaceMechanism`` or a subclass (planted bugs).
    """

    mechanism = "LaplaceMechanism"
    method = CLOPPER_PEARSON
    statistics = ("noisy output",)

    def __init__(self, epsilon: float, *, sensitivity: float = 1.0,
                 mechanism_class: type[LaplaceMechanism] | None = None, name: str = "laplace") -> None:
        from accounting import PureDP
        from mechanisms.noise import LaplaceMechanism

        self.epsilon = check_positive("epsilon", epsilon)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.mechanism_class = LaplaceMechanism if mechanism_class is None else mechanism_class
        self.name = name
        self._pure = PureDP
        self._single = self.mechanism_class(huge_budget_account("pure"), self.sensitivity,
                                            np.random.default_rng(0), cost=PureDP(Fraction(self.epsilon)))

    def parameters(self) -> dict:
        return {"target_epsilon": self.epsilon, "sensitivity": self.sensitivity,
                "mechanism_class": self.mechanism_class.__name__}

    def claim(self) -> Claim:
        receipt = self._single.release(0.0, note="audit: claimed cost of one run").receipt
        if not isinstance(receipt.cost, self._pure):
            raise TypeError(f"a Laplace claim is read from a pure-DP charge, got {type(receipt.cost).__name__}")
        eps = float(receipt.cost.eps)
        return Claim(epsilon=eps, delta=0.0, cost=str(receipt.cost), ledger_epsilon=eps)

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        bulk = self.mechanism_class(huge_budget_account("pure"), self.sensitivity * runs, rng,
                                    cost=self._pure(Fraction(self.epsilon) * runs))
        _same_noise("scale", bulk.scale, self._single.scale)
        statistic = np.full(runs, neighbour * self.sensitivity)
        return np.asarray(bulk.release(statistic, note="audit: bulk runs").value)
