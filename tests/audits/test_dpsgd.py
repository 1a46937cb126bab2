"""DP-SGD audit with a Dirac gradient canary: tight on the real optimiser, refutes add/remove-sized noise."""

import math

import numpy as np
import pytest

from audits.dpsgd import DPSGDAudit
from audits.planted import AddRemoveNoiseDPSGD


def test_last_iterate_is_the_gaussian_pair_of_the_derivation():
    audit = DPSGDAudit(2.0, steps=5, rows=4)
    # ρ = T(2C)²/(2σ²) with C = 1, T = 5: σ = √(2T/ρ).
    sigma = math.sqrt(2 * 5 / float(audit.rho))
    rng = np.random.default_rng(9)
    null, alternative = audit.sample(0, 10_000, rng)[:, 0], audit.sample(1, 10_000, rng)[:, 0]
    spread = math.sqrt(5) * sigma
    assert abs(null.mean() + 5) < 5 * spread / math.sqrt(10_000)
    assert abs(alternative.mean() - 5) < 5 * spread / math.sqrt(10_000)
    assert alternative.std() == pytest.approx(spread, rel=0.03)
    assert audit.claim().mu == pytest.approx(2 * math.sqrt(5) / sigma, rel=1e-9)


def test_dpsgd_audit_is_tight_and_consistent():
    result = DPSGDAudit(2.0, steps=5, rows=4).run(20_000, seed=2)
    assert result.verdict == "consistent"
    assert 0.8 * 2.0 <= result.epsilon_lower_bound <= 2.0


def test_add_remove_sized_noise_is_refuted():
    result = DPSGDAudit(1.0, steps=5, rows=4, mechanism_class=AddRemoveNoiseDPSGD).run(10_000, seed=2)
    assert result.verdict == "violated"
    # Half the noise: the true μ is twice the claim, and a valid bound stays below it.
    assert 1.3 * result.claimed_mu < result.mu_lower_bound <= 2 * result.claimed_mu


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="rows"):
        DPSGDAudit(1.0, rows=1)
    with pytest.raises(ValueError, match="steps"):
        DPSGDAudit(1.0, steps=0)


def test_the_vectorised_engines_halved_noise_is_refuted_and_touches_no_other_engine():
    from audits.planted import HalvedNoiseVectorisedDPSGD

    result = DPSGDAudit(1.0, steps=5, rows=4, engine="vectorised",
                        mechanism_class=HalvedNoiseVectorisedDPSGD).run(10_000, seed=2)
    assert result.verdict == "violated"
    assert 1.3 * result.claimed_mu < result.mu_lower_bound <= 2 * result.claimed_mu
    # The bug lives in the vectorised loop only: the numpy and opacus engines draw the correct noise,
    # float for float the unplanted optimiser's.
    for engine in ("numpy", "opacus"):
        planted = DPSGDAudit(1.0, steps=5, rows=4, engine=engine, mechanism_class=HalvedNoiseVectorisedDPSGD)
        real = DPSGDAudit(1.0, steps=5, rows=4, engine=engine)
        np.testing.assert_array_equal(planted.sample(1, 200, np.random.default_rng(3)),
                                      real.sample(1, 200, np.random.default_rng(3)))
