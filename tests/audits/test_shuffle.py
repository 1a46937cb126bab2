"""Shuffled bit-sum audit: consistent with the exact accountant, refutes a shuffler that does not shuffle."""

import numpy as np
import pytest
from scipy import stats

from audits.planted import identity_shuffler
from audits.shuffle import ShuffleBitSumAudit
from mechanisms.shuffle_accountant import (
    bitsum_delta_for_configuration,
    bitsum_local_epsilon,
)


@pytest.fixture(scope="module")
def audit():
    return ShuffleBitSumAudit(1.0, 1e-5, n_users=200)


def test_counts_follow_the_binomial_law_of_the_protocol(audit):
    rng = np.random.default_rng(8)
    null = audit.sample(0, 4000, rng)
    a = audit.gamma / 2
    # D0: n messages Ber(γ/2). Mean and variance within sampling error of the closed form.
    expected_mean, expected_var = 200 * a, 200 * a * (1 - a)
    assert null[:, 0].mean() == pytest.approx(expected_mean, abs=5 * np.sqrt(expected_var / 4000))
    assert null[:, 0].var() == pytest.approx(expected_var, rel=0.08)
    # A uniform shuffle leaves position 0 a typical message: P[1] = γ/2 under D0.
    assert stats.binomtest(int(null[:, 1].sum()), 4000, a).pvalue > 1e-3


def test_correct_shuffle_is_consistent_and_below_the_counts_exact_epsilon(audit):
    result = audit.run(20_000, seed=6)
    assert result.verdict == "consistent"
    assert result.statistic == "count"
    # The exact ε of the count alone (hockey-stick of the two count laws, all others 0) caps
    # what any test on the count can certify.
    count_eps = next(e for e in np.linspace(0.0, 1.0, 201)
                     if bitsum_delta_for_configuration(200, audit.gamma, float(e), 0) <= 1e-5)
    assert 0.1 < result.epsilon_lower_bound <= count_eps


def test_shuffler_that_does_not_shuffle_is_refuted():
    audit = ShuffleBitSumAudit(1.0, 1e-5, n_users=200, shuffler=identity_shuffler)
    result = audit.run(2_000, seed=6)
    assert result.verdict == "violated"
    assert result.statistic == "message at position 0"
    # User 0's message is then in the clear: the local randomizer's ε is all that is left.
    assert 1.0 < result.epsilon_lower_bound <= bitsum_local_epsilon(audit.gamma)
