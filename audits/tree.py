"""Audit of the binary-tree continual release (``mechanisms/tree.py``).

Worst-case pair (REFERENCES.md, privacy auditing): the stream is all zeros
except its first element, ``x₁ = −Δ/2`` on ``D0`` and ``+Δ/2`` on ``D1``
(replace-one: any two admissible elements differ by at most Δ, and the tree
admits ‖x‖ ≤ Δ/2). With T = 2^k the first element lies in the L = k + 1 nodes
[1, 2^j], and the prefix sum released at t = 2^j is exactly node j, so the
releases y_{2^j}, j = 0..k, are independent N(±Δ/2, σ²). Their likelihood
ratio is monotone in Σⱼ y_{2^j}, which is N(±LΔ/2, Lσ²): the audit sees a
Gaussian pair with μ = √L·Δ/σ — exactly √(2ρ) for the ρ = LΔ²/(2σ²) the tree
charges, so the Gaussian-DP route can certify the whole claim.

Vectorised runs drive the real mechanism: a tree over R-vectors with
i.i.d. node noise per coordinate is R independent scalar trees. It is built
with sensitivity Δ·s (s = √R) and cost ρ·s², which gives every coordinate the
single-run tree's σ (checked before sampling), on a huge-budget ledger.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from audits.base import GAUSSIAN_DP, Audit, Claim, huge_budget_account
from audits.bounds import gdp_mu_for_epsilon
from audits.noise import _check_delta, _check_positive, _same_noise, gaussian_claim

__all__ = ["TreeAudit"]


class TreeAudit(Audit):
    """Binary tree: change x₁, observe y at t = 1, 2, 4, …, T, score Σⱼ y_{2^j}.

    Parameters
    ----------
    epsilon : float
        Target ε at ``delta``: the tree is charged ρ = μ²/2 for the whole
        horizon, μ the analytic-Gaussian parameter of (ε, δ).
    delta : float
        δ at which ε is stated.
    horizon : int
        T, a power of two ≥ 2 (so that x₁ lies in all L = log₂T + 1 nodes).
    sensitivity : float
        Δ, L2 sensitivity of one element under replace-one.
    mechanism_class : type
        ``mechanisms.tree.BinaryTreeMechanism`` or a subclass (planted bugs).
    """

    mechanism = "BinaryTreeMechanism"
    method = GAUSSIAN_DP
    statistics = ("sum of y_t at t = 2^j",)

    def __init__(self, epsilon: float, delta: float = 1e-5, *, horizon: int = 128, sensitivity: float = 1.0,
                 mechanism_class: type | None = None, name: str = "tree") -> None:
        from accounting import ZCDP
        from mechanisms.tree import BinaryTreeMechanism

        self.epsilon = _check_positive("epsilon", epsilon)
        self.delta = _check_delta(delta)
        if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 2 \
                or horizon & (horizon - 1):
            raise ValueError(f"horizon must be a power of two ≥ 2, got {horizon!r}")
        self.horizon = horizon
        self.sensitivity = _check_positive("sensitivity", sensitivity)
        self.mechanism_class = BinaryTreeMechanism if mechanism_class is None else mechanism_class
        self.name = name
        self.rho = Fraction(gdp_mu_for_epsilon(self.epsilon, self.delta) ** 2 / 2)
        self._zcdp = ZCDP
        self._single = self.mechanism_class(huge_budget_account("zcdp"), horizon, (1,), self.sensitivity,
                                            np.random.default_rng(0), cost=ZCDP(self.rho))
        self.chunk = max(1000, 50_000_000 // (horizon * 4))

    def parameters(self) -> dict:
        return {"target_epsilon": self.epsilon, "delta": self.delta, "horizon": self.horizon,
                "depth": self._single.depth, "sensitivity": self.sensitivity, "rho": float(self.rho),
                "mechanism_class": self.mechanism_class.__name__}

    def claim(self) -> Claim:
        return gaussian_claim(self._single.receipt, self.delta)

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        first = np.full(runs, (self.sensitivity / 2) * (1 if neighbour else -1))
        # Sensitivity exactly twice the first element's norm, so it passes the replace-one bound Δ/2.
        bulk_sensitivity = 2.0 * float(np.linalg.norm(first))
        scale = Fraction(bulk_sensitivity) / Fraction(self.sensitivity)
        bulk = self.mechanism_class(huge_budget_account("zcdp"), self.horizon, (runs,), bulk_sensitivity, rng,
                                    cost=self._zcdp(self.rho * scale**2))
        _same_noise("sigma", bulk.sigma, self._single.sigma)
        zeros = np.zeros(runs)
        total = np.zeros(runs)
        for t in range(1, self.horizon + 1):
            release = bulk.append(first if t == 1 else zeros)
            if t & (t - 1) == 0:
                total += release.value
        return total
