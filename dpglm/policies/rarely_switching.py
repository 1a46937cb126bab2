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

from dpglm._validation import check_horizon_left, check_round_order, check_size
from dpglm.glm import GLMFamily, fit_mle, fit_mle_ball, get_family
from dpglm.glm_newton import RowBlocks
from dpglm.linalg import FlooredSpectrum, floored_inverse
from dpglm.policies.base import _NORM_TOLERANCE, Policy
from dpglm.policies.rs_parameters import (
    RarelySwitchingParameters,
    kappa_bound,
    kappa_star_bound,
    paper_floor,
    rs_glinucb_parameters,
)
from dpglm.policies.running import ExactDesign, Rows

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
_FLOAT = np.dtype(np.float64)


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

    def add_outer(self, x: np.ndarray, weight: float) -> None:
        """Add round t's leaf ``weight·x xᵀ`` (x the policy's clipped context, ``weight ≥ 0``)."""


class Estimator(Protocol):
    """Refits an estimate of θ* from the rows (x_s, y_s) over a constraint set."""

    def fit(
        self, rows: RowBlocks, constraint: Constraint, theta0: np.ndarray, rounds: int
    ) -> np.ndarray | None:
        """The new estimate, or ``None`` if it may not be updated (budget refused).

        ``rows`` are the refit set's rows in blocks (:class:`dpglm.glm_newton.RowBlocks`;
        ``rows.arrays()`` gives them contiguous). ``rounds`` is the number of rounds played
        so far: public, unlike ``rows.n`` (which round belongs to which refit set depends
        on the data). ``rows`` may be empty: a refit is decided from released values
        only, never from whether its data set is empty.
        """


class MLEEstimator:
    """Regularised MLE (paper §4 loss ``L(θ; λ)``) over the constraint set.

    On the ball ``Θ_I`` it is the exact constrained minimiser (:func:`dpglm.glm.fit_mle_ball`),
    warm-started from the previous estimate and its KKT multiplier ν (a refit adds a few rows
    to the last one's data, so two or three Newton solves replace a search for ν from
    scratch); on the ellipsoid ``Θ_II`` the unconstrained minimiser, warm-started from the
    last one, projected in the V metric. With no rows (and λ > 0) the minimiser is that of
    the ridge alone, 0, then projected.
    """

    def __init__(self, family: GLMFamily, lam: float) -> None:
        self.family = family
        self.lam = float(lam)
        self._nu: float | None = None  # the multiplier of the last ball fit (its warm start)
        self._free: np.ndarray | None = None  # the last unconstrained minimiser (Θ_II fits' warm start)

    def fit(
        self, rows: RowBlocks, constraint: Constraint, theta0: np.ndarray, rounds: int
    ) -> np.ndarray:
        if constraint.metric is None and not np.any(constraint.centre):
            # The policy's rows are float64 blocks of the right shapes: no checks, no copy.
            theta, self._nu = fit_mle_ball(self.family, rows, None, self.lam, float(constraint.radius),
                                           np.array(theta0, dtype=float), self._nu)
            return theta
        # The last unconstrained minimiser is the warm start (the previous estimate may be projected).
        start = theta0 if self._free is None or self._free.shape != np.shape(theta0) else self._free
        self._free = theta = fit_mle(self.family, rows, None, lam=self.lam, theta0=start)
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
        self.horizon = None if horizon is None else check_size("horizon", horizon)
        super().__init__(d, reward_bound=self.family.reward_bound)
        if not isinstance(params, RarelySwitchingParameters):
            raise TypeError(f"params must be RarelySwitchingParameters, got {type(params).__name__}")
        self.params = params
        self.design_v, self.design_h = design_v, design_h
        self.estimator_o, self.estimator_tau = estimator_o, estimator_tau
        self.theta_o = np.zeros(d)
        self.theta_tau = np.zeros(d)
        # Data kept only to hand to the estimators (the mechanisms of the private path):
        # 8·(d + 1) bytes a round (dpglm.policies.running.Rows).
        self._rows_o, self._rows_h = Rows(d), Rows(d)
        self._arm_map: np.ndarray | None = None
        self._width_sq = (params.beta**2, params.elimination_width**2)  # folded into the arm map
        self._theta_choice = np.zeros(d)
        self._set_v_o(design_v.matrix)
        self._v_checked = design_v.version
        # An exact H (running sum of PSD leaves) lets Criterion II skip its check while a
        # cheap upper bound on H's growth since τ says it cannot fire (_criterion_two).
        self._h_exact = isinstance(design_h, ExactDesign)
        self._loewner = params.switch_rule == "loewner"
        c = params.switch_factor
        self._h_skip_below = (c - 1.0 if self._loewner else math.log(c)) - 1e-9  # _criterion_two
        self._set_tau(design_h.matrix)
        self._h_checked = design_h.version
        self._limit = math.inf if self.horizon is None else self.horizon
        self._pending: tuple[np.ndarray, bool, float, float] | None = None
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
        self._h_growth = 0.0  # Σ over leaves since τ of w‖x‖²_{H_τ⁻¹} (loewner) or log(1 + w‖x‖²_{H_τ⁻¹})
        self._arm_map = None

    def _set_v_o(self, v_o: np.ndarray) -> None:
        """Cache the floored ``V_o`` of θ̂_o's last refit, its inverse and whitening.

        ``V_o`` is the current ``V`` (construction, or a refit at the start of a round), so
        its floored inverse is also the current ``V⁻¹`` (:meth:`_current_v_inv`, the same
        computation): kept for it, not decomposed again.
        """
        spectrum = FlooredSpectrum.of(v_o, self.params.floor_v)
        self._v_o = spectrum.matrix
        self._v_o_inv = self._v_inv = spectrum.inverse
        self._v_version = self.design_v.version
        self._v_o_whiten = spectrum.whitening
        self._arm_map = None

    def _current_v_inv(self) -> np.ndarray:
        if self.design_v.version != self._v_version:
            self._v_inv = floored_inverse(self.design_v.matrix, self.params.floor_v)
            self._v_version = self.design_v.version
            self._arm_map = None
        return self._v_inv

    def _arm_products(self, arms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``⟨x, θ̃⟩, ⟨x, θ̂_o⟩`` (2, K) and ``‖x‖², ‖x‖²_{V⁻¹}, β²‖x‖²_{H_τ⁻¹}, w²‖x‖²_{V_o⁻¹}`` (4, K).

        One product of the arms with the cached ``[I | V⁻¹ | β²H_τ⁻¹ | w²V_o⁻¹ | θ̃ | θ̂_o]``ᵀ
        (rebuilt when a factor changes) replaces six, and the four forms are one product with
        the arms and one sum over d. On d = 3, K = 20 a round costs per numpy call, not per
        flop (hence also ``.dot``, cheaper to call than ``@``, and ``v[v.argmax()]`` for
        maxima), and a call on a row costs less than on a column (issue 32: the arm-major
        layout's column slices were about a tenth of RS-GLinUCB's round in instructions), so
        everything is laid out quantity-major: each quantity a contiguous row of K. The
        widths' factors β and w are folded in, so a width is one square root.
        """
        v_inv = self._current_v_inv()  # drops the cached map if V changed
        d = self.d
        if self._arm_map is None:
            beta_sq, width_sq = self._width_sq
            self._arm_map = np.concatenate([np.eye(d), v_inv, beta_sq * self._h_tau_inv, width_sq * self._v_o_inv,
                                            self._theta_choice[:, None], self.theta_o[:, None]], axis=1).T.copy()
        k = arms.shape[0]
        columns = arms.T
        products = self._arm_map.dot(columns)  # (4d + 2, K): row j·d + a is (arms M_j)[:, a]
        forms = np.add.reduce(products[: 4 * d].reshape(4, d, k) * columns, axis=1)
        return products[4 * d:], forms

    def _criterion_two(self) -> bool:
        """Paper Alg. 2, line 11 (``H_t ⋠ cH_τ``) or Sawarni's ``det H_t > c det H_τ``.

        On an exact H the check is skipped while it provably cannot fire: with W whitening
        the floored ``H_τ`` and leaves ``w_s x_s x_sᵀ`` since τ, ``W H_t Wᵀ ⪯ I + Σ w_s Wx_s(Wx_s)ᵀ``,
        so ``λ_max ≤ 1 + Σ w_s‖x_s‖²_{H_τ⁻¹}`` and ``log det(W H_t Wᵀ) ≤ Σ log(1 + w_s‖x_s‖²_{H_τ⁻¹})``
        (matrix determinant lemma, each later ``(I + …)⁻¹ ⪯ I``). ``_h_growth`` holds that
        sum (observe); below ``c − 1`` (``log c``), less a 1e-9 margin for rounding, H_t is not
        formed at all. Above it the exact rule decides, so the switch times are the same.
        """
        c = self.params.switch_factor
        if self._h_exact and self._h_growth < self._h_skip_below:
            return False
        h_t = self.design_h.matrix
        if self._loewner:
            w = self._h_tau_whiten
            fired = bool(np.linalg.eigvalsh(w @ h_t @ w.T)[-1] > c)
        else:
            fired = _log_det(h_t) > math.log(c) + self._h_tau_logdet
        if fired:
            self._set_tau(h_t)
        return fired

    # -- the protocol -----------------------------------------------------------------
    def choose(self, arms: np.ndarray) -> int:
        """Paper Alg. 2, lines 3–14: θ̂_o refit, Criterion II (V, H only), Criterion I, else elimination and UCB."""
        if not (type(arms) is np.ndarray and arms.dtype == _FLOAT and arms.ndim == 2 and arms.shape[1] == self.d
                and arms.shape[0]):
            arms = self._check_arms(arms)  # the boundary's TypeError / ValueError (a complex arm is not cast)
        if self._pending is not None:
            check_round_order(self._pending, "choose")
        if self.t >= self._limit:
            check_horizon_left(self.t, int(self._limit))
        self._start_round()
        products, forms = self._arm_products(arms)
        largest, most_uncertain = forms[:2].max(axis=1).tolist()  # max ‖x‖², max ‖x‖²_{V⁻¹}: one call
        if not largest <= _NORM_SQ_BOUND:  # ‖x‖ > 1 or NaN (max propagates NaN)
            screened = self._outside_ball(arms)
            if screened is None:
                return 0
            arms = screened
            products, forms = self._arm_products(arms)
            most_uncertain = float(forms[1].max())
        norm_sq = forms[0]
        if most_uncertain >= self.params.exploration_threshold:  # Criterion I (line 4)
            best = int(forms[1].argmax())
            self.counts["criterion_I"] += 1
            self._stage(arms, best, norm_sq, products, forms, True)
            return best
        # β‖x‖_{H_τ⁻¹} and w‖x‖_{V_o⁻¹} of every arm, shape (2, K)
        widths = np.sqrt(np.maximum(forms[2:], 0.0))
        ucb = products[0] + widths[0]
        index = int(ucb.argmax())  # line 14
        if self.counts["refits_o"]:
            # Elimination (line 13) in the metric of θ̂_o's confidence set, V_o. With
            # θ̂_o = 0 (never refitted) it keeps every arm: UCB_o = w‖x‖ ≥ 0 ≥ max LCB_o.
            # Eliminating only lowers UCBs, so the first maximiser stands if it survives.
            width = widths[1]
            centre_o = products[1]
            lcb_o = centre_o - width
            best_lcb = lcb_o[lcb_o.argmax()]
            if centre_o[index] + width[index] < best_lcb:
                ucb[centre_o + width < best_lcb] = -np.inf
                index = int(ucb.argmax())
        self._stage(arms, index, norm_sq, products, forms, False)
        return index

    def _outside_ball(self, arms: np.ndarray) -> np.ndarray | None:
        """Arms of which some seem to leave the unit ball (or are NaN): the boundary check and its ValueError.

        A private subclass may clip them, or skip the user (``None``: the round plays arm 0,
        nothing staged), after the round's refits (:class:`dpglm.policies.joint_dp.JointDPGLMBandit`).
        """
        return self._check_arms(arms)

    def _start_round(self) -> None:
        """The refits due at the start of a round, from V and H alone (Alg. 2, lines 7 and 11, moved here).

        θ̂_o: V changes only when a leaf entered it, and an unchanged V cannot newly satisfy
        the growth rule. Criterion II in every round, before Criterion I (line 11 is in its
        else branch in the paper, which let the current user's exploration shift the
        switch); an unchanged H cannot newly satisfy it.
        """
        if self.design_v.version != self._v_checked:
            self._v_checked = self.design_v.version
            v_t = self.design_v.matrix
            w = self._v_o_whiten
            if np.linalg.eigvalsh(w @ v_t @ w.T)[-1] > self.params.refit_o_factor:
                self._refit_o(v_t)
        if self.design_h.version != self._h_checked:
            self._h_checked = self.design_h.version
            if (not self._h_exact or self._h_growth >= self._h_skip_below) and self._criterion_two():  # line 11
                self.counts["criterion_II"] += 1
                self._refit_tau()

    def _stage(self, arms: np.ndarray, index: int, norm_sq: np.ndarray, products: np.ndarray, forms: np.ndarray,
               explored: bool) -> None:
        """Keep the chosen context, clipped to the unit ball, in its refit set's next row until the reward comes.

        Also kept: ``⟨x, θ̂_o⟩`` of the clipped x (the H leaf's weight) and ``‖x‖²_{H_τ⁻¹}``
        of the unclipped x, an upper bound for the clipped one (Criterion II's bound).
        """
        scale = 1.0 / math.sqrt(norm_sq[index]) if norm_sq[index] > 1.0 else 1.0
        row = (self._rows_o if explored else self._rows_h).stage(arms[index])
        if scale != 1.0:
            row *= scale  # x/‖x‖: the leaves' unit-ball bound holds exactly
        self._pending = (row, explored, float(products[1, index]) * scale, float(forms[2, index]) / self._width_sq[0])

    def observe(self, reward: float) -> None:
        """Paper Alg. 2, lines 5–6 and 15–16: feed ``V`` or ``H`` (θ̂_o is refitted in :meth:`choose`)."""
        if self._pending is None:
            raise ValueError("choose(arms) must be called before observe(reward)")
        r = reward if type(reward) is float and 0.0 <= reward <= self.reward_bound else self._check_reward(reward)
        x, explored, z_o, h_form = self._pending
        self._pending = None
        self.t += 1
        if explored:
            self._rows_o.commit(r)
            self.design_v.add_outer(x, 1.0)  # x xᵀ
            self.design_h.append(None)
        else:
            self._rows_h.commit(r)
            weight = self.family.dmu_at(z_o) / math.e  # μ̇(⟨x, θ̂_o⟩)/e ≥ 0
            self.design_v.append(None)
            self.design_h.add_outer(x, weight)
            if self._h_exact:
                growth = weight * h_form
                self._h_growth += growth if self._loewner else math.log1p(growth)

    def _refit_o(self, v_t: np.ndarray) -> None:
        """θ̂_o on T_o over Θ_I = {‖θ‖ ≤ S} (Alg. 2, line 7); on success ``V_o ← V_t``.

        A refused refit keeps θ̂_o and its metric ``V_o``, so the rule keeps asking (and
        the budget keeps refusing) at later rounds.
        """
        theta = self._fit("o", self.estimator_o, self._rows_o, Constraint(np.zeros(self.d), self.params.radius),
                          self.theta_o)
        if theta is not None:
            self.theta_o = theta
            self._set_v_o(v_t)
            self._set_theta_choice()

    def _refit_tau(self) -> None:
        """θ̂_τ on [t−1]∖T_o over Θ_II = {‖θ − θ̂_o‖_{V_o} ≤ w} (Alg. 2, line 12)."""
        theta = self._fit("tau", self.estimator_tau, self._rows_h,
                          Constraint(self.theta_o.copy(), self.params.elimination_width, self._v_o), self.theta_tau)
        if theta is not None:
            self.theta_tau = theta
            self._set_theta_choice()

    def _fit(self, name: str, estimator: Estimator, rows: Rows, constraint: Constraint, current: np.ndarray,
             ) -> np.ndarray | None:
        """One refit of θ̂_``name`` on its rows, counted; ``None`` if the estimator refused (budget spent).

        The caller then keeps the old estimate.
        """
        theta = estimator.fit(rows.blocks(), constraint, current, self.t)
        if theta is None:
            self.counts[f"refused_{name}"] += 1
            return None
        self.counts[f"refits_{name}"] += 1
        return np.asarray(theta, dtype=float)

    def _set_theta_choice(self) -> None:
        """Cache the arm-choice estimate θ̂_τ or ``(θ̂_o + θ̂_τ)/2`` (§6.1; ``params.centre``)."""
        if self.params.centre == "tau":
            self._theta_choice = self.theta_tau
        else:
            self._theta_choice = 0.5 * (self.theta_o + self.theta_tau)
        self._arm_map = None

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
