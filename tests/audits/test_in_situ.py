"""In-situ audit: the mechanisms a policy run builds are recorded whatever the preset and audited as built."""

import math

import numpy as np
import pytest
from scipy import stats

from audits.in_situ import InSituAudit, charged_sigma, node_noise, recording
from audits.planted import HalvedHTreeBandit
from mechanisms.base import _Constructed
from mechanisms.tree import BinaryTreeMechanism


def test_recording_sees_every_tree_and_refit_and_restores_the_hook():
    original = _Constructed.__call__
    for preset in ("tight", "calibrated"):
        records = InSituAudit(1.0, horizon=60, preset=preset).record(3)
        trees = [r for r in records if isinstance(r.instance, BinaryTreeMechanism)]
        assert trees and all(len([c for c in r.calls if c[0] == "append"]) == 60 for r in trees)
        assert any(r.cls.__name__ == "DPSGD" for r in records)
    assert _Constructed.__call__ is original


def test_node_noise_of_a_recorded_tree_is_standard_normal_over_the_charged_sigma():
    from accounting import ZCDP
    from audits.base import huge_budget_account

    rng = np.random.default_rng(5)
    with recording() as records:
        tree = BinaryTreeMechanism(huge_budget_account("zcdp"), 300, (2, 2), 2**0.5, rng, cost=ZCDP(0.5), psd=True)
        for _ in range(300):
            x = rng.normal(size=2)
            x /= math.sqrt(2) * np.linalg.norm(x)
            tree.append(np.outer(x, x))
    # σ from the charge alone: Δ·√(L/(2ρ)) with L = 9 for T = 300 (Δ inflated by the PSD and float slack).
    assert charged_sigma(tree) == pytest.approx(2**0.5 * math.sqrt(9 / 1.0), rel=1e-8)
    assert charged_sigma(tree) == pytest.approx(tree.sigma, rel=1e-12)
    z = node_noise(records[0])
    assert z.size == 300 * 3  # one node per append, 3 upper-triangle entries each
    assert stats.kstest(z, "norm").pvalue > 1e-3


def test_planted_policy_with_a_halved_h_tree_is_refuted_in_situ():
    report = InSituAudit(1.0, horizon=100, policy_class=HalvedHTreeBandit, runs_per_row=3_000).run()
    assert report.verdict == "violated"
    tree_row = next(row for row in report.rows if row["label"].startswith("#0 HalvedNoiseTree"))
    assert tree_row["verdict"] == "violated"
    noise_row = next(row for row in report.rows if "node noise" in row["label"])
    # The run's node noise, over the σ the charge paid for, has rms ≈ ½ (5 standard errors of the rms).
    assert noise_row["verdict"] == "violated"
    assert noise_row["rms"] == pytest.approx(0.5, abs=5 * 0.5 / math.sqrt(2 * noise_row["entries"]))


@pytest.mark.slow
def test_real_policies_are_consistent_in_situ():
    for policy in ("joint", "shuffle"):
        report = InSituAudit(1.0, policy=policy, horizon=400).run()
        assert report.verdict == "consistent", report.summary()
