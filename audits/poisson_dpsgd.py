"""Audit of Poisson-subsampled DP-SGD (``mechanisms/optim/poisson_dpsgd.py``) with one canary row per run.

Pair (add/remove, as the mechanism claims): ``D1`` holds R canary rows, row j with
x = e_j (norm C = 1) and the linear loss ℓ(z, y) = −y·z at y = 1, so its
gradient is −e_j whatever θ is; ``D0`` is the empty data set (the R canaries
removed). Poisson sampling includes each row independently, and the discrete
noise is i.i.d. per coordinate, so coordinate j of one fit is an independent run
of the one-canary game: Σ_t (B_{j,t}·C + noise) on ``D1``, Σ_t noise on ``D0``,
with B_{j,t} ~ Bernoulli(q). Score: θ_T along e_j (η = N, θ₀ = 0, a ball that
never binds). The claim is the (ε, δ) the mechanism charged for one run (a
one-coordinate fit): dp-accounting's PLD of its Poisson-sampled Gaussian event.
The test is a threshold on the score, certified by Clopper–Pearson (valid for
any test; the sum is not the likelihood ratio of the mixture, so the bound is
not tight).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from accounting import ApproxDP, Ledger
from accounting.validation import check_positive, check_probability
from audits.base import CLOPPER_PEARSON, Audit, Claim
from audits.bounds import gdp_mu_for_epsilon
from audits.dpsgd import linear_loss

if TYPE_CHECKING:
    from accounting import Account
    from mechanisms.optim.poisson_dpsgd import PoissonDPSGD
    from mechanisms.release import Release

__all__ = ["PoissonDPSGDAudit"]


def _add_remove_account() -> Account:
    return Ledger(ApproxDP(Fraction(10**12), Fraction(1, 2)), relation="add_remove").root


class PoissonDPSGDAudit(Audit):
    """Canary rows in Poisson DP-SGD; score = the last iterate along each canary.

    Parameters
    ----------
    epsilon, delta : float
        Sets the noise: z = √T/μ with μ the Gaussian-DP parameter meeting (ε, δ) for
        T unsampled steps; the claim (amplified by q) is then below ε.
    steps : int
        Noisy steps T.
    sample_rate : float
        Poisson rate q.
    mechanism_class : type
        ``PoissonDPSGD`` or a subclass (planted bugs).
    """

    mechanism = "PoissonDPSGD"
    method = CLOPPER_PEARSON
    statistics = ("last iterate along the canary",)

    def __init__(self, epsilon: float, delta: float = 1e-5, *, steps: int = 3, sample_rate: float = 0.2,
                 mechanism_class: type[PoissonDPSGD] | None = None, name: str = "dpsgd-poisson") -> None:
        from mechanisms.optim.poisson_dpsgd import PoissonDPSGD

        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = check_probability("delta", delta)
        self.steps, self.sample_rate, self.name = int(steps), float(sample_rate), name
        self.mechanism_class = PoissonDPSGD if mechanism_class is None else mechanism_class
        self.noise_multiplier = math.sqrt(self.steps) / gdp_mu_for_epsilon(self.epsilon, self.delta)
        self.chunk = 2_000  # one fit per chunk holds a (chunk, chunk) identity design

    def parameters(self) -> dict:
        return {"target_epsilon": self.epsilon, "delta": self.delta, "steps": self.steps,
                "sample_rate": self.sample_rate, "noise_multiplier": self.noise_multiplier,
                "mechanism_class": self.mechanism_class.__name__}

    def _fit(self, rng: np.random.Generator, canaries: int, width: int, delta: float) -> Release:
        from mechanisms.optim import BallProjection

        optimiser = self.mechanism_class(_add_remove_account(), linear_loss, rng, clip=1.0)
        X = np.eye(width)[:canaries]
        return optimiser.fit(X, np.ones(canaries), steps=self.steps, lr=1.0, projection=BallProjection(1e12),
                             sample_rate=self.sample_rate, noise_multiplier=self.noise_multiplier, normalizer=1.0,
                             theta0=np.zeros(width), delta=delta, note="audit: canary rows")

    def claim(self) -> Claim:
        receipt = self._fit(np.random.default_rng(0), 1, 1, self.delta).receipt
        if not isinstance(receipt.charged, ApproxDP):
            raise TypeError(f"Poisson DP-SGD charges approximate DP, got {type(receipt.charged).__name__}")
        eps = float(receipt.charged.eps)
        return Claim(epsilon=eps, delta=self.delta, cost=str(receipt.charged), ledger_epsilon=eps)

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        # One fit, R coordinates: R independent runs (module docstring). The bulk fit's δ is only for its own
        # huge-budget charge; its noise σ is the single run's (same z and C).
        return np.asarray(self._fit(rng, runs if neighbour else 0, runs, 0.25).value)
