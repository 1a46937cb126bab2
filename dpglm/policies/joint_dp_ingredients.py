"""The private ingredients of the joint-DP bandit: tree-released design matrices and DP-SGD refits.

:class:`TreeDesign` is a :class:`~dpglm.policies.rarely_switching.DesignStatistic` whose
matrix is ``λI`` plus a :class:`mechanisms.tree.BinaryTreeMechanism` release;
:class:`DPSGDEstimator` is an :class:`~dpglm.policies.rarely_switching.Estimator` whose
refits are :class:`mechanisms.optim.DPSGD` runs, each charging a fixed cost (a filter);
:class:`NeverCalled` holds the θ̂_o slot when Criterion I provably cannot fire. Their
privacy argument is ``docs/joint-dp-privacy.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from accounting import ZCDP, BudgetExceeded
from dpglm._validation import check_int
from dpglm.glm_newton import RowBlocks
from dpglm.policies.rarely_switching import Constraint
from mechanisms import Release
from mechanisms.tree import BinaryTreeMechanism

__all__ = ["DPSGDEstimator", "NeverCalled", "TreeDesign"]


class TreeDesign:
    """``λI`` plus the binary-tree release of ``Σ leaves`` (paper §J.3, Alg. 2 lines 7, 16).

    Every round appends exactly one leaf (zero if the round belongs to the other
    tree), so a release exists for every t. :attr:`release` is the last
    :class:`~mechanisms.Release`; :attr:`matrix` is ``λI + release.value``. A leaf
    ``w·x xᵀ`` goes to the tree as (x, w) (:meth:`add_outer`), which forms and checks it
    itself (no eigenvalue test, no intermediate object).
    """

    def __init__(self, tree: BinaryTreeMechanism, lam: float) -> None:
        self.tree = tree
        d = tree.shape[0]
        self._zero = np.zeros(d)  # the zero leaf, appended as 0·x xᵀ
        self._lam_eye = lam * np.eye(d)
        self.release: Release | None = None
        self._matrix = self._lam_eye.copy()
        self._matrix.setflags(write=False)
        self.version = 0

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix

    def append(self, leaf: np.ndarray | None) -> None:
        self._released(self.tree.append(self._zero, 0.0) if leaf is None else self.tree.append(leaf))

    def add_outer(self, x: np.ndarray, weight: float) -> None:
        """Append the leaf ``weight·x xᵀ`` (the policy's clipped context and its weight)."""
        self._released(self.tree.append(x, weight))

    def _released(self, release: Release) -> None:
        self.release = release
        matrix = self._lam_eye + release.value
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

        planned_refits = check_int("planned_refits", planned_refits)
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
        self, rows: RowBlocks, constraint: Constraint, theta0: np.ndarray, rounds: int
    ) -> np.ndarray | None:
        """One refit on the objective ``(1/N)[Σ ℓ + λ/2‖θ‖²]`` with the public ``N = rounds``.

        The refit sets T_o and [t−1]∖T_o gain or lose user t's row under a neighbouring
        data set (its round can switch criterion), so their sizes are not public: the
        normaliser N is the round count, and the clipped-sum sensitivity 2C covers
        replace, add and remove (DPSGD ``normalizer``).
        """
        projection: Any
        if constraint.metric is None:
            projection = self._ball(constraint.radius, constraint.centre)
        else:
            projection = self._ellipsoid(constraint.centre, constraint.metric, constraint.radius)
        try:
            # The rows stay in their blocks: DP-SGD's numpy engine sums a block at a time
            # (no copy of the rows, temporaries O(block·d); docs/design.md, memory flat in T).
            release = self.dpsgd.fit_blocks(
                rows.xs,
                rows.ys,
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


class NeverCalled:
    """Estimator slot for θ̂_o when Criterion I provably cannot fire (no budget behind it)."""

    def fit(
        self, rows: RowBlocks, constraint: Constraint, theta0: np.ndarray, rounds: int
    ) -> np.ndarray | None:
        raise RuntimeError("Criterion I cannot fire under these parameters; θ̂_o is never refitted")
