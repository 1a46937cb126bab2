"""Membership attacks and the ROC: each checked against a slow loop written here from the papers' definitions."""

import math

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import norm

from audits.membership.attacks import attack_statistics
from audits.membership.result import MembershipResult


def _table(models=20, examples=30, seed=0):
    rng = np.random.default_rng(seed)
    masks = rng.random((models, examples)) < 0.5
    scores = rng.normal(size=(models, examples)) + 1.5 * masks + rng.normal(size=examples)
    return scores, masks


def _slow_lira(scores, masks, target, exclude, offline, fixed):
    """Carlini et al. 2022, Alg. 1, one (target, example) at a time; references = every model but the excluded."""
    out = np.empty(scores.shape[1])
    keep = [k for k in range(scores.shape[0]) if k != exclude]
    fits = []
    for i in range(scores.shape[1]):
        inside = [scores[k, i] for k in keep if masks[k, i]]
        outside = [scores[k, i] for k in keep if not masks[k, i]]
        fits.append((np.mean(inside), np.var(inside, ddof=1), np.mean(outside), np.var(outside, ddof=1)))
    shared = np.mean([0.5 * (f[1] + f[3]) for f in fits])
    for i, (mean_in, var_in, mean_out, var_out) in enumerate(fits):
        if fixed:
            var_in = var_out = shared
        s = target[i]
        if offline:
            out[i] = (s - mean_out) / math.sqrt(var_out)
        else:
            out[i] = norm.logpdf(s, mean_in, math.sqrt(var_in)) - norm.logpdf(s, mean_out, math.sqrt(var_out))
    return out


@pytest.mark.parametrize("attack, fixed", [("lira", False), ("lira", True), ("lira-offline", False),
                                           ("lira-offline", True)])
def test_lira_matches_the_per_example_gaussian_fits(attack, fixed):
    scores, masks = _table()
    fast = attack_statistics(attack, scores, scores, masks, exclude=np.arange(20), fixed_variance=fixed)
    for j in range(20):
        slow = _slow_lira(scores, masks, scores[j], j, attack == "lira-offline", fixed)
        np.testing.assert_allclose(fast[j], slow, rtol=1e-9, atol=1e-9)
    # Targets outside the references use every reference.
    fresh = attack_statistics(attack, scores[:2], scores[2:], masks[2:], fixed_variance=fixed)
    np.testing.assert_allclose(fresh[1], _slow_lira(scores[2:], masks[2:], scores[1], -1,
                                                    attack == "lira-offline", fixed), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("gamma", [1.0, 2.0])
def test_rmia_is_the_fraction_of_population_examples_it_dominates(gamma):
    """Zarifzadeh et al. 2024, Eq. 4 with Pr(x) the mean over references and z every other example."""
    scores, masks = _table(models=6, examples=12)
    fast = attack_statistics("rmia", scores, scores, masks, exclude=np.arange(6), gamma=gamma)
    for j in range(6):
        prior = np.mean([expit(scores[k]) for k in range(6) if k != j], axis=0)
        ratio = expit(scores[j]) / prior
        for i in range(12):
            others = [z for z in range(12) if z != i]
            expected = np.mean([ratio[i] / ratio[z] >= gamma for z in others])
            assert fast[j, i] == pytest.approx(expected, abs=1e-12)


def test_an_example_without_in_or_out_references_gets_finite_statistics():
    """Few models: a group with no member borrows the other's mean (shifted by the global gap), the pooled variance."""
    scores, masks = _table(models=3, examples=50)
    masks[:, 0] = True  # example 0 is in every model: no out-reference anywhere
    for attack in ("lira", "lira-offline", "rmia"):
        values = attack_statistics(attack, scores, scores, masks, exclude=np.arange(3))
        assert np.all(np.isfinite(values))


def test_the_loss_attack_is_the_score_itself():
    scores, masks = _table()
    np.testing.assert_array_equal(attack_statistics("loss", scores, scores[:0], masks[:0]), scores)


def _result(statistics, masks):
    return MembershipResult(attack="loss", fixed_variance=False, models=statistics.shape[0], references=1, targets=1,
                            examples=statistics.shape[1], canaries=0, guesses=0, correct=0, threshold_in=math.inf,
                            threshold_out=-math.inf, delta=1e-5, confidence=0.95, training_cpu_seconds=0.0,
                            attack_cpu_seconds=0.0, seconds=0.0, seed=0, name="t", claim=None,
                            statistics=statistics, masks=masks)


def test_roc_auc_and_tpr_at_fpr_match_brute_force():
    rng = np.random.default_rng(4)
    masks = rng.random((5, 40)) < 0.5
    statistics = np.round(rng.normal(size=(5, 40)) + masks, 1)  # rounded: ties, which must step together
    result = _result(statistics, masks)
    values, labels = statistics.ravel(), masks.ravel()
    positives, negatives = values[labels], values[~labels]
    fpr, tpr, thresholds = result.roc()
    for rate_f, rate_t, threshold in zip(fpr[1:], tpr[1:], thresholds[1:], strict=True):
        assert rate_f == pytest.approx(np.mean(negatives >= threshold))
        assert rate_t == pytest.approx(np.mean(positives >= threshold))
    pairs = np.mean([(p > q) + 0.5 * (p == q) for p in positives for q in negatives])
    assert result.auc == pytest.approx(pairs, abs=1e-12)
    for target in (0.0, 0.01, 0.1, 0.5, 1.0):
        best = max(np.mean(positives >= c) for c in np.append(values, np.inf) if np.mean(negatives >= c) <= target)
        assert result.tpr_at(target) == pytest.approx(best)
