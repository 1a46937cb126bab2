"""``JointDPGLMBandit(horizon=None)``: doubling epochs, each a fresh plan (docs/service.md, section 4).

``epoch_budget="parallel"``: epoch k split off under partition key k, the whole budget each;
``"sequential"``: the public share 1/(k(k+1)).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

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
                              first_horizon=FIRST, epoch_budget="sequential")
    assert isinstance(policy, DoublingEpochs)
    _play(policy, _env(), 0, T)
    assert policy.epoch == 4  # 20 + 40 + 80 = 140 < 150 rounds
    budgets = {a.path.rsplit("/", 1)[-1]: a.budget for a in ledger.accounts() if "epoch-" in a.path.rsplit("/", 1)[-1]}
    for k in range(1, 5):  # 1/(k(k+1)) of (4, 1/50), exactly
        assert budgets[f"epoch-{k}"] == ApproxDP(Fraction(4, k * (k + 1)), Fraction(1, 50 * k * (k + 1)))
    g = ledger.guarantee()
    assert g.eps <= 4 and getattr(g, "delta", 0) <= Fraction(1, 50)


def test_parallel_epochs_each_get_the_whole_budget_under_their_key_and_compose_by_max(tmp_path):
    ledger = Ledger(ApproxDP(4, Fraction(1, 50)), journal=tmp_path / "j.db")
    policy = JointDPGLMBandit("probit", 2, None, 1.0, rng=np.random.default_rng(1), ledger=ledger,
                              first_horizon=FIRST)
    assert policy.epoch_budget == "parallel"  # the default: every epoch restarts from scratch
    _play(policy, _env(), 0, T)
    assert policy.epoch == 4
    epochs = [ledger.account(f"epoch-{k}") for k in range(1, 5)]
    assert [e.partition for e in epochs] == [1, 2, 3, 4]
    assert all(e.budget == ApproxDP(4, Fraction(1, 50)) for e in epochs)
    used = [e.converted() for e in epochs]
    assert sum(u.eps for u in used) > 4  # composed sequentially they would not fit ...
    g = ledger.guarantee()  # ... by parallel composition: the max over epochs, ε and δ each
    assert (g.eps, g.delta) == (max(u.eps for u in used), max(u.delta for u in used))
    assert g.eps <= 4 and g.delta <= Fraction(1, 50)
    assert ledger.remaining == ApproxDP(0, 0)  # nothing sequential fits beside the epochs


@pytest.mark.parametrize("epoch_budget", ["parallel", "sequential"])
def test_epoch_2_uses_no_data_of_epoch_1(epoch_budget):
    """Two runs whose users differ in epoch 1 only: every later action is the same (and so is every budget)."""
    rng = np.random.default_rng(11)
    later_arms, later_rewards = rng.normal(size=(T, 5, 2)) / 3, rng.uniform(size=(T, 5))
    actions, budgets = [], []
    for first_users in (12, 13):
        users = np.random.default_rng(first_users)
        arms, rewards = later_arms.copy(), later_rewards.copy()
        arms[:FIRST], rewards[:FIRST] = users.normal(size=(FIRST, 5, 2)) / 3, users.uniform(size=(FIRST, 5))
        policy = JointDPGLMBandit("probit", 2, None, 1.0, 4.0, 0.02, np.random.default_rng(1), first_horizon=FIRST,
                                  epoch_budget=epoch_budget)
        played = []
        for t in range(T):
            a = policy.choose(arms[t])
            policy.observe(float(rewards[t, a]))
            played.append(a)
        actions.append(played)
        budgets.append([a.budget for a in policy.ledger.accounts() if a.name.startswith("epoch-")])
    assert actions[0][:FIRST] != actions[1][:FIRST]  # epoch 1 saw different users ...
    assert actions[0][FIRST:] == actions[1][FIRST:]  # ... and nothing of them reached a later epoch
    assert budgets[0] == budgets[1]


def test_an_unknown_epoch_budget_is_refused_before_any_split():
    ledger = Ledger(ApproxDP(4, 0.02))
    with pytest.raises(ValueError, match=r"^epoch_budget must be one of \('parallel', 'sequential'\), got 'both'$"):
        JointDPGLMBandit("probit", 2, None, 1.0, rng=np.random.default_rng(1), ledger=ledger, epoch_budget="both")
    assert ledger.accounts() == [ledger.root]


@pytest.mark.parametrize("epoch_budget", ["parallel", "sequential"])
def test_an_anytime_policy_restores_bit_identically_inside_its_second_epoch(tmp_path, epoch_budget):
    def fresh(journal):
        return JointDPGLMBandit("probit", 2, None, 1.0, rng=np.random.default_rng(1),
                                ledger=Ledger(ApproxDP(4, 0.02), journal=journal), first_horizon=FIRST,
                                epoch_budget=epoch_budget)

    full = fresh(tmp_path / "a.db")
    want, ledger_a = _play(full, _env(), 0, T), full.ledger
    policy, env = fresh(tmp_path / "b.db"), _env()
    got = _play(policy, env, 0, 37)
    policy.checkpoint(tmp_path / "cp.npz")
    policy.ledger.close()
    restored = Policy.restore(tmp_path / "cp.npz", ledger=Ledger.from_journal(tmp_path / "b.db"))
    got += _play(restored, env, 37, T)
    assert got == want
    assert restored.ledger.root.spent == ledger_a.root.spent  # nothing re-granted


def test_shuffle_anytime_epochs_and_restore(tmp_path):
    from dpglm.policies import ShuffleDPGLMBandit

    def fresh(journal):
        return ShuffleDPGLMBandit("probit", 2, None, 1.0, np.random.default_rng(3),
                                  ledger=Ledger(ApproxDP(4, Fraction(1, 50)), journal=journal), first_horizon=FIRST)

    full = fresh(tmp_path / "a.db")
    assert isinstance(full, DoublingEpochs)
    want = _play(full, _env(), 0, T)
    assert full.epoch == 4
    epoch3 = full.ledger.account("epoch-3")  # parallel: the whole budget under key 3
    assert epoch3.budget == ApproxDP(4, Fraction(1, 50)) and epoch3.partition == 3
    policy, env = fresh(tmp_path / "b.db"), _env()
    got = _play(policy, env, 0, 70)  # inside epoch 3
    policy.checkpoint(tmp_path / "cp.npz")
    restored = Policy.restore(tmp_path / "cp.npz", ledger=policy.ledger)
    got += _play(restored, env, 70, T)
    assert got == want
    assert restored.ledger.root.spent == full.ledger.root.spent  # type: ignore[attr-defined]


def test_a_checkpoint_stops_the_inner_epoch_and_every_mechanism_it_saved(tmp_path):
    """Issue 30: the inner epoch policy kept playing after the wrapper's checkpoint, and the restored policy
    then drew the same noise. Now every policy and mechanism in the checkpoint refuses; the restore plays on
    bit-identically to an uninterrupted run, so the noise is released once, by the restored copy."""
    from mechanisms.base import Mechanism

    def fresh(journal):
        return JointDPGLMBandit("probit", 2, None, 1.0, rng=np.random.default_rng(1),
                                ledger=Ledger(ApproxDP(4, 0.02), journal=journal), first_horizon=FIRST)

    want = _play(fresh(tmp_path / "a.db"), _env(), 0, T)
    policy, env = fresh(tmp_path / "b.db"), _env()
    got = _play(policy, env, 0, 37)  # inside epoch 2
    inner = policy.policy
    assert inner is not None
    trees = [inner.design_v.tree, inner.design_h.tree] if inner.exploration_possible else [inner.design_h.tree]
    policy.checkpoint(tmp_path / "cp.npz")
    arms = np.full((3, 2), 0.5)
    for call in (lambda: inner.choose(arms), lambda: inner.observe(1.0), lambda: policy.choose(arms)):
        with pytest.raises(RuntimeError, match="stopped by checkpoint"):
            call()
    for tree in trees:
        assert isinstance(tree, Mechanism)
        with pytest.raises(RuntimeError, match="stopped by checkpoint"):
            tree.append(np.zeros(2), 0.0)
    restored = Policy.restore(tmp_path / "cp.npz", ledger=Ledger.from_journal(tmp_path / "b.db"))
    got += _play(restored, env, 37, T)
    assert got == want
