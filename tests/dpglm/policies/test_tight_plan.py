"""The ``tight`` plan of the joint-DP bandit: one Gaussian pool, RS-GLinUCB's constants in the limit."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest

from dpglm.envs import StochasticContextEnv
from dpglm.policies import run_policy_record
from dpglm.policies.joint_dp import JointDPGLMBandit
from dpglm.policies.rarely_switching import RSGLinUCB, rs_glinucb_parameters
from dpglm.policies.tight_plan import (
    gdp_epsilon,
    gdp_mu,
    plan_tight,
    planned_refits,
    tight_parameters,
)


def _pld_epsilon(mu_squares: list[float], delta: float) -> float:
    """ε at δ of Gaussian releases with the given μ², composed by dp-accounting's PLD accountant."""
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-3)
    counts: dict[float, int] = {}
    for mu_sq in mu_squares:
        if mu_sq > 0:
            counts[mu_sq] = counts.get(mu_sq, 0) + 1
    for mu_sq, count in counts.items():
        accountant.compose(dp_accounting.GaussianDpEvent(1.0 / math.sqrt(mu_sq)), count)
    return accountant.get_epsilon(delta)


def _policy(eps: float, S: float = 2.5, horizon: int = 5000) -> JointDPGLMBandit:
    return JointDPGLMBandit("probit", 3, horizon, S, eps, 0.02, np.random.default_rng(0))


def test_gdp_mu_and_epsilon_invert_each_other_and_match_dp_accounting():
    for eps in (0.5, 4.0, 8.0):
        mu = gdp_mu(eps, 0.02)
        assert gdp_epsilon(mu, 0.02) == pytest.approx(eps, abs=1e-6)
        assert _pld_epsilon([mu * mu], 0.02) == pytest.approx(eps, rel=3e-3)


@pytest.mark.parametrize("eps, S", [(4.0, 2.5), (8.0, 3.0), (2.0, 2.0)])
def test_the_plan_never_allows_more_than_the_asked_guarantee(eps, S):
    policy = _policy(eps, S)
    plan = policy.plan
    assert plan.allowed_mu_sq() <= plan.mu_sq_pool * (1 + 1e-12)
    parts = [plan.mu_sq_trees] + [plan.mu_sq_refit_o] * plan.refits_o + [plan.mu_sq_refit_tau] * plan.refits_tau
    allowed = _pld_epsilon(parts, 0.02)  # composed by an independent accountant
    assert allowed <= eps * (1 + 3e-3)
    # The pool is a zCDP account of the asked (ε, δ) (CKS): all it can release is worth
    # 0.83–0.86 of ε exactly (the rest is the zCDP → (ε, δ) conversion's slack).
    assert allowed >= 0.8 * eps
    assert float(policy.ledger.guarantee().eps) <= eps


def test_constants_tend_to_rs_glinucb_as_the_noise_vanishes():
    base = rs_glinucb_parameters("probit", 3, 5000, 2.5, delta=0.02)
    p = tight_parameters("probit", 3, 5000, 2.5, 0.02, 0.0, 0.0)
    for name in ("lam", "lam_h", "floor_v", "floor_h", "beta", "exploration_threshold", "elimination_width",
                 "switch_factor", "fit_lam", "centre", "switch_rule"):
        assert getattr(p, name) == getattr(base, name), name
    assert p.refit_o_factor == pytest.approx(1.0, abs=1e-8) and p.refit_o_factor > 1
    q = tight_parameters("probit", 3, 5000, 2.5, 0.02, 2.0, 3.0, noise_term=0.5)  # η = 0.5 for the check
    assert (q.lam, q.lam_h) == (base.lam + 2.0, base.lam_h + 3.0)
    assert q.switch_factor == pytest.approx(1.5 * (1 + 0.5 * 3.0 / q.floor_h) ** 3)
    # At ε = 10⁶ the planner's noise terms are negligible and Criterion I can fire, as in RS-GLinUCB.
    policy = _policy(1e6)
    assert policy.exploration_possible
    from dpglm.policies.joint_dp import tree_noise_bound

    noise_v = tree_noise_bound(policy.design_v.tree.sigma, policy.design_v.tree.depth, 3, 5000, 0.02)
    assert policy.params.lam == base.lam + noise_v and noise_v < 0.5
    assert policy.params.centre == "midpoint" and policy.params.switch_rule == "determinant"


def test_plan_shares_and_refit_counts():
    plan = plan_tight(6.0, exploration=True, refits_o=10, refits_tau=20, tree_share=0.5, o_share=0.25)
    # Both trees are one pair (tree_pair): each gets the whole tree share, which is their joint cost.
    assert plan.mu_sq_v == plan.mu_sq_h == plan.mu_sq_trees == pytest.approx(3.0)
    assert plan.mu_sq_refit_o * 10 == pytest.approx(0.75) and plan.mu_sq_refit_tau * 20 == pytest.approx(2.25)
    no_v = plan_tight(6.0, exploration=False, refits_o=10, refits_tau=20, tree_share=0.5)
    assert (no_v.mu_sq_v, no_v.refits_o, no_v.mu_sq_h, no_v.mu_sq_trees) == (0.0, 0, 3.0, 3.0)
    assert no_v.mu_sq_refit_tau * 20 == pytest.approx(3.0)
    # Determinant-rule count: log det grows by at most d ln(1 + (b + T·leaf/d)/λ_H); a switch
    # needs ln c of it (counted here by brute force on the bound).
    p = tight_parameters("probit", 3, 5000, 2.5, 0.02, 0.0, 1.0)
    growth = 3 * math.log(1 + (1.0 + 5000 * 0.1 / 3) / p.lam_h)
    assert planned_refits(p, 5000, 3, 0.1, 1.0, which="tau") == math.ceil(growth / math.log(p.switch_factor))


def test_tight_is_the_default_preset():
    assert _policy(4.0).preset == "tight"


@pytest.mark.slow
@pytest.mark.parametrize("S", [2.0, 2.5, 3.0])
def test_at_huge_epsilon_tight_regret_equals_rs_glinucb_on_table2_cells(S):
    # Table 2 cells (probit, d = 3, K = 20, T = 5000), 10 seeds: mean regret of the tight plan
    # at ε = 10⁶ equals RS-GLinUCB's within two standard errors of the paired difference.
    diffs, rs = [], []
    for seed in range(10):
        env = StochasticContextEnv("probit", 3, 20, S, 5000, np.random.default_rng([500, seed]))
        r = run_policy_record(RSGLinUCB("probit", 3, 5000, S, delta=0.02), env).regret[-1]
        t = run_policy_record(JointDPGLMBandit("probit", 3, 5000, S, 1e6, 0.02, np.random.default_rng([501, seed])),
                              env).regret[-1]
        diffs.append(t - r)
        rs.append(r)
    se = np.std(diffs, ddof=1) / math.sqrt(len(diffs))
    print(f"S={S}: RS-GLinUCB {np.mean(rs):.1f}, tight at 1e6 minus it {np.mean(diffs):.1f} ± {se:.1f}")
    assert abs(np.mean(diffs)) <= 2 * se + 1e-9, (np.mean(rs), np.mean(diffs), se)


def test_an_epsilon_near_the_float_limit_plans_with_the_largest_float_mu_squared():
    """Found by the slow fuzz test: ε = 1e308 gave a pool μ² beyond any float (a raw OverflowError)."""
    policy = JointDPGLMBandit("logistic", 3, 30, 1.0, np.float64(1e308), 1e-5, np.random.default_rng(0), clip=1.0)
    rng = np.random.default_rng(1)
    for _ in range(30):
        policy.choose(rng.uniform(-0.5, 0.5, (4, 3)))
        policy.observe(float(rng.random() < 0.5))
    spent = policy.ledger.guarantee()
    assert 0 < spent.eps <= 1e308 and spent.delta <= 1e-5  # planned with less than the budget: never more
