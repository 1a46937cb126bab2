"""Planning the joint-DP bandit: from the public problem and a ledger to a frozen :class:`JointDPPlan`.

:func:`plan_joint_dp` is everything :class:`dpglm.policies.joint_dp.JointDPGLMBandit`
decides before round 1, from public quantities only (T, d, S, the link, the asked
(ε, δ), the preset's constants — never the data): the accounts on the ledger, the
constants, whether Criterion I can fire, the two trees (charged here, before any noise)
and the DP-SGD refit estimators with their per-refit costs. The policy loop then only
runs :class:`dpglm.policies.rarely_switching.RarelySwitchingBandit` on these ingredients.

Two plans (the budgets of ``docs/joint-dp-privacy.md``):

* ``"tight"`` (:func:`_plan_tight`): one gdp pool pays every Gaussian release, divided by
  :func:`dpglm.policies.tight_plan.plan_tight`; both trees are one pair
  (:mod:`dpglm.policies.tree_pair`);
* the paper presets (:func:`_plan_paper`): the ledger split in thirds, ``tree`` (zCDP),
  ``switching`` (the paper's Lemma 6.1 analysis charge) and ``optimizer`` (zCDP filters),
  constants from :func:`dpglm.policies.joint_dp_presets.joint_dp_parameters`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from accounting import ZCDP, Account, ApproxDP, Ledger
from accounting.costs import as_fraction
from accounting.validation import check_memory
from dpglm._validation import check_int, check_positive, check_probability, check_real
from dpglm.glm import GLMFamily, kappa_support
from dpglm.linalg import dmu_range
from dpglm.policies.joint_dp_ingredients import DPSGDEstimator, NeverCalled, TreeDesign
from dpglm.policies.joint_dp_presets import joint_dp_parameters, planned_switches, tree_noise_bound
from dpglm.policies.rarely_switching import (
    _NORM_SQ_BOUND,
    ExactDesign,
    RarelySwitchingParameters,
    kappa_star_bound,
)
from dpglm.policies.tight_plan import (
    O_SHARE,
    POOL_CURRENCY,
    REFIT_STEPS,
    TREE_SHARE,
    TightPlan,
    gaussian_cost,
    keep_v,
    link_leaf_bound,
    newton_metric,
    plan_tight,
    planned_refits,
    pool_mu_sq,
    tight_parameters,
)
from dpglm.policies.tree_pair import build_tree_pair
from mechanisms.tree import BinaryTreeMechanism, tree_depth

__all__ = ["JointDPPlan", "JointDPProblem", "RefitOptions", "check_joint_dp_arguments", "joint_dp_ledger",
           "plan_joint_dp"]

_LEMMA_6_1 = ("paper Lemma 6.1 (Lemma J.5): T_o \\ {t} depends on user t only through the "
              "V-tree release, which is (ε/3, δ/3)-DP as part of the tree account")


@dataclass(frozen=True)
class JointDPProblem:
    """The public problem: link, dimension, horizon, ‖θ*‖ bound and the (ε, δ) the policy may spend."""

    family: GLMFamily
    d: int
    horizon: int
    S: float
    epsilon: float
    delta: float


@dataclass(frozen=True)
class RefitOptions:
    """DP-SGD settings of every refit (full batch); ``None`` takes the plan's default."""

    clip: float = 1.0
    steps: int | None = None
    lr: float | None = None
    refits_tau: int | None = None
    refits_o: int | None = None
    optimizer_backend: str = "numpy"


@dataclass(frozen=True)
class JointDPPlan:
    """Everything planned before round 1 (module docstring).

    Attributes
    ----------
    preset : str
        The preset, or ``"custom"`` when ``params`` were given.
    params : RarelySwitchingParameters
        The constants the loop decides with.
    exploration_possible : bool
        Whether Criterion I can fire (``‖x‖²_{V⁻¹} ≤ ‖x‖²/floor_v``); if not, there is no
        V-tree and no θ̂_o budget.
    design_v, design_h, estimator_o, estimator_tau
        The loop's ingredients (:class:`~dpglm.policies.joint_dp_ingredients.TreeDesign`,
        :class:`~dpglm.policies.rarely_switching.ExactDesign` for a public ``V = λI``,
        :class:`~dpglm.policies.joint_dp_ingredients.DPSGDEstimator`).
    tight : TightPlan or None
        The pool's division (``"tight"`` only).
    """

    preset: str
    params: RarelySwitchingParameters
    exploration_possible: bool
    design_v: Any
    design_h: TreeDesign
    estimator_o: Any
    estimator_tau: DPSGDEstimator
    tight: TightPlan | None = None


def joint_dp_ledger(ledger: Ledger | Account | None, epsilon: float | None, delta: float | None,
                    ) -> tuple[Ledger | Account, float, float]:
    """The ledger to charge and the (ε, δ) the policy may spend: ``ledger``'s remaining budget, or a new one.

    Raises
    ------
    ValueError
        Neither or both of ``ledger`` and (ε, δ) given; an add/remove ledger (the trees'
        sensitivities are replace-one); a ledger with nothing left to spend.
    TypeError
        ``ledger`` is not an :class:`accounting.Ledger` of an ApproxDP budget.
    """
    if ledger is None:
        if epsilon is None or delta is None:
            raise ValueError("give a ledger, or both epsilon and delta")
        epsilon, delta = check_positive("epsilon", epsilon), check_probability("delta", delta)
        return Ledger(ApproxDP(as_fraction(epsilon, "epsilon"), as_fraction(delta, "delta"))), epsilon, delta
    if epsilon is not None or delta is not None:
        raise ValueError("give either a ledger or (epsilon, delta), not both")
    if not isinstance(ledger, (Ledger, Account)):  # an Account: an anytime epoch's share (dpglm.policies.anytime)
        raise TypeError(f"ledger must be an accounting.Ledger, got {type(ledger).__name__}")
    if ledger.relation != "replace_one":
        raise ValueError(f"ledger must state replace_one privacy (the trees' sensitivities), got {ledger.relation!r}")
    remaining = ledger.remaining
    if not isinstance(remaining, ApproxDP):
        raise TypeError(f"ledger must hold an ApproxDP budget, got {type(remaining).__name__}")
    if not (remaining.eps > 0 and 0 < remaining.delta < 1):
        raise ValueError(f"ledger has no (epsilon, delta) left to spend: remaining {remaining}")
    return ledger, float(remaining.eps), float(remaining.delta)


def check_joint_dp_arguments(problem: JointDPProblem, refits: RefitOptions, params: RarelySwitchingParameters | None,
                             shares: dict[str, float | None], noise_term: float | None) -> RefitOptions:
    """Every public argument of the plan checked before the ledger is split or charged (docs/mechanisms.md).

    Returns ``refits`` with its numbers in canonical types. Refuses, naming the argument,
    what would otherwise fail only after the trees were charged: a bad DP-SGD setting, a
    share outside (0, 1), a negative ``noise_term``, ``params`` of the wrong type, an ``S``
    whose κ is infinite, a ``d`` whose two trees cannot be allocated.
    """
    from mechanisms.optim.dpsgd import ENGINES

    clip = check_positive("clip", refits.clip)
    steps = None if refits.steps is None else check_int("steps", refits.steps)
    lr = None if refits.lr is None else check_positive("lr", refits.lr)
    refits_tau = None if refits.refits_tau is None else check_int("refits_tau", refits.refits_tau)
    refits_o = None if refits.refits_o is None else check_int("refits_o", refits.refits_o)
    backend = refits.optimizer_backend
    if not isinstance(backend, str) or backend not in ENGINES:
        raise ValueError(f"optimizer_backend must be one of {ENGINES}, got {backend!r}")
    for name, share in shares.items():
        if share is not None:
            check_real(name, share, 0.0, 1.0, low_open=True, high_open=True)
    if noise_term is not None:
        check_real("noise_term", noise_term, 0.0)
    if params is not None:
        if not isinstance(params, RarelySwitchingParameters):
            raise TypeError(f"params must be a RarelySwitchingParameters, got {type(params).__name__}")
        _exploration_possible(params)
    kappa_support(problem.family, problem.S)
    depth = tree_depth(problem.horizon)
    check_memory("d", problem.d, 2 * 8 * (2 * depth + 2) * problem.d**2, "the two trees' state (two (d, d) trees)")
    return RefitOptions(clip=clip, steps=steps, lr=lr, refits_tau=refits_tau, refits_o=refits_o,
                        optimizer_backend=backend)


def plan_joint_dp(problem: JointDPProblem, ledger: Ledger | Account, rng: np.random.Generator, *, preset: str,
                  params: RarelySwitchingParameters | None = None, refits: RefitOptions | None = None,
                  tree_share: float | None = None, o_share: float | None = None,
                  noise_term: float | None = None) -> JointDPPlan:
    """Plan the policy on ``ledger``: accounts, constants, trees (charged now) and refit estimators.

    ``rng`` is spawned into the trees' and the two estimators' noise sources.
    ``tree_share``, ``o_share`` and ``noise_term`` are the tight plan's
    (:mod:`dpglm.policies.tight_plan`); the paper presets ignore them.
    """
    refits = RefitOptions() if refits is None else refits
    if preset == "tight":
        shares = {"tree_share": TREE_SHARE if tree_share is None else tree_share,
                  "o_share": O_SHARE if o_share is None else o_share}
        return _plan_tight(problem, ledger, rng, params, refits, shares, noise_term)
    return _plan_paper(problem, ledger, rng, preset, params, refits)


def _exploration_possible(params: RarelySwitchingParameters) -> bool:
    """Whether Criterion I can fire: ``‖x‖²_{V⁻¹} ≤ ‖x‖²/floor_v`` once V is floored, ``‖x‖² ≤ _NORM_SQ_BOUND``."""
    possible = params.exploration_threshold <= _NORM_SQ_BOUND / params.floor_v
    if possible and params.refit_o_factor <= 1:
        # A released V moves every round: with c_o = 1 every round would ask for a refit.
        raise ValueError(f"params.refit_o_factor must be > 1 for the private policy, got {params.refit_o_factor!r}")
    return possible


def _estimator(account: Any, family: GLMFamily, rng: np.random.Generator, planned: int, refits: RefitOptions,
               steps: int, lr: float, lam: float, **kwargs: Any) -> DPSGDEstimator:
    """A DP-SGD refit estimator charging ``account`` (``kwargs``: per-refit cost, preconditioner)."""
    from mechanisms.optim.dpsgd import DPSGD

    dpsgd = DPSGD(account, family.name, rng, clip=refits.clip, engine=refits.optimizer_backend)
    return DPSGDEstimator(dpsgd, account, planned, steps=steps, lr=lr, lam=lam, **kwargs)


# -- the tight plan ---------------------------------------------------------------------
def _tight_constants(problem: JointDPProblem, mu_sq_pool: float, params: RarelySwitchingParameters | None,
                     shares: dict[str, float], noise_term: float | None,
                     ) -> tuple[RarelySwitchingParameters, bool, float, float]:
    """The tight constants from a draft division of the pool: (params, exploration, noise_V, noise_H)."""
    family, d, horizon, S, delta = problem.family, problem.d, problem.horizon, problem.S, problem.delta
    leaf_h = link_leaf_bound(family, S)
    sens_v, sens_h = math.sqrt(2.0), math.sqrt(2.0) * leaf_h  # replace-one, Frobenius
    depth = tree_depth(horizon)

    def bound(mu_sq: float, sens: float) -> float:  # ‖noise‖_op bound of a tree costing μ² = LΔ²/σ²
        return 0.0 if mu_sq <= 0 else tree_noise_bound(sens * math.sqrt(depth / mu_sq), depth, d, horizon, delta)

    given = params is not None
    draft = plan_tight(mu_sq_pool, exploration=True, refits_o=1, refits_tau=1, **shares)
    noise_v, noise_h = (0.0, 0.0) if given else (bound(draft.mu_sq_v, sens_v), bound(draft.mu_sq_h, sens_h))
    if params is None:
        params = tight_parameters(family, d, horizon, S, delta, noise_v, noise_h, noise_term=noise_term)
    exploration = _exploration_possible(params)
    if not exploration and not given:
        # No V-tree: V stays the public λ_V I it would have had (Criterion I cannot fire
        # on it), and H gets the whole tree share.
        draft = plan_tight(mu_sq_pool, exploration=False, refits_o=1, refits_tau=1, **shares)
        noise_h = bound(draft.mu_sq_h, sens_h)
        params = keep_v(tight_parameters(family, d, horizon, S, delta, noise_v, noise_h, exploration=False,
                                         noise_term=noise_term), params)
    return params, exploration, noise_v, noise_h


def _plan_tight(problem: JointDPProblem, ledger: Ledger | Account, rng: np.random.Generator,
                params: RarelySwitchingParameters | None, refits: RefitOptions, shares: dict[str, float],
                noise_term: float | None) -> JointDPPlan:
    """``preset="tight"``: every Gaussian release on one pool (:mod:`dpglm.policies.tight_plan`)."""
    family, d, horizon, S, delta = problem.family, problem.d, problem.horizon, problem.S, problem.delta
    pool = ledger.split({"pool": 1}, currency={"pool": POOL_CURRENCY})["pool"]
    mu_sq_pool = pool_mu_sq(pool)
    tree_rng, sgd_o_rng, sgd_tau_rng = rng.spawn(3)
    leaf_h = link_leaf_bound(family, S)
    sens_v, sens_h = math.sqrt(2.0), math.sqrt(2.0) * leaf_h
    depth = tree_depth(horizon)
    given = params is not None
    params, exploration, noise_v, noise_h = _tight_constants(problem, mu_sq_pool, params, shares, noise_term)
    refits_tau = refits.refits_tau
    if refits_tau is None:
        refits_tau = planned_refits(params, horizon, d, leaf_h, noise_h, which="tau")
    refits_o = refits.refits_o
    if refits_o is None:
        refits_o = planned_refits(params, horizon, d, 1.0, noise_v, which="o")
    plan = plan_tight(mu_sq_pool, exploration=exploration, refits_o=refits_o, refits_tau=refits_tau, **shares)
    v_tree: Any = None
    h_tree: BinaryTreeMechanism
    if plan.exploration:  # both trees charged as one pair: the joint μ², not the sum
        pair = build_tree_pair(pool, horizon, d, (sens_v, sens_h), tree_rng, plan.mu_sq_trees)
        v_tree, h_tree = pair.v_tree, pair.h_tree
    else:
        h_tree = BinaryTreeMechanism(pool, horizon, (d, d), sens_h, tree_rng,
                                     cost=gaussian_cost(pool, plan.mu_sq_h), psd=True)
    if not given:
        # The constants from the σ the trees actually use (their own cost functions, rounded up).
        noise_h = tree_noise_bound(h_tree.sigma, depth, d, horizon, delta)
        if v_tree is not None:
            noise_v = tree_noise_bound(v_tree.sigma, depth, d, horizon, delta)
        new = tight_parameters(family, d, horizon, S, delta, noise_v, noise_h, exploration=v_tree is not None,
                               noise_term=noise_term)
        params = new if v_tree is not None else keep_v(new, params)
    steps = REFIT_STEPS if refits.steps is None else refits.steps
    lr = 1.0 if refits.lr is None else refits.lr
    design_v: Any = TreeDesign(v_tree, params.lam) if v_tree is not None else ExactDesign(d, params.lam)
    design_h = TreeDesign(h_tree, params.lam_h)
    estimator_tau = _estimator(pool, family, sgd_tau_rng, refits_tau, refits, steps, lr, params.fit_lam,
                               cost_per_refit=gaussian_cost(pool, plan.mu_sq_refit_tau),
                               preconditioner=newton_metric(design_h, params.floor_h, math.e))
    estimator_o: Any = NeverCalled()
    if plan.exploration:
        estimator_o = _estimator(pool, family, sgd_o_rng, refits_o, refits, steps, lr, params.fit_lam,
                                 cost_per_refit=gaussian_cost(pool, plan.mu_sq_refit_o),
                                 preconditioner=newton_metric(design_v, params.floor_v,
                                                              1.0 / kappa_star_bound(family, S)))
    return JointDPPlan("tight" if not given else "custom", params, exploration, design_v, design_h, estimator_o,
                       estimator_tau, plan)


# -- the paper presets -------------------------------------------------------------------
def _paper_trees(problem: JointDPProblem, accounts: dict[str, Any], tree_rng: np.random.Generator, preset: str,
                 params: RarelySwitchingParameters | None,
                 ) -> tuple[RarelySwitchingParameters, bool, Any, BinaryTreeMechanism, float]:
    """Constants and trees of a paper preset: (params, exploration, V-tree or None, H-tree, Δ_H)."""
    family, d, horizon, S, epsilon, delta = (problem.family, problem.d, problem.horizon, problem.S,
                                             problem.epsilon, problem.delta)
    tree_account = accounts["tree"]
    # Replace-one sensitivities (Frobenius): ‖x xᵀ − x' x'ᵀ‖_F ≤ √2 for ‖x‖, ‖x'‖ ≤ 1;
    # H leaves are scaled by μ̇/e ≤ max_{|z|≤S} μ̇ / e, a public constant of the link.
    sens_v = math.sqrt(2.0)
    sens_h = math.sqrt(2.0) * dmu_range(family, S)[1] / math.e
    depth = tree_depth(horizon)
    rho_tree = Fraction(tree_account.budget.rho)
    # Same node σ for both trees: ρ_V : ρ_H = Δ_V² : Δ_H² (the joint Gaussian's split).
    rho_v = rho_tree * Fraction(sens_v**2) / (Fraction(sens_v**2) + Fraction(sens_h**2))

    def noise(rho: Fraction, sens: float) -> float:
        return tree_noise_bound(sens * math.sqrt(depth / (2 * float(rho))), depth, d, horizon, delta)

    def build(noise_v: float, noise_h: float) -> RarelySwitchingParameters:
        return joint_dp_parameters(family, d, horizon, S, epsilon, delta, preset=preset, tree_noise=(noise_v, noise_h))

    calibrate = params is None and preset == "calibrated"
    if params is None:
        params = build(noise(rho_v, sens_v), noise(rho_tree - rho_v, sens_h))
    exploration = _exploration_possible(params)
    v_tree = None
    if exploration:
        v_tree = BinaryTreeMechanism(tree_account, horizon, (d, d), sens_v, tree_rng, cost=ZCDP(rho_v), psd=True)
    h_tree = BinaryTreeMechanism(tree_account, horizon, (d, d), sens_h, tree_rng, psd=True)
    if exploration:
        accounts["switching"].charge_analysis(accounts["switching"].budget, reason=_LEMMA_6_1)
    if calibrate:
        # λ from the σ the trees actually use (rounded up by the mechanism); without a
        # V-tree, V stays at the λ it would have had (it only widens elimination).
        bound_v = noise(rho_v, sens_v) if v_tree is None else tree_noise_bound(v_tree.sigma, depth, d, horizon, delta)
        params = build(bound_v, tree_noise_bound(h_tree.sigma, depth, d, horizon, delta))
    return params, exploration, v_tree, h_tree, sens_h


def _plan_paper(problem: JointDPProblem, ledger: Ledger | Account, rng: np.random.Generator, preset: str,
                params: RarelySwitchingParameters | None, refits: RefitOptions) -> JointDPPlan:
    """A paper preset: the ledger in thirds (module docstring), constants of :func:`joint_dp_parameters`."""
    family, d, horizon = problem.family, problem.d, problem.horizon
    steps = 20 if refits.steps is None else refits.steps
    lr = 5.0 if refits.lr is None else refits.lr
    refits_o = 4 * d if refits.refits_o is None else refits.refits_o
    accounts = ledger.split({"tree": 1, "switching": 1, "optimizer": 1},
                            currency={"tree": "zcdp", "optimizer": "zcdp"})
    tree_rng, sgd_o_rng, sgd_tau_rng = rng.spawn(3)
    given = params is not None
    params, exploration, v_tree, h_tree, sens_h = _paper_trees(problem, accounts, tree_rng, preset, params)
    opt = accounts["optimizer"].split({"theta_o": 1, "theta_tau": 1} if exploration else {"theta_tau": 1})
    design_v: Any = TreeDesign(v_tree, params.lam) if v_tree is not None else ExactDesign(d, params.lam)
    refits_tau = refits.refits_tau
    if refits_tau is None:
        refits_tau = planned_switches(params, horizon, sens_h / math.sqrt(2.0), d)
    estimator_tau = _estimator(opt["theta_tau"], family, sgd_tau_rng, refits_tau, refits, steps, lr, params.fit_lam)
    estimator_o: Any = NeverCalled()
    if exploration:
        estimator_o = _estimator(opt["theta_o"], family, sgd_o_rng, refits_o, refits, steps, lr, params.fit_lam)
    return JointDPPlan(preset if not given else "custom", params, exploration, design_v,
                       TreeDesign(h_tree, params.lam_h), estimator_o, estimator_tau)
