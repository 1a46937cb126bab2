"""The constants the batched loop decides with (paper §5, App. E.1; :mod:`dpglm.policies.batched`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from accounting.validation import check_real

__all__ = ["BatchedParameters"]


@dataclass(frozen=True)
class BatchedParameters:
    """Every constant the batched loop decides with (paper §5, App. E.1; :mod:`dpglm.policies.batched`).

    Parameters
    ----------
    lam : float > 0
        λ: ridge of ``V``, ``H_k`` and of every fit.
    gamma : float > 0
        γ in the widths ``w₁ = γ√κ‖x‖_{V⁻¹}``, ``w_j = γ‖x‖_{H_j⁻¹}``.
    kappa : float >= 1
        Public κ bound (``1/min_{|z|≤S} μ̇(z)``); enters the schedule's c₁.
    width_kappa : float >= 1
        κ_w in the warm-up width ``w₁ = γ√κ_w‖x‖_{V⁻¹}`` and in β (choice 3).
    radius : float > 0
        S: fits are constrained to ``‖θ‖ ≤ S``; β's cap is ``2S``.
    design_ridge : float > 0
        ε of the regularised Kiefer–Wolfowitz lemma (paper §4.2).
    design_tol : float > 0
        Stop the design once ``max ‖x‖²_{A⁻¹} ≤ d(1 + tol)``.
    warmup_scale : float > 0
        c₁ of ``B₁ = (c₁α)^{2/3}``.
    warmup_cap : float >= 1 or None
        Cap on ``B₁`` (None: ``⌈T^{2/3}⌉``).
    """

    lam: float
    gamma: float
    kappa: float
    width_kappa: float
    radius: float
    design_ridge: float = 1e-6
    design_tol: float = 1e-2
    warmup_scale: float = 1.0
    warmup_cap: float | None = None

    def __post_init__(self) -> None:
        for name in ("lam", "gamma", "radius", "design_ridge", "design_tol", "warmup_scale"):
            check_real(name, getattr(self, name), 0.0, low_open=True)
        for name in ("kappa", "width_kappa"):
            check_real(name, getattr(self, name), 1.0)
        if self.warmup_cap is not None:
            check_real("warmup_cap", self.warmup_cap, 1.0)

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (for results files)."""
        return asdict(self)

