"""Environments: instance construction, coupling, validation, and the regret by hand."""

import numpy as np
import pytest
from scipy import stats

from dpglm.envs import AdversarialContextEnv, StochasticContextEnv
from dpglm.glm import LOGISTIC, PROBIT
from dpglm.policies import Policy, run_policy, run_policy_record


class FixedSequence(Policy):
    """Plays a given index sequence; records what it saw."""

    def __init__(self, d, choices):
        super().__init__(d)
        self.choices = list(choices)
        self.seen, self.got = [], []

    def choose(self, arms):
        self.seen.append(np.array(arms))
        return self.choices[len(self.seen) - 1]

    def observe(self, reward):
        self.got.append(self._check_reward(reward))


def test_stochastic_instance_matches_the_paper_setup():
    env = StochasticContextEnv(PROBIT, d=3, n_arms=20, S=2.5, horizon=400, rng=np.random.default_rng(1))
    assert np.linalg.norm(env.theta_star) == pytest.approx(2.5)
    contexts = env.context_sequence
    norms = np.linalg.norm(contexts, axis=-1)
    assert contexts.shape == (400, 20, 3) and norms.max() <= 1.0
    # Uniform in the 3-ball: P(‖x‖ ≤ r) = r³, so ‖x‖³ is U(0, 1) (KS test, 8000 points).
    assert stats.kstest(norms.ravel() ** 3, "uniform").pvalue > 1e-3
    # κ is the max of 1/φ(⟨x, θ*⟩) over all contexts, below the sup over the ball 1/φ(S).
    z = contexts @ env.theta_star
    assert env.kappa == pytest.approx(1 / stats.norm.pdf(np.abs(z).max()), rel=1e-10)
    assert env.kappa < 1 / stats.norm.pdf(2.5)


def test_regret_by_hand_and_reward_coupling():
    rng = np.random.default_rng(7)
    env = StochasticContextEnv(LOGISTIC, d=2, n_arms=3, S=2.0, horizon=5, rng=rng)
    choices = [0, 1, 2, 1, 0]
    policy = FixedSequence(2, choices)
    regret = run_policy(policy, env)
    expected, total = [], 0.0
    for t, i in enumerate(choices):
        means = 1 / (1 + np.exp(-(policy.seen[t] @ env.theta_star)))
        total += means.max() - means[i]
        expected.append(total)
    np.testing.assert_allclose(regret, expected, rtol=1e-12)
    assert set(policy.got) <= {0.0, 1.0}
    # Same seed, another env object: same contexts, and the same reward for the same arm.
    env2 = StochasticContextEnv(LOGISTIC, d=2, n_arms=3, S=2.0, horizon=5, rng=np.random.default_rng(7))
    other = FixedSequence(2, choices)
    run_policy(other, env2)
    for a, b in zip(policy.seen, other.seen, strict=True):
        np.testing.assert_array_equal(a, b)
    assert policy.got == other.got


def test_contexts_do_not_depend_on_the_policy_stream():
    a = StochasticContextEnv(PROBIT, 3, 4, 2.0, 10, np.random.default_rng(3))
    b = StochasticContextEnv(PROBIT, 3, 4, 2.0, 10, np.random.default_rng(3))
    run_policy(FixedSequence(3, [0] * 10), a)
    run_policy(FixedSequence(3, [3] * 10), b)
    for t in range(10):
        np.testing.assert_array_equal(a.context_sequence[t], b.context_sequence[t])


def test_bernoulli_reward_frequency():
    theta = np.array([1.0, 0.0])
    contexts = np.tile(np.array([[0.5, 0.0], [-0.5, 0.0]]), (20000, 1, 1))
    env = AdversarialContextEnv(PROBIT, theta, contexts, np.random.default_rng(0))
    record = run_policy_record(FixedSequence(2, [0] * 20000), env)
    mean = stats.norm.cdf(0.5)
    # 5-sigma binomial band around Φ(0.5).
    assert abs(record.rewards.mean() - mean) < 5 * np.sqrt(mean * (1 - mean) / 20000)
    np.testing.assert_allclose(record.instant_regret, 0.0)


def test_adaptive_adversary_sees_history_and_is_validated():
    calls = []

    def adversary(t, actions, rewards):
        calls.append((t, actions.copy(), rewards.copy()))
        return np.array([[0.1 * (t % 3), 0.0], [0.0, 0.5]])

    env = AdversarialContextEnv(LOGISTIC, np.array([1.0, -1.0]), adversary, np.random.default_rng(2),
                                horizon=4, n_arms=2)
    run_policy(FixedSequence(2, [1, 0, 1, 0]), env)
    assert [c[0] for c in calls] == [0, 1, 2, 3]
    np.testing.assert_array_equal(calls[3][1], [1, 0, 1])
    assert env.kappa == pytest.approx(max(1 / LOGISTIC.dmu(np.array([0.0, -0.5, 0.1, 0.2]))))

    bad = AdversarialContextEnv(LOGISTIC, np.ones(2), lambda t, a, r: np.array([[1.0, 1.0], [0, 0]]),
                                np.random.default_rng(0), horizon=2, n_arms=2)
    with pytest.raises(ValueError, match="unit ball"):
        bad.contexts(0)
    wrong = AdversarialContextEnv(LOGISTIC, np.ones(2), lambda t, a, r: np.zeros((3, 2)),
                                  np.random.default_rng(0), horizon=2, n_arms=2)
    with pytest.raises(ValueError, match="shape"):
        wrong.contexts(0)


def test_custom_rewards_are_checked_against_the_reward_bound():
    contexts = np.zeros((2, 2, 2))
    env = AdversarialContextEnv(PROBIT, np.ones(2), contexts, np.random.default_rng(0),
                                rewards=lambda t, i, mean: 1.5)
    env.contexts(0)
    with pytest.raises(ValueError, match=r"\[0, R\]"):
        env.pull(0, 0)
    with pytest.raises(ValueError, match=r"\[0, R\]"):
        AdversarialContextEnv(PROBIT, np.ones(2), contexts, np.random.default_rng(0),
                              rewards=np.array([[0.0, 1.0], [-0.1, 0.0]]))
    fixed = AdversarialContextEnv(PROBIT, np.ones(2), contexts, np.random.default_rng(0),
                                  rewards=np.array([[0.0, 1.0], [0.25, 0.0]]))
    assert run_policy_record(FixedSequence(2, [1, 0]), fixed).rewards.tolist() == [1.0, 0.25]


@pytest.mark.parametrize(
    "contexts, message",
    [
        (np.full((3, 2, 2), 0.8), "unit ball"),
        (np.where(np.arange(12).reshape(3, 2, 2) == 5, np.nan, 0.1), "finite"),
        (np.zeros((3, 2)), "shape"),
        (np.zeros((3, 2, 3)), "shape"),
    ],
)
def test_context_validation(contexts, message):
    with pytest.raises(ValueError, match=message):
        AdversarialContextEnv(PROBIT, np.ones(2), contexts, np.random.default_rng(0))


def test_protocol_errors():
    env = StochasticContextEnv(PROBIT, 2, 3, 1.0, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="before pull"):
        env.pull(0, 0)
    with pytest.raises(ValueError, match="current round"):
        env.contexts(1)
    env.contexts(0)
    with pytest.raises(ValueError, match="index"):
        env.pull(0, 3)
    with pytest.raises(TypeError, match="index"):
        env.pull(0, 1.0)
    env.pull(0, 1)
    env.contexts(1)
    env.pull(1, 0)
    with pytest.raises(ValueError, match="horizon exceeded"):
        env.contexts(2)
    with pytest.raises(ValueError, match="S"):
        StochasticContextEnv(PROBIT, 2, 3, 0.0, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_arms"):
        StochasticContextEnv(PROBIT, 2, 0, 1.0, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="theta_star"):
        StochasticContextEnv(PROBIT, 2, 3, 1.0, 2, np.random.default_rng(0), theta_star=np.array([2.0, 0.0]))
    with pytest.raises(TypeError, match="rng"):
        StochasticContextEnv(PROBIT, 2, 3, 1.0, 2, 0)


def test_policy_boundary_checks():
    p = FixedSequence(2, [])
    with pytest.raises(ValueError, match="unit ball"):
        p._check_arms(np.array([[1.0, 1.0]]))
    with pytest.raises(ValueError, match="finite"):
        p._check_arms(np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match="shape"):
        p._check_arms(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"\[0, R\]"):
        p._check_reward(1.5)
    with pytest.raises(ValueError, match=r"\[0, R\]"):
        p._check_reward(float("nan"))


def test_blocks_are_the_spawned_children_of_the_context_and_reward_streams():
    from dpglm.envs import BLOCK_ROUNDS, sample_unit_ball
    from dpglm.glm import kappa

    T, K, d = 2 * BLOCK_ROUNDS + 100, 4, 3
    env = StochasticContextEnv(PROBIT, d, K, 2.0, T, np.random.default_rng(11))
    # Reference: block b is child b of the spawned context (reward) stream, drawn by SeedSequence.spawn.
    _, context_rng, reward_rng = np.random.default_rng(11).spawn(3)
    blocks = context_rng.bit_generator.seed_seq.spawn(3)
    sizes = [BLOCK_ROUNDS, BLOCK_ROUNDS, 100]
    expected = np.concatenate([sample_unit_ball(np.random.default_rng(s), (n, K), d)
                               for s, n in zip(blocks, sizes, strict=True)])
    np.testing.assert_array_equal(env.context_sequence, expected)
    uniforms = np.concatenate([np.random.default_rng(s).random((n, K))
                               for s, n in zip(reward_rng.bit_generator.seed_seq.spawn(3), sizes, strict=True)])
    choices = [t % K for t in range(T)]
    record = run_policy_record(FixedSequence(d, choices), env)
    means = PROBIT.mu(np.einsum("tkd,d->tk", expected, env.theta_star))
    rounds = np.arange(T)
    np.testing.assert_array_equal(record.rewards, (uniforms[rounds, choices] < means[rounds, choices]) * 1.0)
    assert env.kappa == kappa(PROBIT, env.theta_star, expected)
    np.testing.assert_array_equal(env.context_window(BLOCK_ROUNDS - 3, BLOCK_ROUNDS + 2),
                                  expected[BLOCK_ROUNDS - 3: BLOCK_ROUNDS + 2])


def test_every_policy_on_one_seed_faces_the_same_data_across_blocks():
    from dpglm.envs import BLOCK_ROUNDS

    T = BLOCK_ROUNDS + 50
    a = StochasticContextEnv(LOGISTIC, 2, 3, 2.0, T, np.random.default_rng(5))
    b = StochasticContextEnv(LOGISTIC, 2, 3, 2.0, T, np.random.default_rng(5))
    first = FixedSequence(2, [0] * T)
    second = FixedSequence(2, [0 if t % 2 else 2 for t in range(T)])
    ra, rb = run_policy_record(first, a), run_policy_record(second, b)
    np.testing.assert_array_equal(np.array(first.seen), np.array(second.seen))
    same = np.arange(T) % 2 == 1
    np.testing.assert_array_equal(ra.rewards[same], rb.rewards[same])
    # A second run on the same env (reset) replays the same blocks.
    again = FixedSequence(2, [0] * T)
    np.testing.assert_array_equal(run_policy_record(again, a).rewards, ra.rewards)


def test_memory_does_not_grow_with_the_horizon_times_arms():
    import tracemalloc

    T, K, d = 100_000, 20, 10  # all contexts up front would be T·K·d·8 B = 160 MB
    tracemalloc.start()
    env = StochasticContextEnv(PROBIT, d, K, 3.0, T, np.random.default_rng(0))
    env.reset()
    for t in range(3000):
        env.contexts(t)
        env.pull(t, 0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # O(T) bookkeeping (actions, rewards, regret: 3 · 0.8 MB) plus one block (1024·K·d·8 B = 1.6 MB, ×~3).
    assert peak < 12e6, peak
