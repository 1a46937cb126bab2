"""The joint-DP bandit's paper presets: ``"paper-simulation"``, ``"calibrated"`` and ``"theory"``.

The constants of paper Alg. 2 for each preset (:func:`joint_dp_parameters`), the number
of Criterion II switches to budget for (:func:`planned_switches`) and the w.h.p. bound on
a matrix tree's noise the calibrated constants are built from (:func:`tree_noise_bound`).
The default preset, ``"tight"``, is :mod:`dpglm.policies.tight_plan`; how a preset's
constants become a planned policy is :mod:`dpglm.policies.joint_dp_plan`.
"""

from __future__ import annotations

import math

from dpglm._validation import check_dimension, check_positive, check_probability, check_size
from dpglm.glm import GLMFamily, get_family
from dpglm.policies.rarely_switching import (
    RarelySwitchingParameters,
    kappa_bound,
    kappa_star_bound,
    paper_floor,
)

__all__ = ["PRESETS", "joint_dp_parameters", "planned_switches", "tree_noise_bound"]

PRESETS = ("tight", "paper-simulation", "calibrated", "theory")
"""The joint-DP bandit's presets (``"tight"``: :mod:`dpglm.policies.tight_plan`)."""


def tree_noise_bound(sigma: float, depth: int, d: int, horizon: int, zeta: float) -> float:
    """Bound on ‖noise‖_op of every prefix release of a symmetric-matrix tree, w.p. ≥ 1 − ζ.

    A release carries at most L = ``depth`` independent node noises (Z' + Z'ᵀ)/2, so its
    noise N is symmetric Gaussian with diagonal std ≤ s and off-diagonal std ≤ s/√2,
    s = σ√L. Then ``‖N‖_op ≤ ‖N‖_F = s‖g‖₂`` with g standard normal in dimension
    d(d+1)/2, and Gaussian concentration of the 1-Lipschitz ‖g‖₂ gives
    ``‖g‖₂ ≤ √(d(d+1)/2) + √(2 ln(T/ζ))`` with probability ≥ 1 − ζ/T; a union bound over
    the T releases gives the claim.
    """
    return sigma * math.sqrt(depth) * (math.sqrt(d * (d + 1) / 2) + math.sqrt(2 * math.log(horizon / zeta)))


def joint_dp_parameters(
    family: GLMFamily | str,
    d: int,
    horizon: int,
    S: float,
    epsilon: float,
    delta: float,
    *,
    preset: str = "paper-simulation",
    constant: float = 1.0,
    tree_noise: tuple[float, float] | None = None,
) -> RarelySwitchingParameters:
    """Constants of paper Alg. 2 for a preset.

    ``"theory"`` (paper §J.1, with ζ = δ, R = the reward bound, κ and κ* the public
    bounds :func:`kappa_bound`, :func:`kappa_star_bound`, ``C = constant``)::

        λ = 5/4·dΛ_T + 100 dΛ_δ log T (Λ_T + d)/(εκ*)
        β = C[R dΛ_T + R S d^{1/4} Λ_T^{1/2} Λ_δ^{1/2} (d + Λ_T)^{1/4}/(ε min(κ*, 1))]
        γ = C[R²S dΛ_T + R²S d^{1/4} Λ_T^{1/2} (d + Λ_T)^{1/4} Λ_δ^{1/2}/(εκ*) + R⁴S⁴dκΛ_TΛ_δ^{1/2}/ε]

    Criterion I at ``1/(γ²κR²)`` (§6.2), elimination width and ``Θ_II`` radius ``γκ``
    (§6.1), switch when ``H_t ⋠ 2H_τ`` (Alg. 2, line 11), arms by ``UCB(x, H_τ, θ̂_τ)``,
    refits with ridge ``λ_max = (4d+2)/(4d+1)·λ``. Every preset refits θ̂_o when
    ``V_t ⋠ c·V_o`` with Criterion II's factor c (``refit_o_factor``; the paper refits at
    every exploration round, which leaks, see :class:`JointDPGLMBandit`).

    ``"paper-simulation"`` (the authors' simulation hyperparameters, docs/references.md)::

        λ = 2 ln(4/δ) ln²(4T/ζ)/(εκ*) + 0.75 d ln(4T/ζ)/R²
        γ = R S √(d ln(T/ζ)),   β = 4√(d ln(T/ζ))

    switch when ``λ_max(H_τ^{-1/2} H_t H_τ^{-1/2}) > 1 + 5/(8√d) + 0.05``, arms by UCB
    centred on ``(θ̂_o + θ̂_τ)/2``, elimination width ``γ√κ`` (the RS-GLinCB simulation
    width), Criterion I at the RS-GLinCB simulation threshold ``1/(0.01·κS²d)`` (with the
    private λ it cannot fire at the paper's Table 2 settings; the policy then detects it
    and spends nothing on V), refits with a unit ridge (the tree-noise part of λ
    regularises V and H, whose noise the refits never see).

    ``"calibrated"``: as ``"paper-simulation"`` but each design matrix gets its own λ,
    calibrated to the noise its tree actually adds (``tree_noise``, from
    :func:`tree_noise_bound`): ``λ_V = b_V + λ₀``, ``λ_H = b_H + λ₀`` with the authors'
    non-private term ``λ₀ = 0.75 d ln(4T/ζ)/R²``, so that ``λI + noise ⪰ λ₀I`` with
    probability ≥ 1 − ζ over the whole run (eigenvalue floors as in Assumption J.1). The
    authors' λ pays for H-tree noise at V's sensitivity; with one honest account the
    H-tree (whose leaves are ≤ max μ̇/e in norm) is far less noisy, so Criterion II can
    switch — and θ̂_τ be refitted — much earlier. The privacy guarantee is the same: λ
    is a function of the public σ only.
    """
    family = get_family(family)
    d, horizon = check_dimension(d), check_size("horizon", horizon)
    S, epsilon, delta = check_positive("S", S), check_positive("epsilon", epsilon), check_probability("delta", delta)
    if preset == "theory":
        return _theory_parameters(family, d, horizon, S, epsilon, delta, constant)
    if preset in ("paper-simulation", "calibrated"):
        return _simulation_parameters(family, d, horizon, S, epsilon, delta, preset, tree_noise)
    raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")


def _theory_parameters(family: GLMFamily, d: int, horizon: int, S: float, epsilon: float, delta: float,
                       constant: float) -> RarelySwitchingParameters:
    """``preset="theory"`` of :func:`joint_dp_parameters` (paper §J.1, ζ = δ)."""
    R = float(family.reward_bound)
    kappa = kappa_bound(family, S)
    kstar = kappa_star_bound(family, S)
    zeta = delta
    big_t = math.log(horizon / zeta)
    big_d = math.log(1.0 / delta)
    log_t = math.log(horizon)
    lam = 1.25 * d * big_t + 100 * d * big_d * log_t * (big_t + d) / (epsilon * kstar)
    root = d**0.25 * math.sqrt(big_t) * (d + big_t) ** 0.25 * math.sqrt(big_d)
    beta = constant * (R * d * big_t + R * S * root / (epsilon * min(kstar, 1.0)))
    gamma = constant * (
        R**2 * S * d * big_t
        + R**2 * S * root / (epsilon * kstar)
        + R**4 * S**4 * d * kappa * big_t * math.sqrt(big_d) / epsilon
    )
    return RarelySwitchingParameters(
        lam=lam,
        lam_h=lam,
        floor_v=paper_floor(d, lam),
        floor_h=paper_floor(d, lam),
        beta=beta,
        exploration_threshold=1.0 / (gamma**2 * kappa * R**2),
        elimination_width=gamma * kappa,
        switch_rule="loewner",
        switch_factor=2.0,
        centre="tau",
        fit_lam=(4 * d + 2) / (4 * d + 1) * lam,
        radius=S,
        kappa=kappa,
        refit_o_factor=2.0,
    )


def _simulation_parameters(family: GLMFamily, d: int, horizon: int, S: float, epsilon: float, delta: float,
                           preset: str, tree_noise: tuple[float, float] | None) -> RarelySwitchingParameters:
    """``preset="paper-simulation"`` or ``"calibrated"`` of :func:`joint_dp_parameters` (ζ = δ)."""
    R = float(family.reward_bound)
    kappa = kappa_bound(family, S)
    kstar = kappa_star_bound(family, S)
    zeta = delta
    log_4t = math.log(4 * horizon / zeta)
    log_t = math.log(horizon / zeta)
    lam0 = 0.75 * d * log_4t / R**2
    if preset == "paper-simulation":
        lam = lam_h = 2 * math.log(4 / delta) * log_4t**2 / (epsilon * kstar) + lam0
        floor_v, floor_h = paper_floor(d, lam), paper_floor(d, lam)
    else:
        if tree_noise is None:
            raise ValueError("preset 'calibrated' needs tree_noise=(bound_V, bound_H)")
        lam, lam_h = tree_noise[0] + lam0, tree_noise[1] + lam0
        floor_v, floor_h = paper_floor(d, lam), paper_floor(d, lam_h)
    gamma = R * S * math.sqrt(d * log_t)
    switch_factor = 1 + 5 / (8 * math.sqrt(d)) + 0.05
    return RarelySwitchingParameters(
        lam=lam,
        lam_h=lam_h,
        floor_v=floor_v,
        floor_h=floor_h,
        beta=4 * math.sqrt(d * log_t),
        exploration_threshold=1.0 / (0.01 * kappa * S**2 * d),
        elimination_width=gamma * math.sqrt(kappa),
        switch_rule="loewner",
        switch_factor=switch_factor,
        centre="midpoint",
        fit_lam=1.0,
        radius=S,
        kappa=kappa,
        refit_o_factor=switch_factor,
    )


def planned_switches(params: RarelySwitchingParameters, horizon: int, leaf_bound: float, d: int) -> int:
    """How many Criterion II switches to budget for (the paper's count2 cutoff, made concrete).

    ``H`` starts at ``λ_H I`` and every round adds a leaf of operator norm at most
    ``leaf_bound`` (``max μ̇/e``). Under the Loewner rule a switch needs some direction to
    grow by the factor c, so growth concentrated in one direction allows
    ``⌈ln(1 + T·leaf_bound/λ_H)/ln c⌉`` switches; under the determinant rule
    ``ln det`` can grow by at most ``d ln(1 + T·leaf_bound/(dλ_H))``. Like the paper's
    cutoffs this is a planning constant: switches beyond it are refused by the budget.
    """
    c = params.switch_factor
    if params.switch_rule == "loewner":
        growth = math.log1p(horizon * leaf_bound / params.lam_h)
    else:
        growth = d * math.log1p(horizon * leaf_bound / (d * params.lam_h))
    return max(1, math.ceil(growth / math.log(c)))
