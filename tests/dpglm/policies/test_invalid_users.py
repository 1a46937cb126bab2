"""Bad users (issue 24, docs/service.md): ``invalid=`` on the private policies.

The coupling test: a run where user k's context set is out of the ball (with a NaN) and
user j's reward is out of [0, R] (and user i's is NaN) gives EVERY user the same action as
a run of ``invalid="raise"`` where those users' data were clipped by hand here (the
projection written out below, not the module's).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpglm.envs import StochasticContextEnv
from dpglm.policies import JointDPGLMBandit, ShuffleDPGLMBandit

D, K, T, S = 2, 6, 160, 1.0
BAD_ARMS, BAD_REWARD, NAN_REWARD = 37, 101, 130


def _hand_clip(arms: np.ndarray) -> np.ndarray:
    out = arms.copy()
    out[~np.isfinite(out)] = 0.0
    for row in out:
        n = math.sqrt(sum(v * v for v in row))
        if n > 1.0:
            row /= n
    return out


def _make(kind: str, invalid: str):
    rng = np.random.default_rng(11)
    if kind == "joint":
        return JointDPGLMBandit("logistic", D, T, S, 4.0, 0.02, rng, invalid=invalid)
    return ShuffleDPGLMBandit("logistic", D, T, S, rng, epsilon=4.0, delta=0.02, invalid=invalid)


def _play(policy, corrupt: bool, by_hand: bool) -> list[int]:
    env = StochasticContextEnv("logistic", D, K, S, T, np.random.default_rng([3, 4]))
    env.reset()
    actions = []
    for t in range(T):
        arms = env.contexts(t)
        if corrupt and t == BAD_ARMS:
            arms = 3.0 * arms
            arms[1, 0] = np.nan
            if by_hand:
                arms = _hand_clip(arms)
        a = policy.choose(arms)
        r = env.pull(t, a)
        if corrupt and t == BAD_REWARD:
            r = 1.0 if by_hand else 7.5
        if corrupt and t == NAN_REWARD:
            r = 0.5 if by_hand else float("nan")  # the public value R/2 (R = 1 for logistic)
        policy.observe(r)
        actions.append(a)
    return actions


@pytest.mark.parametrize("kind", ["joint", "shuffle"])
def test_an_invalid_user_changes_no_action_against_a_run_clipped_by_hand(kind):
    clipped_by_policy = _make(kind, "clip")
    by_hand = _make(kind, "raise")
    got = _play(clipped_by_policy, corrupt=True, by_hand=False)
    want = _play(by_hand, corrupt=True, by_hand=True)
    assert got == want
    assert clipped_by_policy.operator_invalid_users == 3
    assert by_hand.operator_invalid_users == 0
    # The count is operator-only: not in what a run records.
    assert "invalid" not in str(clipped_by_policy.diagnostics())
    assert clipped_by_policy.ledger.root.spent == by_hand.ledger.root.spent


@pytest.mark.parametrize("kind", ["joint", "shuffle"])
def test_raise_keeps_todays_error_and_skip_plays_the_public_arm(kind):
    with pytest.raises(ValueError, match="finite|unit ball"):
        _play(_make(kind, "raise"), corrupt=True, by_hand=False)
    skipping = _make(kind, "skip")
    env = StochasticContextEnv("logistic", D, K, S, T, np.random.default_rng([3, 4]))
    env.reset()
    for t in range(T):
        arms = env.contexts(t) * (5.0 if t % 50 == 7 else 1.0)
        a = skipping.choose(arms)
        if t % 50 == 7:
            assert a == 0
        r = env.pull(t, a)
        skipping.observe(float("nan") if t % 50 == 9 else r)
    assert skipping.t == T and skipping.operator_invalid_users == 8
    with pytest.raises(ValueError, match="horizon"):
        skipping.choose(np.full((K, D), 5.0))


@pytest.mark.parametrize("kind", ["joint", "shuffle"])
def test_caller_mistakes_still_raise(kind):
    policy = _make(kind, "clip")
    with pytest.raises(TypeError, match="arms"):
        policy.choose(np.ones((K, D), dtype=complex))
    with pytest.raises(ValueError, match="shape"):
        policy.choose(np.zeros((K, D + 1)))
    policy.choose(np.zeros((K, D)))
    with pytest.raises(TypeError, match="reward"):
        policy.observe("1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid must be one of"):
        _make(kind, "ignore")
