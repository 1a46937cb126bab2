"""AdaP-TT(⋆)'s thesis formulas (eqs. 5.9–5.14, C.30) against a slow hand computation written here."""

import functools
import math

import numpy as np
import pytest
from scipy import optimize
from scipy.special import zeta

from dpglm.bai.gaussian_thresholds import (
    cal_c_gaussian,
    gaussian_cost,
    lambert_bar,
    private_gaussian_cost,
    private_gaussian_threshold,
    star_h,
    star_threshold,
)

K, DELTA, EPS, S = 5, 0.01, 0.1, 2.0
Z2 = math.pi**2 / 6
SIGMA = 0.5


@functools.cache
def c_g_grid(x):
    """𝒞_G(x) = min over a dense λ grid in (1/2, 1) of (g_G(λ) + x)/λ (eq. C.30)."""
    lam = np.linspace(0.5 + 1e-9, 1 - 1e-9, 400001)
    g = 2 * lam - 2 * lam * np.log(4 * lam) + np.log(zeta(2 * lam)) - 0.5 * np.log(1 - lam)
    return float(np.min((g + x) / lam))


def w_bar(x):
    """The u ≥ 1 with u − log u = x, by bracketing."""
    return optimize.brentq(lambda u: u - math.log(u) - x, 1.0, 10 * x + 10, xtol=1e-14)


def k_of(x):
    return math.log2(x) + 2


def c_gauss(wa, wb, delta):
    """Eq. (5.10)."""
    return 2 * c_g_grid(math.log((K - 1) / delta) / 2) + 2 * math.log(4 + math.log(wa)) + 2 * math.log(4 + math.log(wb))


def c_gauss_eps(wa, wb, delta):
    """Eq. (5.11)."""
    d = delta / (2 * Z2**2 * k_of(wa) ** S * k_of(wb) ** S)
    noise = sum(math.log(2 * K * Z2 * k_of(w) ** S / delta) ** 2 / w for w in (wa, wb))
    return 2 * c_gauss(wa, wb, d) + noise / (EPS**2 * SIGMA**2)


def h_of(x):
    return w_bar(2 * math.log(3 * K * Z2 * k_of(x) ** S / DELTA) + 4 * math.log(4 + math.log(x)) + 0.5) / 2


def c_star(ma, mb, wa, wb):
    """Eq. (5.14), both regimes."""
    if max(ma - mb, 0.0) < 3 * EPS:
        extra = sum(math.sqrt(h_of(w) / w) * math.log(3 * K * Z2 * k_of(w) ** S / DELTA) for w in (wa, wb))
        return 0.5 * c_gauss_eps(wa, wb, 2 * DELTA / 3) + math.sqrt(2) / (EPS * SIGMA) * extra
    k_max = max(k_of(wa), k_of(wb))
    return 3 / SIGMA**2 * math.log(3 * K * Z2 * k_max / DELTA) + 3 * EPS / (math.sqrt(2) * SIGMA) * sum(
        math.sqrt(w * h_of(w)) for w in (wa, wb))


@pytest.mark.parametrize("x", [0.5, 3.0, 8.7, 40.0])
def test_cal_c_gaussian_is_the_minimum_of_c30(x):
    grid = c_g_grid(x)
    assert grid - 1e-5 <= cal_c_gaussian(x) <= grid + 1e-12
    assert x < cal_c_gaussian(x) < x + max(math.log(x), 0.0) + 4  # the thesis' 𝒞_G(x) ≈ x + ln x


@pytest.mark.parametrize("x", [1.0, 2.5, 13.0, 60.0])
def test_lambert_bar_solves_u_minus_log_u(x):
    assert lambert_bar(np.array(x)) == pytest.approx(w_bar(x), rel=1e-12, abs=1e-9)


def test_costs_by_hand():
    ma, mb, wa, wb = 0.9, 0.82, 1000.0, 250.0
    harm = 1 / (1 / wa + 1 / wb)
    assert gaussian_cost(ma, mb, wa, wb) == pytest.approx(0.08**2 / (2 * 0.25) * harm)
    assert private_gaussian_cost(ma, mb, wa, wb, EPS) == pytest.approx(0.08 * 0.08 / (2 * 0.25) * harm)  # 0.08 < 0.3
    assert private_gaussian_cost(ma, 0.2, wa, wb, EPS) == pytest.approx(0.7 * 0.3 / (2 * 0.25) * harm)  # 3ε caps
    assert private_gaussian_cost(0.2, ma, wa, wb, EPS) == 0.0


@pytest.mark.parametrize("wa, wb", [(1000.0, 250.0), (16.0, 2.0**17)])
def test_thresholds_by_hand(wa, wb):
    assert star_h(np.array(wa), K, DELTA, S) == pytest.approx(h_of(wa), rel=1e-10)
    got = private_gaussian_threshold(np.array(wa), np.array(wb), K, DELTA, EPS, S)
    assert got == pytest.approx(c_gauss_eps(wa, wb, DELTA), rel=1e-6)
    for mb in (0.85, 0.5):  # gap 0.05 < 3ε (Gaussian regime) and 0.4 ≥ 3ε (linear regime)
        got = star_threshold(np.array(0.9), np.array(mb), np.array(wa), np.array(wb), K, DELTA, EPS, S)
        assert got == pytest.approx(c_star(0.9, mb, wa, wb), rel=1e-6)


def test_star_threshold_regimes_follow_the_interpretable_shapes():
    """Remark 5.22: far from 3ε, c̃ ≈ (3/σ²)log(1/δ) + (3ε/(√2σ))(√ω_a + √ω_b)√log(1/δ) as δ → 0."""
    wa = wb = 2.0**12
    delta = 1e-30
    lin = star_threshold(np.array(0.9), np.array(0.1), np.array(wa), np.array(wb), K, delta, EPS, S)
    root = math.sqrt(math.log(1 / delta))
    shape = 12 * math.log(1 / delta) + 3 * EPS / (math.sqrt(2) * SIGMA) * 2 * math.sqrt(wa) * root
    assert 0.9 < float(lin) / shape < 1.3
