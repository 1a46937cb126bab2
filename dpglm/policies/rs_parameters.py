"""The constants of the rarely-switching family and RS-GLinUCB's presets (Sawarni et al. 2024).

:class:`RarelySwitchingParameters` is every constant the loop of
:mod:`dpglm.policies.rarely_switching` decides with; :func:`rs_glinucb_parameters` the
non-private presets (``"simulation"``, ``"theory"``); :func:`kappa_bound`,
:func:`kappa_star_bound` the public κ bounds from S alone and :func:`paper_floor`
Assumption J.1's eigenvalue floor. The joint-DP presets are
:mod:`dpglm.policies.joint_dp_presets` and :mod:`dpglm.policies.tight_plan`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from dpglm._validation import check_dimension, check_positive, check_probability, check_real, check_size
from dpglm.glm import GLMFamily, get_family, kappa_support
from dpglm.linalg import dmu_range

__all__ = [
    "RarelySwitchingParameters",
    "kappa_bound",
    "kappa_star_bound",
    "paper_floor",
    "rs_glinucb_parameters",
]

SwitchRule = Literal["loewner", "determinant"]
Centre = Literal["tau", "midpoint"]


def kappa_bound(family: GLMFamily | str, S: float) -> float:
    """Public upper bound on κ: ``1/min_{|z| ≤ S} μ̇(z)`` (paper §4.1 with ‖x‖ ≤ 1, ‖θ*‖ ≤ S).

    Computed from the known S only, never from θ* or the contexts (the paper's code uses
    the oracle κ; a private policy must not).
    """
    return kappa_support(family, S)


def kappa_star_bound(family: GLMFamily | str, S: float) -> float:
    """Public lower bound on κ*: ``1/max_{|z| ≤ S} μ̇(z)`` (paper §4.1: ``1/κ* = max μ̇``).

    Formulas of §J.1 grow with ``1/κ*``, so this is the conservative value
    (√(2π) ≈ 2.507 for probit, 4 for logistic).
    """
    return float(1.0 / dmu_range(family, check_positive("S", S))[1])


@dataclass(frozen=True)
class RarelySwitchingParameters:
    """Every constant the rarely-switching loop decides with (paper §6.1, §J.1).

    Parameters
    ----------
    lam : float > 0
        λ: ``V`` starts at ``λI`` (Alg. 2, line 1).
    lam_h : float > 0
        ``H`` starts at ``lam_h·I`` (the paper uses one λ for both; a private run may
        calibrate each to its own tree's noise).
    floor_v, floor_h : float in (0, lam], (0, lam_h]
        Eigenvalue floors applied before inverting ``V``, ``H`` (post-processing that
        keeps a noisy release positive definite; Assumption J.1's ``λ_min = 4d/(4d+1)·λ``
        by default, see :func:`paper_floor`).
    beta : float > 0
        β: width of ``UCB(x, H, θ) = ⟨x, θ⟩ + β‖x‖_{H⁻¹}`` (§6.1).
    exploration_threshold : float > 0
        Criterion I fires when ``max_x ‖x‖²_{V⁻¹} ≥`` this (paper: ``1/(γ²κR²)``).
    elimination_width : float > 0
        w in ``UCB_o/LCB_o = ⟨x, θ̂_o⟩ ± w‖x‖_{V⁻¹}`` and the radius of ``Θ_II``
        (paper §6.1: ``γκ``; Sawarni et al.: ``γ√κ``).
    switch_rule : {"loewner", "determinant"}
        Criterion II: ``λ_max(H_τ^{-1/2} H_t H_τ^{-1/2}) > c`` (paper Alg. 2, line 11,
        the directional-growth rule that survives noisy ``H``) or
        ``det H_t > c·det H_τ`` (Sawarni et al. 2024).
    switch_factor : float > 1
        c above (paper: 2).
    centre : {"tau", "midpoint"}
        The arm-choice estimate: ``θ̂_τ`` (paper §6.1) or ``(θ̂_o + θ̂_τ)/2`` (both
        authors' simulation code).
    fit_lam : float >= 0
        Ridge weight of the refits (paper: ``λ_max = (4d+2)/(4d+1)·λ``, §J.1).
    radius : float > 0
        S, the radius of ``Θ_I``.
    kappa : float >= 1
        The κ bound used in the widths (kept for the record).
    refit_o_factor : float >= 1
        c_o: θ̂_o is refitted at the start of a round when ``λ_max(V_o^{-1/2} V_t
        V_o^{-1/2}) > c_o``, ``V_o`` the ``V`` of its last refit. ``1`` (default) on an
        exact ``V`` refits after every exploration round (paper Alg. 2, line 7); a
        released ``V`` moves every round, so a private run needs ``c_o > 1``.
    """

    lam: float
    lam_h: float
    floor_v: float
    floor_h: float
    beta: float
    exploration_threshold: float
    elimination_width: float
    switch_rule: SwitchRule
    switch_factor: float
    centre: Centre
    fit_lam: float
    radius: float
    kappa: float
    refit_o_factor: float = 1.0

    def __post_init__(self) -> None:
        for name in ("lam", "lam_h", "floor_v", "floor_h", "beta", "exploration_threshold",
                     "elimination_width", "radius"):
            check_positive(name, getattr(self, name))
        if self.floor_v > self.lam or self.floor_h > self.lam_h:
            raise ValueError(
                f"floor_v, floor_h must not exceed lam, lam_h; got {self.floor_v}, {self.floor_h} "
                f"for {self.lam}, {self.lam_h}"
            )
        check_real("fit_lam", self.fit_lam, 0.0)
        check_real("kappa", self.kappa, 1.0)
        if self.switch_rule not in ("loewner", "determinant"):
            raise ValueError(f"switch_rule must be 'loewner' or 'determinant', got {self.switch_rule!r}")
        check_real("switch_factor", self.switch_factor, 1.0, low_open=True)
        check_real("refit_o_factor", self.refit_o_factor, 1.0)
        if self.centre not in ("tau", "midpoint"):
            raise ValueError(f"centre must be 'tau' or 'midpoint', got {self.centre!r}")

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (for results files)."""
        return asdict(self)


def paper_floor(d: int, lam: float) -> float:
    """Assumption J.1's lower eigenvalue bound ``λ_min = 4d/(4d+1)·λ`` (paper §J.1)."""
    return 4 * d / (4 * d + 1) * lam


def rs_glinucb_parameters(
    family: GLMFamily | str,
    d: int,
    horizon: int,
    S: float,
    *,
    delta: float = 0.02,
    preset: str = "simulation",
) -> RarelySwitchingParameters:
    """Parameters of the non-private RS-GLinCB (Sawarni et al. 2024).

    ``"simulation"``: the constants of Sawarni et al.'s public simulation code (λ = 0.5,
    γ = S√(d ln(T/δ)), β = 4√(d ln(T/δ)), exploration when ``‖x‖²_{V⁻¹} > 1/(0.01·κS²d)``,
    elimination width ``γ√κ``, determinant growth factor 1.5, arm choice at
    ``(θ̂_o + θ̂_τ)/2``, refits with ridge λ/2); κ is the public bound
    :func:`kappa_bound`, not the oracle.
    ``"theory"``: the non-private limit (ε → ∞) of the paper's §J.1 constants with C = 1:
    ``λ = 5/4·dΛ_T``, ``β = R d Λ_T``, ``γ = R²S d Λ_T``, threshold ``1/(γ²κR²)``,
    width ``γκ``, ``det H_t > 2 det H_τ``.
    """
    family = get_family(family)
    _check_problem(d, horizon, S)
    delta = check_probability("delta", delta)
    kappa = kappa_bound(family, S)
    if not math.isfinite(1.0 / max(0.01 * kappa * float(S) ** 2 * d, 5e-324)) or float(S) ** 2 == 0.0:
        raise ValueError(f"S={S!r} is too small: S**2 underflows, and Criterion I's threshold 1/(0.01 kappa S^2 d) "
                         "with it")
    R = float(family.reward_bound)
    log_term = math.log(horizon / delta)
    if preset == "simulation":
        gamma = S * math.sqrt(d * log_term)
        return RarelySwitchingParameters(
            lam=0.5,
            lam_h=0.5,
            floor_v=paper_floor(d, 0.5),
            floor_h=paper_floor(d, 0.5),
            beta=4.0 * math.sqrt(d * log_term),
            exploration_threshold=1.0 / (0.01 * kappa * S**2 * d),
            elimination_width=gamma * math.sqrt(kappa),
            switch_rule="determinant",
            switch_factor=1.5,
            centre="midpoint",
            fit_lam=0.25,
            radius=float(S),
            kappa=kappa,
        )
    if preset == "theory":
        lam = 1.25 * d * log_term
        gamma = R**2 * S * d * log_term
        return RarelySwitchingParameters(
            lam=lam,
            lam_h=lam,
            floor_v=paper_floor(d, lam),
            floor_h=paper_floor(d, lam),
            beta=R * d * log_term,
            exploration_threshold=1.0 / (gamma**2 * kappa * R**2),
            elimination_width=gamma * kappa,
            switch_rule="determinant",
            switch_factor=2.0,
            centre="tau",
            fit_lam=(4 * d + 2) / (4 * d + 1) * lam,
            radius=float(S),
            kappa=kappa,
        )
    raise ValueError(f"preset must be 'simulation' or 'theory', got {preset!r}")


def _check_problem(d: int, horizon: int, S: float) -> None:
    check_dimension(d)
    check_size("horizon", horizon)
    check_positive("S", S)
