"""``JointDPGLMBandit(ledger=...)``: the charges land on the given ledger, or on one built from (ε, δ)."""

from __future__ import annotations

import numpy as np
import pytest

from accounting import ApproxDP, Ledger
from dpglm.envs import StochasticContextEnv
from dpglm.policies import run_policy_record
from dpglm.policies.joint_dp import JointDPGLMBandit
from dpglm.policies.tight_plan import gdp_mu

D, T, S = 2, 300, 1.0


def _run(policy: JointDPGLMBandit) -> np.ndarray:
    env = StochasticContextEnv("probit", D, 10, S, T, np.random.default_rng([7, 1]))
    return run_policy_record(policy, env).actions


@pytest.mark.parametrize("preset", ["tight", "calibrated"])
def test_a_given_fresh_ledger_is_charged_and_the_run_equals_the_one_from_epsilon_delta(preset):
    ledger = Ledger(ApproxDP(4.0, 0.02))
    given = JointDPGLMBandit("probit", D, T, S, rng=np.random.default_rng(3), ledger=ledger, preset=preset)
    built = JointDPGLMBandit("probit", D, T, S, 4.0, 0.02, np.random.default_rng(3), preset=preset)
    assert given.ledger is ledger and (given.epsilon, given.delta) == (4.0, 0.02)
    assert ledger.root.spent == built.ledger.root.spent  # the same allocations, on the given ledger
    assert np.array_equal(_run(given), _run(built))
    # Every charge of the run (trees at construction, the refits during it) is on the given ledger.
    assert float(ledger.guarantee().eps) == float(built.ledger.guarantee().eps) > 0
    assert [a.path for a in ledger.accounts()] == [a.path for a in built.ledger.accounts()]


def test_a_ledger_with_earlier_spends_gives_the_policy_what_is_left():
    ledger = Ledger(ApproxDP(8.0, 0.02))
    ledger.charge(ApproxDP(4.0, 0.01), mechanism="an earlier release")
    policy = JointDPGLMBandit("probit", D, T, S, rng=np.random.default_rng(3), ledger=ledger)
    assert (policy.epsilon, policy.delta) == (4.0, 0.01)
    # The pool is the GDP share of the remaining (4, 0.01): μ from the exact GDP conversion
    # (the filter meets the share at δ_F = 0.9·δ: a tenth of δ is its odometer's, docs/accounting.md "Claims")
    assert ledger.account("pool").budget.mu == pytest.approx(gdp_mu(4.0, 0.009), rel=1e-9)
    _run(policy)
    total = ledger.guarantee()
    assert float(total.eps) <= 8.0 and float(total.delta) <= 0.02


def test_a_spent_or_wrong_ledger_is_refused_before_any_noise():
    rng = np.random.default_rng(5)
    state = rng.bit_generator.state
    spent = Ledger(ApproxDP(1.0, 0.02))
    spent.charge(ApproxDP(1.0, 0.02), mechanism="everything")
    with pytest.raises(ValueError, match="ledger has no"):
        JointDPGLMBandit("probit", D, T, S, rng=rng, ledger=spent)
    with pytest.raises(ValueError, match="replace_one"):
        JointDPGLMBandit("probit", D, T, S, rng=rng, ledger=Ledger(ApproxDP(1.0, 0.02), relation="add_remove"))
    with pytest.raises(ValueError, match="not both"):
        JointDPGLMBandit("probit", D, T, S, 1.0, 0.02, rng, ledger=Ledger(ApproxDP(1.0, 0.02)))
    with pytest.raises(ValueError, match="give a ledger"):
        JointDPGLMBandit("probit", D, T, S, rng=rng)
    with pytest.raises(TypeError, match="ledger must be"):
        JointDPGLMBandit("probit", D, T, S, rng=rng, ledger="4, 0.02")
    assert rng.bit_generator.state == state
    assert spent.root.spent == ApproxDP(1.0, 0.02)  # nothing more charged
