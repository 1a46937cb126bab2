"""The presets of the batched loop's constants: ``simulation``, ``union``, ``theory``.

Paper §8 treats λ, γ and β as hyperparameters; choice 3 of :mod:`dpglm.policies.batched`
says why the theory values make the loop linear and what the presets measure.
"""

from __future__ import annotations

import math

from accounting.validation import check_positive, check_probability, check_size
from dpglm._validation import check_dimension
from dpglm.glm import GLMFamily, get_family, kappa_support
from dpglm.policies.batched.parameters import BatchedParameters
from dpglm.policies.batched.schedule import max_batches

__all__ = ["PRESETS", "batched_parameters"]

#: The presets :func:`batched_parameters` knows.
PRESETS = ("simulation", "union", "theory")


def batched_parameters(
    family: GLMFamily | str, d: int, horizon: int, S: float, *, delta: float = 0.02, gamma: float | None = None,
    lam: float = 1.0, preset: str = "simulation",
) -> BatchedParameters:
    """Constants of the batched loop (paper §8 treats λ, γ, β as hyperparameters).

    ``preset="simulation"``: γ = 2, κ_w = 1. ``"union"``: γ a Gaussian width with a union
    bound over the T rounds and M batches, ``√(2 ln(2MT/δ))`` (≈ 5.6 at T = 20000,
    δ = 0.02), κ_w = 1. ``"theory"``: that γ and κ_w = κ (:mod:`dpglm.policies.batched`, choice 3).
    ``gamma`` overrides the preset's γ. Always λ = 1 (unless given), κ the public bound,
    ``c₁ = κ e^{3S} d² γ²/S`` (paper §5), which the default cap then overrides.
    """
    family = get_family(family)
    d, horizon = check_dimension(d), check_size("horizon", horizon)
    S = check_positive("S", S)
    delta = check_probability("delta", delta)
    kappa = kappa_support(family, S)
    if preset not in PRESETS:
        raise ValueError(f"preset must be 'simulation', 'union' or 'theory', got {preset!r}")
    if gamma is None:
        union = math.sqrt(2.0 * math.log(2.0 * max_batches(horizon) * horizon / delta))
        gamma = 2.0 if preset == "simulation" else union
    warmup_scale = kappa * math.exp(3.0 * S) * d**2 * gamma**2 / S
    if not math.isfinite(warmup_scale):  # a tiny S (or a huge gamma): c1 overflows before the cap could apply
        raise ValueError(f"S={S!r} with gamma={gamma!r} gives a warm-up constant c1 = kappa e^(3S) d^2 gamma^2 / S "
                         "that overflows a float; S is too small (or gamma too large)")
    return BatchedParameters(lam=float(lam), gamma=float(gamma), kappa=kappa,
                             width_kappa=kappa if preset == "theory" else 1.0, radius=S,
                             warmup_scale=warmup_scale)

