"""The issue-33 reproductions, small (slow; skipped without scikit-learn, the ``membership`` extra).

examples/membership_digits.py: four attacks on a logistic regression, an MLP and DP-SGD at ε = 1, 4, 10;
examples/audit_dpsgd_canaries.py: DP-SGD at a claimed ApproxDP(10, 1e-5) (μ = 2), black box and white box.
"""

import pytest


@pytest.mark.slow
def test_membership_on_digits_finds_the_overfit_models_and_stays_below_the_dp_claims(tmp_path, monkeypatch,
                                                                                      load_example):
    pytest.importorskip("sklearn")
    monkeypatch.chdir(tmp_path)
    results = load_example("membership_digits").main(models=16)
    by_name = {(r.name, r.attack, r.fixed_variance): r for r in results}
    for model in ("logistic", "mlp"):
        # The non-private models leak: RMIA (strong with few reference models) beats the loss attack.
        assert by_name[(model, "rmia", False)].tpr_at(0.01) > by_name[(model, "loss", False)].tpr_at(0.01)
        assert by_name[(model, "rmia", False)].auc > 0.55
    for result in results:
        if result.claim is not None:
            assert result.verdict == "consistent" and result.bound.epsilon <= result.claim.epsilon


@pytest.mark.slow
def test_dpsgd_on_digits_black_and_white_box_reach_most_of_the_claimed_mu(load_example):
    pytest.importorskip("sklearn")
    pytest.importorskip("opacus")
    example = load_example("audit_dpsgd_canaries")
    for report in example.white_box(canaries=500):
        assert report.verdict == "consistent" and report.mu_lower_bound >= 1.12
        assert 0 < report.epsilon_lower_bound <= report.claimed_epsilon
    for result, _ in example.black_box(runs=300, opacus_runs=60):
        assert result.verdict == "consistent" and result.mu_lower_bound <= result.claimed_mu
        if result.runs == 300:
            assert result.mu_lower_bound >= 1.12
