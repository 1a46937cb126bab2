"""Bad users: out-of-domain contexts and rewards handled by ``invalid=`` (docs/service.md, "Bad users").

A context of norm above 1 (+1e-9), a non-finite entry, or a reward outside [0, R] (NaN
included) is a *user's data*, not the caller's mistake. If it made the policy raise, the
run would halt and every later user would see that it halted: whether user t's data was
valid would leak to all of them (issue 24). A private policy therefore takes
``invalid=``:

``"clip"`` (default of the private policies)
    Non-finite context entries become 0 (a fixed public value), then each arm is projected
    onto the unit ball, ``x/max(1, ‖x‖)``; a reward is clipped into [0, R] and a NaN reward
    becomes R/2 (:data:`NAN_REWARD_FRACTION` of R, public).
``"skip"``
    The user is dropped: the policy plays the fixed public arm 0 and feeds its mechanisms
    a zero contribution (a zero leaf, a zero row), which is what a user with no data adds;
    the round clock still advances, so every later round is where it would have been.
``"raise"``
    Today's behaviour: ``ValueError``.

Either way the treatment of user t depends on user t's own data only, so no later user
learns anything from it. Wrong types and shapes (a string, a complex array, the wrong d)
still raise: they are the caller's mistake. The number of invalid users is itself a
statistic of the private data: :attr:`InvalidUsers.operator_invalid_users` holds it for the
operator only; it is never in ``diagnostics()`` (which runs record) nor in any release.
"""

from __future__ import annotations

import math

import numpy as np

from dpglm._validation import check_reward, real_array

__all__ = ["INVALID_CHOICES", "NAN_REWARD_FRACTION", "InvalidUsers", "check_invalid", "clip_arm_sets", "clip_arms"]

INVALID_CHOICES = ("clip", "skip", "raise")
NAN_REWARD_FRACTION = 0.5
"""A NaN reward becomes ``NAN_REWARD_FRACTION · R`` under ``invalid="clip"`` (a public constant)."""
_NORM_SQ_BOUND = (1.0 + 1e-9) ** 2  # the largest ‖x‖² Policy._check_arms accepts


def check_invalid(invalid: object) -> str:
    """``invalid`` if it is one of :data:`INVALID_CHOICES`; a one-line ``ValueError`` naming it otherwise."""
    if not isinstance(invalid, str) or invalid not in INVALID_CHOICES:
        raise ValueError(f"invalid must be one of {INVALID_CHOICES}, got {invalid!r}")
    return invalid


def clip_arms(arms: np.ndarray) -> np.ndarray:
    """``arms`` (..., K, d) with non-finite entries set to 0 and each arm projected onto the unit ball (a copy)."""
    out = np.where(np.isfinite(arms), arms, 0.0)
    norms = np.sqrt(np.einsum("...j,...j->...", out, out))
    over = norms > 1.0
    out[over] /= norms[over, None]
    return out


def clip_arm_sets(arm_sets: np.ndarray) -> np.ndarray:
    """The (n, K, d) float ``arm_sets`` with each set the unit-ball screen refuses clipped (:func:`clip_arms`).

    The sets it accepts as given (every ‖x‖ ≤ 1 + 1e-9) are untouched; ``arm_sets`` itself
    is returned when there is none to clip. What a batched policy plans on, so that its
    plan sees each arm set as ``choose`` will.
    """
    bad = ~(np.einsum("nkj,nkj->nk", arm_sets, arm_sets).max(axis=-1) <= _NORM_SQ_BOUND)  # NaN is bad
    if not bad.any():
        return arm_sets
    out = arm_sets.copy()
    out[bad] = clip_arms(arm_sets[bad])
    return out


def clip_reward(reward: float, bound: float) -> float:
    """``reward`` clipped into [0, ``bound``]; NaN becomes ``NAN_REWARD_FRACTION·bound``."""
    if math.isnan(reward):
        return NAN_REWARD_FRACTION * bound
    return min(max(reward, 0.0), bound)


class InvalidUsers:
    """The ``invalid=`` seam of a private policy: screen a user's arms and reward before the policy sees them.

    The host class sets ``self.invalid`` (:func:`check_invalid`), ``self.d`` and
    ``self.reward_bound``, and calls :meth:`_screen_arms` / :meth:`_screen_reward` first
    in ``choose`` / ``observe``.
    """

    invalid: str = "raise"
    d: int
    reward_bound: float
    _invalid_users: int = 0

    @property
    def operator_invalid_users(self) -> int:
        """OPERATOR-ONLY: how many users had out-of-domain data (clipped or skipped) so far.

        A statistic of private data: releasing it (a log others read, a dashboard, a
        run record) is a release that no ledger paid for. Kept out of ``diagnostics()``.
        """
        return self._invalid_users

    def _screen_arms(self, arms: object) -> np.ndarray | None:
        """``arms`` valid as given, clipped, or None (skip this user); TypeError/ValueError for caller mistakes."""
        return self._screen_norms(self._screen_shape(arms))

    def _screen_shape(self, arms: object) -> np.ndarray:
        """``arms`` as a float (K, d) array, norms unchecked; TypeError/ValueError (caller mistakes) otherwise."""
        a = arms if type(arms) is np.ndarray and arms.dtype == np.float64 else real_array("arms", arms)
        if a.ndim != 2 or a.shape[1] != self.d or a.shape[0] < 1:
            raise ValueError(f"arms must have shape (K, {self.d}) with K >= 1, got {a.shape}")
        return a

    def _screen_norms(self, a: np.ndarray) -> np.ndarray | None:
        """The (K, d) float ``a`` valid as given (every ‖x‖ ≤ 1 + 1e-9), clipped, or None (skip this user)."""
        largest = np.einsum("ij,ij->i", a, a).max()
        if largest <= _NORM_SQ_BOUND:  # False for NaN
            return a
        if self.invalid == "raise":
            if not np.all(np.isfinite(a)):
                raise ValueError("arms must be finite (no NaN or inf)")
            raise ValueError(f"arms must lie in the unit ball (‖x‖ ≤ 1), got a norm of {np.sqrt(largest):.6g}")
        self._invalid_users += 1
        return None if self.invalid == "skip" else clip_arms(a)

    def _screen_reward(self, reward: object) -> float | None:
        """``reward`` valid as given, clipped, or None (skip); TypeError for a non-real reward."""
        if type(reward) is float and 0.0 <= reward <= self.reward_bound:
            return reward
        if self.invalid == "raise":
            return check_reward(reward, self.reward_bound)
        try:
            r = check_reward(reward, self.reward_bound)
        except ValueError:
            pass
        else:
            return r
        self._invalid_users += 1
        return None if self.invalid == "skip" else clip_reward(float(reward), self.reward_bound)  # type: ignore[arg-type]
