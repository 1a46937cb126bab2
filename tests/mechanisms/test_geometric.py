"""GeometricBatchMean: batch boundaries, Laplace noise law, ledger cost ε, refusal, validation."""

import numpy as np
import pytest
from scipy import stats

from accounting import ApproxDP, BudgetExceeded, Ledger, PureDP
from mechanisms.geometric import GeometricBatchMean, refresh_points


def test_refresh_points_closed_form():
    assert refresh_points(1.0)[:6].tolist() == [1, 2, 4, 8, 16, 32]
    # ⌈1.5^k⌉ = 1, 2, 3, 4, 6, 8, 12, 18, 26 (1.5^8 = 25.63)
    assert refresh_points(0.5)[:9].tolist() == [1, 2, 3, 4, 6, 8, 12, 18, 26]
    with pytest.raises(ValueError, match="eta"):
        refresh_points(0.0)


def test_refresh_points_are_exact_over_the_whole_range():
    # η = 1: exactly the powers of two up to 2^53 (a float exp(k·log 2) gave 2^25 + 1).
    assert refresh_points(1.0).tolist() == [2**k for k in range(54)]
    # η = 0.5: ⌈3^k / 2^k⌉ in exact integer arithmetic, deduplicated.
    expected = sorted({-(-(3**k) // 2**k) for k in range(200) if -(-(3**k) // 2**k) <= 2**53})
    assert refresh_points(0.5).tolist() == expected


@pytest.mark.parametrize("epsilon", [0.01, 0.03, 0.07, 0.1, 0.3, 0.7, 1.1, 3.3, 9.99])
def test_noise_scale_never_undercuts_the_charged_epsilon(epsilon):
    from fractions import Fraction

    mech = GeometricBatchMean(Ledger(PureDP(epsilon)).root, 2, epsilon, np.random.default_rng(0))
    # The real loss of Lap(b) on sensitivity 1 is 1/b: never above the charged decimal ε.
    assert 1 / Fraction(mech.scale) <= Fraction(repr(epsilon))
    assert mech.scale < 1 / epsilon * (1 + 1e-15)


def _feed(mech, arm_counts_rewards, rng):
    """Feed one run batch by batch; rewards are Bernoulli(0.3); returns raw batch sums per arm."""
    raw = {a: [] for a in range(mech.n_arms)}
    for _ in range(arm_counts_rewards):
        for a in range(mech.n_arms):
            n = int(mech.next_refresh[0, a] - mech.counts[0, a])
            s = float(rng.binomial(n, 0.3))
            c = np.zeros(mech.n_arms, dtype=np.int64)
            ss = np.zeros(mech.n_arms)
            c[a], ss[a] = n, s
            mech.observe(c, ss)
            raw[a].append(s)
    return raw


def test_whole_stream_costs_epsilon_by_parallel_composition(rng):
    ledger = Ledger(PureDP(0.5))
    mech = GeometricBatchMean(ledger.root, 3, 0.5, rng)
    _feed(mech, 6, np.random.default_rng(1))
    assert mech.batches.tolist() == [[6, 6, 6]]
    assert mech.phase_counts.tolist() == [[32, 32, 32]]  # counts 1, 2, 4, …, 32
    assert ledger.guarantee().cost == PureDP(0.5)
    assert "GeometricBatchMean ×18" in ledger.report()


def test_noise_is_laplace_one_over_eps_and_cumulative():
    eps, runs = 0.7, 4000
    ledgers = [Ledger(PureDP(eps)) for _ in range(runs)]
    mech = GeometricBatchMean([ledger.root for ledger in ledgers], 1, eps, np.random.default_rng(3))
    # batch 1: one reward of 1 each; batch 2: one reward of 0
    rel1 = mech.observe(np.ones((runs, 1), dtype=np.int64), np.ones((runs, 1)))
    v1 = np.array([r.value for _, _, r in rel1])
    rel2 = mech.observe(np.ones((runs, 1), dtype=np.int64), np.zeros((runs, 1)))
    v2 = np.array([r.value for _, _, r in rel2])
    assert stats.kstest(v1 - 1.0, stats.laplace(scale=1 / eps).cdf).pvalue > 1e-3
    # cumulative: S̃₂ − S̃₁ = 0 + fresh Lap(1/ε), independent of the first noise
    d = v2 - v1
    assert stats.kstest(d, stats.laplace(scale=1 / eps).cdf).pvalue > 1e-3
    assert abs(np.corrcoef(d, v1)[0, 1]) < 0.06
    assert mech.phase_counts[:, 0].tolist() == [2] * runs


def test_forget_keeps_only_the_last_batch():
    ledger = Ledger(PureDP(1e6))
    mech = GeometricBatchMean(ledger.root, 1, 1e6, np.random.default_rng(0), forget=True)  # tiny noise
    mech.observe(np.array([1]), np.array([1.0]))
    mech.observe(np.array([1]), np.array([0.0]))
    rel = mech.observe(np.array([2]), np.array([2.0]))
    assert rel[0][2].value == pytest.approx(2.0, abs=1e-4)
    assert mech.phase_counts.tolist() == [[2]]


def test_refusal_draws_no_noise_and_changes_nothing():
    ledger = Ledger(PureDP(0.1))
    rng = np.random.default_rng(5)
    mech = GeometricBatchMean(ledger.root, 2, 0.2, rng)  # each batch asks 0.2 > 0.1
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceeded):
        mech.observe(np.array([1, 0]), np.array([1.0, 0.0]))
    assert rng.bit_generator.state == state
    assert mech.counts.tolist() == [[0, 0]] and mech.batches.tolist() == [[0, 0]]


def test_bad_input_raises(rng):
    ledger = Ledger(PureDP(1.0))
    mech = GeometricBatchMean(ledger.root, 2, 1.0, rng)
    with pytest.raises(ValueError, match="boundary"):
        mech.observe(np.array([2, 0]), np.array([1.0, 0.0]))  # skips the refresh at count 1
    with pytest.raises(ValueError, match="shape"):
        mech.observe(np.array([1, 0, 0]), np.array([1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="epsilon"):
        GeometricBatchMean(ledger.root, 2, 0.0, rng)
    # a tiny normal epsilon (found by the slow fuzz test): 1/epsilon grid units exceed the exact sampler's 2^52
    with pytest.raises(ValueError, match=r"^epsilon=1\.26438e-277 is too small .* > 2\^52$"):
        GeometricBatchMean(ledger.root, 2, 1.264378214467403e-277, rng)
    assert ledger.root.spent.eps == 0
    with pytest.raises(ValueError, match="n_arms"):
        GeometricBatchMean(ledger.root, 0, 1.0, rng)
    with pytest.raises(TypeError, match="rng"):
        GeometricBatchMean(ledger.root, 2, 1.0, 42)
    zc = Ledger(ApproxDP(1.0, 1e-6)).split({"z": 1}, currency={"z": "zcdp"})["z"]
    with pytest.raises(ValueError, match="pure"):
        GeometricBatchMean(zc, 2, 1.0, rng)


@pytest.mark.parametrize("bad, saturated", [(1.5, 1.0), (-0.1, 0.0), (float("nan"), 0.0), (float("inf"), 1.0)])
def test_reward_sums_outside_their_domain_are_saturated_not_refused(bad, saturated):
    # A reward sum is private: refusing one outside [0, counts] for free would tell the caller
    # about the data, so it is clipped into [0, counts] (NaN read as 0) and released under the
    # same charge. Reference: the same seed fed the saturated value (docs/mechanisms.md).
    def first_release(value):
        ledger = Ledger(PureDP(1.0))
        mech = GeometricBatchMean(ledger.root, 2, 1.0, np.random.default_rng(7))
        (_, _, release), = mech.observe(np.array([1, 0]), np.array([value, 0.0]))
        return release.value, ledger.root.spent

    assert first_release(bad) == first_release(saturated)


def test_same_seed_same_numbers():
    def run(seed):
        ledger = Ledger(PureDP(1.0))
        mech = GeometricBatchMean(ledger.root, 2, 1.0, np.random.default_rng(seed))
        return [r.value for _, _, r in mech.observe(np.array([1, 1]), np.array([1.0, 0.0]))]

    assert run(9) == run(9) and run(9) != run(10)
