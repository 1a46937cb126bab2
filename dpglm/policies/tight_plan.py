"""The ``tight`` plan of the joint-DP GLM bandit: one Gaussian pool, RS-GLinUCB's constants plus noise terms.

Every private release of :class:`dpglm.policies.joint_dp.JointDPGLMBandit` is a Gaussian
mechanism: the V-tree and the H-tree (node noise) and the DP-SGD refits of θ̂_o and
θ̂_τ (noisy clipped gradient sums). Under the argument of ``docs/joint-dp-privacy.md``
every later user's action depends on another user only through these releases, so the
switching times need no charge of their own and the whole asked (ε, δ) can go to ONE
pool of Gaussian releases, composed as Gaussian DP (Dong, Roth & Su 2022, Cor. 3.3:
μ-GDP releases compose to ``√(Σ μᵢ²)``-GDP, adaptively). The pool's budget is written
``μ²`` here; on a zCDP account it is ``2ρ`` (a Gaussian mechanism's zCDP is ``μ²/2``, so
both currencies compose Gaussians identically and differ only in the final conversion to
(ε, δ)).

:func:`plan_tight` divides the pool, from public quantities only (T, d, S, the link, the
sensitivities and the preset's constants — never the data):

* a share ``tree_share`` for the trees; with both trees, the share is the pair's joint
  μ² (:mod:`dpglm.policies.tree_pair`: a user's leaf is in one tree only, so the pair
  costs about the larger tree's μ², not the sum) and each tree gets all of it, so that
  ``σ_H/σ_V = Δ_H/Δ_V`` (each tree's noise is the same fraction of its leaf bound);
  when Criterion I cannot fire (see below) there is no V-tree and H takes it all;
* the rest for the refits, a share ``o_share`` of it to θ̂_o (when Criterion I can
  fire), each estimator's share divided evenly over its planned refits
  (:func:`planned_refits`); refits past the plan are refused by the account (a filter);
* every constant of :func:`tight_parameters` is RS-GLinUCB's simulation constant
  (:func:`dpglm.policies.rarely_switching.rs_glinucb_parameters`) plus a term driven by
  the noise the trees actually add, so as ε → ∞ the policy is RS-GLinUCB.

How ``tree_share`` and ``o_share`` were chosen: a grid on held-out seeds (root seed 100,
not used by any reported experiment), ``docs/joint-dp-privacy.md`` §"Choosing the split".
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Final

import numpy as np

from accounting import GDP, ZCDP
from dpglm._validation import check_real
from dpglm.glm import GLMFamily
from dpglm.linalg import FlooredSpectrum, dmu_range
from dpglm.policies.rs_parameters import (
    RarelySwitchingParameters,
    paper_floor,
    rs_glinucb_parameters,
)

__all__ = [
    "NOISE_TERM",
    "NOISE_TERM_O",
    "O_SHARE",
    "POOL_CURRENCY",
    "REFIT_STEPS",
    "TREE_SHARE",
    "TightPlan",
    "gaussian_cost",
    "gdp_epsilon",
    "gdp_mu",
    "keep_v",
    "link_leaf_bound",
    "newton_metric",
    "plan_tight",
    "planned_refits",
    "pool_mu_sq",
    "tight_parameters",
]

TREE_SHARE = 0.3
"""Default share of the pool's μ² for the trees (chosen on held-out seeds; module docstring)."""
O_SHARE = 0.3
"""Default share of the refits' μ² for θ̂_o when Criterion I can fire."""
NOISE_TERM = 0.0
"""η of Criterion II's noise term, ``c = 1.5·(1 + η·b_H/floor_H)^d`` (0: RS-GLinUCB's rule; docs)."""
NOISE_TERM_O = 2.0
"""η_o of the θ̂_o refit rule's noise term ``1 + η_o·b_V/floor_V`` (2: the release noise alone cannot fire it)."""
REFIT_STEPS = 10
"""Preconditioned DP-GD steps per refit (Newton-like steps converge in a few; docs)."""


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest μ with μ-GDP ⇒ (ε, δ)-DP (Dong, Roth & Su 2022, Cor. 2.13), rounded down.

    μ-GDP is exactly the Gaussian mechanism of sensitivity 1 and σ = 1/μ, so μ is the
    reciprocal of the analytic Gaussian σ (Balle & Wang 2018, Thm 8) of
    :func:`accounting.convert.analytic_gaussian_sigma`, which is rounded up (μ down).
    """
    from accounting.convert import analytic_gaussian_sigma

    return 1.0 / analytic_gaussian_sigma(epsilon, delta, 1.0)


def gdp_epsilon(mu: float, delta: float) -> float:
    """Exact ε at δ of μ-GDP: the root of Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) = δ (DRS Cor. 2.13)."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    if not mu > 0:
        return 0.0

    def excess(eps: float) -> float:
        # e^ε Φ(b) as exp(ε + log Φ(b)): no overflow at large ε.
        return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps + norm.logcdf(-eps / mu - mu / 2))) - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2
    return float(brentq(excess, 0.0, hi, xtol=1e-12))


@dataclass(frozen=True)
class TightPlan:
    """How the pool's μ² is divided (all from public quantities), and the noise it buys.

    ``mu_sq_*`` are shares of the pool in μ² (zCDP ρ = μ²/2); ``refits_*`` the planned
    refit counts; ``mu_sq_refit_*`` the cost of one refit. ``exploration`` says whether
    Criterion I can fire (then the V-tree and θ̂_o exist). ``mu_sq_trees`` is what the
    trees together may cost: with both, their joint μ² (:mod:`dpglm.policies.tree_pair`),
    each tree's own ``mu_sq_v`` = ``mu_sq_h`` = that share; with H alone, ``mu_sq_h``.
    """

    mu_sq_pool: float
    exploration: bool
    mu_sq_v: float
    mu_sq_h: float
    refits_o: int
    refits_tau: int
    mu_sq_refit_o: float
    mu_sq_refit_tau: float
    tree_share: float
    o_share: float
    mu_sq_trees: float

    def allowed_mu_sq(self) -> float:
        """μ² of everything the plan can release (the trees + every planned refit) — at most the pool."""
        return self.mu_sq_trees + self.refits_o * self.mu_sq_refit_o + self.refits_tau * self.mu_sq_refit_tau


def tight_parameters(
    family: GLMFamily | str,
    d: int,
    horizon: int,
    S: float,
    delta: float,
    noise_v: float,
    noise_h: float,
    *,
    exploration: bool = True,
    noise_term: float | None = None,
) -> RarelySwitchingParameters:
    """RS-GLinUCB's simulation constants plus the terms the tree noise needs.

    ``noise_v``, ``noise_h`` bound ‖noise‖_op of every release of each tree with
    probability ≥ 1 − δ (:func:`dpglm.policies.joint_dp_presets.tree_noise_bound`; 0 for an
    exact or absent tree). With b = that bound and λ₀ = 0.5 RS-GLinUCB's ridge:

    * ``λ_V = λ₀ + b_V``, ``λ_H = λ₀ + b_H``: then ``λI + noise ⪰ λ₀I`` on the whole run,
      the eigenvalue floor RS-GLinUCB's analysis has (Assumption J.1's floors are kept);
    * Criterion II: RS-GLinUCB's determinant rule ``det H_t > c·det H_τ`` with
      ``c = 1.5·(1 + η·b_H/floor_H)^d``. Between two releases the noise moves every
      eigenvalue by at most 2b_H, i.e. ``log det`` by at most ``d·ln(1 + 2b_H/floor_H)``,
      so η = 2 would stop noise alone from triggering a switch; the held-out grid
      preferred η = 0 (:data:`NOISE_TERM`: early noise-driven switches refit θ̂_τ sooner,
      and the budget caps their number);
    * θ̂_o refit when ``λ_max(V_o^{-1/2} V_t V_o^{-1/2}) > 1 + 2b_V/floor_V`` (RS-GLinUCB
      refits whenever the exact V changed, i.e. factor 1; a release moves every round,
      and the noise term stops its noise from calling for a refit every round);
    * β, the Criterion I threshold, the elimination width, the midpoint centre, the refit
      ridge: RS-GLinUCB's (β could carry a DP-SGD term; the refits' noise is planned small
      instead, :func:`plan_tight`).

    All four are post-processing of the releases and public constants.
    """
    eta = NOISE_TERM if noise_term is None else noise_term
    base = rs_glinucb_parameters(family, d, horizon, S, delta=delta, preset="simulation")
    lam_v, lam_h = base.lam + noise_v, base.lam_h + noise_h
    floor_v, floor_h = paper_floor(d, lam_v), paper_floor(d, lam_h)
    return replace(
        base,
        lam=lam_v,
        lam_h=lam_h,
        floor_v=floor_v,
        floor_h=floor_h,
        switch_factor=base.switch_factor * (1.0 + eta * noise_h / floor_h) ** d,
        refit_o_factor=1.0 + max(NOISE_TERM_O * noise_v / floor_v, 1e-9),
        centre=base.centre if exploration else "tau",
    )


def planned_refits(params: RarelySwitchingParameters, horizon: int, d: int, leaf_bound: float,
                   noise: float, *, which: str) -> int:
    """Refits to budget for one estimator, from public constants only (a planning count).

    Both rules compare a released matrix M_t against the floored matrix M_ref of the last
    refit. Up to the noise (bounded by ``noise`` w.p. ≥ 1 − δ), the sum only grows: its
    ``log det`` starts at ``d ln λ`` and ends at most ``d ln(λ + noise + T·leaf/d)``
    (AM–GM on the trace). A determinant switch raises ``log det M_ref`` by more than
    ``ln c``; a Loewner refit (λ_max > c_o, every eigenvalue of ``M_ref^{-1/2}M_tM_ref^{-1/2}``
    then ≥ 1 up to noise) raises it by more than ``ln c_o``. Hence at most
    ``d·ln(1 + (noise + T·leaf/d)/λ)/ln c`` refits. For θ̂_o the count is also capped by
    the exploration rounds the elliptical potential allows, ``n ln(1 + thr) ≤
    d ln(1 + n/(dλ_V))``. Refits beyond the plan are refused by the budget (privacy does
    not rest on this count).
    """
    if which == "tau":
        lam, factor = params.lam_h, params.switch_factor
    elif which == "o":
        lam, factor = params.lam, params.refit_o_factor
    else:
        raise ValueError(f"which must be 'o' or 'tau', got {which!r}")
    growth = d * math.log1p((noise + horizon * leaf_bound / d) / lam)
    count = growth / math.log(factor) if factor > 1 else math.inf
    if which == "o":
        thr = params.exploration_threshold
        n = 1.0
        for _ in range(200):  # fixed point of n = d ln(1 + n/(dλ))/ln(1 + thr), increasing in n
            n_next = min(float(horizon), d * math.log1p(n / (d * lam)) / math.log1p(thr) + 1.0)
            if abs(n_next - n) < 0.5:
                break
            n = n_next
        count = min(count, n_next)
    return max(1, min(horizon, math.ceil(count)))


def plan_tight(
    mu_sq_pool: float,
    *,
    exploration: bool,
    refits_o: int,
    refits_tau: int,
    tree_share: float = TREE_SHARE,
    o_share: float = O_SHARE,
) -> TightPlan:
    """Divide the pool's μ² (module docstring); shares are exact fractions of the pool.

    The last share is the remainder, so the parts sum to at most ``mu_sq_pool`` (never
    more after float rounding: each part is rounded down through a Fraction).
    """
    for name, value in (("tree_share", tree_share), ("o_share", o_share)):
        check_real(name, value, 0.0, 1.0, low_open=True, high_open=True)
    pool = Fraction(mu_sq_pool)
    tree = pool * Fraction(tree_share)
    refits = pool - tree
    if exploration:
        mu_v = mu_h = tree  # the pair's joint cost (module docstring), each tree all of it
        share_o = refits * Fraction(o_share)
        share_tau = refits - share_o
        per_o = share_o / refits_o
    else:
        mu_v, mu_h = Fraction(0), tree
        share_tau = refits
        per_o = Fraction(0)
        refits_o = 0
    per_tau = share_tau / refits_tau

    def down(x: Fraction) -> float:
        f = float(x)
        return f if Fraction(f) <= x else math.nextafter(f, 0.0)

    return TightPlan(
        mu_sq_pool=float(mu_sq_pool), exploration=exploration, mu_sq_v=down(mu_v), mu_sq_h=down(mu_h),
        refits_o=refits_o, refits_tau=refits_tau, mu_sq_refit_o=down(per_o), mu_sq_refit_tau=down(per_tau),
        tree_share=float(tree_share), o_share=float(o_share), mu_sq_trees=down(tree),
    )


def link_leaf_bound(family: GLMFamily | str, S: float) -> float:
    """``max_{|z| ≤ S} μ̇(z)/e``: the operator-norm bound of an H leaf (a public constant of the link)."""
    return dmu_range(family, S)[1] / math.e


POOL_CURRENCY: Final = "gdp"
"""Currency of the tight plan's pool: Gaussian DP, whose (ε, δ) conversion is exact (docs/accounting.md)."""


def pool_mu_sq(account: Any) -> float:
    """The pool's budget in μ² (GDP μ², or 2ρ on a zCDP account: a Gaussian's ρ is μ²/2)."""
    budget = account.budget
    exact = budget.mu_squared if account.currency == "gdp" else 2 * Fraction(budget.rho)
    if exact > Fraction(sys.float_info.max):  # an ε near the float limit: plan with less, which is safe
        return sys.float_info.max
    value = float(exact)
    return value if Fraction(value) <= exact else math.nextafter(value, 0.0)


def gaussian_cost(account: Any, mu_sq: float) -> Any:
    """The cost of a Gaussian release of GDP μ² in the pool's currency (zCDP: ρ = μ²/2, exact)."""
    if account.currency == "gdp":
        return GDP.from_mu_squared(Fraction(mu_sq))
    return ZCDP(Fraction(mu_sq) / 2)


def keep_v(params: RarelySwitchingParameters, old: RarelySwitchingParameters) -> RarelySwitchingParameters:
    """``params`` with V's constants (λ_V, floor, θ̂_o factor) from ``old``."""
    return replace(params, lam=old.lam, floor_v=old.floor_v, refit_o_factor=old.refit_o_factor)


def newton_metric(design: Any, floor: float, curvature: float) -> Callable[[int], np.ndarray]:
    """Public preconditioner ``N·(c·M)^{-1}`` of a refit, M the released design at refit time.

    With the public normaliser N, DP-GD steps ``θ ← θ − M_pre(g̃/N + λθ/N)`` become
    ``θ − (cM)^{-1}(g̃ + λθ)``: Newton-like steps when ``cM`` approximates the loss's
    Hessian ``Σ μ̇(⟨x, θ⟩) x xᵀ`` (H's leaves carry μ̇/e, so c = e for θ̂_τ; V's leaves
    are ``x xᵀ``, and c = max μ̇ keeps the step inside the curvature bound for θ̂_o).
    Post-processing of released matrices (``docs/joint-dp-privacy.md``).
    """

    def metric(rounds: int) -> np.ndarray:
        spectrum = FlooredSpectrum.of(design.matrix, floor)
        q, w = spectrum.eigenvectors, spectrum.eigenvalues
        return rounds * ((q / (curvature * w)) @ q.T)

    return metric
