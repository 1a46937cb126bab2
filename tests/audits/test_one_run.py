"""One-run audit (Steinke et al. 2023) of the Gaussian mechanism: m canaries in a single release."""

import pytest

from audits.one_run import OneRunGaussianAudit
from audits.planted import HalvedSensitivityGaussian


def test_one_release_certifies_a_good_part_of_epsilon_and_stays_below_it():
    result = OneRunGaussianAudit(1.0, canaries=100_000).run(seed=3)
    assert result.verdict == "consistent"
    assert result.claimed_epsilon == pytest.approx(1.0, rel=1e-6)
    assert 0.4 < result.epsilon_lower_bound <= 1.0
    assert result.guesses <= result.canaries and 0.5 * result.guesses < result.correct <= result.guesses


def test_one_release_refutes_halved_sensitivity():
    result = OneRunGaussianAudit(1.0, canaries=100_000, mechanism_class=HalvedSensitivityGaussian).run(seed=3)
    assert result.verdict == "violated"
    assert result.epsilon_lower_bound > 1.0


def test_exactly_one_run():
    with pytest.raises(ValueError, match="one run"):
        OneRunGaussianAudit(1.0, canaries=1000).run(runs=2)


def test_reports_without_score_distributions_are_written_by_the_command():
    # dpglm audit writes strict_json(result.to_dict()) for every row, the one-run and coupling reports too.
    import json

    from audits.bandit import BanditCouplingAudit
    from dpglm.engine.results import strict_json

    one_run = OneRunGaussianAudit(1.0, canaries=1000).run()
    assert json.loads(strict_json(one_run.to_dict()))["ratio"] == pytest.approx(one_run.ratio)
    coupling = BanditCouplingAudit(1.0, horizon=20).run(1)
    assert json.loads(strict_json(coupling.to_dict()))["verdict"] == coupling.verdict
