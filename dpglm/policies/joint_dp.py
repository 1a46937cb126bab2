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
``diagnostics()`` records ``criterion_I`` rounds against ``refits_o`` / ``refused_o``
(θ̂_o refits made / refused).

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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from accounting import ZCDP, ApproxDP, BudgetExceeded, Ledger
from dpglm._validation import check_generator, check_int, check_positive, check_probability
from dpglm.glm import GLMFamily, get_family
from dpglm.policies.rarely_switching import (
    _NORM_SQ_BOUND,
    Constraint,
    ExactDesign,
    RarelySwitchingBandit,
    RarelySwitchingParameters,
    kappa_bound,
    kappa_star_bound,
    paper_floor,
)
from dpglm.policies.tight_plan import (
    O_SHARE,
    POOL_CURRENCY,
    REFIT_STEPS,
    TREE_SHARE,
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
from mechanisms import Release
from mechanisms.tree import BinaryTreeMechanism, tree_depth

__all__ = [
    "PRESETS",
    "DPSGDEstimator",
    "JointDPGLMBandit",
    "TreeDesign",
    "joint_dp_parameters",
    "planned_switches",
    "tree_noise_bound",
]

PRESETS = ("tight", "paper-simulation", "calibrated", "theory")


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
    for name, value in (("d", d), ("horizon", horizon)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    S = float(S)
    if not math.isfinite(S) or S <= 0:
        raise ValueError(f"S must be a finite number > 0, got {S}")
    epsilon = float(epsilon)
    if not math.isfinite(epsilon) or epsilon <= 0:
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon}")
    delta = float(delta)
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    R = float(family.reward_bound)
    kappa = kappa_bound(family, S)
    kstar = kappa_star_bound(family, S)
    zeta = delta
    if preset == "theory":
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
    if preset in ("paper-simulation", "calibrated"):
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
    raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")


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


class TreeDesign:
    """``λI`` plus the binary-tree release of ``Σ leaves`` (paper §J.3, Alg. 2 lines 7, 16).

    Every round appends exactly one leaf (zero if the round belongs to the other
    tree), so a release exists for every t. :attr:`release` is the last
    :class:`~mechanisms.Release`; :attr:`matrix` is ``λI + release.value``.
    """

    def __init__(self, tree: BinaryTreeMechanism, lam: float) -> None:
        self.tree = tree
        d = tree.shape[0]
        self._zero = np.zeros((d, d))
        self._lam_eye = lam * np.eye(d)
        self.release: Release | None = None
        self._matrix = self._lam_eye.copy()
        self._matrix.setflags(write=False)
        self.version = 0

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix

    def append(self, leaf: np.ndarray | None) -> None:
        self.release = self.tree.append(self._zero if leaf is None else leaf)
        matrix = self._lam_eye + self.release.value
        matrix.setflags(write=False)
        self._matrix = matrix
        self.version += 1


class DPSGDEstimator:
    """Refits by projected DP-SGD, each charging a fixed zCDP cost to its account (a filter).

    paper: Alg. 2 lines 7 and 12, §6 "Optimizer and loss details" (ρ per call, at most
    c calls). Each call costs ``account budget / planned_refits``; once the account
    refuses (:class:`accounting.BudgetExceeded`), :meth:`fit` returns ``None`` and the
    estimate it feeds stops updating.
    """

    def __init__(
        self,
        dpsgd: Any,
        account: Any,
        planned_refits: int,
        *,
        steps: int,
        lr: float,
        lam: float,
        batch_size: int | None = None,
        cost_per_refit: Any = None,
        preconditioner: Callable[[int], np.ndarray] | None = None,
    ) -> None:
        from mechanisms.optim import BallProjection, EllipsoidProjection

        if isinstance(planned_refits, bool) or not isinstance(planned_refits, int) or planned_refits < 1:
            raise ValueError(f"planned_refits must be an int >= 1, got {planned_refits!r}")
        self._ball, self._ellipsoid = BallProjection, EllipsoidProjection
        self.dpsgd = dpsgd
        self.account = account
        self.planned_refits = planned_refits
        if cost_per_refit is None:
            cost_per_refit = ZCDP(Fraction(account.budget.rho) / planned_refits)
        self.cost_per_refit = cost_per_refit
        self.preconditioner = preconditioner
        self.steps, self.lr, self.lam, self.batch_size = steps, lr, lam, batch_size
        self.last_release: Release | None = None

    def fit(
        self, X: np.ndarray, y: np.ndarray, constraint: Constraint, theta0: np.ndarray, rounds: int
    ) -> np.ndarray | None:
        """One refit on the objective ``(1/N)[Σ ℓ + λ/2‖θ‖²]`` with the public ``N = rounds``.

        The refit sets T_o and [t−1]∖T_o gain or lose user t's row under a neighbouring
        data set (its round can switch criterion), so their sizes are not public: the
        normaliser N is the round count, and the clipped-sum sensitivity 2C covers
        replace, add and remove (DPSGD ``normalizer``).
        """
        if constraint.metric is None:
            projection = self._ball(constraint.radius, constraint.centre)
        else:
            projection = self._ellipsoid(constraint.centre, constraint.metric, constraint.radius)
        try:
            release = self.dpsgd.fit(
                X,
                y,
                steps=self.steps,
                lr=self.lr,
                projection=projection,
                cost=self.cost_per_refit,
                batch_size=self.batch_size,
                theta0=projection(np.asarray(theta0, dtype=float)),
                lam=self.lam,
                normalizer=float(max(rounds, 1)),
                preconditioner=None if self.preconditioner is None else self.preconditioner(max(rounds, 1)),
            )
        except BudgetExceeded:
            return None
        self.last_release = release
        return np.array(release.value)


class JointDPGLMBandit(RarelySwitchingBandit):
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
    S : float
        Known bound on ‖θ*‖ (radius of Θ_I).
    epsilon : float > 0
    delta : float in (0, 1)
        The asked (ε, δ); the ledger's total guarantee never exceeds it.
    rng : numpy.random.Generator
        Source of all noise (trees and DP-SGD).
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
    optimizer_backend : {"vectorised", "opacus"}
        DP-SGD implementation (same noise and privacy; vectorised is faster). Not
        where work runs: that is the experiments' engine (docs/engine.md).
    tree_share, o_share, noise_term : float, optional
        ``tight`` only: the pool's tree share, θ̂_o's share of the refits, Criterion II's
        noise term (defaults :data:`~dpglm.policies.tight_plan.TREE_SHARE` etc.).

    Attributes
    ----------
    ledger : accounting.Ledger
        Split ``tree`` / ``switching`` / ``optimizer``; :meth:`accounting.Ledger.report`.
    """

    name = "Private-GLM"

    def __init__(
        self,
        family: GLMFamily | str,
        d: int,
        horizon: int,
        S: float,
        epsilon: float,
        delta: float,
        rng: np.random.Generator,
        *,
        preset: str = "tight",
        params: RarelySwitchingParameters | None = None,
        clip: float = 1.0,
        steps: int | None = None,
        lr: float | None = None,
        refits_tau: int | None = None,
        refits_o: int | None = None,
        optimizer_backend: str = "vectorised",
        tree_share: float | None = None,
        o_share: float | None = None,
        noise_term: float | None = None,
    ) -> None:
        from mechanisms.optim import DPSGD

        d, horizon, S = check_int("d", d), check_int("horizon", horizon), check_positive("S", S)
        epsilon, delta = check_positive("epsilon", epsilon), check_probability("delta", delta)
        family = get_family(family)
        rng = check_generator(rng)
        if preset not in PRESETS:
            raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
        if family.name not in ("logistic", "probit"):
            raise ValueError(f"family must be 'logistic' or 'probit' for DP-SGD refits, got {family.name!r}")
        if preset == "tight":
            self._init_tight(
                family, d, horizon, S, epsilon, delta, rng, params=params, clip=clip, steps=steps, lr=lr,
                refits_tau=refits_tau, refits_o=refits_o, optimizer_backend=optimizer_backend, tree_share=tree_share,
                o_share=o_share, noise_term=noise_term,
            )
            return
        steps = 20 if steps is None else steps
        lr = 5.0 if lr is None else lr
        if refits_o is None:
            refits_o = 4 * d
        self.epsilon, self.delta = float(epsilon), float(delta)
        self.ledger = Ledger(ApproxDP(self.epsilon, self.delta))
        accounts = self.ledger.split(
            {"tree": 1, "switching": 1, "optimizer": 1}, currency={"tree": "zcdp", "optimizer": "zcdp"}
        )
        tree_account = accounts["tree"]
        tree_rng, sgd_o_rng, sgd_tau_rng = rng.spawn(3)

        # Replace-one sensitivities (Frobenius): ‖x xᵀ − x' x'ᵀ‖_F ≤ √2 for ‖x‖, ‖x'‖ ≤ 1;
        # H leaves are scaled by μ̇/e ≤ max_{|z|≤S} μ̇ / e, a public constant of the link.
        sens_v = math.sqrt(2.0)
        sens_h = math.sqrt(2.0) * float(np.max(family.dmu(np.linspace(-S, S, 20001)))) / math.e
        depth = tree_depth(horizon)
        rho_tree = Fraction(tree_account.budget.rho)
        # Same node σ for both trees: ρ_V : ρ_H = Δ_V² : Δ_H² (the joint Gaussian's split).
        rho_v = rho_tree * Fraction(sens_v**2) / (Fraction(sens_v**2) + Fraction(sens_h**2))

        def noise(rho: Fraction, sens: float) -> float:
            return tree_noise_bound(sens * math.sqrt(depth / (2 * float(rho))), depth, d, horizon, delta)

        def build(noise_v: float, noise_h: float) -> RarelySwitchingParameters:
            return joint_dp_parameters(
                family, d, horizon, S, epsilon, delta, preset=preset, tree_noise=(noise_v, noise_h)
            )

        given_params = params is not None
        calibrate = params is None and preset == "calibrated"
        if params is None:
            params = build(noise(rho_v, sens_v), noise(rho_tree - rho_v, sens_h))
        # ‖x‖²_{V⁻¹} ≤ ‖x‖²/floor_v once V's eigenvalues are floored, and the policy accepts
        # ‖x‖² up to _NORM_SQ_BOUND: above that threshold Criterion I can never fire, and
        # then nothing is spent on V or θ̂_o.
        self.exploration_possible = params.exploration_threshold <= _NORM_SQ_BOUND / params.floor_v
        if self.exploration_possible and params.refit_o_factor <= 1:
            # A released V moves every round: with c_o = 1 every round would ask for a refit.
            raise ValueError(
                f"params.refit_o_factor must be > 1 for the private policy, got {params.refit_o_factor!r}"
            )
        if self.exploration_possible:
            v_tree = BinaryTreeMechanism(
                tree_account, horizon, (d, d), sens_v, tree_rng, cost=ZCDP(rho_v), psd=True
            )
            h_tree = BinaryTreeMechanism(tree_account, horizon, (d, d), sens_h, tree_rng, psd=True)
            accounts["switching"].charge_analysis(
                accounts["switching"].budget,
                reason=(
                    "paper Lemma 6.1 (Lemma J.5): T_o \\ {t} depends on user t only through the "
                    "V-tree release, which is (ε/3, δ/3)-DP as part of the tree account"
                ),
            )
            opt = accounts["optimizer"].split({"theta_o": 1, "theta_tau": 1})
        else:
            v_tree = None
            h_tree = BinaryTreeMechanism(tree_account, horizon, (d, d), sens_h, tree_rng, psd=True)
            opt = accounts["optimizer"].split({"theta_tau": 1})
        if calibrate:
            # λ from the σ the trees actually use (rounded up by the mechanism); without a
            # V-tree, V stays at the λ it would have had (it only widens elimination).
            if v_tree is None:
                bound_v = noise(rho_v, sens_v)
            else:
                bound_v = tree_noise_bound(v_tree.sigma, depth, d, horizon, delta)
            params = build(bound_v, tree_noise_bound(h_tree.sigma, depth, d, horizon, delta))
        design_v: Any = TreeDesign(v_tree, params.lam) if v_tree is not None else ExactDesign(d, params.lam)
        if refits_tau is None:
            refits_tau = planned_switches(params, horizon, sens_h / math.sqrt(2.0), d)
        loss = family.name
        estimator_tau = DPSGDEstimator(
            DPSGD(opt["theta_tau"], loss, sgd_tau_rng, clip=clip, engine=optimizer_backend),
            opt["theta_tau"],
            refits_tau,
            steps=steps,
            lr=lr,
            lam=params.fit_lam,
        )
        if self.exploration_possible:
            estimator_o: Any = DPSGDEstimator(
                DPSGD(opt["theta_o"], loss, sgd_o_rng, clip=clip, engine=optimizer_backend),
                opt["theta_o"],
                refits_o,
                steps=steps,
                lr=lr,
                lam=params.fit_lam,
            )
        else:
            estimator_o = _NeverCalled()
        super().__init__(
            family,
            d,
            params,
            design_v=design_v,
            design_h=TreeDesign(h_tree, params.lam_h),
            estimator_o=estimator_o,
            estimator_tau=estimator_tau,
            horizon=horizon,
        )
        self.preset = preset if not given_params else "custom"

    def _init_tight(self, family: GLMFamily, d: int, horizon: int, S: float, epsilon: float, delta: float,
                    rng: np.random.Generator, *, params: RarelySwitchingParameters | None, clip: float,
                    steps: int | None, lr: float | None, refits_tau: int | None, refits_o: int | None,
                    optimizer_backend: str, tree_share: float | None, o_share: float | None,
                    noise_term: float | None) -> None:
        """``preset="tight"``: every Gaussian release on one pool (:mod:`dpglm.policies.tight_plan`)."""
        from mechanisms.optim import DPSGD

        self.epsilon, self.delta = float(epsilon), float(delta)
        self.ledger = Ledger(ApproxDP(self.epsilon, self.delta))
        pool = self.ledger.split({"pool": 1}, currency={"pool": POOL_CURRENCY})["pool"]
        mu_sq_pool = pool_mu_sq(pool)
        tree_rng, sgd_o_rng, sgd_tau_rng = rng.spawn(3)
        leaf_h = link_leaf_bound(family, S)
        sens_v, sens_h = math.sqrt(2.0), math.sqrt(2.0) * leaf_h  # replace-one, Frobenius (as above)
        depth = tree_depth(horizon)
        shares = {"tree_share": TREE_SHARE if tree_share is None else tree_share,
                  "o_share": O_SHARE if o_share is None else o_share}

        def bound(mu_sq: float, sens: float) -> float:  # ‖noise‖_op bound of a tree costing μ² = LΔ²/σ²
            return 0.0 if mu_sq <= 0 else tree_noise_bound(sens * math.sqrt(depth / mu_sq), depth, d, horizon, delta)

        given = params is not None
        draft = plan_tight(mu_sq_pool, exploration=True, refits_o=1, refits_tau=1, **shares)
        noise_v, noise_h = (0.0, 0.0) if given else (bound(draft.mu_sq_v, sens_v), bound(draft.mu_sq_h, sens_h))
        if params is None:
            params = tight_parameters(family, d, horizon, S, delta, noise_v, noise_h, noise_term=noise_term)
        self.exploration_possible = params.exploration_threshold <= _NORM_SQ_BOUND / params.floor_v
        if self.exploration_possible and params.refit_o_factor <= 1:
            raise ValueError(
                f"params.refit_o_factor must be > 1 for the private policy, got {params.refit_o_factor!r}"
            )
        if not self.exploration_possible and not given:
            # No V-tree: V stays the public λ_V I it would have had (Criterion I cannot fire
            # on it), and H gets the whole tree share.
            draft = plan_tight(mu_sq_pool, exploration=False, refits_o=1, refits_tau=1, **shares)
            noise_h = bound(draft.mu_sq_h, sens_h)
            params = keep_v(tight_parameters(family, d, horizon, S, delta, noise_v, noise_h, exploration=False,
                                              noise_term=noise_term), params)
        if refits_tau is None:
            refits_tau = planned_refits(params, horizon, d, leaf_h, noise_h, which="tau")
        if refits_o is None:
            refits_o = planned_refits(params, horizon, d, 1.0, noise_v, which="o")
        self.plan = plan = plan_tight(mu_sq_pool, exploration=self.exploration_possible, refits_o=refits_o,
                                      refits_tau=refits_tau, **shares)
        v_tree: Any = None
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
        steps = REFIT_STEPS if steps is None else steps
        lr = 1.0 if lr is None else lr
        design_v: Any = TreeDesign(v_tree, params.lam) if v_tree is not None else ExactDesign(d, params.lam)
        design_h = TreeDesign(h_tree, params.lam_h)
        estimator_tau = DPSGDEstimator(
            DPSGD(pool, family.name, sgd_tau_rng, clip=clip, engine=optimizer_backend), pool, refits_tau,
            steps=steps, lr=lr,
            lam=params.fit_lam, cost_per_refit=gaussian_cost(pool, plan.mu_sq_refit_tau),
            preconditioner=newton_metric(design_h, params.floor_h, math.e),
        )
        estimator_o: Any = _NeverCalled()
        if plan.exploration:
            estimator_o = DPSGDEstimator(
                DPSGD(pool, family.name, sgd_o_rng, clip=clip, engine=optimizer_backend), pool, refits_o,
                steps=steps, lr=lr,
                lam=params.fit_lam, cost_per_refit=gaussian_cost(pool, plan.mu_sq_refit_o),
                preconditioner=newton_metric(design_v, params.floor_v, 1.0 / kappa_star_bound(family, S)),
            )
        RarelySwitchingBandit.__init__(self, family, d, params, design_v=design_v, design_h=design_h,
                                       estimator_o=estimator_o, estimator_tau=estimator_tau, horizon=horizon)
        self.preset = "tight" if not given else "custom"

    def diagnostics(self) -> dict[str, Any]:
        """Criterion counts, refits made/refused, and the ledger's total (ε, δ)."""
        out = super().diagnostics()
        guarantee = self.ledger.guarantee()
        out["guarantee_epsilon"] = float(guarantee.eps)
        out["guarantee_delta"] = float(getattr(guarantee, "delta", 0.0))
        return out


class _NeverCalled:
    """Estimator slot for θ̂_o when Criterion I provably cannot fire (no budget behind it)."""

    def fit(
        self, X: np.ndarray, y: np.ndarray, constraint: Constraint, theta0: np.ndarray, rounds: int
    ) -> np.ndarray | None:
        raise RuntimeError("Criterion I cannot fire under these parameters; θ̂_o is never refitted")
