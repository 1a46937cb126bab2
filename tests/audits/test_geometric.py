"""Geometric-batch Laplace mean audit: consistent on the real estimator, refutes a sample reused across batches."""

import numpy as np
import pytest

from audits.geometric import GeometricBatchAudit
from audits.planted import HalvedScaleGeometricMean, ReusedSampleGeometricMean


def test_claim_is_epsilon_for_the_whole_stream_by_parallel_composition():
    audit = GeometricBatchAudit(0.7, samples=16)
    claim = audit.claim()
    assert claim.epsilon == pytest.approx(0.7) and claim.delta == 0.0
    assert audit.parameters()["batches"] == 5  # refresh points 1, 2, 4, 8, 16


def test_first_batch_scores_are_laplace_location_pair():
    audit = GeometricBatchAudit(1.0, samples=4)
    rng = np.random.default_rng(11)
    null, alternative = audit.sample(0, 2000, rng), audit.sample(1, 2000, rng)
    # d₁ = first reward + Lap(1/ε): medians 0 and 1 (standard error 0.022 at 2000 runs),
    # mean absolute deviation 1/ε (standard error 0.022).
    assert np.median(null[:, 0]) == pytest.approx(0.0, abs=0.1)
    assert np.median(alternative[:, 0]) == pytest.approx(1.0, abs=0.1)
    assert np.mean(np.abs(null[:, 0])) == pytest.approx(1.0, abs=0.08)


def test_correct_estimator_is_consistent_and_tight():
    result = GeometricBatchAudit(1.0, samples=8, arms=1).run(2_000, seed=4)
    assert result.verdict == "consistent"
    assert result.statistic == "first batch"
    assert 0.75 <= result.epsilon_lower_bound <= 1.0


def test_sample_reused_across_batches_is_refuted():
    # The first reward now enters all 4 batches: the true ε is 4ε.
    result = GeometricBatchAudit(1.0, samples=8, arms=1, mechanism_class=ReusedSampleGeometricMean).run(1_000, seed=4)
    assert result.verdict == "violated"
    assert result.statistic == "all batches"
    assert 1.5 < result.epsilon_lower_bound <= 4.0


def test_runs_use_a_ledger_each_as_dp_tt_and_adap_tt_do():
    # AdaP-TT (forget=True) releases each batch alone: d₁ is the first release, the others hold no x₁.
    audit = GeometricBatchAudit(1.0, samples=4, arms=2, forget=True)
    rng = np.random.default_rng(2)
    alternative = audit.sample(1, 1500, rng)
    assert np.median(alternative[:, 0]) == pytest.approx(1.0, abs=0.12)
    accounts = audit._accounts(3)
    assert len({id(account) for account in accounts}) == 3
    assert audit.claim().epsilon == pytest.approx(1.0)


def test_halved_scale_is_refuted():
    result = GeometricBatchAudit(1.0, samples=4, arms=1, mechanism_class=HalvedScaleGeometricMean).run(1_000, seed=4)
    assert result.verdict == "violated"
    assert 1.3 < result.epsilon_lower_bound <= 2.0


def test_samples_must_end_a_batch():
    with pytest.raises(ValueError, match="samples"):
        GeometricBatchAudit(1.0, samples=6)
