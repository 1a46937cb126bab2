"""dpglm.linalg: floored spectra against direct numpy, μ̇ range against closed forms."""

import math

import numpy as np
import pytest
from scipy import stats

from dpglm.linalg import FlooredSpectrum, dmu_range, floored_inverse


def test_floored_spectrum_matches_direct_computation():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 4))
    m = a @ a.T - 0.5 * np.eye(4)  # one or more eigenvalues may fall below the floor
    floor = 0.3
    w, q = np.linalg.eigh(m)
    floored = (q * np.maximum(w, floor)) @ q.T
    s = FlooredSpectrum.of(m, floor)
    np.testing.assert_allclose(s.matrix, floored, atol=1e-12)
    np.testing.assert_allclose(s.inverse, np.linalg.inv(floored), atol=1e-10)
    np.testing.assert_allclose(s.whitening @ floored @ s.whitening.T, np.eye(4), atol=1e-10)
    assert s.logdet == pytest.approx(np.linalg.slogdet(floored)[1])
    np.testing.assert_allclose(floored_inverse(m, floor), np.linalg.inv(floored), atol=1e-10)


def test_floor_does_not_bind_on_an_exact_ridge_design():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(20, 3))
    m = 0.5 * np.eye(3) + x.T @ x
    np.testing.assert_allclose(floored_inverse(m, 0.5), np.linalg.inv(m), atol=1e-12)


def test_dmu_range_closed_forms():
    lo, hi = dmu_range("logistic", 2.0)
    assert hi == pytest.approx(0.25)
    assert lo == pytest.approx(math.exp(2.0) / (1 + math.exp(2.0)) ** 2)
    lo, hi = dmu_range("probit", 1.5)
    assert hi == pytest.approx(stats.norm.pdf(0.0))
    assert lo == pytest.approx(stats.norm.pdf(1.5))


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_dmu_range_rejects_bad_radius(bad):
    with pytest.raises(ValueError, match="radius"):
        dmu_range("logistic", bad)


def test_floor_must_be_positive():
    with pytest.raises(ValueError, match="floor"):
        FlooredSpectrum.of(np.eye(2), 0.0)


@pytest.mark.parametrize("d", [1, 2, 3, 10, 37])
@pytest.mark.parametrize("lam, floor", [(1.0, 0.5), (3.7, 1e-3), (0.25, 0.5), (2.0**-20, 1.0)])
def test_a_scaled_identity_skips_eigh_with_eighs_own_floats(d, lam, floor):
    """λI (a policy's start) is read without a decomposition; every product equals the eigh path's, bit for bit."""
    fast = FlooredSpectrum.of(lam * np.eye(d), floor)
    assert fast.diagonal
    w, q = np.linalg.eigh(lam * np.eye(d))
    slow = FlooredSpectrum(np.maximum(w, floor), q)
    assert not slow.diagonal
    np.testing.assert_array_equal(fast.eigenvalues, slow.eigenvalues)
    np.testing.assert_array_equal(fast.eigenvectors, slow.eigenvectors)
    for name in ("matrix", "inverse", "whitening"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name))
    assert fast.logdet == slow.logdet


@pytest.mark.parametrize("matrix", [np.diag([1.0, 2.0]), np.array([[1.0, 1e-300], [1e-300, 1.0]]),
                                    np.zeros((2, 2)), np.diag([np.nan, np.nan]), np.diag([np.inf, np.inf])])
def test_anything_but_a_finite_nonzero_scaled_identity_is_decomposed(matrix):
    assert not FlooredSpectrum.of(matrix, 0.5).diagonal
