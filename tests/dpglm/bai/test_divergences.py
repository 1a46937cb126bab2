"""Divergences and transport cost against brute-force minimisation written here."""

import numpy as np
import pytest

from dpglm.bai.divergences import d_eps, d_minus, d_plus, kl, transport_cost


def brute_kl(z, y):
    """Bernoulli kl with 0·log 0 = 0, written out here."""
    z = np.asarray(z, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = z * np.log(z / y) + (1 - z) * np.log((1 - z) / (1 - y))
    k = np.where(z == 0, -np.log(1 - y), np.where(z == 1, -np.log(y), k))
    return np.where(z == y, 0.0, k)


def brute_d_eps(x: float, y: float, eps: float) -> float:
    """inf over a fine grid of z between x and y of ε|z − x| + kl(z, y) (definition, paper §3)."""
    if np.isinf(eps):
        return float(brute_kl(x, y))
    z = np.linspace(min(x, y), max(x, y), 200001)
    return float(np.min(eps * np.abs(z - x) + brute_kl(z, y)))


def test_kl_closed_form_values():
    assert kl(0.5, 0.25) == pytest.approx(0.5 * np.log(2) + 0.5 * np.log(0.5 / 0.75), rel=1e-12)
    assert kl(0.0, 0.3) == pytest.approx(-np.log(0.7), rel=1e-12)
    assert kl(1.0, 0.3) == pytest.approx(-np.log(0.3), rel=1e-12)
    assert kl(0.0, 0.0) == 0.0 and kl(1.0, 1.0) == 0.0
    assert np.isinf(kl(0.5, 0.0))


@pytest.mark.parametrize("eps", [1e-4, 1e-2, 0.3, 2.0, 50.0, np.inf])
def test_d_eps_matches_its_definition(eps):
    rng = np.random.default_rng(1)
    pts = np.concatenate([rng.uniform(0, 1, (12, 2)), [[0.0, 0.4], [1.0, 0.6], [0.3, 0.999], [0.95, 0.9]]])
    for x, y in pts:
        assert float(d_eps(x, y, eps)) == pytest.approx(brute_d_eps(x, y, eps), rel=1e-6, abs=1e-10)


def test_signed_forms_and_limits():
    mu, x, eps = 0.3, 0.8, 0.5
    assert float(d_plus(mu, x, eps)) == pytest.approx(brute_d_eps(mu, x, eps), rel=1e-6)
    assert float(d_plus(mu, 0.2, eps)) == 0.0
    assert float(d_minus(mu, 0.1, eps)) == pytest.approx(brute_d_eps(mu, 0.1, eps), rel=1e-6)
    assert float(d_minus(mu, 0.5, eps)) == 0.0
    # linear (TV) branch closed form, paper §3: −log(1 − x(1 − e^{−ε})) − εμ
    assert float(d_plus(0.2, 0.9, 1e-3)) == pytest.approx(-np.log(1 - 0.9 * (1 - np.exp(-1e-3))) - 1e-3 * 0.2, rel=1e-9)
    # ε → 0: d_ε ≈ ε·|x − y| ; ε = ∞: kl
    assert float(d_plus(0.2, 0.9, 1e-4)) == pytest.approx(1e-4 * 0.7, rel=1e-3)
    assert float(d_plus(0.2, 0.9, np.inf)) == pytest.approx(float(kl(0.2, 0.9)), rel=1e-12)
    vals = d_plus(np.array([0.0, 1.0, 0.0]), np.array([1.0, 1.0, 0.5]), np.array([1e-4, 1e-4, np.inf]))
    assert np.all(np.isfinite(vals[:2])) and vals[2] == pytest.approx(np.log(2))


def test_bad_input_raises():
    with pytest.raises(ValueError, match="eps"):
        d_plus(0.2, 0.3, 0.0)
    with pytest.raises(ValueError, match="mu"):
        d_plus(1.2, 0.3, 1.0)
    with pytest.raises(ValueError, match="w_leader"):
        transport_cost(0.9, 0.5, -1.0, 1.0, 1.0)


def test_transport_cost_matches_brute_force():
    rng = np.random.default_rng(2)
    n = 60
    m = np.sort(rng.uniform(0, 1, (n, 2)), axis=1)[:, ::-1]
    m[:5, 0] = 1.0
    m[5:10, 1] = 0.0
    w = np.exp(rng.uniform(-2, 9, (n, 2)))
    eps = 10 ** rng.uniform(-4, 2, n)
    eps[:6] = np.inf
    got = transport_cost(m[:, 0], m[:, 1], w[:, 0], w[:, 1], eps)  # vectorised over pairs
    for i in range(n):
        xs = np.linspace(m[i, 1], m[i, 0], 100001)
        ref = np.min(w[i, 0] * d_minus(m[i, 0], xs, eps[i]) + w[i, 1] * d_plus(m[i, 1], xs, eps[i]))
        assert got[i] <= ref * (1 + 1e-9) + 1e-12
        assert got[i] == pytest.approx(ref, rel=1e-5, abs=1e-9)
    assert float(transport_cost(0.4, 0.6, 3.0, 2.0, 0.1)) == 0.0


@pytest.mark.parametrize("eps", [40.0, 215.0, 1000.0])
def test_large_eps_boundary_values_stay_finite(eps):
    """d⁺_ε(μ, 1) = ε(1 − μ) (linear branch); 1 − e^{−ε} rounds to 1 for ε ≳ 37 and once gave inf."""
    mu = np.array([0.0, 0.3, 0.9])
    np.testing.assert_allclose(d_plus(mu, np.ones(3), eps), np.minimum(eps * (1 - mu), np.inf), rtol=1e-12)
    np.testing.assert_allclose(d_minus(np.ones(3) - mu, np.zeros(3), eps), eps * (1 - mu), rtol=1e-12)


def test_scalar_transport_cost_at_a_branch_boundary():
    """Scalar inputs that take the boundary repair path (clipped means, huge ε) once raised."""
    x = np.linspace(0.0, 1.0, 200_001)
    brute = (d_minus(np.ones_like(x), x, 215.0) + d_plus(np.zeros_like(x), x, 215.0)).min()
    assert float(transport_cost(1.0, 0.0, 1.0, 1.0, 215.0)) == pytest.approx(brute, rel=1e-9)


def test_d_minus_is_the_chernoff_supremum_capped_at_eps():
    """d⁻_ε(m, μ) = sup_{0≤λ≤ε} [λm − log(1 − μ + μe^λ)] (docs/bai-threshold.md, Lemma 2), on a λ grid."""
    from dpglm.bai.divergences import d_minus

    lam_unit = np.linspace(0.0, 1.0, 200_001)
    for m, mu, eps in [(0.9, 0.5, 0.01), (0.95, 0.9, 1e-3), (0.6, 0.5, 5.0), (1.0, 0.3, 0.5), (0.2, 0.4, 1.0)]:
        lam = eps * lam_unit
        ref = np.max(lam * m - np.log1p(mu * np.expm1(lam)))
        assert float(d_minus(m, mu, eps)) == pytest.approx(ref, rel=1e-6, abs=1e-12)
