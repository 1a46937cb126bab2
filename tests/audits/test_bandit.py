"""Noise coupling of the joint-DP bandit.

Bit-identical actions for the real policy, not for one reading the exact Gram matrix.
"""

import numpy as np
import pytest

from audits.bandit import BanditCouplingAudit, coupled_actions
from audits.planted import ExactGramBandit
from dpglm.policies.joint_dp import JointDPGLMBandit

HORIZON = 300


@pytest.fixture(scope="module")
def game():
    """Auditor-controlled rounds: arms e₁, e₂ at every round ≥ 2 with fixed Bernoulli rewards;
    round 1 offers only e₁ with reward 0 (D0) or only e₂ with reward 1 (D1)."""
    rng = np.random.default_rng(12)
    arms = np.tile(np.eye(2), (HORIZON, 1, 1))
    arms[0] = [[1.0, 0.0], [1.0, 0.0]]
    rewards = (rng.random((HORIZON, 2)) < [0.3, 0.6]).astype(float)
    rewards[0] = 0.0
    return arms, rewards, np.array([[0.0, 1.0], [0.0, 1.0]]), np.ones(2)


def _policy(cls):
    return lambda: cls("logistic", 2, HORIZON, 1.0, 4.0, 0.01, np.random.default_rng(1), preset="calibrated")


def test_joint_dp_bandit_decides_only_from_releases(game):
    result = coupled_actions(_policy(JointDPGLMBandit), *game)
    # Round 1's leaf went into the H-tree and its (x, y) into the DP-SGD refit: both were coupled.
    assert set(result.slots) >= {"design_h.tree", "estimator_tau.dpsgd"}
    assert result.coupled_calls >= HORIZON and result.uncoupled_calls == 0
    # Non-trivial decisions (both arms played), and bit-identical under the coupling.
    assert set(np.unique(result.actions_null[1:])) == {0, 1}
    assert result.identical and result.first_divergence is None


def test_policy_reading_the_exact_gram_matrix_is_caught(game):
    result = coupled_actions(_policy(ExactGramBandit), *game)
    assert not result.identical
    assert result.first_divergence >= 2


def test_shapes_are_checked(game):
    arms, rewards, first_arms, first_rewards = game
    with pytest.raises(ValueError, match="arms"):
        coupled_actions(_policy(JointDPGLMBandit), arms[:, :, 0], rewards, first_arms, first_rewards)


def test_coupling_audit_report_verdicts():
    # seed 2: with the float-safe (discrete) noise stream, seed 1 has one pair that plays a single arm.
    real = BanditCouplingAudit(4.0, horizon=HORIZON).run(runs=2, seed=2)
    assert real.verdict == "consistent" and real.pairs_with_both_arms_played == 2
    planted = BanditCouplingAudit(4.0, horizon=HORIZON, policy_class=ExactGramBandit).run(runs=1, seed=1)
    assert planted.verdict == "violated" and planted.identical_pairs == 0
