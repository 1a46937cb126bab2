"""The paper's joint-DP GLM bandit (Algorithm 2): the rarely-switching loop on private ingredients.

:class:`JointDPGLMBandit` is :class:`~dpglm.policies.rarely_switching.RarelySwitchingBandit`
with

* ``V`` and ``H`` released by two :class:`mechanisms.tree.BinaryTreeMechanism` s (paper
  §J.3): every round appends one leaf to each tree, ``x xᵀ`` to the V-tree on a
  Criterion I round and ``μ̇(⟨x, θ̂_o⟩)/e · x xᵀ`` to the H-tree otherwise, a zero leaf
  to the other tree;
* ``θ̂_o`` and ``θ̂_τ`` refitted by DP-SGD (:class:`mechanisms.optim.DPSGD`) over
  ``Θ_I`` and ``Θ_II``, at times decided from the tree releases only (below).

Deviations from the paper: refit times (Alg. 2, lines 7 and 11). The paper refits θ̂_o in
every exploration round t, i.e. exactly when user t's raw context set X_t satisfies
Criterion I. "θ̂_o changed at round t" is then a deterministic function of user t's
data, seen by every later user through the elimination rule ``UCB_o`` and the ``H``
weights ``μ̇(⟨x, θ̂_o⟩)/e``: a δ = 1 leak that Lemma 6.1 (about ``T_o ∖ {t}`` only) does
not cover. Here θ̂_o is refitted at the START of a round when the released ``V`` has grown
in some direction since the last refit, ``λ_max(V_o^{-1/2} V_t V_o^{-1/2}) > c_o``
(``refit_o_factor``; the presets use Criterion II's factor): the directional-growth rule
of Criterion II (line 11) applied to ``V``, hence post-processing of the V-tree releases.
A refit is made even when T_o is empty (DP-SGD then releases noise only), and elimination
and ``Θ_II`` use ``V_o`` (the ``V`` θ̂_o was fitted at). The refit data T_o still gains or
loses user t's row between neighbours: DP-SGD's public normaliser (the round count) and
its clipped-sum sensitivity 2C cover add, remove and replace. θ̂_τ likewise is refitted
on every Criterion II switch, even on an empty data set, and Criterion II is checked at
the start of EVERY round (the paper checks it only when Criterion I did not fire, line 11
being its ``else`` branch, so a switch due at round t happened at t or later depending on
user t's raw context; Criterion II is post-processing of H only when checked like this).
``diagnostics()`` publishes only counts that are functions of the releases
(:data:`RELEASED_COUNTS`: Criterion II switches, θ̂_o / θ̂_τ refits made and refused) and
the ledger's guarantee. How often Criterion I fired is computed from each user's own
arms (docs/joint-dp-privacy.md, step 4) and released by no mechanism, so it is not
published: ``policy.counts["criterion_I"]`` holds it for the operator only
(docs/service.md, "What a run publishes").

Budget of ``preset="tight"`` (the default): ONE pool holds the asked (ε, δ) and pays
every Gaussian release (both trees, every θ̂_o and θ̂_τ refit), composed as Gaussian DP;
nothing is charged for the switching times, because every later user's action is a
function of its own context and the releases (the billboard argument of
``docs/joint-dp-privacy.md``, backed by a noise-coupling test with everything active).
The plan and its constants are :mod:`dpglm.policies.tight_plan`.

Budget of the other presets (paper §6.3 "Privacy composition", with honest accounting).
The ledger holds the asked (ε, δ) and is split in thirds:

``tree`` (zCDP)
    ONE account for both trees. Replacing one user's data can move its round from
    one tree to the other, so both trees are charged to the same account and composed
    (ρ_V + ρ_H), each with its replace-one sensitivity: ``‖x xᵀ − x' x'ᵀ‖_F ≤ √2`` for
    V, ``√2·max μ̇/e`` for H (a public constant of the link, not the oracle 1/κ*). Both
    trees get the same node σ (the joint Gaussian has sensitivity
    ``√(Δ_V² + Δ_H²)``), i.e. the account is split in proportion to Δ².
``switching`` (approximate DP)
    An analysis charge of (ε/3, δ/3) citing paper Lemma 6.1: the exploration set
    ``T_o ∖ {t}`` depends on user t only through the V-tree release, which is
    (ε/3, δ/3)-DP because the whole tree account is. (The refit times need no charge:
    they are post-processing of the V-tree and H-tree releases.)
``optimizer`` (zCDP filter)
    Split again into ``theta_o`` and ``theta_tau``; each refit charges a fixed ρ
    (the sub-budget over the planned number of refits). When the filter refuses, that
    estimate stops updating: the paper's count cutoffs are a consequence of the budget.

Nothing is spent on parts that cannot run. Once V's eigenvalues are floored at
``floor_v`` (post-processing), ``‖x‖²_{V⁻¹} ≤ 1/floor_v`` for every context; if the
Criterion I threshold is above that, T_o = ∅ on every data set, so there is no V-tree
(V = λI, a public constant), no Lemma 6.1 charge and no θ̂_o budget: the whole tree third
goes to the H-tree and the whole optimizer third to θ̂_τ. This is the case of the
``paper-simulation`` and ``calibrated`` presets on the paper's Table 2 instances.

The policy touches contexts and rewards only to feed these mechanisms: every matrix
and estimate it decides with is the value of a :class:`mechanisms.Release`.

Modules: this one is the policy (validation, the ledger, the loop's wiring); the plan it
runs is :func:`dpglm.policies.joint_dp_plan.plan_joint_dp` (a frozen
:class:`~dpglm.policies.joint_dp_plan.JointDPPlan`); the paper presets are
:mod:`dpglm.policies.joint_dp_presets`, the tight one :mod:`dpglm.policies.tight_plan`;
the private ingredients :mod:`dpglm.policies.joint_dp_ingredients`.
"""


from __future__ import annotations

from typing import Any

import numpy as np

from accounting import Account, Ledger
from dpglm._validation import (
    check_dimension,
    check_generator,
    check_positive,
    check_round_order,
    check_size,
)
from dpglm.glm import GLMFamily, get_family
from dpglm.policies.invalid import InvalidUsers, check_invalid
from dpglm.policies.joint_dp_ingredients import DPSGDEstimator, NeverCalled, TreeDesign
from dpglm.policies.joint_dp_plan import (
    JointDPPlan,
    JointDPProblem,
    RefitOptions,
    check_joint_dp_arguments,
    joint_dp_ledger,
    plan_joint_dp,
)
from dpglm.policies.joint_dp_presets import PRESETS, joint_dp_parameters, planned_switches, tree_noise_bound
from dpglm.policies.rarely_switching import RarelySwitchingBandit, RarelySwitchingParameters

__all__ = [
    "PRESETS",
    "RELEASED_COUNTS",
    "DPSGDEstimator",
    "JointDPGLMBandit",
    "JointDPPlan",
    "TreeDesign",
    "joint_dp_parameters",
    "planned_switches",
    "tree_noise_bound",
]

_NeverCalled = NeverCalled  # the old private name (audits and tests may hold it)

RELEASED_COUNTS = ("criterion_II", "refits_o", "refits_tau", "refused_o", "refused_tau")
"""The counts ``diagnostics()`` publishes: each a function of the releases (docs/joint-dp-privacy.md, steps 1–3).

Switches and refits are decided from the released V and H at the start of a round, and a
refit is granted or refused by a filter whose decisions follow from the refit times.
``criterion_I`` (step 4, the user's own arms) is not among them."""


class JointDPGLMBandit(InvalidUsers, RarelySwitchingBandit):
    """Paper Algorithm 2: (ε, δ)-joint-DP rarely-switching GLM bandit (see the module docstring).

    Deviations from the paper (module docstring): θ̂_o is not refitted in each
    exploration round (Alg. 2, line 7), whose timing is decided by the current user's raw
    context and would reveal ``t ∈ T_o`` to every later user; it is refitted at the start
    of a round when the released ``V`` has grown, ``λ_max(V_o^{-1/2} V_t V_o^{-1/2}) >
    params.refit_o_factor`` (> 1 required), a function of the V-tree releases only; and
    Criterion II (line 11) is checked at the start of every round, not only in rounds
    where Criterion I did not fire.

    Parameters
    ----------
    family : GLMFamily or str
    d, horizon : int
        ``horizon=None``: anytime doubling epochs (``first_horizon=1000``, ``epoch_budget="parallel"``:
        each epoch restarts and has the whole budget; :mod:`dpglm.policies.anytime`, docs/service.md).
    S : float
        Known bound on ‖θ*‖ (radius of Θ_I).
    epsilon : float > 0
    delta : float in (0, 1)
        The asked (ε, δ); the ledger's total guarantee never exceeds it. Give these or
        ``ledger``, not both.
    rng : numpy.random.Generator
        Source of all noise (trees and DP-SGD).
    ledger : accounting.Ledger, optional
        An existing replace-one ledger of an ApproxDP budget to charge instead of a new
        one: the policy plans with, and splits, what it has left
        (:func:`~dpglm.policies.joint_dp_plan.joint_dp_ledger`).
    preset : {"tight", "paper-simulation", "calibrated", "theory"}
        ``"tight"`` (default): :mod:`dpglm.policies.tight_plan`; the others
        :func:`joint_dp_parameters`.
    params : RarelySwitchingParameters, optional
        Overrides the preset.
    clip, steps, lr : DP-SGD settings of every refit (full batch).
    refits_tau : int, optional
        Planned θ̂_τ refits (default :func:`planned_switches`); the θ̂_τ budget is
        divided among them and later refits are refused.
    refits_o : int, optional
        Planned θ̂_o refits (default ``4d``).
    optimizer_backend : {"numpy", "vectorised", "opacus"}
        DP-SGD implementation (same noise and privacy, the same θ to rounding): ``"numpy"``
        (default) imports no torch; ``"vectorised"`` (torch) and ``"opacus"`` need the
        ``opacus`` extra. Not where work runs: that is the execution engine (docs/engine.md).
    tree_share, o_share, noise_term : float, optional
        ``tight`` only: the pool's tree share, θ̂_o's share of the refits, Criterion II's
        noise term (defaults :data:`~dpglm.policies.tight_plan.TREE_SHARE` etc.).
    invalid : {"clip", "skip", "raise"}
        What an out-of-domain user (‖x‖ > 1, NaN, a reward outside [0, R]) gets
        (:mod:`dpglm.policies.invalid`, docs/service.md). A skipped user adds a zero leaf
        to both trees and no refit row.

    Attributes
    ----------
    ledger : accounting.Ledger
        ``pool`` (tight) or ``tree`` / ``switching`` / ``optimizer``; :meth:`accounting.Ledger.report`.
    joint_plan : JointDPPlan
        Everything planned before round 1; ``plan`` is its ``tight`` division (or None).
    """

    name = "Private-GLM"

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        """``horizon=None``: an anytime :class:`~dpglm.policies.anytime.DoublingEpochs` of this policy."""
        horizon = args[2] if len(args) > 2 else kwargs.get("horizon", 0)
        if horizon is None and cls is JointDPGLMBandit:
            return _anytime(*args, **kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        family: GLMFamily | str,
        d: int,
        horizon: int | None,
        S: float,
        epsilon: float | None = None,
        delta: float | None = None,
        rng: np.random.Generator | None = None,
        *,
        ledger: Ledger | Account | None = None,
        preset: str = "tight",
        params: RarelySwitchingParameters | None = None,
        clip: float = 1.0,
        steps: int | None = None,
        lr: float | None = None,
        refits_tau: int | None = None,
        refits_o: int | None = None,
        optimizer_backend: str = "numpy",
        tree_share: float | None = None,
        o_share: float | None = None,
        noise_term: float | None = None,
        invalid: str = "clip",
    ) -> None:
        d, horizon, S = check_dimension(d), check_size("horizon", horizon), check_positive("S", S)
        self.invalid = check_invalid(invalid)
        self._skipping = False
        self.ledger: Any  # a Ledger; an Account for an anytime epoch (dpglm.policies.anytime)
        self.ledger, self.epsilon, self.delta = joint_dp_ledger(ledger, epsilon, delta)
        family = get_family(family)
        rng = check_generator(rng)
        if not isinstance(preset, str) or preset not in PRESETS:
            raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
        if family.name not in ("logistic", "probit"):
            raise ValueError(f"family must be 'logistic' or 'probit' for DP-SGD refits, got {family.name!r}")
        problem = JointDPProblem(family, d, horizon, S, self.epsilon, self.delta)
        refits = check_joint_dp_arguments(  # all public: refused before the ledger is split or charged
            problem, RefitOptions(clip=clip, steps=steps, lr=lr, refits_tau=refits_tau, refits_o=refits_o,
                                  optimizer_backend=optimizer_backend),
            params, {"tree_share": tree_share, "o_share": o_share}, noise_term)
        self.joint_plan = plan = plan_joint_dp(problem, self.ledger, rng, preset=preset, params=params, refits=refits,
                                               tree_share=tree_share, o_share=o_share, noise_term=noise_term)
        self.plan = plan.tight
        self.exploration_possible = plan.exploration_possible
        super().__init__(family, d, plan.params, design_v=plan.design_v, design_h=plan.design_h,
                         estimator_o=plan.estimator_o, estimator_tau=plan.estimator_tau, horizon=horizon)
        self.preset = plan.preset

    def choose(self, arms: np.ndarray) -> int:
        """Alg. 2's round; the user's arms screened (``invalid=``, :mod:`dpglm.policies.invalid`) on the way.

        The unit-ball check is the one the round makes anyway (``‖x‖²`` is among its
        quadratic forms); only arms that fail it are screened (:meth:`_outside_ball`).
        """
        if self._skipping:
            check_round_order(True, "choose")
        return super().choose(arms)

    def _check_arms(self, arms: np.ndarray) -> np.ndarray:
        """Type and shape (the caller's mistakes raise); with ``invalid != "raise"`` the norms are screened later."""
        return super()._check_arms(arms) if self.invalid == "raise" else self._screen_shape(arms)

    def _outside_ball(self, arms: np.ndarray) -> np.ndarray | None:
        """Screen arms that fail the unit-ball check: clipped, or None (skip: the round's refits were made,
        it plays the public arm 0 and stages nothing), or the ValueError under ``invalid="raise"``."""
        if self.invalid == "raise":
            return super()._outside_ball(arms)
        screened = self._screen_norms(arms)
        self._skipping = screened is None
        return screened

    def observe(self, reward: float) -> None:
        """Screen the reward (``invalid=``); a skipped user adds a zero leaf to both trees and no row."""
        if self._skipping or self.invalid == "raise":
            if not self._skipping:
                return super().observe(reward)
            self._skipping = False
        elif self._pending is not None:
            r = self._screen_reward(reward)
            if r is not None:
                return super().observe(r)
            self._pending = None  # the staged row is never committed
        else:
            return super().observe(reward)  # raises the round-order error
        self.t += 1
        self.design_v.append(None)
        self.design_h.append(None)
        return None

    def diagnostics(self) -> dict[str, Any]:
        """:data:`RELEASED_COUNTS` and the ledger's total (ε, δ) (``guarantee_epsilon``/``_delta``): nothing else.

        Criterion I's count is private (computed from users' own arms, released by no
        mechanism): the operator reads it in ``counts``; it is never published.
        """
        out: dict[str, Any] = {name: self.counts[name] for name in RELEASED_COUNTS}
        guarantee = self.ledger.guarantee() if isinstance(self.ledger, Ledger) else self.ledger.converted()
        assert guarantee is not None
        out["guarantee_epsilon"] = float(guarantee.eps)
        out["guarantee_delta"] = float(getattr(guarantee, "delta", 0.0))
        return out


def _anytime(family: GLMFamily | str, d: int, horizon: None, S: float, epsilon: float | None = None,
             delta: float | None = None, rng: np.random.Generator | None = None, *, ledger: Ledger | None = None,
             first_horizon: int = 1000, epoch_budget: str = "parallel", **kwargs: Any) -> Any:
    """``JointDPGLMBandit(horizon=None)``: doubling epochs from ``first_horizon`` (:mod:`dpglm.policies.anytime`).

    Each epoch restarts from scratch, so ``epoch_budget="parallel"`` (each epoch the whole budget) applies;
    ``"sequential"`` gives epoch k the public share 1/(k(k+1)).
    """
    from dpglm.policies.anytime import DoublingEpochs, check_epoch_budget

    check_epoch_budget(epoch_budget)
    chosen, _, _ = joint_dp_ledger(ledger, epsilon, delta)
    if not isinstance(chosen, Ledger):
        raise TypeError("ledger must be an accounting.Ledger for horizon=None")
    rng = check_generator(rng)
    fam = get_family(family)
    # Every public argument checked now, before any epoch's split: a throwaway plan on an in-memory copy
    # of the budget (the first epoch would otherwise allocate its share and then refuse).
    JointDPGLMBandit(fam, d, check_size("first_horizon", first_horizon), S, rng=np.random.default_rng(0),
                     ledger=Ledger(chosen.remaining), **kwargs)

    def build(epoch_horizon: int, account: Account, epoch_rng: np.random.Generator) -> JointDPGLMBandit:
        return JointDPGLMBandit(fam, d, epoch_horizon, S, rng=epoch_rng, ledger=account, **kwargs)

    return DoublingEpochs(build, check_dimension(d), ledger=chosen, first_horizon=first_horizon, rng=rng,
                          epoch_budget=epoch_budget, reward_bound=fam.reward_bound, name="Private-GLM (anytime)")
