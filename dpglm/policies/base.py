"""The one interface every bandit policy implements: ``choose(arms)``, ``observe(reward)``.

A round is: the environment shows the (K, d) arm set, ``choose`` returns an index, the
environment returns that arm's reward, ``observe`` receives it. Policies keep the chosen
context themselves between the two calls.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from dpglm._validation import check_dimension, check_positive, check_reward, real_array

__all__ = ["Policy"]

_NORM_TOLERANCE = 1e-9


def clip_to_unit_ball(x: np.ndarray) -> np.ndarray:
    """A copy of ``x`` scaled by ``1/max(1, ‖x‖)``.

    Policies accept contexts up to ``‖x‖ ≤ 1 + 1e-9`` (float-normalised unit vectors
    overshoot 1 by an ulp or two); a private policy clips the context it feeds to a
    mechanism so the mechanism's norm bound, and hence its sensitivity, holds exactly.
    """
    norm = float(np.sqrt(x.dot(x)))
    return x / norm if norm > 1.0 else x.copy()


class Policy(ABC):
    """Base class of a contextual bandit policy in dimension ``d`` with rewards in [0, R].

    Subclasses implement :meth:`choose` and :meth:`observe`, and may use the
    boundary checks :meth:`_check_arms` and :meth:`_check_reward`.
    """

    name: str = "policy"

    def __init__(self, d: int, *, reward_bound: float = 1.0) -> None:
        d = check_dimension(d)
        reward_bound = check_positive("reward_bound", reward_bound)
        self.d = int(d)
        self.reward_bound = reward_bound

    @abstractmethod
    def choose(self, arms: np.ndarray) -> int:
        """Index of the arm to play among the rows of ``arms`` (shape (K, d))."""

    @abstractmethod
    def observe(self, reward: float) -> None:
        """Reward of the arm returned by the last :meth:`choose`."""

    def checkpoint(self, path: str | os.PathLike[str]) -> str:
        """Write this policy's whole state to ``path`` and stop it cleanly; the checkpoint's id.

        :mod:`dpglm.service.checkpoint` (docs/service.md): no pickle, the ledger's journal
        id and seq (not the ledger), a ``"stopped"`` row journalled after the file; the
        policy refuses further rounds. The file holds raw private data.
        """
        from dpglm.service.checkpoint import checkpoint_policy

        return checkpoint_policy(self, path)

    @classmethod
    def restore(cls, path: str | os.PathLike[str], *, ledger: Any = None) -> Policy:
        """The policy checkpointed at ``path``, continued on ``ledger`` (same journal; None if it had none).

        Refused (:class:`dpglm.service.CheckpointError`, one line): another journal, no
        clean stop (a crash), a checkpoint restored before, or an older one.
        """
        from dpglm.service.checkpoint import restore_policy

        policy: Policy = restore_policy(path, ledger, cls)
        return policy

    def diagnostics(self) -> dict[str, Any]:
        """Counters worth recording with a run (e.g. how often a criterion fired)."""
        return {}

    # -- boundary checks --------------------------------------------------------------
    def _check_arms(self, arms: np.ndarray) -> np.ndarray:
        """``arms`` as a float (K, d) array; TypeError unless real; ValueError on shape, NaN, or ‖x‖ > 1."""
        arms = real_array("arms", arms)
        if arms.ndim != 2 or arms.shape[1] != self.d or arms.shape[0] < 1:
            raise ValueError(f"arms must have shape (K, {self.d}) with K >= 1, got {arms.shape}")
        largest = float(np.einsum("ij,ij->i", arms, arms).max())
        if not largest <= (1.0 + _NORM_TOLERANCE) ** 2:  # also catches NaN
            if not np.all(np.isfinite(arms)):
                raise ValueError("arms must be finite (no NaN or inf)")
            raise ValueError(f"arms must lie in the unit ball (‖x‖ ≤ 1), got a norm of {np.sqrt(largest):.6g}")
        return arms

    def _check_reward(self, reward: float) -> float:
        """``reward`` as a float; TypeError unless a real number, ValueError unless in [0, R]."""
        return check_reward(reward, self.reward_bound)
