"""DPSGD under add/remove neighbours: full batch with a public normaliser, sensitivity C, and the refusals.

Independent sources: the closed form ρ = E·C²/(2σ²) of E adaptively composed Gaussian
steps; dp-accounting's RDP accountant on the same steps (ADD_OR_REMOVE_ONE, noise
multiplier σ/C); the empirical law of the last iterate with and without a canary row,
whose mean shift in noise units must equal √(2ρ) (the Gaussian pair a ρ-zCDP charge
covers); group privacy (4ρ) for the replace-one restatement (docs/accounting.md).
"""

import doctest
from fractions import Fraction

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, SelfComposedDpEvent, ZCDpEvent
from dp_accounting.rdp import RdpAccountant

from accounting import GDP, ZCDP, ApproxDP, Ledger
from mechanisms.lattice import gdp_mu_squared
from mechanisms.optim import DPSGD, BallProjection, PoissonDPSGD
from mechanisms.optim import dpsgd as dpsgd_module


class _LinearLoss:
    """ℓ(z, y) = −yz: the per-sample gradient is −y·x, so a row x = e₁, y = 1 pushes θ₁ by C per step."""

    def derivative(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return -np.broadcast_to(y, np.shape(z)).astype(float)


def _add_remove(budget=None, currency="zcdp"):
    ledger = Ledger(budget or ZCDP(1e30), relation="add_remove")
    return ledger, ledger.split({"fit": 1}, currency={"fit": currency})["fit"]


def test_full_batch_charge_is_a_quarter_of_replace_one_and_matches_dp_accounting(rng):
    """E = 6 steps, C = 0.5, z = 4 (σ = 2 exactly): ρ = 6·C²/(2σ²) = 6/32 = 3/16 under add/remove."""
    _, account = _add_remove()
    X = rng.normal(size=(30, 3))
    y = (rng.random(30) < 0.5).astype(float)
    release = DPSGD(account, "logistic", rng, clip=0.5).fit(
        X, y, noise_multiplier=4.0, steps=6, lr=0.5, projection=BallProjection(3.0), normalizer=50)
    assert release.receipt.cost.rho == Fraction(3, 16) == account.spent.rho
    assert release.receipt.relation == "add_remove"
    assert "add/remove one row" in release.receipt.note and "sensitivity C=0.5" in release.receipt.note
    # dp-accounting: six Gaussian steps of noise multiplier σ/Δ = z (Δ = C) give the ε of ZCDP(3/16).
    steps = RdpAccountant().compose(SelfComposedDpEvent(GaussianDpEvent(4.0), 6)).get_epsilon(1e-6)
    assert steps == pytest.approx(RdpAccountant().compose(ZCDpEvent(3 / 16)).get_epsilon(1e-6), rel=1e-9)
    # The replace-one charge of the same run is four times as much (sensitivity 2C).
    replace = Ledger(ZCDP(1e30)).split({"fit": 1}, currency={"fit": "zcdp"})["fit"]
    plan = DPSGD(replace, "logistic", rng, clip=0.5).plan(30, steps=6, noise_multiplier=4.0, normalizer=50)
    assert plan.cost.rho == 4 * Fraction(3, 16)


def test_the_last_iterate_moves_by_the_charged_mu_when_a_row_is_added():
    """Canary row x = e₁, y = 1 (clipped gradient norm C) added to three zero rows, or not: over 1500
    fits each the difference of means, in units of the iterate's std, is √(2ρ) = √T/z = 1."""
    steps, z = 4, 2.0
    _, account = _add_remove()
    optimiser = DPSGD(account, _LinearLoss(), np.random.default_rng(11), clip=1.0)
    kwargs = dict(noise_multiplier=z, steps=steps, lr=1.0, projection=BallProjection(1e6), normalizer=1.0)
    zeros = np.zeros((3, 2))
    with_canary = np.vstack([zeros, [[1.0, 0.0]]])
    samples = {}
    for name, X in (("without", zeros), ("with", with_canary)):
        y = np.ones(X.shape[0])
        samples[name] = np.array([optimiser.fit(X, y, **kwargs).value[0] for _ in range(1500)])
    rho = float(account.spent.rho) / 3000
    assert rho == pytest.approx(steps / (2 * z * z), rel=1e-12)
    spread = np.sqrt(0.5 * (samples["with"].var() + samples["without"].var()))
    assert spread == pytest.approx(np.sqrt(steps) * z, rel=0.05)  # √T·σ, σ = z·C (the lattice adds ~1e-8)
    mu_hat = (samples["with"].mean() - samples["without"].mean()) / spread
    assert mu_hat == pytest.approx(np.sqrt(2 * rho), abs=5 * np.sqrt(2 / 1500))  # 1 ± 0.18


def test_gdp_account_charges_the_lattice_mu_for_sensitivity_c(rng):
    _, account = _add_remove(ApproxDP(1e6, 0.5), currency="gdp")
    release = DPSGD(account, "probit", rng, clip=0.5).fit(
        np.eye(3), np.ones(3), noise_multiplier=4.0, steps=5, lr=0.5, projection=BallProjection(3.0), normalizer=10)
    assert isinstance(release.receipt.cost, GDP)
    assert release.receipt.cost.mu_squared == 5 * gdp_mu_squared(2.0, 0.5, 3)
    assert float(release.receipt.cost.mu_squared) == pytest.approx(5 * (0.5 / 2.0) ** 2, rel=1e-6)


def test_one_add_remove_ledger_pays_full_batch_and_poisson_dpsgd(rng):
    ledger = Ledger(ApproxDP(4, 1e-6), relation="add_remove")
    parts = ledger.split({"full": 1, "poisson": 1}, currency={"full": "zcdp", "poisson": "rdp"})
    X, y, ball = np.eye(3), np.array([1.0, 0.0, 1.0]), BallProjection(2.0)
    full = DPSGD(parts["full"], "logistic", rng, clip=1.0).fit(
        X, y, noise_multiplier=20.0, steps=10, lr=0.5, projection=ball, normalizer=100)
    sampled = PoissonDPSGD(parts["poisson"], "logistic", rng, clip=1.0).fit(
        X, y, sample_rate=0.1, noise_multiplier=4.0, steps=10, lr=0.5, projection=ball, normalizer=100)
    assert full.receipt.cost == ZCDP(Fraction(10, 800))
    assert (full.receipt.relation, sampled.receipt.relation) == ("add_remove", "add_remove")
    assert parts["full"].spent == ZCDP(Fraction(10, 800))
    (order,) = parts["poisson"].orders  # the charge is kept at the held order and the ladder's rung orders too
    assert sampled.receipt.mechanism == "PoissonDPSGD"
    assert parts["poisson"].spent.epsilons == (sampled.receipt.charged.at(order),)


@pytest.mark.parametrize("change", [{}, {"normalizer": 100.0, "batch_size": 5}, {"batch_size": 5}])
def test_what_add_remove_does_not_cover_is_refused_before_the_charge_naming_what_works(rng, change):
    ledger, account = _add_remove()
    optimiser = DPSGD(account, "logistic", rng, clip=1.0)
    state = rng.bit_generator.state
    with pytest.raises(ValueError) as refused:
        optimiser.fit(np.eye(10), np.ones(10), noise_multiplier=2.0, steps=3, lr=0.5,
                      projection=BallProjection(1.0), **change)
    message = str(refused.value)
    for named in ("normalizer=N", "batch_size=None", "PoissonDPSGD", "replace_one ledger"):
        assert named in message
    assert account.spent.rho == 0 and rng.bit_generator.state == state


def test_following_the_messages_leads_out_not_round_in_a_circle(rng):
    """The old circle: the ledger refuses a replace-one charge and says to state it under add_remove;
    DPSGD(relation="add_remove") now takes it (and DPSGD's default relation is the ledger's already)."""
    _, account = _add_remove()
    kwargs = dict(noise_multiplier=2.0, steps=3, lr=0.5, projection=BallProjection(1.0), normalizer=20.0)
    with pytest.raises(ValueError, match="state the cost under relation='add_remove'"):
        DPSGD(account, "logistic", rng, clip=1.0, relation="replace_one").fit(np.eye(3), np.ones(3), **kwargs)
    explicit = DPSGD(account, "logistic", rng, clip=1.0, relation="add_remove").fit(np.eye(3), np.ones(3), **kwargs)
    default = DPSGD(account, "logistic", rng, clip=1.0).fit(np.eye(3), np.ones(3), **kwargs)
    assert explicit.receipt.cost == default.receipt.cost == ZCDP(Fraction(3, 8))  # 3/(2·2²)


def test_an_add_remove_cost_in_a_replace_one_ledger_is_restated_to_the_replace_one_charge(rng):
    ledger = Ledger(ZCDP(1e30))
    kwargs = dict(noise_multiplier=2.0, steps=3, lr=0.5, projection=BallProjection(1.0), normalizer=20.0)
    stated = DPSGD(ledger.root, "logistic", rng, clip=1.0, relation="add_remove").fit(np.eye(3), np.ones(3), **kwargs)
    replace = DPSGD(ledger.root, "logistic", rng, clip=1.0).fit(np.eye(3), np.ones(3), **kwargs)
    assert stated.receipt.charged == ZCDP(4 * stated.receipt.cost.rho) == replace.receipt.cost  # group privacy k = 2


def test_the_docstring_example_runs():
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(DPSGD, "DPSGD", module=dpsgd_module):
        runner.run(test)
    assert runner.summarize(verbose=False).attempted >= 8
    assert runner.summarize(verbose=False).failed == 0
