"""Audit of the continual-release counters (``mechanisms/tree.py``, ``mechanisms/factorization.py``).

Worst-case pair (docs/audits.md): the stream is all zeros except its first
element, which differs between ``D0`` and ``D1`` by the full sensitivity Δ
under the mechanism's relation and element bound B:

* vectors: ``x₁ = ∓B`` along one axis (replace-one: B = Δ/2, the difference is Δ);
* symmetric matrices, as :class:`dpglm.policies.joint_dp.JointDPGLMBandit`
  builds its trees (``psd=True``, node noise (Z + Zᵀ)/2): the rank-one leaves
  ``x₁ = (Δ/(2√2)) u uᵀ`` on ``D0`` and ``(Δ/(2√2)) v vᵀ`` on ``D1`` with
  ``u = (1, 1)``, ``v = (1, −1)`` — both of norm Δ/√2 = B, orthogonal, so
  ``‖x₁ − x₁'‖_F = Δ`` exactly; they differ only in the off-diagonal entry, by
  Δ/√2, whose noise is N(0, σ²/2): per node μ = Δ/σ, as the charge says.

Tree. x₁ lies in the L = ⌊log₂T⌋ + 1 nodes [1, 2^j], and the release at
t = 2^j is exactly node j, so the releases y_{2^j} are independent Gaussian
observations of x₁ and Σⱼ y_{2^j} (the audited entry) is the likelihood-ratio
statistic: a Gaussian pair with μ = √L·Δ/σ = √(2ρ) for the ρ the tree charges.

Square-root factorization. The releases are y = A x + B Z with B the lower-
triangular Toeplitz matrix of the c_k; x₁ shifts every y_t by the same amount,
so the likelihood-ratio statistic is wᵀy with w = (BBᵀ)⁻¹𝟙, and
𝟙ᵀ(BBᵀ)⁻¹𝟙 = ‖B⁻¹A e₁‖² = Σ c_k²: again μ = √(2ρ) for the charged ρ.

Vectorised runs drive the real mechanism. A vector stream of R coordinates
with i.i.d. noise is R scalar runs (sensitivity Δ·√R, cost ρ·R). A matrix
stream of size 2k×2k with leaves (δ/2)·𝟙𝟙ᵀ and (δ/2)·vvᵀ, v = (𝟙_k, −𝟙_k),
δ = Δ/√2, is k² runs: the k² entries of its off-diagonal block are
independent, each differs by δ and has noise N(0, σ²/2) per node, and the
leaves are rank-one, PSD, orthogonal, of norm Δk/√2 — the element bound for
sensitivity Δ·k, charged ρ·k². Either way the bulk mechanism's σ equals the
single-run mechanism's (checked before sampling); it is charged to a
huge-budget ledger, and the claim is the single-run mechanism's receipt.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from accounting.validation import check_int, check_positive, check_probability
from audits.base import GAUSSIAN_DP, Audit, Claim, huge_budget_account
from audits.bounds import gdp_mu_for_epsilon
from audits.noise import _same_noise, as_zcdp, gaussian_claim

if TYPE_CHECKING:
    from accounting import GDP, ZCDP, Account
    from mechanisms.tree import ContinualRelease

__all__ = ["TreeAudit", "factorization_weights"]

SHAPES = ("vector", "matrix")


def factorization_weights(coefficients: np.ndarray) -> np.ndarray:
    """w = (BBᵀ)⁻¹𝟙 for B the lower-triangular Toeplitz matrix of ``coefficients``: the LR direction."""
    from scipy.linalg import solve_triangular, toeplitz

    size = coefficients.size
    b = np.tril(toeplitz(coefficients, np.zeros(size)))
    inner = solve_triangular(b, np.ones(size), lower=True)  # B⁻¹𝟙
    return solve_triangular(b.T, inner, lower=False)  # B⁻ᵀB⁻¹𝟙


class TreeAudit(Audit):
    """A continual counter (binary tree or square-root factorization): change x₁, score the LR statistic.

    Parameters
    ----------
    epsilon : float, optional
        Target ε at ``delta``: the counter is charged ρ = μ²/2 for the whole
        horizon, μ the analytic-Gaussian parameter of (ε, δ). Omit when ``cost`` is given.
    delta : float
        δ at which ε is stated.
    horizon : int
        T ≥ 1 (the tree observes t = 1, 2, 4, …, ≤ T; the factorization every t).
    sensitivity : float
        Δ, L2 (Frobenius) sensitivity of one element under replace-one.
    shape : {"vector", "matrix"}
        ``"matrix"``: symmetric 2×2 PSD leaves with symmetrised node noise, as
        the joint-DP bandit's V- and H-trees (``psd`` selects the PSD element bound).
    psd : bool
        Matrix elements are PSD (``psd=True`` in the mechanism); ignored for vectors.
    mechanism_class : type
        ``BinaryTreeMechanism`` (default), ``SquareRootFactorizationMechanism`` or a subclass.
    cost : accounting.ZCDP or accounting.GDP, optional
        Charge the counter exactly this cost (an in-situ audit of a policy's tree; a GDP
        cost is audited as ρ = μ²/2, :func:`audits.noise.as_zcdp`).
    """

    mechanism = "BinaryTreeMechanism"
    method = GAUSSIAN_DP

    def __init__(self, epsilon: float | None = None, delta: float = 1e-5, *, horizon: int = 128,
                 sensitivity: float = 1.0, shape: str = "vector", psd: bool = True,
                 mechanism_class: type[ContinualRelease] | None = None, cost: ZCDP | GDP | None = None,
                 name: str = "tree") -> None:
        from accounting import ZCDP
        from mechanisms.factorization import SquareRootFactorizationMechanism
        from mechanisms.tree import BinaryTreeMechanism

        self.delta = check_probability("delta", delta)
        horizon = check_int("horizon", horizon)
        if shape not in SHAPES:
            raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")
        self.horizon, self.shape, self.psd = horizon, shape, bool(psd) and shape == "matrix"
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.mechanism_class = BinaryTreeMechanism if mechanism_class is None else mechanism_class
        self.factorization = issubclass(self.mechanism_class, SquareRootFactorizationMechanism)
        self.mechanism = "SquareRootFactorizationMechanism" if self.factorization else "BinaryTreeMechanism"
        self.name = name
        self.epsilon: float | None
        if cost is None:
            self.epsilon = check_positive("epsilon", epsilon)
            self.rho = Fraction(gdp_mu_for_epsilon(self.epsilon, self.delta) ** 2 / 2)
        else:
            self.rho, self.epsilon = Fraction(as_zcdp(cost).rho), None
        self._zcdp = ZCDP
        self._single = single = self._counter(huge_budget_account("zcdp"), 1, np.random.default_rng(0))
        if isinstance(single, SquareRootFactorizationMechanism):
            self._weights = factorization_weights(single.coefficients)
            self._times, nodes = np.arange(1, horizon + 1), horizon
        elif isinstance(single, BinaryTreeMechanism):
            self._times, nodes = 2 ** np.arange(horizon.bit_length()), single.depth
        else:
            raise TypeError("mechanism_class must be a BinaryTreeMechanism or SquareRootFactorizationMechanism "
                            f"(or a subclass), got {self.mechanism_class.__name__}")
        self.statistics = (("wᵀy (LR of the factorization)",) if self.factorization
                           else ("sum of y_t at t = 2^j",))
        width = (1 if shape == "vector" else 4) * nodes
        self.chunk = max(1000, 20_000_000 // width)

    def _counter(self, account: Account, scale: int, rng: np.random.Generator) -> ContinualRelease:
        """The audited counter for ``scale`` runs (sensitivity Δ·√runs, cost ρ·runs)."""
        factor = math.sqrt(scale) if self.shape == "vector" else math.isqrt(scale)
        shape = (scale,) if self.shape == "vector" else (2 * factor, 2 * factor)
        return self.mechanism_class(account, self.horizon, shape, self.sensitivity * factor, rng,
                                    cost=self._zcdp(self.rho * scale), psd=self.psd)

    def parameters(self) -> dict:
        return {"target_epsilon": self.epsilon, "delta": self.delta, "horizon": self.horizon,
                "shape": self.shape, "psd": self.psd, "sensitivity": self.sensitivity, "rho": float(self.rho),
                "sigma": self._single.sigma, "mechanism_class": self.mechanism_class.__name__}

    def claim(self) -> Claim:
        return gaussian_claim(self._single.receipt, self.delta)

    def _matrix_leaf(self, neighbour: int, k: int) -> tuple[np.ndarray, float]:
        """First element of ``D{neighbour}`` for a 2k×2k bulk counter, and the sign of (D1 − D0) in its runs."""
        if self.psd:
            # (δ/2)·u uᵀ with u = 𝟙 (D0) or (𝟙_k, −𝟙_k) (D1), δ = Δ/√2: norm δk = Δk/√2 = the bulk bound.
            u = np.ones(2 * k)
            if neighbour:
                u[k:] = -1.0
            return (self.sensitivity / (2 * math.sqrt(2))) * np.outer(u, u), -1.0
        # Not PSD: ∓(B/√2)·[[0, J], [J, 0]], B = Δ/2: norm B·k (the bulk bound), runs differ by √2·B = Δ/√2.
        block = np.zeros((2 * k, 2 * k))
        block[:k, k:] = block[k:, :k] = (self.sensitivity / 2) / math.sqrt(2)
        return block * (1 if neighbour else -1), 1.0

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        if self.shape == "vector":
            bulk = self._counter(huge_budget_account("zcdp"), runs, rng)
            first = np.full(runs, self._single.element_bound * (1 if neighbour else -1))
        else:
            k = math.isqrt(runs - 1) + 1
            bulk = self._counter(huge_budget_account("zcdp"), k * k, rng)
            first, sign = self._matrix_leaf(neighbour, k)
        _same_noise("sigma", bulk.sigma, self._single.sigma)
        zeros = np.zeros_like(first)
        total = np.zeros_like(first)
        observed = set(self._times.tolist())
        for t in range(1, int(self._times[-1]) + 1):
            release = np.asarray(bulk.append(first if t == 1 else zeros).value)
            if t in observed:
                total += (self._weights[t - 1] if self.factorization else 1.0) * release
        if self.shape == "vector":
            return total
        return sign * total[:k, k:].reshape(-1)[:runs]
