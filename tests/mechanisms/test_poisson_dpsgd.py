"""Poisson-subsampled DP-SGD: amplified accounting through dp-accounting, in add/remove ledgers only."""

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from accounting import ZCDP, ApproxDP, BudgetExceeded, Ledger
from accounting.events import planned_curve
from mechanisms.lattice import GaussianLattice
from mechanisms.optim.poisson_dpsgd import PoissonDPSGD
from mechanisms.optim.projection import BallProjection


def data(n=1000, seed=1):
    X = np.random.default_rng(seed).normal(size=(n, 3)) / 3
    return X, (X[:, 0] > 0).astype(float)


def run(optimizer, steps=100, **kwargs):
    X, y = data()
    return optimizer.fit(X, y, steps=steps, lr=0.5, projection=BallProjection(3.0), sample_rate=0.01,
                         noise_multiplier=1.0, normalizer=10, **kwargs)


def test_two_fits_in_an_rdp_account_match_the_rdp_accountant_on_their_composition(claims):
    ledger = Ledger(ApproxDP(4, 1e-5), relation="add_remove")
    optimizer_probe = PoissonDPSGD(ledger.split({"probe": 1})["probe"], "logistic", np.random.default_rng(0), clip=1.0)
    event = optimizer_probe.event(sample_rate=0.01, noise_multiplier=1.0, steps=100, dim=3)
    z = event.event.event.noise_multiplier
    mu = GaussianLattice(1.0, 2.0, 3).gdp_mu(1.0, 3)
    assert z <= 1 / mu and z == pytest.approx(1.0, rel=1e-7) and z < 1.0  # μ′ slightly above C/σ
    ledger = Ledger(ApproxDP(4, 1e-5), relation="add_remove")
    pool = ledger.split({"sgd": 1}, currency={"sgd": "rdp"},
                        curves={"sgd": planned_curve(dp_accounting.SelfComposedDpEvent(event, 4), 4, 1e-5)})["sgd"]
    optimizer = PoissonDPSGD(pool, "logistic", np.random.default_rng(0), clip=1.0)
    run(optimizer)
    release = run(optimizer)
    assert np.all(np.isfinite(release.value))
    (order,) = pool.orders  # the account holds one order (docs/accounting.md, "Rényi DP")
    orders = sorted({float(order), *claims.RUNG_ORDERS})
    at_orders = rdp_privacy_accountant.RdpAccountant(orders)
    at_orders.compose(dp_accounting.ComposedDpEvent([event, event]))
    curve = dict(zip(orders, at_orders._rdp, strict=True))
    expected = claims.claim_reference(curve.get, 4, 1e-5, float(order))  # the ladder's reading ("Claims")
    assert float(ledger.guarantee().eps) == pytest.approx(expected, rel=1e-6)
    accountant = rdp_privacy_accountant.RdpAccountant()
    accountant.compose(dp_accounting.ComposedDpEvent([event, event]))
    assert float(ledger.guarantee().eps) >= accountant.get_epsilon(1e-5)  # the full grid can only do better


def test_an_approx_account_charges_the_pld_and_refusal_draws_nothing():
    ledger = Ledger(ApproxDP(1, 1e-5), relation="add_remove")
    rng = np.random.default_rng(5)
    optimizer = PoissonDPSGD(ledger.root, "logistic", rng, clip=1.0)
    receipt = run(optimizer, delta=1e-6).receipt
    pld = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(optimizer.event(sample_rate=0.01, noise_multiplier=1.0, steps=100, dim=3))
    assert float(receipt.charged.eps) == pytest.approx(pld.get_epsilon(1e-6), rel=1e-9)
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceeded):
        run(optimizer, steps=2000, delta=1e-6)
    assert rng.bit_generator.state == state


def test_replace_one_ledgers_and_other_currencies_are_refused():
    with pytest.raises(TypeError, match="add_remove"):
        PoissonDPSGD(Ledger(ApproxDP(1, 1e-5)).root, "logistic", np.random.default_rng(0), clip=1.0)
    with pytest.raises(TypeError, match="rdp"):
        PoissonDPSGD(Ledger(ZCDP(1), relation="add_remove").root, "logistic", np.random.default_rng(0), clip=1.0)


def test_batches_are_poisson_samples():
    optimizer = PoissonDPSGD(Ledger(ApproxDP(1, 1e-5), relation="add_remove").root, "logistic",
                             np.random.default_rng(7), clip=1.0)
    optimizer._sample_rate = 0.05
    plan = type("Plan", (), {"steps": 400})()
    sizes = np.array([len(batch) for batch in optimizer._blocks(1000, plan)])
    assert abs(sizes.mean() - 50) < 5 * np.sqrt(50 * 0.95 / 400)  # Binomial(1000, 0.05) per step
    assert sizes.var() == pytest.approx(47.5, rel=0.25)
