"""First-switch game of the joint-DP bandit: the exact-H switch rounds in closed form, the planted
policy reading the exact Gram matrix refuted at the Clopper–Pearson bound of perfect separation,
the real policy consistent."""

import math

import numpy as np
import pytest

from audits.bandit_switch import BanditSwitchAudit
from audits.planted import ExactGramBandit
from dpglm.policies.joint_dp import JointDPGLMBandit

EPSILON, DELTA = 1.0, 0.01


def _exact_switch_round(horizon):
    """D1's exact-H switch round, from the policy's public constants.

    Until the switch every leaf is w e₂e₂ᵀ with w = μ̇(0)/e = (1/4)/e (logistic), and
    H_τ = λ_H I; Criterion II λ_max(H_t/λ_H) > c first holds with n e₂-leaves, n the least
    integer with n·w > (c − 1)λ_H. D1's round-1 leaf is one of them, so D1 has n leaves at
    the start of round n + 1 (D0, whose round-1 leaf is along e₁, at round n + 2).
    """
    params = JointDPGLMBandit("logistic", 2, horizon, 1.0, EPSILON, DELTA, np.random.default_rng(0),
                              preset="calibrated").params
    w = 0.25 / math.e
    n = 1
    while not n * w > (params.switch_factor - 1) * params.lam_h:
        n += 1
    return n + 1


@pytest.fixture(scope="module")
def planted():
    return BanditSwitchAudit(EPSILON, DELTA, policy_class=ExactGramBandit, name="planted")


def test_exact_gram_policy_switches_at_the_closed_form_rounds(planted):
    s = _exact_switch_round(planted.horizon)
    assert planted.exact_switch_round == s and s + 1 <= planted.horizon - 10
    for seed in range(3):
        assert planted.first_round(1, np.random.default_rng(seed)) == s
        assert planted.first_round(0, np.random.default_rng(100 + seed)) == s + 1


def test_exact_gram_policy_is_refuted_at_the_perfect_separation_bound(planted):
    runs = 20
    result = planted.run(runs, seed=3)
    assert result.verdict == "violated" and result.holdout_runs == 10
    assert result.false_positives == 0 and result.false_negatives == 0
    # Zero errors: the Clopper–Pearson upper bound on each rate at α/2 = 0.025 is 1 − 0.025^{1/n}.
    p = 1 - 0.025 ** (1 / runs)
    assert result.epsilon_lower_bound == pytest.approx(math.log((1 - DELTA - p) / p), rel=1e-9)
    assert result.claimed_epsilon == EPSILON and result.claimed_delta == DELTA


def test_real_policy_is_consistent_and_its_switch_is_noisy():
    audit = BanditSwitchAudit(EPSILON, DELTA)
    result = audit.run(20, seed=3)
    assert result.verdict == "consistent" and result.epsilon_lower_bound <= EPSILON
    # The released H is noisy: the first wide-arm round varies from run to run on both sides.
    rounds = -audit.sample(1, 10, np.random.default_rng(4))[:, 0]
    assert np.unique(rounds).size > 3 and np.all((rounds >= 2) & (rounds <= audit.horizon + 1))
    # The recorded ceiling μ = Δ√L/σ of all H releases is the H-tree's charge read as GDP: √(2ρ).
    tree = JointDPGLMBandit("logistic", 2, audit.horizon, 1.0, EPSILON, DELTA, np.random.default_rng(0),
                            preset="calibrated").design_h.tree
    assert result.parameters["h_tree_mu"] == pytest.approx(math.sqrt(2 * float(tree.cost.rho)), rel=1e-6)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"epsilon": 0.0}, "epsilon"), ({"epsilon": 1.0, "delta": 1.0}, "delta"),
    ({"epsilon": 1.0, "eta": 1.5}, "eta"), ({"epsilon": 1.0, "horizon": 1}, "horizon"),
])
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BanditSwitchAudit(**kwargs)
