"""``JointDPGLMBandit(horizon=None)``: doubling epochs, each a fresh plan on its public share (docs/service.md)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from accounting import ApproxDP, Ledger
from dpglm.envs import StochasticContextEnv
from dpglm.policies import JointDPGLMBandit, Policy
from dpglm.policies.anytime import DoublingEpochs

T, FIRST = 150, 20


def _play(policy: Policy, env: StochasticContextEnv, start: int, stop: int) -> list[int]:
    out = []
    for t in range(start, stop):
        a = policy.choose(env.contexts(t))
        policy.observe(env.pull(t, a))
        out.append(a)
    return out


def _env() -> StochasticContextEnv:
    env = StochasticContextEnv("probit", 2, 5, 1.0, T, np.random.default_rng([4, 4]))
    env.reset()
    return env


def test_epochs_double_and_epoch_k_gets_one_over_k_k_plus_1_of_the_budget(tmp_path):
    ledger = Ledger(ApproxDP(4, Fraction(1, 50)), journal=tmp_path / "j.db")
    policy = JointDPGLMBandit("probit", 2, None, 1.0, rng=np.random.default_rng(1), ledger=ledger,
                              first_horizon=FIRST)
    assert isinstance(policy, DoublingEpochs)
    _play(policy, _env(), 0, T)
    assert policy.epoch == 4  # 20 + 40 + 80 = 140 < 150 rounds
    budgets = {a.path.rsplit("/", 1)[-1]: a.budget for a in ledger.accounts() if "epoch-" in a.path.rsplit("/", 1)[-1]}
    for k in range(1, 5):  # 1/(k(k+1)) of (4, 1/50), exactly
        assert budgets[f"epoch-{k}"] == ApproxDP(Fraction(4, k * (k + 1)), Fraction(1, 50 * k * (k + 1)))
    g = ledger.guarantee()
    assert g.eps <= 4 and getattr(g, "delta", 0) <= Fraction(1, 50)


def test_an_anytime_policy_restores_bit_identically_inside_its_second_epoch(tmp_path):
    def fresh(journal):
        return JointDPGLMBandit("probit", 2, None, 1.0, rng=np.random.default_rng(1),
                                ledger=Ledger(ApproxDP(4, 0.02), journal=journal), first_horizon=FIRST)

    want = _play(fresh(tmp_path / "a.db"), _env(), 0, T)
    policy, env = fresh(tmp_path / "b.db"), _env()
    got = _play(policy, env, 0, 37)
    policy.checkpoint(tmp_path / "cp.npz")
    policy.ledger.close()
    restored = Policy.restore(tmp_path / "cp.npz", ledger=Ledger.from_journal(tmp_path / "b.db"))
    got += _play(restored, env, 37, T)
    assert got == want


def test_shuffle_anytime_epochs_and_restore(tmp_path):
    from dpglm.policies import ShuffleDPGLMBandit

    def fresh(journal):
        return ShuffleDPGLMBandit("probit", 2, None, 1.0, np.random.default_rng(3),
                                  ledger=Ledger(ApproxDP(4, Fraction(1, 50)), journal=journal), first_horizon=FIRST)

    full = fresh(tmp_path / "a.db")
    assert isinstance(full, DoublingEpochs)
    want = _play(full, _env(), 0, T)
    assert full.epoch == 4
    epoch3 = full.ledger.account("later-1/later-2/epoch-3")
    assert epoch3.budget == ApproxDP(Fraction(4, 12), Fraction(1, 600))
    policy, env = fresh(tmp_path / "b.db"), _env()
    got = _play(policy, env, 0, 70)  # inside epoch 3
    policy.checkpoint(tmp_path / "cp.npz")
    restored = Policy.restore(tmp_path / "cp.npz", ledger=policy.ledger)
    got += _play(restored, env, 70, T)
    assert got == want
    assert restored.ledger.root.spent == full.ledger.root.spent  # type: ignore[attr-defined]
