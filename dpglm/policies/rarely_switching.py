"""The rarely-switching GLM bandit family: one core, exact or private ingredients.

Sawarni et al. (2024)'s RS-GLinCB and the paper's joint-DP Algorithm 2 run the same
loop (paper §6, Alg. 2):

* **θ̂_o refit** (at the start of the round): if ``V`` has grown in some direction since
  the ``V_o`` of the last refit, ``λ_max(V_o^{-1/2} V_t V_o^{-1/2}) > c_o``, refit ``θ̂_o``
  on T_o over ``Θ_I = {‖θ‖ ≤ S}`` and set ``V_o ← V_t``. With exact ``V`` and
  ``c_o = 1`` this is Alg. 2, line 7 (refit after every exploration round: only those
  change ``V``);
* **Criterion II** (line 11, also at the start of the round): if the design matrix
  ``H_t`` has grown enough since the last switch τ (``H_t ⋠ c·H_τ`` in the paper;
  ``det H_t > c·det H_τ`` in Sawarni et al.), switch: ``H_τ ← H_t`` and refit ``θ̂_τ``
  on the other rounds over ``Θ_II = {‖θ − θ̂_o‖_{V_o} ≤ w}``;
* **Criterion I** (Alg. 2, line 4): if some arm has ``‖x‖²_{V⁻¹} ≥ 1/(γ²κR²)``, play the
  most uncertain one and add it to the exploration set T_o and to ``V``; otherwise
* eliminate the arms whose ``UCB_o(x) = ⟨x, θ̂_o⟩ + w‖x‖_{V_o⁻¹}`` is below the best
  ``LCB_o``, and play ``argmax ⟨x, θ̃⟩ + β‖x‖_{H_τ⁻¹}`` (§6.1); the round then enters
  ``H`` with weight ``μ̇(⟨x, θ̂_o⟩)/e`` (line 16). ``V_o`` (the ``V`` θ̂_o was fitted
  at; ``= V_t`` in the paper's schedule) is the metric of θ̂_o's confidence set, so it
  also defines ``Θ_II``.

The leaves ``x xᵀ`` are formed from ``x/max(1, ‖x‖)``: contexts are accepted up to
``‖x‖ ≤ 1 + 1e-9`` (float-normalised unit vectors), and the clip keeps every leaf inside
the unit-ball bound the private trees' sensitivity assumes (a per-user map, so it
changes no sensitivity).

Both refit rules read only ``V`` and ``H``, never the current arm set, so with released
``V``, ``H`` the refit times are post-processing of the releases. The papers decide
them from the raw context of the current user: Alg. 2 refits θ̂_o inside each exploration
round (line 7) and checks Criterion II only in rounds where Criterion I did not fire
(line 11 is in the ``else`` branch), so in both the timing revealed whether the current
user explored. On exact ``V``, ``H`` the reordering changes nothing but the θ̂_o centre
of ``Θ_II`` when exploration rounds fall between H's growth and the next
non-exploration round (exact ``H`` is unchanged in exploration rounds).

What differs between the two algorithms is only where the ingredients come from: the
matrices ``V`` and ``H`` are exact running sums (:class:`ExactDesign`) or binary-tree
releases (:class:`dpglm.policies.joint_dp_ingredients.TreeDesign`); the estimates are the
regularised MLE (:class:`MLEEstimator`) or DP-SGD (:class:`dpglm.policies.joint_dp_ingredients.DPSGDEstimator`).
Both plug into :class:`RarelySwitchingBandit` through the two small protocols below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dpglm._validation import check_horizon_left, check_int, check_round_order, real_array
from dpglm.glm import GLMFamily, get_family
from dpglm.linalg import FlooredSpectrum, floored_inverse
from dpglm.policies.base import _NORM_TOLERANCE, Policy, clip_to_unit_ball
from dpglm.policies.rs_parameters import (
    RarelySwitchingParameters,
    kappa_bound,
    kappa_star_bound,
    paper_floor,
    rs_glinucb_parameters,
)
from mechanisms.tree import OuterProduct

__all__ = [
    "Constraint",
    "DesignStatistic",
    "Estimator",
    "ExactDesign",
    "MLEEstimator",
    "RSGLinUCB",
    "RarelySwitchingBandit",
    "RarelySwitchingParameters",
    "kappa_bound",
    "kappa_star_bound",
    "paper_floor",
    "rs_glinucb_parameters",
]

_NORM_SQ_BOUND = (1.0 + _NORM_TOLERANCE) ** 2  # the largest ‖x‖² Policy._check_arms accepts


# -- pluggable ingredients --------------------------------------------------------------
@dataclass(frozen=True)
class Constraint:
    """The set a refit minimises over: ``{θ : ‖θ − centre‖_M ≤ radius}``.

    ``metric=None`` is the Euclidean ball (``Θ_I``, paper §6); otherwise the ellipsoid
    ``Θ_II = {‖θ − θ̂_o‖_V ≤ γκ}`` with ``M = V``.
    """

    centre: np.ndarray
    radius: float
    metric: np.ndarray | None = None

    def project_metric(self, theta: np.ndarray) -> np.ndarray:
        """Projection of θ onto the set in the set's own metric (radial scaling)."""
        diff = np.asarray(theta, dtype=float) - self.centre
        norm = math.sqrt(float(diff @ diff if self.metric is None else diff @ self.metric @ diff))
        if norm <= self.radius:
            return np.asarray(theta, dtype=float)
        return self.centre + diff * (self.radius / norm)


class DesignStatistic(Protocol):
    """A running design matrix ``λI + Σ leaves`` (exact) or its private release."""

    version: int
    """Incremented whenever :attr:`matrix` changes (factorizations are cached on it)."""

    @property
    def matrix(self) -> np.ndarray:
        """The current (symmetric) matrix the policy decides with."""

    def append(self, leaf: np.ndarray | None) -> None:
        """Add round t's leaf (``None``: this round contributes nothing to the sum)."""


class Estimator(Protocol):
    """Refits an estimate of θ* from (X, y) over a constraint set."""

    def fit(
        self, X: np.ndarray, y: np.ndarray, constraint: Constraint, theta0: np.ndarray, rounds: int
    ) -> np.ndarray | None:
        """The new estimate, or ``None`` if it may not be updated (budget refused).

        ``rounds`` is the number of rounds played so far: public, unlike ``len(X)``
        (which round belongs to which refit set depends on the data). ``X`` may have no
        rows: a refit is decided from released values only, never from whether its
        data set is empty.
        """


class ExactDesign:
    """Exact ``λI + Σ_s leaf_s`` (non-private RS-GLinCB, Sawarni et al. 2024)."""

    def __init__(self, d: int, lam: float) -> None:
        self._matrix = lam * np.eye(d)
        self._matrix.setflags(write=False)
        self.version = 0

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix

    def append(self, leaf: np.ndarray | None) -> None:
        if leaf is None:
            return
        matrix = self._matrix + leaf
        matrix.setflags(write=False)
        self._matrix = matrix
        self.version += 1


class MLEEstimator:
    """Regularised MLE (paper §4 loss ``L(θ; λ)``) over the constraint set.

    On the ball ``Θ_I`` it is the exact constrained minimiser (:meth:`GLMFamily.fit_mle`);
    on the ellipsoid ``Θ_II`` the unconstrained minimiser projected in the V metric.
    With no rows (and λ > 0) the minimiser is that of the ridge alone, 0, then projected.
    """

    def __init__(self, family: GLMFamily, lam: float) -> None:
        self.family = family
        self.lam = float(lam)

    def fit(
        self, X: np.ndarray, y: np.ndarray, constraint: Constraint, theta0: np.ndarray, rounds: int
    ) -> np.ndarray:
        if constraint.metric is None and not np.any(constraint.centre):
            return self.family.fit_mle(X, y, lam=self.lam, radius=constraint.radius, theta0=theta0)
        theta = self.family.fit_mle(X, y, lam=self.lam, theta0=theta0)
        return constraint.project_metric(theta)


def _log_det(matrix: np.ndarray) -> float:
    """log det of a symmetric matrix (−inf unless positive); closed form for d ≤ 3 (speed)."""
    d = matrix.shape[0]
    if d <= 3:
        m = matrix.tolist()
        if d == 1:
            det = m[0][0]
        elif d == 2:
            det = m[0][0] * m[1][1] - m[0][1] * m[1][0]
        else:
            det = (m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
                   - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
                   + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]))
        return math.log(det) if det > 0 else -math.inf
    sign, logdet = np.linalg.slogdet(matrix)
    return float(logdet) if sign > 0 else -math.inf


def _extended(stacked: np.ndarray, rows: list) -> np.ndarray:
    """``stacked`` (rows ``[:len(stacked)]`` as one read-only array) extended by the rest of ``rows``.

    A refit converts only the rows appended since the last one: stacking the whole list
    again cost more than the Newton solve (0.7 ms per refit at 2500 rows).
    """
    if len(rows) == len(stacked):
        return stacked
    new = np.array(rows[len(stacked):], dtype=float).reshape((-1,) + stacked.shape[1:])
    out = np.concatenate([stacked, new])
    out.setflags(write=False)
    return out


# -- the loop ---------------------------------------------------------------------------
class RarelySwitchingBandit(Policy):
    """The rarely-switching loop of paper Alg. 2 / Sawarni et al. Alg. 2 (module docstring).

    Parameters
    ----------
    family : GLMFamily or str
    d : int
    params : RarelySwitchingParameters
    design_v, design_h : DesignStatistic
        Sources of ``V`` (Criterion I rounds) and ``H`` (the other rounds).
    estimator_o, estimator_tau : Estimator
        Refits of ``θ̂_o`` on T_o over ``Θ_I`` and of ``θ̂_τ`` on [t−1]∖T_o over ``Θ_II``.

    Notes
    -----
    Every refit is decided at the start of a round from ``V`` and ``H`` alone (the θ̂_o
    growth rule and Criterion II, both before Criterion I), and is made even if its data
    set is empty, so on released ``V``, ``H`` the refit times are post-processing of the
    releases. Paper Alg. 2 decides both from whether the current user's raw context
    triggers Criterion I (module docstring; :class:`dpglm.policies.joint_dp.JointDPGLMBandit`).
    """

    name = "rarely-switching"

    def __init__(
        self,
        family: GLMFamily | str,
        d: int,
        params: RarelySwitchingParameters,
        *,
        design_v: DesignStatistic,
        design_h: DesignStatistic,
        estimator_o: Estimator,
        estimator_tau: Estimator,
        horizon: int | None = None,
    ) -> None:
        self.family = get_family(family)
        self.horizon = None if horizon is None else check_int("horizon", horizon)
        super().__init__(d, reward_bound=self.family.reward_bound)
        if not isinstance(params, RarelySwitchingParameters):
            raise TypeError(f"params must be RarelySwitchingParameters, got {type(params).__name__}")
        self.params = params
        self.design_v, self.design_h = design_v, design_h
        self.estimator_o, self.estimator_tau = estimator_o, estimator_tau
        self.theta_o = np.zeros(d)
        self.theta_tau = np.zeros(d)
        # Data kept only to hand to the estimators (the mechanisms of the private path).
        self._x_o: list[np.ndarray] = []
        self._y_o: list[float] = []
        self._x_h: list[np.ndarray] = []
        self._y_h: list[float] = []
        self._stacked_o = (np.empty((0, d)), np.empty(0))  # the lists above as arrays, kept
        self._stacked_h = (np.empty((0, d)), np.empty(0))  # up to the last refit (_extended)
        self._arm_map: np.ndarray | None = None
        self._width_factors = np.array([params.beta, params.elimination_width])
        self._theta_choice = np.zeros(d)
        self._v_version = -1
        self._v_inv = np.eye(d) / params.lam
        self._set_v_o(design_v.matrix)
        self._v_checked = design_v.version
        self._set_tau(design_h.matrix)
        self._h_checked = design_h.version
        self._pending: tuple[np.ndarray, bool] | None = None
        self.t = 0
        self.counts = {
            "criterion_I": 0,
            "criterion_II": 0,
            "refits_o": 0,
            "refits_tau": 0,
            "refused_o": 0,
            "refused_tau": 0,
        }

    # -- cached factorizations --------------------------------------------------------
    def _set_tau(self, h_tau: np.ndarray) -> None:
        """Cache the floored ``H_τ``'s inverse, whitening W (``W H_τ Wᵀ = I``) and log-det."""
        spectrum = FlooredSpectrum.of(h_tau, self.params.floor_h)
        self._h_tau_inv = spectrum.inverse
        self._h_tau_whiten = spectrum.whitening
        self._h_tau_logdet = spectrum.logdet
        self._arm_map = None

    def _set_v_o(self, v_o: np.ndarray) -> None:
        """Cache the floored ``V_o`` of θ̂_o's last refit, its inverse and whitening."""
        spectrum = FlooredSpectrum.of(v_o, self.params.floor_v)
        self._v_o = spectrum.matrix
        self._v_o_inv = spectrum.inverse
        self._v_o_whiten = spectrum.whitening
        self._arm_map = None

    def _current_v_inv(self) -> np.ndarray:
        if self.design_v.version != self._v_version:
            self._v_inv = floored_inverse(self.design_v.matrix, self.params.floor_v)
            self._v_version = self.design_v.version
            self._arm_map = None
        return self._v_inv

    def _quadratic_forms(self, arms: np.ndarray) -> np.ndarray:
        """``‖x‖², ‖x‖²_{V⁻¹}, ‖x‖²_{H_τ⁻¹}, ‖x‖²_{V_o⁻¹}`` of every arm, shape (K, 4).

        One product with the cached ``[I | V⁻¹ | H_τ⁻¹ | V_o⁻¹]`` (rebuilt when a factor
        changes) replaces four: on d = 3, K = 20 a round costs per numpy call, not per
        flop (hence also ``.dot``, cheaper to call than ``@``, and ``v[v.argmax()]`` for
        maxima). Each block of the product equals ``arms @ M`` bit for bit, so the forms
        are those of ``(arms @ M * arms).sum(axis=1)``.
        """
        v_inv = self._current_v_inv()  # drops the cached map if V changed
        if self._arm_map is None:
            self._arm_map = np.concatenate([np.eye(self.d), v_inv, self._h_tau_inv, self._v_o_inv], axis=1)
        k, d = arms.shape
        return np.add.reduce(arms.dot(self._arm_map).reshape(k, 4, d) * arms[:, None, :], axis=2)

    def _criterion_two(self, h_t: np.ndarray) -> bool:
        """Paper Alg. 2, line 11 (``H_t ⋠ cH_τ``) or Sawarni's ``det H_t > c det H_τ``."""
        c = self.params.switch_factor
        if self.params.switch_rule == "loewner":
            w = self._h_tau_whiten
            return bool(np.linalg.eigvalsh(w @ h_t @ w.T)[-1] > c)
        return _log_det(h_t) > math.log(c) + self._h_tau_logdet

    # -- the protocol -----------------------------------------------------------------
    def choose(self, arms: np.ndarray) -> int:
        """Paper Alg. 2, lines 3–14: θ̂_o refit, Criterion II (V, H only), Criterion I, else elimination and UCB."""
        arms = real_array("arms", arms)  # a complex arm is refused, not cast
        if arms.ndim != 2 or arms.shape[1] != self.d or arms.shape[0] < 1:
            self._check_arms(arms)  # raises the boundary's ValueError
        check_round_order(self._pending, "choose")
        if self.horizon is not None:
            check_horizon_left(self.t, self.horizon)
        p = self.params
        # θ̂_o refit (Alg. 2, line 7, moved to the round start): V changes only when a
        # leaf entered it, and an unchanged V cannot newly satisfy the growth rule.
        if self.design_v.version != self._v_checked:
            self._v_checked = self.design_v.version
            v_t = self.design_v.matrix
            w = self._v_o_whiten
            if np.linalg.eigvalsh(w @ v_t @ w.T)[-1] > p.refit_o_factor:
                self._refit_o(v_t)
        # Criterion II in every round, before Criterion I (line 11 is in its else branch in the
        # paper, which let the current user's exploration shift the switch). H changes only
        # when a leaf entered it: an unchanged H cannot newly satisfy line 11.
        if self.design_h.version != self._h_checked:
            self._h_checked = self.design_h.version
            h_t = self.design_h.matrix
            if self._criterion_two(h_t):  # Criterion II (line 11)
                self.counts["criterion_II"] += 1
                self._set_tau(h_t)
                self._refit_tau()
        forms = self._quadratic_forms(arms)
        norm_sq = forms[:, 0]
        if not norm_sq[norm_sq.argmax()] <= _NORM_SQ_BOUND:  # ‖x‖ > 1 or NaN (argmax finds NaN)
            self._check_arms(arms)  # the boundary check and its ValueError
        v_norm_sq = forms[:, 1]  # ‖x‖²_{V⁻¹} for every arm
        best = int(v_norm_sq.argmax())
        if v_norm_sq[best] >= p.exploration_threshold:  # Criterion I (line 4)
            self.counts["criterion_I"] += 1
            self._pending = (clip_to_unit_ball(arms[best]), True)
            return best
        # β‖x‖_{H_τ⁻¹} and w‖x‖_{V_o⁻¹} of every arm, shape (K, 2)
        widths = np.sqrt(np.maximum(forms[:, 2:], 0.0)) * self._width_factors
        ucb = arms.dot(self._theta_choice) + widths[:, 0]
        if self.counts["refits_o"]:
            # Elimination (line 13) in the metric of θ̂_o's confidence set, V_o. With
            # θ̂_o = 0 (never refitted) it keeps every arm: UCB_o = w‖x‖ ≥ 0 ≥ max LCB_o.
            width = widths[:, 1]
            centre_o = arms.dot(self.theta_o)
            lcb_o = centre_o - width
            ucb[centre_o + width < lcb_o[lcb_o.argmax()]] = -np.inf
        index = int(ucb.argmax())  # line 14
        self._pending = (clip_to_unit_ball(arms[index]), False)
        return index

    def observe(self, reward: float) -> None:
        """Paper Alg. 2, lines 5–6 and 15–16: feed ``V`` or ``H`` (θ̂_o is refitted in :meth:`choose`)."""
        if self._pending is None:
            raise ValueError("choose(arms) must be called before observe(reward)")
        r = self._check_reward(reward)
        x, explored = self._pending
        self._pending = None
        self.t += 1
        if explored:
            self._x_o.append(x)
            self._y_o.append(r)
            self.design_v.append(OuterProduct(x))  # x xᵀ, formed (and known PSD) by the tree
            self.design_h.append(None)
        else:
            self._x_h.append(x)
            self._y_h.append(r)
            weight = float(self.family.dmu(x.dot(self.theta_o))) / math.e
            self.design_v.append(None)
            self.design_h.append(OuterProduct(x, weight))  # weight·x xᵀ, weight = μ̇/e ≥ 0

    def _refit_o(self, v_t: np.ndarray) -> None:
        """θ̂_o on T_o over Θ_I = {‖θ‖ ≤ S} (Alg. 2, line 7); on success ``V_o ← V_t``.

        A refused refit keeps θ̂_o and its metric ``V_o``, so the rule keeps asking (and
        the budget keeps refusing) at later rounds.
        """
        self._stacked_o, theta = self._fit(
            "o", self.estimator_o, self._stacked_o, self._x_o, self._y_o,
            Constraint(np.zeros(self.d), self.params.radius), self.theta_o,
        )
        if theta is not None:
            self.theta_o = theta
            self._set_v_o(v_t)
            self._set_theta_choice()

    def _refit_tau(self) -> None:
        """θ̂_τ on [t−1]∖T_o over Θ_II = {‖θ − θ̂_o‖_{V_o} ≤ w} (Alg. 2, line 12)."""
        self._stacked_h, theta = self._fit(
            "tau", self.estimator_tau, self._stacked_h, self._x_h, self._y_h,
            Constraint(self.theta_o.copy(), self.params.elimination_width, self._v_o), self.theta_tau,
        )
        if theta is not None:
            self.theta_tau = theta
            self._set_theta_choice()

    def _fit(self, name: str, estimator: Estimator, stacked: tuple[np.ndarray, np.ndarray],
             xs: list[np.ndarray], ys: list[float], constraint: Constraint, current: np.ndarray,
             ) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray | None]:
        """One refit of θ̂_``name``: extend the stacked data by the new rounds, fit, count it.

        Returns the extended data and the new estimate, or ``None`` if the estimator
        refused (its budget is spent): the caller then keeps the old estimate.
        """
        X, y = stacked = (_extended(stacked[0], xs), _extended(stacked[1], ys))
        theta = estimator.fit(X, y, constraint, current, self.t)
        if theta is None:
            self.counts[f"refused_{name}"] += 1
            return stacked, None
        self.counts[f"refits_{name}"] += 1
        return stacked, np.asarray(theta, dtype=float)

    def _set_theta_choice(self) -> None:
        """Cache the arm-choice estimate θ̂_τ or ``(θ̂_o + θ̂_τ)/2`` (§6.1; ``params.centre``)."""
        if self.params.centre == "tau":
            self._theta_choice = self.theta_tau
        else:
            self._theta_choice = 0.5 * (self.theta_o + self.theta_tau)

    def diagnostics(self) -> dict[str, Any]:
        """How often each criterion fired and how many refits were made or refused."""
        return dict(self.counts)


class RSGLinUCB(RarelySwitchingBandit):
    """Non-private RS-GLinCB (Sawarni et al. 2024, Alg. 2): exact ``V``, ``H`` and MLE refits.

    Parameters
    ----------
    family : GLMFamily or str
    d, horizon : int
    S : float
        Known bound on ‖θ*‖.
    delta : float in (0, 1)
        Failure probability in the confidence widths.
    preset : {"simulation", "theory"}
        See :func:`rs_glinucb_parameters`.
    params : RarelySwitchingParameters, optional
        Overrides the preset.
    """

    name = "RS-GLinUCB"

    def __init__(
        self,
        family: GLMFamily | str,
        d: int,
        horizon: int,
        S: float,
        *,
        delta: float = 0.02,
        preset: str = "simulation",
        params: RarelySwitchingParameters | None = None,
    ) -> None:
        family = get_family(family)
        preset_name = preset if params is None else "custom"
        if params is None:
            params = rs_glinucb_parameters(family, d, horizon, S, delta=delta, preset=preset)
        super().__init__(
            family,
            d,
            params,
            design_v=ExactDesign(d, params.lam),
            design_h=ExactDesign(d, params.lam_h),
            estimator_o=MLEEstimator(family, params.fit_lam),
            estimator_tau=MLEEstimator(family, params.fit_lam),
            horizon=horizon,
        )
        self.preset = preset_name
