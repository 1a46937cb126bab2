"""The batched loop of paper Algorithm 1 / Sawarni et al.'s B-GLinCB, on pluggable ingredients.

Warm-up on the G-optimal design, then per batch: eliminate, scale, design, and at
the batch's end form its statistics from its own data (:mod:`dpglm.policies.batched`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from accounting.validation import check_generator
from dpglm._validation import check_horizon_left, check_round_order
from dpglm.design import g_optimal_design
from dpglm.glm import GLMFamily, get_family
from dpglm.linalg import dmu_range, floored_inverse
from dpglm.policies.base import Policy, clip_to_unit_ball
from dpglm.policies.batched.parameters import BatchedParameters
from dpglm.policies.batched.protocols import BatchEstimator, DesignSum, PreconditionedEstimator
from dpglm.policies.batched.schedule import batch_schedule

__all__ = ["BatchedGLMBandit"]

_FIRST_ROWS = 1024  # rows a batch's arrays start with (they double up to its length)


@dataclass(frozen=True)
class _ConfidenceSet:
    """``⟨x, θ_j⟩ ± multiplier·‖x‖_{M_j⁻¹}`` of one granted batch."""

    theta: np.ndarray
    inverse: np.ndarray
    multiplier: float

    def bounds(self, arms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        centre = arms @ self.theta
        width = self.multiplier * np.sqrt(np.maximum(quadratic_forms(arms, self.inverse), 0))
        return centre - width, centre + width


def quadratic_forms(arms: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """``xᵀ M x`` for every row ``x`` of ``arms`` (..., K, d): one ``matmul`` and a sum over d.

    About 4× faster than a three-operand ``einsum`` at d = 10, K = 100 (issue 32); the
    forms differ from einsum's in the last bits only.
    """
    return np.add.reduce((arms @ matrix) * arms, axis=-1)


class BatchedGLMBandit(Policy):
    """The batched loop of paper Alg. 1 / Sawarni et al.'s B-GLinCB (:mod:`dpglm.policies.batched`).

    Parameters
    ----------
    family : GLMFamily or str
    d, horizon : int
    params : BatchedParameters
    design_sum : DesignSum
        Source of ``V`` and ``H_k``.
    estimator : BatchEstimator
        Source of ``θ̂_k``.
    rng : numpy.random.Generator
        Draws the arm from each round's design (one uniform per round).
    """

    name = "batched"

    def __init__(self, family: GLMFamily | str, d: int, horizon: int, params: BatchedParameters, *,
                 design_sum: DesignSum, estimator: BatchEstimator, rng: np.random.Generator) -> None:
        self.family = get_family(family)
        super().__init__(d, reward_bound=self.family.reward_bound)
        if not isinstance(params, BatchedParameters):
            raise TypeError(f"params must be BatchedParameters, got {type(params).__name__}")
        check_generator(rng)
        self.params = params
        self.horizon = int(horizon)
        self.schedule = batch_schedule(horizon, warmup_scale=params.warmup_scale, warmup_cap=params.warmup_cap)
        self._ends = self.schedule.ends
        self.design_sum, self.estimator, self._rng = design_sum, estimator, rng
        self.leaf_bound = dmu_range(self.family, params.radius)[1]  # public sup of μ̇ (choice 8)
        self.t = 0
        self.batch = 1
        self.theta_warmup: np.ndarray | None = None
        self._v_inverse: np.ndarray | None = None
        self.confidence_sets: list[tuple[int, _ConfidenceSet]] = []
        self.estimates: dict[int, np.ndarray] = {}
        self._start_rows()
        self._pending: tuple[np.ndarray, float] | None = None
        self._plan: tuple[int, np.ndarray, np.ndarray] | None = None  # (start t, arm sets, weights)
        self.counts = {"granted": 0, "refused": 0, "planned_rounds": 0, "unplanned_rounds": 0}

    # -- the batch's rule, vectorised over arm sets ----------------------------------------------
    @property
    def rounds_left_in_batch(self) -> int:
        """Rounds from the current one to the end of the current batch."""
        return int(self._ends[self.batch - 1] - self.t)

    @property
    def planned(self) -> bool:
        """Whether the current round's arm set was given to :meth:`plan` (within the current batch)."""
        plan = self._plan
        return plan is not None and self.t - plan[0] < len(plan[1])

    def _start_rows(self) -> None:
        """Room for the current batch's rows (x, y, leaf weight), up to its public length; none in the last batch.

        The last batch releases and fits nothing (choice 6), so it keeps no rows: a run holds
        at most one earlier batch's rows, 8·(d + 2) bytes a round of that batch (issue 32).
        The arrays start at 1024 rows and double as rounds come (a horizon of 2⁵³ plans
        batches far beyond memory; only the rows played are ever held).
        """
        self._row_limit = int(self.schedule.lengths[self.batch - 1]) if self.batch < len(self._ends) else 0
        n = min(self._row_limit, _FIRST_ROWS)
        self._x, self._y, self._w = np.empty((n, self.d)), np.empty(n), np.empty(n)
        self._filled = 0

    def _grow_rows(self) -> None:
        """Double the row arrays (at most to the batch's length), keeping the rows filled."""
        n = self._filled
        size = min(2 * n, self._row_limit)
        x, y, w = np.empty((size, self.d)), np.empty(size), np.empty(size)
        x[:n], y[:n], w[:n] = self._x[:n], self._y[:n], self._w[:n]
        self._x, self._y, self._w = x, y, w

    def _scaled_design(self, arm_sets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The design weights ``(n, K)`` of the current rule and the leaf weights ``(n, K)``."""
        p = self.params
        n, k, _ = arm_sets.shape
        if self.theta_warmup is None or self._v_inverse is None:  # warm-up rule (batch 1, or after a refused one)
            weights = np.ones((n, k))
            design = g_optimal_design(arm_sets, ridge=p.design_ridge, tol=p.design_tol)
            return design.weights, weights
        alive = np.ones((n, k), dtype=bool)
        for _, cs in self.confidence_sets:  # elimination (paper §5 "Confidence bounds")
            lcb, ucb = cs.bounds(arm_sets)
            alive &= ucb >= np.where(alive, lcb, -np.inf).max(axis=-1, keepdims=True)
        warm_width = p.gamma * math.sqrt(p.width_kappa) * np.sqrt(
            np.maximum(quadratic_forms(arm_sets, self._v_inverse), 0))
        beta = np.exp(self.reward_bound * np.minimum(2.0 * p.radius, warm_width))
        weights = self.family.dmu(arm_sets @ self.theta_warmup) / beta  # paper §5 "Arm scaling"
        design = g_optimal_design(np.sqrt(weights)[..., None] * arm_sets, available=alive,
                                  ridge=p.design_ridge, tol=p.design_tol)
        return design.weights, weights

    def plan(self, arm_sets: np.ndarray) -> None:
        """Precompute the designs of the next rounds of the current batch (one vectorised call).

        ``arm_sets`` (n, K, d) are the arm sets of rounds ``t, …, t+n−1``, all in the current
        batch (n ≤ :attr:`rounds_left_in_batch`). :meth:`choose` uses them when it is shown
        the same arm set at the same round.
        """
        arm_sets = np.asarray(arm_sets, dtype=float)
        if arm_sets.ndim != 3 or arm_sets.shape[-1] != self.d or len(arm_sets) < 1:
            raise ValueError(f"arm_sets must have shape (n, K, {self.d}) with n >= 1, got {arm_sets.shape}")
        if len(arm_sets) > self.rounds_left_in_batch:
            raise ValueError(f"arm_sets must cover at most the {self.rounds_left_in_batch} rounds left in batch "
                             f"{self.batch}, got {len(arm_sets)}")
        design, weights = self._scaled_design(arm_sets)
        self._plan = (self.t, arm_sets, np.stack([design, weights], axis=1))

    def choose(self, arms: np.ndarray) -> int:
        """Draw an arm from this round's (scaled, eliminated) G-optimal design (paper Alg. 1)."""
        return self._choose_checked(self._check_arms(arms))

    def _choose_checked(self, arms: np.ndarray) -> int:
        """:meth:`choose` on arms already checked (a float (K, d) array in the unit ball, up to 1e-9)."""
        check_round_order(self._pending, "choose")
        check_horizon_left(self.t, self.horizon)
        row = None
        if self._plan is not None:
            start, planned, table = self._plan
            i = self.t - start
            # The planned row serves only the very arm set it was computed from, bit for bit.
            if 0 <= i < len(planned) and planned[i].shape == arms.shape and planned[i].tobytes() == arms.tobytes():
                row = table[i]
                self.counts["planned_rounds"] += 1
        if row is None:
            design, weights = self._scaled_design(arms[None])
            row = np.stack([design[0], weights[0]])
            self.counts["unplanned_rounds"] += 1
        cdf = np.cumsum(row[0])
        index = min(int(np.searchsorted(cdf, self._rng.random() * cdf[-1], side="right")), len(arms) - 1)
        self._pending = (clip_to_unit_ball(arms[index]), float(row[1][index]))
        return index

    def observe(self, reward: float) -> None:
        """Record the round; at a batch's end, form its statistics (paper Alg. 1, batch end)."""
        if self._pending is None:
            raise ValueError("choose(arms) must be called before observe(reward)")
        self._observe_checked(self._check_reward(reward))

    def _observe_checked(self, r: float) -> None:
        """:meth:`observe` of a checked reward r in [0, R], a round pending."""
        assert self._pending is not None  # both callers check it first
        x, w = self._pending
        self._pending = None
        i = self._filled
        if i < self._row_limit:  # the last batch keeps no rows
            if i == len(self._y):
                self._grow_rows()
            self._x[i], self._y[i], self._w[i] = x, r, w
            self._filled = i + 1
        self.t += 1
        if self.t == self._ends[self.batch - 1]:
            if self.batch < len(self._ends):  # the last batch's statistics would never be used
                self._end_batch()
            self.batch += 1
            self._plan = None
            self._start_rows()

    def _end_batch(self) -> None:
        """``V`` (batch 1) or ``H_k`` and ``θ̂_k`` from this batch's data alone; refusals keep the old state."""
        X, y = self._x[: self._filled], self._y[: self._filled]
        warm = self.theta_warmup is None
        leaf_weights = np.ones(len(X)) if warm else self._w[: self._filled]
        bound = 1.0 if warm else self.leaf_bound
        matrix = self.design_sum.matrix(X, leaf_weights, self.batch, bound)  # Σ w x xᵀ + ridge, from the factors
        theta = None
        if matrix is not None:
            estimator = self.estimator
            if isinstance(estimator, PreconditionedEstimator) and estimator.uses_design:
                theta = estimator.fit(X, y, self.batch, design=matrix, unit_leaves=warm)  # a public preconditioner
            else:
                theta = estimator.fit(X, y, self.batch)
        if matrix is None or theta is None:
            self.counts["refused"] += 1
            return
        self.counts["granted"] += 1
        theta = np.asarray(theta, dtype=float)
        self.estimates[self.batch] = theta
        inverse = floored_inverse(0.5 * (matrix + matrix.T), self.params.lam)  # Assumption E.1
        p = self.params
        if warm:
            self.theta_warmup, self._v_inverse = theta, inverse
        multiplier = p.gamma * math.sqrt(p.width_kappa) if warm else p.gamma
        self.confidence_sets.append((self.batch, _ConfidenceSet(theta, inverse, multiplier)))

    def diagnostics(self) -> dict[str, Any]:
        """Batch lengths, granted/refused batch statistics, planned vs unplanned rounds."""
        out: dict[str, Any] = dict(self.counts)
        out["batch_lengths"] = list(self.schedule.lengths)
        out["warmup_capped"] = self.schedule.warmup_capped
        return out

