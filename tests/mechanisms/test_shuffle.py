"""Shuffle protocols: message level vs count simulation, analyzer moments, the ledger contract."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from accounting import ZCDP, ApproxDP, BudgetExceeded, Ledger, PureDP
from mechanisms.shuffle import (
    ShuffleBitSum,
    ShuffleVectorSum,
    bitsum_analyze,
    bitsum_randomize,
    run_vector_summation,
    shuffle_messages,
    vector_analyze,
    vector_randomize,
)
from mechanisms.shuffle_accountant import bitsum_delta, vector_sum_delta


def _account(eps: float = 1e7, delta: float = 0.5):
    return Ledger(ApproxDP(eps, delta)).split({"shuffle": 1})["shuffle"]


def _gof_pvalue(samples: np.ndarray, pmf: np.ndarray) -> float:
    """Chi-square goodness of fit of integer samples to ``pmf`` (bins with expected < 5 pooled)."""
    observed = np.bincount(samples, minlength=len(pmf)).astype(float)
    expected = pmf * len(samples)
    order = np.argsort(expected)
    obs_bins, exp_bins, o_acc, e_acc = [], [], 0.0, 0.0
    for i in order:
        o_acc += observed[i]
        e_acc += expected[i]
        if e_acc >= 5:
            obs_bins.append(o_acc)
            exp_bins.append(e_acc)
            o_acc = e_acc = 0.0
    obs_bins[-1] += o_acc
    exp_bins[-1] += e_acc
    return float(stats.chisquare(obs_bins, exp_bins).pvalue)


# --------------------------------------------------------------------------- message level vs counts


def test_vector_messages_and_counts_match_the_exact_count_law(rounding_law):
    rng = np.random.default_rng(7)
    n, levels, bits, bound = 5, 3, 4, 1.0
    values = np.array([[0.9, -0.2], [-0.45, 0.1], [0.05, 0.7], [-1.0, -0.33], [0.5, 1.0]])
    exact = stats.binom.pmf(np.arange(n * bits + 1), n * bits, 0.5)
    for v in values[:, 0]:
        exact = np.convolve(exact, rounding_law(v, bound, levels))
    reps = 3000
    to_count = lambda z: np.rint((z[0] + n * bound) * levels / bound + bits * n / 2).astype(int)  # noqa: E731
    by_messages = np.array([to_count(run_vector_summation(values, bound, levels, bits, rng, method="messages"))
                            for _ in range(reps)])
    by_counts = np.array([to_count(run_vector_summation(values, bound, levels, bits, rng)) for _ in range(reps)])
    assert _gof_pvalue(by_messages, exact) > 1e-3
    assert _gof_pvalue(by_counts, exact) > 1e-3
    # and the two paths against each other (two-sample chi-square on the common support)
    table = np.stack([np.bincount(by_messages, minlength=len(exact)), np.bincount(by_counts, minlength=len(exact))])
    table = table[:, table.sum(axis=0) >= 10]
    assert stats.chi2_contingency(table).pvalue > 1e-3


def test_bitsum_messages_and_counts_match_the_exact_count_law():
    rng = np.random.default_rng(11)
    n, gamma = 8, 0.4
    bits = np.array([1, 0, 0, 1, 1, 0, 1, 0])
    a = gamma / 2
    exact = np.convolve(stats.binom.pmf(np.arange(5), 4, 1 - a), stats.binom.pmf(np.arange(5), 4, a))
    mech = ShuffleBitSum(_account(), n, rng, epsilon=50.0, delta=1e-9, gamma=gamma)
    to_count = lambda est: int(round(est * (1 - gamma) + gamma * n / 2))  # noqa: E731
    by_messages = np.array([to_count(mech.release(bits, method="messages").value) for _ in range(3000)])
    by_counts = np.array([to_count(mech.release(bits).value) for _ in range(3000)])
    assert _gof_pvalue(by_messages, exact) > 1e-3
    assert _gof_pvalue(by_counts, exact) > 1e-3


def test_shuffler_is_a_uniform_permutation():
    rng = np.random.default_rng(3)
    messages = np.array([1, 0, 0, 0, 0])
    positions = np.array([int(np.argmax(shuffle_messages(messages, rng))) for _ in range(5000)])
    assert _gof_pvalue(positions, np.full(5, 0.2)) > 1e-3
    shuffled = shuffle_messages(np.arange(20), rng)
    assert sorted(shuffled.tolist()) == list(range(20))


def test_vector_messages_are_fixed_length_and_analyzer_inverts_the_encoding():
    rng = np.random.default_rng(5)
    values = np.array([[1.0, -1.0, 0.0]] * 4)  # exact levels: no rounding randomness
    msgs = vector_randomize(values, 1.0, 2, 3, rng)
    assert msgs.shape == (4 * 3 * (2 * 2 + 3), 2)
    # remove the noise-bit ones to check the data ones: level(1.0)=4, level(-1.0)=0, level(0)=2
    data = msgs.reshape(4, 3, 7, 2)[:, :, :4, 1].sum(axis=(0, 2))
    assert data.tolist() == [16, 0, 8]
    noise_ones = msgs.reshape(4, 3, 7, 2)[:, :, 4:, 1].sum(axis=(0, 2))
    est = vector_analyze(msgs, 4, 3, 1.0, 2, 3)
    assert np.allclose(est, values.sum(axis=0) + (1.0 / 2) * (noise_ones - 3 * 4 / 2))


# --------------------------------------------------------------------------- analyzer moments


def test_bitsum_analyzer_unbiased_with_closed_form_variance():
    rng = np.random.default_rng(17)
    n, gamma = 200, 0.3
    bits = (np.arange(n) % 3 == 0).astype(int)
    mech = ShuffleBitSum(_account(), n, rng, epsilon=50.0, delta=1e-9, gamma=gamma)
    est = np.array([mech.release(bits).value for _ in range(4000)])
    var = n * (gamma / 2) * (1 - gamma / 2) / (1 - gamma) ** 2
    assert mech.variance == pytest.approx(var)
    assert abs(est.mean() - bits.sum()) < 4 * math.sqrt(var / len(est))
    # sample variance / var ~ chi2(k-1)/(k-1): 4000 draws give sd ~ 0.022
    assert est.var(ddof=1) / var == pytest.approx(1.0, abs=0.1)
    msg_est = np.array([bitsum_analyze(bitsum_randomize(bits, gamma, rng), gamma) for _ in range(2000)])
    assert abs(msg_est.mean() - bits.sum()) < 4 * math.sqrt(var / len(msg_est))


def test_vector_analyzer_unbiased_with_closed_form_variance():
    rng = np.random.default_rng(19)
    n, levels, bits, bound = 50, 8, 6, 2.0
    values = rng.uniform(-bound, bound, size=(n, 2))
    frac = ((values + bound) * levels / bound) % 1.0
    var = (bound / levels) ** 2 * ((frac * (1 - frac)).sum(axis=0) + n * bits / 4)
    est = np.array([run_vector_summation(values, bound, levels, bits, rng) for _ in range(4000)])
    assert np.all(np.abs(est.mean(axis=0) - values.sum(axis=0)) < 4 * np.sqrt(var / len(est)))
    assert np.allclose(est.var(axis=0, ddof=1) / var, 1.0, atol=0.1)


def test_matrix_release_is_symmetric_and_unbiased():
    rng = np.random.default_rng(23)
    n, d = 40, 3
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    outer = np.einsum("ni,nj->nij", x, x)
    mech = ShuffleVectorSum(_account(), n, (d, d), 1.0, rng, epsilon=5.0, delta=1e-6)
    assert mech.coordinates == d * (d + 1) // 2
    releases = np.array([mech.release(outer).value for _ in range(1000)])
    assert np.array_equal(releases, np.swapaxes(releases, 1, 2))
    sd = math.sqrt(mech.variance_bound() / len(releases))
    assert np.all(np.abs(releases.mean(axis=0) - outer.sum(axis=0)) < 4 * sd)


@pytest.mark.parametrize("n, d", [(2, 1), (37, 3), (9000, 10)])
def test_leaves_from_their_factors_are_the_formed_leaves_release_to_the_last_bit(n, d):
    # release(x, weights=w) forms w·(x_j x_k) a chunk of 4096 users at a time; the formed
    # leaves through the plain path are the reference: same entries, draws and output.
    rng = np.random.default_rng(41)
    x = rng.normal(size=(n, d))
    x *= rng.uniform(0, 1, size=(n, 1)) / np.linalg.norm(x, axis=1, keepdims=True)
    w = rng.uniform(0, 0.4, size=n)
    w[::7] = 0.0
    leaves = w[:, None, None] * np.einsum("ni,nj->nij", x, x)
    releases = []
    for factors in (False, True):
        mech = ShuffleVectorSum(_account(), n, (d, d), 0.4, np.random.default_rng(43), epsilon=2.0, delta=1e-6)
        out = mech.release(x, weights=w, partition="p") if factors else mech.release(leaves, partition="p")
        releases.append((out.value, out.receipt.cost, out.receipt.partition, mech.rng.bit_generator.state))
    (plain, cost, key, state), (factored, cost2, key2, state2) = releases
    np.testing.assert_array_equal(factored, plain)
    assert (cost, key, state) == (cost2, key2, state2)


@pytest.mark.parametrize("bad, message", [
    ("negative", "positive semidefinite"), ("trace", "trace <= bound"), ("nan", "finite"), ("inf", "finite")])
def test_a_bad_leaf_from_its_factors_is_refused_after_the_charge_before_any_draw(bad, message):
    rng = np.random.default_rng(47)
    n, d = 5000, 3  # the bad user sits in the second chunk: the first is checked and still not drawn
    x = rng.normal(size=(n, d))
    x /= 2 * np.linalg.norm(x, axis=1, keepdims=True)
    w = np.full(n, 0.5)
    if bad == "negative":
        w[4500] = -1e-3
    elif bad == "trace":
        x[4500] = [1.3, 0.6, 0.0]  # trace 0.5·2.05 > 1, every entry <= 1
    else:
        x[4500, 1] = np.nan if bad == "nan" else np.inf
    account = _account(10.0, 0.01)
    mech = ShuffleVectorSum(account, n, (d, d), 1.0, rng, epsilon=1.0, delta=1e-6)
    state = rng.bit_generator.state
    with pytest.raises(ValueError, match=f"{message}.*refused after the charge"):
        mech.release(x, weights=w)
    assert rng.bit_generator.state == state
    assert account.spent == ApproxDP(1.0, 1e-6)


def test_factor_and_formed_checks_agree_at_the_trace_bound():
    # Leaves whose trace sits within a few ulps of the bound: the factor path accepts exactly
    # the leaves the formed path accepts (same formed diagonal, same sum).
    rng = np.random.default_rng(53)
    seen = set()
    for _ in range(200):
        d = int(rng.integers(1, 12))
        x = rng.normal(size=(2, d))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        w = 1.0 + rng.integers(-4, 5, size=2) * 2.0**-52 + np.array([0.0, 1e-12])
        verdicts = []
        for factors in (False, True):
            mech = ShuffleVectorSum(_account(), 2, (d, d), 1.0, np.random.default_rng(0), epsilon=5.0, delta=1e-6)
            try:
                if factors:
                    mech.release(x, weights=w)
                else:
                    mech.release(w[:, None, None] * np.einsum("ni,nj->nij", x, x))
                verdicts.append(True)
            except ValueError:
                verdicts.append(False)
        assert verdicts[0] == verdicts[1]
        seen.add(verdicts[0])
    assert seen == {True, False}


# --------------------------------------------------------------------------- ledger contract


def test_release_charges_approx_dp_with_the_relation():
    rng = np.random.default_rng(29)
    account = _account(10.0, 0.01)
    mech = ShuffleVectorSum(account, 50, (2,), 1.0, rng, epsilon=1.0, delta=1e-6)
    # inputs="l2" (default): vectors of norm <= 1, composed under the per-rank shift bound (2g, floor(sqrt(2) g) + 1)
    assert vector_sum_delta(50, mech.noise_bits, mech.levels, 1.0, 2, max_shift=2.0, l2_shift=2.0) <= 1e-6
    assert vector_sum_delta(50, mech.noise_bits, mech.levels, 1.0, 2) > 1e-6  # too few bits for the box
    box = ShuffleVectorSum(account, 50, (2,), 1.0, rng, epsilon=1.0, delta=1e-6, inputs="box")
    assert vector_sum_delta(50, box.noise_bits, box.levels, 1.0, 2) <= 1e-6 < vector_sum_delta(
        50, box.noise_bits - 1, box.levels, 1.0, 2)
    release = mech.release(np.zeros((50, 2)))
    assert release.receipt.cost == ApproxDP(1.0, 1e-6)
    assert release.receipt.relation == "replace_one"
    assert release.receipt.mechanism == "ShuffleVectorSum"
    assert not release.value.flags.writeable


@pytest.mark.parametrize("kind", ["vector", "bitsum"])
def test_refused_charge_draws_no_noise(kind):
    rng = np.random.default_rng(31)
    account = _account(1.5, 1e-5)
    if kind == "vector":
        mech = ShuffleVectorSum(account, 50, (2,), 1.0, rng, epsilon=1.0, delta=1e-6)
        data = np.zeros((50, 2))
    else:
        mech = ShuffleBitSum(account, 50, rng, epsilon=1.0, delta=1e-6)
        data = np.zeros(50, dtype=int)
    mech.release(data)
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceeded):
        mech.release(data)
    assert rng.bit_generator.state == state


@pytest.mark.parametrize("mechanism", ["bitsum", "vector"])
@pytest.mark.parametrize("account, message", [
    (None, "account must be an accounting.Account .with a charge method., got NoneType"),
    ("x", "account must be an accounting.Account .with a charge method., got str"),
    ("zcdp", "account must charge in currency 'approx' for Shuffle(BitSum|VectorSum) .an ApproxDP.epsilon, delta. "
             "cost., got currency 'zcdp'"),
    ("pure", "got currency 'pure'"),
])
def test_an_account_that_cannot_pay_approx_dp_is_refused_at_construction(mechanism, account, message):
    # A zCDP or pure account cannot take an ApproxDP(eps, delta) charge: refused before anything is drawn.
    if account in ("zcdp", "pure"):
        account = Ledger(ZCDP(1.0) if account == "zcdp" else PureDP(1.0)).root
    rng = np.random.default_rng(37)
    state = rng.bit_generator.state
    with pytest.raises(TypeError, match=message):
        if mechanism == "bitsum":
            ShuffleBitSum(account, 50, rng, epsilon=1.0, delta=1e-6)
        else:
            ShuffleVectorSum(account, 50, (2,), 1.0, rng, epsilon=1.0, delta=1e-6)
    assert rng.bit_generator.state == state


def test_calibrated_gamma_meets_the_target():
    mech = ShuffleBitSum(_account(), 500, np.random.default_rng(0), epsilon=1.0, delta=1e-6)
    assert bitsum_delta(500, mech.gamma, 1.0) <= 1e-6


def test_certified_budget_is_never_above_the_charged_decimals():
    from fractions import Fraction

    # 1e-05 is stored as 1e-05 + 8e-22: the accountant must certify a float at or below
    # the decimal the ledger charges, for ε and δ alike.
    for epsilon, delta in [(1.0, 1e-5), (0.3, 1e-6), (0.7, 3e-7)]:
        mech = ShuffleBitSum(_account(), 500, np.random.default_rng(0), epsilon=epsilon, delta=delta)
        certified_eps, certified_delta = mech._certified
        assert Fraction(certified_eps) <= Fraction(repr(epsilon))
        assert Fraction(certified_delta) <= Fraction(repr(delta))
        assert bitsum_delta(500, mech.gamma, certified_eps) <= certified_delta


def test_bad_input_raises_naming_the_argument():
    rng = np.random.default_rng(41)
    account = _account()
    mech = ShuffleVectorSum(account, 4, (2, 2), 1.0, rng, epsilon=5.0, delta=1e-3)
    with pytest.raises(ValueError, match="symmetric"):
        mech.release(np.array([[[0.0, 0.5], [0.0, 0.0]]] * 4))
    with pytest.raises(ValueError, match="shape"):
        mech.release(np.zeros((3, 2, 2)))
    with pytest.raises(ValueError, match="bound"):
        mech.release(np.full((4, 2, 2), 1.5))
    with pytest.raises(ValueError, match="positive semidefinite"):  # inputs="l2": PSD, trace <= bound
        mech.release(np.array([[[0.0, 0.5], [0.5, 0.0]]] * 4))
    with pytest.raises(ValueError, match="trace <= bound"):
        mech.release(np.array([np.eye(2) * 0.6] * 4))
    with pytest.raises(ValueError, match="l2 norm <= bound"):
        ShuffleVectorSum(account, 4, (2,), 1.0, rng, epsilon=5.0, delta=1e-3).release(np.full((4, 2), 0.8))
    with pytest.raises(ValueError, match="inputs"):
        ShuffleVectorSum(account, 4, (2,), 1.0, rng, epsilon=5.0, delta=1e-3, inputs="linf")
    with pytest.raises(ValueError, match="finite"):
        mech.release(np.full((4, 2, 2), np.nan))
    with pytest.raises(ValueError, match="method"):
        mech.release(np.zeros((4, 2, 2)), method="fast")
    with pytest.raises(ValueError, match="relation"):
        ShuffleVectorSum(account, 4, (2,), 1.0, rng, epsilon=1.0, delta=1e-3, relation="add_remove")
    with pytest.raises(ValueError, match="noise_bits"):
        ShuffleVectorSum(account, 100, (2,), 1.0, rng, epsilon=0.5, delta=1e-6, noise_bits=100)
    with pytest.raises(ValueError, match="gamma"):
        ShuffleBitSum(account, 100, rng, epsilon=0.5, delta=1e-6, gamma=0.01)
    with pytest.raises(ValueError, match="bits"):
        ShuffleBitSum(account, 4, rng, epsilon=5.0, delta=1e-3).release(np.array([0, 1, 2, 0]))
    with pytest.raises(ValueError, match="epsilon"):
        ShuffleBitSum(account, 4, rng, epsilon=0.0, delta=1e-3)
    with pytest.raises(TypeError, match="rng"):
        ShuffleBitSum(account, 4, np.random.RandomState(0), epsilon=1.0, delta=1e-3)
    # The public refusals (shape, method, inputs, relation, noise_bits, gamma, epsilon, rng)
    # charged nothing; the seven refusals of private values (symmetric, bound, PSD, trace,
    # l2 norm, finite, a bit of 2) were charged first, ApproxDP(5, 1e-3) each
    # (docs/mechanisms.md, "Refusals that depend on the data").
    assert account.spent == ApproxDP(35, Fraction(7, 1000))


def test_partition_keys_compose_by_max():
    """Two releases on disjoint users (different keys) fit a budget that holds only one sequentially."""
    rng = np.random.default_rng(43)
    account = _account(1.5, 2e-6)
    mech = ShuffleVectorSum(account, 50, (2,), 1.0, rng, epsilon=1.0, delta=1e-6)
    first = mech.release(np.zeros((50, 2)), partition="batch-1")
    second = mech.release(np.zeros((50, 2)), partition="batch-2")
    assert first.receipt.partition == "batch-1" and second.receipt.partition == "batch-2"
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceeded):
        mech.release(np.zeros((50, 2)), partition="batch-1")
    assert rng.bit_generator.state == state


def test_box_inputs_accept_what_l2_refuses_and_cost_more_noise():
    """inputs="box" keeps the coordinate-wise composition: any entries in [-L, L], more noise bits."""
    rng = np.random.default_rng(47)
    account = _account()
    box = ShuffleVectorSum(account, 40, (3, 3), 1.0, rng, epsilon=4.0, delta=1e-5, inputs="box")
    l2 = ShuffleVectorSum(account, 40, (3, 3), 1.0, rng, epsilon=4.0, delta=1e-5)
    assert (box.input_set, l2.input_set) == ("box", "psd_trace")
    assert l2.levels == box.levels and l2.noise_bits < box.noise_bits / 5
    not_psd = np.broadcast_to(np.array([[0.0, 0.9, -0.9], [0.9, 1.0, 0.2], [-0.9, 0.2, -1.0]]), (40, 3, 3))
    assert box.release(not_psd).value.shape == (3, 3)
    with pytest.raises(ValueError, match="positive semidefinite"):
        l2.release(not_psd)
