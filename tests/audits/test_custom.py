"""The public audit API: a user's mechanism, two neighbours, a claim, a score; garbage in is refused in one line."""

import math
from fractions import Fraction

import numpy as np
import pytest

from audits import Audit, Claim, MechanismAudit, as_claim
from audits.bounds import epsilon_lower_bound


def randomized_response(bit, rng):
    # Warner's randomized response, truthful w.p. 3/4: exactly ε = ln 3 (likelihood ratio 3).
    return bit if rng.random() < 0.75 else 1 - bit


def truthful(bit, rng):
    return bit


def test_a_correct_mechanism_is_consistent_and_its_bound_is_the_counts_bound():
    result = MechanismAudit(randomized_response, (0, 1), claim=(math.log(3), 0.0), name="rr").run(4000, seed=1)
    assert result.verdict == "consistent" and result.claimed_epsilon == pytest.approx(math.log(3))
    # The certified bound is the Clopper–Pearson bound of the stored counts, at α / candidates.
    level = 1 - 0.05 / result.candidates
    assert result.epsilon_lower_bound == pytest.approx(epsilon_lower_bound(
        result.false_positives, 4000, result.false_negatives, 4000, confidence=level))
    assert 0.6 < result.epsilon_lower_bound < math.log(3)
    assert "certified ε" in result.summary() and "at 95%" in result.summary()


def test_planted_variant_is_the_power_check():
    audit = MechanismAudit(randomized_response, (0, 1), claim=(math.log(3), 0.0), planted=truthful, name="rr")
    power = audit.run_planted(2000, seed=1)
    assert power.verdict == "violated" and power.audit == "rr-planted"
    # Perfect separation: each rate's Clopper–Pearson bound at α/(2k) is 1 − (α/2k)^{1/n}.
    p = 1 - (0.05 / (2 * power.candidates)) ** (1 / 2000)
    assert power.epsilon_lower_bound == pytest.approx(math.log((1 - p) / p), rel=1e-9)
    with pytest.raises(ValueError, match="no planted"):
        MechanismAudit(randomized_response, (0, 1), claim=1.0).run_planted(100)


def test_the_claim_is_read_from_a_release_receipt():
    from accounting import Ledger, PureDP
    from mechanisms.noise import LaplaceMechanism

    ledger = Ledger(PureDP(10**9))

    def laplace(value, rng):
        return LaplaceMechanism(ledger.root, 1.0, rng, cost=PureDP(Fraction(1, 2))).release(value)

    result = MechanismAudit(laplace, (0.0, 1.0), name="laplace-receipt").run(2000, seed=0)
    assert result.claimed_epsilon == 0.5 and result.claimed_cost == str(PureDP(Fraction(1, 2)))
    assert result.verdict == "consistent"


def test_infinite_scores_are_allowed_and_show_porosity():
    def porous(bit, rng):  # an output impossible under D0 appears under D1 a tenth of the time
        return math.inf if bit == 1 and rng.random() < 0.1 else rng.laplace(bit, 1.0)

    result = MechanismAudit(porous, (0, 1), claim=(1.0, 0.0), name="porous").run(4000, seed=0)
    assert result.verdict == "violated" and result.epsilon_lower_bound > 3


@pytest.mark.parametrize("score, error, message", [
    (lambda out: math.nan, ValueError, "scores contain NaN"),
    (lambda out: [out, out], ValueError, r"must have shape \(100,\) or \(100, 1\), got \(100, 2\)"),
    (lambda out: "high", TypeError, "scores must be real numbers"),
    (lambda out: complex(out), TypeError, "scores must be real numbers"),
])
def test_garbage_scores_are_refused_in_one_line(score, error, message):
    audit = MechanismAudit(randomized_response, (0, 1), claim=(1.0, 0.0), score=score, name="garbage")
    with pytest.raises(error, match=message) as caught:
        audit.run(100, seed=0, holdout_runs=100)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("claim, error, message", [
    ((-1.0, 0.0), ValueError, "claimed epsilon must be ≥ 0"),
    ((math.nan, 1e-5), ValueError, "claimed epsilon is NaN"),
    ((1.0, math.nan), ValueError, "claimed delta is NaN"),
    ((1.0, 1.5), ValueError, "claimed delta must be < 1"),
    (("1", 0.0), TypeError, "claimed epsilon must be a real number"),
    ("abc", TypeError, "claim must be"),
])
def test_garbage_claims_are_refused_in_one_line(claim, error, message):
    with pytest.raises(error, match=message):
        MechanismAudit(randomized_response, (0, 1), claim=claim).run(100, holdout_runs=100)


def test_a_hand_written_audit_returning_garbage_certifies_nothing():
    class AllNaN(Audit):
        name = "all-nan"

        def claim(self):
            return Claim(epsilon=1.0, delta=0.0, cost="by hand")

        def scores(self, neighbour, runs, rng):
            return np.full(runs, np.nan)

    class OneTooMany(AllNaN):
        def scores(self, neighbour, runs, rng):
            return rng.random(runs + 1)

    with pytest.raises(ValueError, match="NaN"):
        AllNaN().run(100)
    with pytest.raises(ValueError, match=r"must have shape \(100,\) or \(100, 1\), got \(101,\)"):
        OneTooMany().run(100, holdout_runs=100)
    with pytest.raises(ValueError, match="claimed epsilon must be ≥ 0"):
        Claim(epsilon=-1.0, delta=0.0, cost="negative")


def test_zcdp_claims_read_at_delta():
    from accounting import ZCDP

    claim = as_claim(ZCDP(Fraction(1, 8)), 1e-5, gaussian=True)
    assert claim.mu == pytest.approx(0.5)
    with pytest.raises(ValueError, match="delta= is needed"):
        as_claim(ZCDP(Fraction(1, 8)))
