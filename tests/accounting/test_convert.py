"""Conversions, checked against dp-accounting and closed forms (docs/references.md check values)."""

import math
from fractions import Fraction

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp
from scipy.stats import norm

from accounting import convert


def rdp_accountant_epsilon(rho: float, delta: float) -> float:
    accountant = rdp.RdpAccountant()
    accountant.compose(dp_accounting.ZCDpEvent(rho))
    return accountant.get_epsilon(delta)


@pytest.mark.parametrize(
    "rho, delta, cks, bun_steinke",
    [(0.5, 1e-6, 5.2215, 5.7565), (0.005, 1e-6, 0.4299, 0.5307)],
)
def test_reference_check_values(rho, delta, cks, bun_steinke):
    assert convert.zcdp_to_approx(rho, delta) == pytest.approx(cks, abs=6e-5)
    assert convert.zcdp_to_approx(rho, delta, method="bun_steinke") == pytest.approx(bun_steinke, abs=6e-5)


@pytest.mark.parametrize("rho, delta", [(0.5, 1e-6), (0.005, 1e-6), (0.1457, 0.02 / 3), (2.0, 1e-10), (1e-4, 1e-5)])
def test_cks_matches_rdp_accountant_and_a_dense_grid(rho, delta, cks_by_dense_grid):
    ours = convert.zcdp_to_approx(rho, delta)
    # dp-accounting minimises the same bound over a fixed grid of orders: never below real-α minimum.
    assert ours <= rdp_accountant_epsilon(rho, delta) + 1e-9
    assert ours == pytest.approx(rdp_accountant_epsilon(rho, delta), rel=2e-3)
    assert ours == pytest.approx(cks_by_dense_grid(rho, delta), rel=1e-7, abs=1e-10)


def test_zero_rho_is_zero_epsilon():
    assert convert.zcdp_to_approx(0, 1e-6) == 0.0


@pytest.mark.parametrize("eps, delta", [(4 / 3, 0.02 / 3), (1.0, 1e-6), (0.1, 1e-5), (8.0, 1e-3)])
def test_approx_to_zcdp_inverts_cks_and_beats_bun_steinke(eps, delta, cks_by_dense_grid):
    rho = convert.approx_to_zcdp(eps, delta)
    assert cks_by_dense_grid(rho, delta) == pytest.approx(eps, rel=1e-7)
    log_inv = math.log(1 / delta)
    bs_inverse = (math.sqrt(eps + log_inv) - math.sqrt(log_inv)) ** 2
    assert convert.approx_to_zcdp(eps, delta, method="bun_steinke") == pytest.approx(bs_inverse, rel=1e-12)
    assert rho > bs_inverse


@pytest.mark.parametrize("eps, delta", [(4 / 3, 0.02 / 3), (1.0, 1e-6), (0.1, 1e-5)])
def test_certified_inverse_is_below_the_true_one_and_meets_eps(eps, delta, cks_by_dense_grid):
    rho_max = convert.approx_to_zcdp_certified(Fraction(repr(eps)), Fraction(repr(delta)))
    assert isinstance(rho_max, Fraction)
    assert float(rho_max) < convert.approx_to_zcdp(eps, delta)
    assert float(rho_max) > convert.approx_to_zcdp(eps, delta) * (1 - 1e-8)
    assert cks_by_dense_grid(float(rho_max), delta) <= eps
    assert rdp_accountant_epsilon(float(rho_max), delta) <= eps * (1 + 2e-3)


def test_certified_forward_conversion_is_an_upper_bound(cks_by_dense_grid):
    eps = convert.zcdp_to_approx_certified(Fraction(1, 2), Fraction(1, 10**6))
    assert isinstance(eps, Fraction)
    assert cks_by_dense_grid(0.5, 1e-6) <= eps <= cks_by_dense_grid(0.5, 1e-6) + 1e-7


def test_pure_to_zcdp_is_half_eps_squared():
    assert convert.pure_to_zcdp(0.3) == pytest.approx(0.045, rel=1e-15)


@pytest.mark.parametrize("rho, sensitivity", [(0.1, 1.0), (0.1457, 2.0), (1e-3, 0.2), (0.3, 3.0)])
def test_gaussian_sigma_and_rho_closed_form_rounded_safely(rho, sensitivity):
    sigma = convert.gaussian_sigma(rho, sensitivity)
    assert sigma == pytest.approx(sensitivity / math.sqrt(2 * rho), rel=1e-14)
    # Exact check: the real zCDP of the float sigma never exceeds the exact charge.
    exact_rho = max(Fraction(repr(sensitivity)), Fraction(sensitivity)) ** 2 / (2 * Fraction(sigma) ** 2)
    assert exact_rho <= Fraction(repr(rho))
    back = convert.gaussian_rho(sigma, sensitivity)
    assert Fraction(back) >= exact_rho
    assert back == pytest.approx(rho, rel=1e-14)


def balle_wang_delta(sigma: float, eps: float, sensitivity: float) -> float:
    """Balle & Wang 2018, Thm 8, written out with scipy."""
    a = sensitivity / (2 * sigma)
    b = eps * sigma / sensitivity
    return norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b)


@pytest.mark.parametrize("eps, delta, sensitivity", [(1.0, 1e-5, 1.0), (0.5, 1e-6, 2.0), (4.0, 0.02 / 3, 0.2)])
def test_analytic_gaussian_meets_balle_wang_and_is_tight(eps, delta, sensitivity):
    sigma = convert.analytic_gaussian_sigma(eps, delta, sensitivity)
    assert balle_wang_delta(sigma, eps, sensitivity) <= delta
    assert balle_wang_delta(sigma * 0.999, eps, sensitivity) > delta
    assert sigma == pytest.approx(dp_accounting.get_sigma_gaussian(eps, delta) * sensitivity, rel=1e-8)


def test_rdp_to_approx_of_a_gaussian_curve_matches_the_cks_formula():
    sigma, delta = 3.0, 1e-5
    orders = np.array([1.5, 2, 4, 8, 16, 32, 64])
    curve = orders / (2 * sigma**2)
    expected = min(
        r + math.log1p(-1 / a) - math.log(delta * a) / (a - 1) for a, r in zip(orders, curve, strict=True)
    )
    assert convert.rdp_to_approx(orders, curve, delta) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: convert.zcdp_to_approx(-0.1, 1e-6), "rho"),
        (lambda: convert.zcdp_to_approx(0.1, 0), "delta"),
        (lambda: convert.zcdp_to_approx(0.1, 1), "delta"),
        (lambda: convert.zcdp_to_approx(math.nan, 1e-6), "rho"),
        (lambda: convert.zcdp_to_approx(0.1, 1e-6, method="rdp"), "method"),
        (lambda: convert.approx_to_zcdp(0, 1e-6), "eps"),
        (lambda: convert.approx_to_zcdp(1, 0), "delta"),
        (lambda: convert.gaussian_sigma(0, 1), "rho"),
        (lambda: convert.gaussian_sigma(0.1, -1), "sensitivity"),
        (lambda: convert.gaussian_rho(0, 1), "sigma"),
        (lambda: convert.gaussian_rho(1, math.inf), "sensitivity"),
        (lambda: convert.analytic_gaussian_sigma(1, 1.5, 1), "delta"),
        (lambda: convert.pure_to_zcdp(-1), "eps"),
        (lambda: convert.rdp_to_approx([1.5, 2], [0.1], 1e-5), "same length"),
        (lambda: convert.rdp_to_approx([0.5], [0.1], 1e-5), "orders"),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_non_numbers_raise_type_error():
    with pytest.raises(TypeError, match="rho"):
        convert.zcdp_to_approx("0.5", 1e-6)


@pytest.mark.parametrize("rho, sensitivity, compositions",
                         [(0.4, 1.0, 10), (Fraction(1, 3), 2.5, 7), (2.0, 0.1, Fraction(17, 4))])
def test_gaussian_calibration_of_k_releases_is_the_smallest_safe_float(rho, sensitivity, compositions):
    """σ is the smallest float with k·Δ²/(2σ²) ≤ ρ exactly; ρ back from σ is rounded up (BS 2016, Prop. 1.6)."""
    sigma = convert.gaussian_sigma(rho, sensitivity, compositions)
    exact_rho = Fraction(rho) if isinstance(rho, Fraction) else Fraction(repr(rho))
    k, delta_l2 = Fraction(compositions), max(Fraction(repr(sensitivity)), Fraction(sensitivity))
    assert k * delta_l2**2 / (2 * Fraction(sigma) ** 2) <= exact_rho
    assert k * delta_l2**2 / (2 * Fraction(math.nextafter(sigma, 0.0)) ** 2) > exact_rho
    assert sigma == pytest.approx(sensitivity * math.sqrt(float(compositions) / (2 * float(rho))), rel=1e-15)
    exact_back = k * delta_l2**2 / (2 * Fraction(sigma) ** 2)
    assert convert.gaussian_rho_exact(sigma, sensitivity, compositions) == exact_back
    back = convert.gaussian_rho(sigma, sensitivity, compositions)
    assert Fraction(back) >= exact_back > Fraction(math.nextafter(back, 0.0))


def test_mechanisms_use_the_one_gaussian_calibration_and_relation_check():
    from accounting import costs
    from mechanisms import noise, release

    assert noise.gaussian_sigma_for is convert.gaussian_sigma
    assert noise.gaussian_rho is convert.gaussian_rho_exact
    assert release.check_relation is costs.check_relation
    with pytest.raises(ValueError, match="compositions"):
        convert.gaussian_sigma(1.0, 1.0, 0)


@pytest.mark.parametrize("rho", [1e36, 1e100, 1e300])
def test_huge_rho_converts_between_rho_and_bun_steinke(rho):
    """For α − 1 = √(ln(1/δ)/ρ) below float resolution near 1 the CKS bound is still evaluated (in α − 1)."""
    delta = 1e-6
    eps = convert.zcdp_to_approx(rho, delta)
    bun_steinke = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    assert rho <= eps <= bun_steinke
    assert math.isfinite(float(convert.zcdp_to_approx_certified(Fraction(rho), Fraction(1, 10**6))))
    back = convert.approx_to_zcdp(rho, delta)  # now read as an ε
    assert (math.sqrt(rho + math.log(1 / delta)) - math.sqrt(math.log(1 / delta))) ** 2 <= back * (1 + 1e-15)
    assert back <= rho


def test_rho_beyond_float_range_names_rho():
    with pytest.raises(ValueError, match=r"^rho must be a real number in \[0, 1e\+301\], got 1e\+400$"):
        convert.zcdp_to_approx(Fraction(10**400), 1e-6)
    with pytest.raises(ValueError, match=r"^eps must be a real number in \(0, 1e\+301\], got 1e\+400$"):
        convert.approx_to_zcdp(Fraction(10**400), 1e-6)


@pytest.mark.parametrize("alpha, rho, delta", [(1.5, 0.5, 1e-6), (3.0, 0.01, 1e-5), (41.0, 0.002, 0.02 / 3)])
def test_cks_bound_at_one_order_is_the_textbook_formula(alpha, rho, delta):
    """CKS 2020 Prop. 12 with τ = αρ, and its inverse in ρ, at a fixed order."""
    textbook = alpha * rho + math.log(1 - 1 / alpha) - math.log(alpha * delta) / (alpha - 1)
    assert convert.cks_epsilon_at(alpha, rho, delta) == pytest.approx(max(0.0, textbook), rel=1e-12, abs=1e-15)
    eps = 30.0  # above the bound at ρ = 0 for these orders, so the inverse is not clipped at 0
    rho_at = convert.cks_rho_at(alpha, eps, delta)
    assert rho_at > 0
    assert alpha * rho_at + math.log(1 - 1 / alpha) - math.log(alpha * delta) / (alpha - 1) == pytest.approx(eps)


def test_gaussian_calibration_of_sizes_beyond_a_float():
    """σ² = Δ²/(2ρ) exactly for ρ = 10^±400 (on main: OverflowError, or a hang stepping up from σ = 0)."""
    for rho in (Fraction(1, 10**400), Fraction(10**400)):
        sigma = convert.gaussian_sigma(rho, 1)
        target = 1 / (2 * rho)
        assert Fraction(sigma) ** 2 >= target > Fraction(math.nextafter(sigma, 0)) ** 2  # the smallest such float
    with pytest.raises(ValueError, match="float range"):
        convert.gaussian_sigma(Fraction(1, 10**800), 1)  # σ ≈ 7e399
    with pytest.raises(ValueError, match="float range"):
        convert.gaussian_sigma(1e300, 1e-200)  # σ ≈ 7e-351
    assert convert.gaussian_rho(1e-300, 1) == math.inf  # ρ = 5e599: an upper bound that no ledger grants
    assert convert.gaussian_rho_exact(1e-300, 1) == 1 / (2 * Fraction(1e-300) ** 2)
