"""The scikit-learn side of the membership audit (the ``membership`` extra): bundled data, models, their scores.

Skipped without scikit-learn; no test downloads anything (the sets ship with scikit-learn).
"""

import numpy as np
import pytest

pytest.importorskip("sklearn")

from audits.membership import MembershipAudit  # noqa: E402
from audits.membership.data import load  # noqa: E402
from audits.membership.models import logistic_fit, logit_score, mlp_fit  # noqa: E402


def test_the_bundled_sets_load_as_documented():
    X, y = load("digits")
    assert X.shape == (1797, 64) and X.min() == 0.0 and X.max() == 1.0 and sorted(set(y)) == list(range(10))
    _, binary = load("digits-binary")
    assert sorted(set(binary)) == [0, 1] and binary.sum() == int((y >= 5).sum())
    X, y = load("breast-cancer")
    assert X.shape == (569, 30) and np.allclose(X.mean(axis=0), 0.0) and np.allclose(X.std(axis=0), 1.0)


@pytest.mark.parametrize("fit", [logistic_fit, mlp_fit])
def test_the_score_is_the_logit_of_the_true_labels_probability(fit):
    X, y = load("digits")
    model = fit(X[:400], y[:400], np.random.default_rng(0))
    probability = model.predict_proba(X[400:600])[np.arange(200), y[400:600]]
    moderate = (probability > 1e-6) & (probability < 1 - 1e-6)
    expected = np.log(probability[moderate]) - np.log1p(-probability[moderate])
    np.testing.assert_allclose(logit_score(model, X[400:600], y[400:600])[moderate], expected, rtol=1e-6, atol=1e-6)
    assert np.all(np.isfinite(logit_score(model, X, y)))


def test_a_small_digits_audit_sees_the_overfit_logistic_regression():
    X, y = load("digits")
    result = MembershipAudit(logistic_fit, logit_score, X[:300], y[:300], attack="rmia", models=6, rng=0,
                             progress=False).run()
    assert result.auc > 0.5
