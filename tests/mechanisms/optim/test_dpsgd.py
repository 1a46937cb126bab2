"""DPSGD: charge before noise, replace-one accounting, noise law, clipping, projection, convergence.

Independent sources: closed-form Gaussian zCDP composition, dp-accounting's RDP
accountant (GaussianDpEvent with noise multiplier σ/Δ, Δ = 2C for replace-one),
opacus's own RDP analysis, hand-computed clipped gradients, scipy MLEs.
"""

import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from dp_accounting import GaussianDpEvent, SelfComposedDpEvent, ZCDpEvent
from dp_accounting.rdp import RdpAccountant
from opacus import GradSampleModule
from opacus.accountants.analysis.rdp import compute_rdp
from opacus.optimizers import DPOptimizer
from scipy import stats
from scipy.optimize import minimize
from scipy.special import expit, ndtr

from accounting import ZCDP, ApproxDP, BudgetExceeded, Ledger
from dpglm.glm import LOGISTIC, PROBIT
from mechanisms.optim import DPSGD, BallProjection, EllipsoidProjection
from mechanisms.optim.dpsgd import ENGINES, LOSS_NAMES, LOSSES, chain_step_hook, logistic_loss, probit_loss


def _account(rho: float = 1e30):
    return Ledger(ZCDP(rho)).split({"optimizer": 1}, currency={"optimizer": "zcdp"})["optimizer"]


def _logistic_data(rng: np.random.Generator, n: int, dim: int, norm: float = 2.0):
    X = rng.normal(size=(n, dim))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    theta_star = rng.normal(size=dim)
    theta_star *= norm / np.linalg.norm(theta_star)
    y = (rng.random(n) < expit(X @ theta_star)).astype(float)
    return X, y


class _ZeroLoss:
    """ℓ = 0 on torch tensors (the torch engines); its derivative 0 on numpy arrays (the numpy engine)."""

    def __call__(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return 0.0 * z

    def derivative(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return 0.0 * z


_zero_loss = _ZeroLoss()


def test_refused_charge_draws_nothing_and_spends_nothing(rng):
    account = _account(0.1)
    X, y = _logistic_data(rng, 50, 3)
    generator = np.random.default_rng(7)
    state = generator.bit_generator.state
    optimizer = DPSGD(account, "logistic", generator, clip=1.0)
    with pytest.raises(BudgetExceeded):
        optimizer.fit(X, y, cost=ZCDP(0.2), steps=5, lr=1.0, projection=BallProjection(3.0))
    assert generator.bit_generator.state == state
    assert account.spent.rho == 0
    with pytest.raises(BudgetExceeded):  # a noise multiplier too small for the budget: 2·5/1² = 10 > 0.1
        optimizer.fit(X, y, noise_multiplier=1.0, steps=5, lr=1.0, projection=BallProjection(3.0))
    assert generator.bit_generator.state == state
    assert account.spent.rho == 0


def test_charge_matches_gaussian_composition_under_replace_one(rng):
    """z = σ/C, 12 steps in blocks of 25 of n = 100 (4 blocks) = 3 epochs: ρ = 3·(2C)²/(2σ²) = 6/z²."""
    account = _account()
    X, y = _logistic_data(rng, 100, 3)
    clip, z = 0.7, 3.0
    release = DPSGD(account, "logistic", rng, clip=clip).fit(
        X, y, noise_multiplier=z, steps=12, batch_size=25, lr=0.5, projection=BallProjection(3.0)
    )
    exact = 3 * Fraction(2 * clip) ** 2 / (2 * Fraction(z * clip) ** 2)
    charged = release.receipt.cost.rho
    assert charged == account.spent.rho
    assert exact <= charged <= exact * (1 + Fraction(1, 10**14))
    assert float(charged) == pytest.approx(6 / z**2, rel=1e-14)

    # dp-accounting: a Gaussian of sensitivity Δ = 2C (replace-one) and std σ has noise
    # multiplier σ/Δ = z/2; three epochs compose. Same ε as the zCDP curve we charged.
    delta = 1e-6
    gaussian = RdpAccountant().compose(SelfComposedDpEvent(GaussianDpEvent(z / 2), 3))
    zcdp = RdpAccountant().compose(ZCDpEvent(float(charged)))
    assert gaussian.get_epsilon(delta) == pytest.approx(zcdp.get_epsilon(delta), rel=1e-9)
    # opacus's RDP analysis with q = 1 (no subsampling) is linear in α with slope ρ.
    orders = [1.5, 2.0, 8.0, 64.0, 1024.0]
    rdp = np.asarray(compute_rdp(q=1.0, noise_multiplier=z / 2, steps=3, orders=orders))
    np.testing.assert_allclose(rdp / np.asarray(orders), float(charged), rtol=1e-12)


def test_cost_is_spent_exactly_with_noise_rounded_up(rng):
    account = _account(1.0)
    X, y = _logistic_data(rng, 40, 2)
    optimizer = DPSGD(account, "logistic", rng, clip=0.3)
    plan = optimizer.plan(40, steps=7, cost=ZCDP(0.3))
    assert plan.epochs == 7 and plan.n_batches == 1
    # 7 full-batch epochs: ρ = 7·(2C)²/(2σ²) ≤ 0.3 exactly, σ the closed form up to rounding.
    assert 7 * Fraction(2 * 0.3) ** 2 / (2 * Fraction(plan.sigma) ** 2) <= Fraction(3, 10)
    assert plan.sigma == pytest.approx(np.sqrt(7 * (2 * 0.3) ** 2 / (2 * 0.3)), rel=1e-14)
    assert plan.sigma == plan.noise_multiplier * 0.3
    optimizer.fit(X, y, cost=ZCDP(0.3), steps=7, lr=1.0, projection=BallProjection(3.0))
    assert account.spent.rho == Fraction(3, 10)
    with pytest.raises(BudgetExceeded):
        optimizer.fit(X, y, cost=ZCDP(Fraction(7, 10) + Fraction(1, 10**9)), steps=7, lr=1.0,
                      projection=BallProjection(3.0))


@pytest.mark.parametrize(
    "n, steps, batch_size, n_batches, epochs",
    [(100, 5, 25, 4, 2), (101, 5, 25, 5, 1), (101, 6, 25, 5, 2), (30, 7, None, 1, 7), (30, 7, 1, 30, 1)],
)
def test_plan_charges_every_started_epoch(rng, n, steps, batch_size, n_batches, epochs):
    """k = ⌈n/b⌉ blocks per epoch; a partial epoch is charged whole: ρ = E·(2C)²/(2(zC)²) = 2E/z²."""
    optimizer = DPSGD(_account(), "logistic", rng, clip=2.0)
    plan = optimizer.plan(n, steps=steps, noise_multiplier=4.0, batch_size=batch_size)
    assert (plan.n_batches, plan.epochs) == (n_batches, epochs)
    assert plan.cost.rho == Fraction(2 * epochs, 16)  # exact: 2E/z² with z = 4 has a short decimal


def test_each_epoch_partitions_the_rows(rng):
    """Parallel composition within an epoch needs every row in exactly one block per epoch."""
    optimizer = DPSGD(_account(), "logistic", rng, clip=1.0)
    plan = optimizer.plan(23, steps=11, noise_multiplier=1.0, batch_size=5)  # 5 blocks, 3 epochs (last partial)
    blocks = list(optimizer._blocks(23, plan))
    assert len(blocks) == 11 and sorted(len(b) for b in blocks[:5]) == [4, 4, 5, 5, 5]
    for epoch in (blocks[0:5], blocks[5:10]):
        np.testing.assert_array_equal(np.sort(np.concatenate(epoch)), np.arange(23))
    assert not np.array_equal(np.concatenate(blocks[0:5]), np.concatenate(blocks[5:10]))  # fresh partition


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("batch_size, block", [(None, 10), (5, 5)])
def test_noise_std_of_privatised_gradient_matches_theory(batch_size, block, engine):
    """Zero data gradient: one step from 0 with lr = 1 gives θ = −N(0, (zC)² I)/|B|."""
    generator = np.random.default_rng(11)
    optimizer = DPSGD(_account(), _zero_loss, generator, clip=0.5, engine=engine)
    X, y = np.ones((10, 200)), np.zeros(10)
    samples = np.concatenate([
        optimizer.fit(X, y, noise_multiplier=2.0, steps=1, batch_size=batch_size, lr=1.0,
                      projection=BallProjection(1e9)).value
        for _ in range(25)
    ])
    expected_std = 2.0 * 0.5 / block
    assert samples.std() == pytest.approx(expected_std, rel=0.04)  # 5000 draws: s.e. 1%
    assert abs(samples.mean()) < 4 * expected_std / np.sqrt(samples.size)
    assert stats.kstest(samples / expected_std, "norm").pvalue > 1e-3


@pytest.mark.parametrize("engine", ENGINES)
def test_per_sample_gradients_are_clipped_then_averaged(engine):
    """Logistic gradient at θ = 0 is (½ − y)x: (1.5, 2) has norm 2.5 → clipped to (0.6, 0.8); (0, −0.25) is kept."""
    X = np.array([[3.0, 4.0], [0.0, 0.5]])
    y = np.array([0.0, 1.0])
    release = DPSGD(_account(), "logistic", np.random.default_rng(0), clip=1.0, engine=engine).fit(
        X, y, noise_multiplier=1e-12, steps=1, lr=1.0, projection=BallProjection(10.0)
    )
    expected = -np.array([0.6 + 0.0, 0.8 - 0.25]) / 2
    np.testing.assert_allclose(release.value, expected, atol=1e-6)  # opacus clips to C·‖g‖/(‖g‖ + 1e-6)


@pytest.mark.parametrize("engine", ENGINES)
def test_ridge_term_is_added_after_the_noise(engine):
    """Zero data loss: one step is θ₁ = θ₀ − lr·(λ/n)θ₀."""
    X, y = np.ones((8, 3)), np.zeros(8)
    theta0 = np.array([1.0, -2.0, 0.5])
    release = DPSGD(_account(), _zero_loss, np.random.default_rng(0), clip=1.0, engine=engine).fit(
        X, y, noise_multiplier=1e-12, steps=1, lr=0.5, projection=BallProjection(10.0), theta0=theta0, lam=4.0
    )
    np.testing.assert_allclose(release.value, theta0 * (1 - 0.5 * 4.0 / 8), atol=1e-10)


def test_same_seed_same_theta_and_release_is_read_only(rng):
    X, y = _logistic_data(rng, 120, 4)
    kwargs = dict(cost=ZCDP(0.5), steps=9, batch_size=40, lr=2.0, projection=BallProjection(2.0))
    first = DPSGD(_account(), "probit", np.random.default_rng(3), clip=1.0).fit(X, y, **kwargs)
    second = DPSGD(_account(), "probit", np.random.default_rng(3), clip=1.0).fit(X, y, **kwargs)
    third = DPSGD(_account(), "probit", np.random.default_rng(4), clip=1.0).fit(X, y, **kwargs)
    np.testing.assert_array_equal(first.value, second.value)
    assert not np.array_equal(first.value, third.value)
    assert not first.value.flags.writeable


@pytest.mark.parametrize("loss, preconditioner", [
    ("logistic", None), ("probit", None), ("logistic", np.array([[2.0, 0.5, 0, 0], [0.5, 1.0, 0, 0],
                                                                  [0, 0, 3.0, 0], [0, 0, 0, 0.5]])),
])
def test_numpy_and_vectorised_engines_reproduce_opacus_step_for_step(rng, loss, preconditioner):
    """Same seed: the same partitions and noise draws, so the same θ up to rounding on all three engines."""
    X, y = _logistic_data(rng, 90, 4, norm=3.0)
    X[:5] *= 4.0  # rows whose gradients get clipped
    projection = EllipsoidProjection(np.full(4, 0.1), np.diag([1.0, 2.0, 3.0, 4.0]), 1.5)
    kwargs = dict(cost=ZCDP(2.0), steps=10, batch_size=20, lr=3.0, lam=5.0, projection=projection,
                  preconditioner=preconditioner)
    thetas = [
        DPSGD(_account(), loss, np.random.default_rng(5), clip=0.8, engine=engine).fit(X, y, **kwargs).value
        for engine in ENGINES
    ]
    assert ENGINES == ("numpy", "opacus", "vectorised")
    np.testing.assert_allclose(thetas[0], thetas[1], rtol=0, atol=1e-10)
    np.testing.assert_allclose(thetas[2], thetas[1], rtol=0, atol=1e-10)
    assert projection.contains(thetas[0]) and not np.allclose(thetas[0], projection.center)


@pytest.mark.parametrize("scale, clip, batch_size, per_sample_norms", [
    (1.0, 1.0, None, 0), (1.0, 1.0, 30, 0), (4.0, 0.8, None, 6), (1.0, 0.5, 30, 6),
])
def test_numpy_engine_skips_per_sample_norms_only_where_the_factor_is_exactly_one(
        rng, monkeypatch, scale, clip, batch_size, per_sample_norms):
    """Same seed, the per-sample norms forced (bound −∞) or not: bit-identical θ either way.

    Probit |ℓ'| < 1 and rows of norm ≤ 1: below C = 1 no factor binds and no step needs
    the norms; rows of norm 4, or C = 0.5, need them in every step.
    """
    import mechanisms.optim.dpsgd_steps as steps

    X, y = _logistic_data(rng, 90, 4, norm=2.0)
    X *= scale
    kwargs = dict(cost=ZCDP(2.0), steps=6, batch_size=batch_size, lr=2.0, lam=1.0, projection=BallProjection(2.5))
    real_norm, calls = np.linalg.norm, []

    def counting_norm(x, *args, **kw):
        calls.append(kw.get("axis"))
        return real_norm(x, *args, **kw)

    def fit():
        optimizer = DPSGD(_account(), "probit", np.random.default_rng(8), clip=clip, engine="numpy")
        return optimizer.fit(X, y, **kwargs).value

    with monkeypatch.context() as patched:
        patched.setattr(np.linalg, "norm", counting_norm)
        fast = fit()
    real_bound = steps._unclipped_bound
    monkeypatch.setattr(steps, "_unclipped_bound", lambda X_all, c: (real_bound(X_all, c)[0], -np.inf))
    forced = fit()
    np.testing.assert_array_equal(fast, forced)
    assert calls.count(1) == per_sample_norms


def test_unclipped_bound_is_below_the_clip_by_the_stated_slack():
    from mechanisms.optim.dpsgd_steps import _unclipped_bound

    norms, bound = _unclipped_bound(np.array([[3.0, 4.0]]), 1.0)
    assert norms.tolist() == [5.0]
    assert 1.0 - 1e-6 - 1e-13 < bound < 1.0 - 1e-6  # (C(1 − 2⁻⁵⁰) − 1e-6)/(1 + 20·2⁻⁵²)


class _RecordingEllipsoid(EllipsoidProjection):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outputs = []

    def __call__(self, theta):
        projected = super().__call__(theta)
        self.outputs.append(projected)
        return projected


def test_every_iterate_is_projected_and_feasible(rng):
    X, y = _logistic_data(rng, 200, 3)
    V = np.array([[4.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 9.0]])
    projection = _RecordingEllipsoid(np.array([0.2, -0.1, 0.0]), V, 0.3)
    DPSGD(_account(), "logistic", rng, clip=1.0).fit(
        X, y, cost=ZCDP(0.05), steps=15, batch_size=70, lr=50.0, projection=projection
    )
    assert len(projection.outputs) == 15
    assert all(projection.contains(theta, rtol=1e-12) for theta in projection.outputs)
    assert max(projection.distance(theta) for theta in projection.outputs) == pytest.approx(0.3, rel=1e-9)


def test_huge_budget_converges_to_the_logistic_mle(rng):
    X, y = _logistic_data(rng, 500, 4)

    def grad(theta):
        return X.T @ (expit(X @ theta) - y) / len(y)

    def hess(theta):
        w = expit(X @ theta) * (1 - expit(X @ theta))
        return (X * w[:, None]).T @ X / len(y)

    mle = np.zeros(4)
    for _ in range(30):  # Newton's method on the (strictly convex) mean NLL
        mle = mle - np.linalg.solve(hess(mle), grad(mle))
    assert np.linalg.norm(grad(mle)) < 1e-12
    lr = 1.0 / (0.25 * np.linalg.eigvalsh(X.T @ X / len(y))[-1])
    release = DPSGD(_account(), "logistic", rng, clip=1.0).fit(
        X, y, cost=ZCDP(1e12), steps=400, lr=lr, projection=BallProjection(10.0)
    )
    np.testing.assert_allclose(release.value, mle, atol=1e-4)


def test_huge_budget_converges_to_the_constrained_probit_optimum(rng):
    """A binding ellipsoid: compare with SLSQP on the same constrained, ridge-regularised probit GLM loss."""
    X, y = _logistic_data(rng, 300, 3, norm=3.0)
    center, V, radius, lam = np.zeros(3), np.diag([1.0, 4.0, 2.0]), 0.6, 3.0

    def objective(theta):  # paper §4 GLM loss b(z) − yz, b(z) = zΦ(z) + φ(z), written out here
        z = X @ theta
        b = z * ndtr(z) + np.exp(-z * z / 2) / np.sqrt(2 * np.pi)
        return (np.sum(b - y * z) + lam / 2 * theta @ theta) / len(y)

    constraint = {"type": "ineq", "fun": lambda t: radius**2 - (t - center) @ V @ (t - center)}
    reference = minimize(objective, center, constraints=[constraint], method="SLSQP",
                         options={"ftol": 1e-14, "maxiter": 500}).x
    assert np.sqrt(reference @ V @ reference) == pytest.approx(radius, rel=1e-6)  # the constraint binds
    release = DPSGD(_account(), "probit", rng, clip=10.0).fit(
        X, y, cost=ZCDP(1e12), steps=400, lr=2.0, lam=lam,
        projection=EllipsoidProjection(center, V, radius),
    )
    np.testing.assert_allclose(release.value, reference, atol=2e-4)
    # A preconditioner (here the inverse Hessian at 0, by finite differences of the objective's
    # gradient) with its M⁻¹-metric projection reaches the same constrained optimum in 40 steps.
    def gradient(theta, h=1e-6):
        return np.array([(objective(theta + h * e) - objective(theta - h * e)) / (2 * h) for e in np.eye(3)])

    hessian = np.array([(gradient(1e-4 * e) - gradient(-1e-4 * e)) / 2e-4 for e in np.eye(3)])
    preconditioned = DPSGD(_account(), "probit", rng, clip=10.0).fit(
        X, y, cost=ZCDP(1e12), steps=40, lr=1.0, lam=lam, projection=EllipsoidProjection(center, V, radius),
        preconditioner=np.linalg.inv(0.5 * (hessian + hessian.T)),
    )
    np.testing.assert_allclose(preconditioned.value, reference, atol=2e-4)


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_chain_step_hook_keeps_the_previous_hook():
    linear = torch.nn.Linear(2, 1, bias=False, dtype=torch.float64)
    module = GradSampleModule(linear, loss_reduction="sum")
    optimizer = DPOptimizer(torch.optim.SGD(module.parameters(), lr=0.1), noise_multiplier=1.0,
                            max_grad_norm=1.0, expected_batch_size=3)
    calls = []
    optimizer.attach_step_hook(lambda opt: calls.append("accountant"))
    chain_step_hook(optimizer, lambda opt: calls.append("ours"))
    module(torch.ones(3, 2, dtype=torch.float64)).sum().backward()
    optimizer.step()
    assert calls == ["accountant", "ours"]


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"y": np.zeros(19)}, ValueError, "y must have shape"),
        ({"cost": None}, ValueError, "exactly one"),
        ({"noise_multiplier": 1.0}, ValueError, "exactly one"),
        ({"cost": ApproxDP(1, 1e-6)}, TypeError, "cost"),
        ({"cost": ZCDP(0.1, 1e-6)}, ValueError, "delta=0"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"batch_size": 21}, ValueError, "batch_size"),
        ({"steps": 0}, ValueError, "steps"),
        ({"lr": -1.0}, ValueError, "lr"),
        ({"lr": 1e308}, ValueError, r"lr must be a real number in \(0, 1e\+100\]"),  # overflowed after the charge
        ({"lam": -1.0}, ValueError, "lam"),
        ({"theta0": np.array([5.0, 0.0])}, ValueError, "theta0"),
        ({"projection": "ball"}, TypeError, "projection"),
        ({"preconditioner": -np.eye(2)}, ValueError, "positive definite"),
        ({"preconditioner": np.eye(3)}, ValueError, "shape"),
    ],
)
def test_bad_input_raises_and_charges_nothing(rng, change, error, match):
    account = _account(1.0)
    optimizer = DPSGD(account, "logistic", rng, clip=1.0)
    kwargs = dict(X=np.zeros((20, 2)), y=np.zeros(20), cost=ZCDP(0.1), steps=3, lr=1.0,
                  projection=BallProjection(1.0))
    kwargs.update(change)
    X, y = kwargs.pop("X"), kwargs.pop("y")
    with pytest.raises(error, match=match):
        optimizer.fit(X, y, **kwargs)
    assert account.spent.rho == 0


@pytest.mark.parametrize("change, match", [({"y": np.full(20, 2.0)}, "y must lie in"),
                                           ({"X": np.full((20, 2), np.nan)}, "finite")])
def test_bad_private_values_are_charged_then_refused(rng, change, match):
    # Whether X and y are finite, y in [0, 1], depends on the data: a free refusal would tell the
    # caller about it, so the run is charged (ρ = 0.1) and then refused; no noise is drawn.
    account = _account(1.0)
    optimizer = DPSGD(account, "logistic", rng, clip=1.0)
    data = {"X": np.zeros((20, 2)), "y": np.zeros(20), **change}
    state = rng.bit_generator.state
    with pytest.raises(ValueError, match=match + ".*refused after the charge"):
        optimizer.fit(data["X"], data["y"], cost=ZCDP(0.1), steps=3, lr=1.0, projection=BallProjection(1.0))
    assert account.spent.rho == Fraction(1, 10)
    assert rng.bit_generator.state == state


def test_constructor_rejects_bad_arguments(rng):
    approx = Ledger(ApproxDP(1, 1e-6)).split({"optimizer": 1})["optimizer"]
    with pytest.raises(TypeError, match="zcdp"):
        DPSGD(approx, "logistic", rng, clip=1.0)
    with pytest.raises(ValueError, match="relation must be one of"):
        DPSGD(_account(), "logistic", rng, clip=1.0, relation="replace_two")
    with pytest.raises(ValueError, match="loss"):
        DPSGD(_account(), "poisson", rng, clip=1.0)
    with pytest.raises(ValueError, match="per-sample"):
        DPSGD(_account(), lambda z, y: z.sum(), rng, clip=1.0, engine="vectorised")
    with pytest.raises(ValueError, match="per-sample"):  # rows coupled through a batch mean
        DPSGD(_account(), lambda z, y: (z - y.mean()) ** 2, rng, clip=1.0, engine="vectorised")
    DPSGD(_account(), lambda z, y: (z - y) ** 2, rng, clip=1.0, engine="vectorised")  # squared error: per-sample
    with pytest.raises(TypeError, match="loss: engine='numpy'"):  # a torch loss has no numpy derivative
        DPSGD(_account(), lambda z, y: (z - y) ** 2, rng, clip=1.0)  # numpy: the default engine

    class _MeanCoupled:
        def __call__(self, z, y):
            return (z - y.mean()) ** 2

        def derivative(self, z, y):
            return 2 * (z - y.mean())

    with pytest.raises(ValueError, match="per-sample"):  # the numpy engine probes the derivative
        DPSGD(_account(), _MeanCoupled(), rng, clip=1.0, engine="numpy")
    with pytest.raises(ValueError, match="clip"):
        DPSGD(_account(), "logistic", rng, clip=0.0)
    with pytest.raises(TypeError, match="rng"):
        DPSGD(_account(), "logistic", 3, clip=1.0)
    with pytest.raises(ValueError, match="engine"):
        DPSGD(_account(), "logistic", rng, clip=1.0, engine="jax")


def _probit_glm_loss(z, y):
    """b(z) − yz with b(z) = zΦ(z) + φ(z) (paper §4), in numpy, independent of the module."""
    return z * ndtr(z) + np.exp(-z * z / 2) / np.sqrt(2 * np.pi) - y * z


@pytest.mark.parametrize("name, family", [("logistic", LOGISTIC), ("probit", PROBIT)])
def test_builtin_losses_are_the_glm_loss_of_the_family(name, family):
    """ℓ(z, y) = b(z) − yz as in dpglm.glm, and its z-derivative is μ(z) − y (central differences)."""
    z = np.array([-30.0, -8.0, -2.5, -0.3, 0.0, 0.7, 3.0, 9.0, 25.0])
    y = np.array([1.0, 1.0, 0.0, 0.4, 1.0, 0.0, 1.0, 0.0, 0.5])
    loss = {"logistic": logistic_loss, "probit": probit_loss}[name]
    value = loss(torch.from_numpy(z), torch.from_numpy(y)).numpy()
    # rtol 1e-10: torch's softplus returns z itself above z = 20 (relative error log(1 + e⁻ᶻ)/z < 1e-10)
    np.testing.assert_allclose(value, family.nll_per_sample(np.ones(1), z[:, None], y), rtol=1e-10, atol=1e-12)
    if name == "probit":
        np.testing.assert_allclose(value, _probit_glm_loss(z, y), rtol=1e-12, atol=1e-12)
    h = 1e-5
    y_torch = torch.from_numpy(y)
    difference = loss(torch.from_numpy(z + h), y_torch) - loss(torch.from_numpy(z - h), y_torch)
    np.testing.assert_allclose(difference.numpy() / (2 * h), family.mu(z) - y, atol=1e-8)


@pytest.mark.parametrize("engine", ENGINES)
def test_probit_step_is_the_glm_gradient_which_clip_one_never_binds(rng, engine):
    """‖(Φ(z) − y)x‖ ≤ ‖x‖ ≤ 1, so with C = 1 one step is θ₀ − lr·∇[(1/n)Σ(b(z_i) − y_i z_i)] exactly.

    The rows reach |z| = 8, where the Bernoulli NLL's gradient would be ≈ 8‖x‖ and get clipped.
    """
    X = rng.normal(size=(40, 3))
    X /= np.linalg.norm(X, axis=1)[:, None]
    y = rng.random(40)
    theta0 = np.array([8.0, 0.0, 0.0])
    X[:4] = [[1.0, 0, 0], [-1.0, 0, 0], [0.99, 0.1, 0], [-0.99, 0, 0.1]]
    y[:4] = [0.0, 1.0, 0.0, 1.0]
    release = DPSGD(_account(), "probit", np.random.default_rng(1), clip=1.0, engine=engine).fit(
        X, y, noise_multiplier=1e-12, steps=1, lr=0.5, theta0=theta0, projection=BallProjection(20.0)
    )
    expected = theta0 - 0.5 * PROBIT.grad(theta0, X, y) / 40
    np.testing.assert_allclose(release.value, expected, atol=1e-6)  # opacus's clip factor C/(‖g‖ + 1e-6)
    # the same gradient by central differences of the loss written out in this test
    h = 1e-6
    fd = np.array([(_probit_glm_loss(X @ (theta0 + h * e), y).sum() - _probit_glm_loss(X @ (theta0 - h * e), y).sum())
                   / (2 * h) for e in np.eye(3)])
    np.testing.assert_allclose(release.value, theta0 - 0.5 * fd / 40, atol=1e-6)


@pytest.mark.parametrize("engine", ENGINES)
def test_normalizer_noise_std_is_z_clip_over_normalizer(engine):
    """Zero data gradient, one full-batch step from 0 with lr = 1: θ = −N(0, (zC)² I)/N, whatever n."""
    generator = np.random.default_rng(12)
    optimizer = DPSGD(_account(), _zero_loss, generator, clip=0.5, engine=engine)
    normalizer = 37.5
    samples = np.concatenate([
        optimizer.fit(np.ones((n, 200)), np.zeros(n), noise_multiplier=2.0, steps=1, lr=1.0,
                      projection=BallProjection(1e9), normalizer=normalizer).value
        for n in [0, 1, 10, 3, 7] * 5
    ])
    expected_std = 2.0 * 0.5 / normalizer
    assert samples.std() == pytest.approx(expected_std, rel=0.04)  # 5000 draws: s.e. 1%
    assert abs(samples.mean()) < 4 * expected_std / np.sqrt(samples.size)
    assert stats.kstest(samples / expected_std, "norm").pvalue > 1e-3


@pytest.mark.parametrize("n", [0, 1, 37])
def test_normalizer_charge_is_the_closed_form_and_does_not_depend_on_n(rng, n):
    """Full batch, E = steps = 6 epochs, Δ = 2C: ρ = 6·(2C)²/(2(zC)²) = 12/z², for any n (n is private)."""
    account = _account()
    X, y = _logistic_data(rng, max(n, 1), 3)
    release = DPSGD(account, "logistic", rng, clip=0.5).fit(  # z·C = 2 exactly in floating point
        X[:n], y[:n], noise_multiplier=4.0, steps=6, lr=0.5, projection=BallProjection(3.0), normalizer=50
    )
    assert release.receipt.cost.rho == Fraction(12, 16) == account.spent.rho
    assert "add/remove-or-replace" in release.receipt.note
    # dp-accounting: six Gaussian steps of noise multiplier σ/Δ = z/2 give the same ε as ρ.
    gaussian = RdpAccountant().compose(SelfComposedDpEvent(GaussianDpEvent(4.0 / 2), 6))
    assert gaussian.get_epsilon(1e-6) == pytest.approx(
        RdpAccountant().compose(ZCDpEvent(0.75)).get_epsilon(1e-6), rel=1e-9
    )
    # given a cost instead, σ is calibrated from E = steps alone: 6·(2C)²/(2σ²) = ρ.
    plan = DPSGD(_account(), "logistic", rng, clip=0.7).plan(n, steps=6, cost=ZCDP(0.3), normalizer=50)
    assert (plan.epochs, plan.n_batches, plan.normalizer) == (6, 1, 50.0)
    assert plan.sigma == pytest.approx(np.sqrt(6 * (2 * 0.7) ** 2 / (2 * 0.3)), rel=1e-14)


@pytest.mark.parametrize("engine", ENGINES)
def test_normalizer_step_divides_clipped_sum_and_ridge_by_it(engine):
    """One step: θ₁ = θ₀ − lr·(Σ_i clip_C((μ(z_i) − y_i)x_i)/N + (λ/N)θ₀), here with one clipped row."""
    X = np.array([[3.0, 4.0], [0.0, 0.5], [0.2, -0.1]])
    y = np.array([0.0, 1.0, 1.0])
    theta0 = np.array([0.3, -0.2])
    gradients = (expit(X @ theta0) - y)[:, None] * X
    norms = np.linalg.norm(gradients, axis=1)
    clipped = gradients * np.minimum(1.0, 1.0 / norms)[:, None]
    assert norms[0] > 1 > norms[1:].max()
    release = DPSGD(_account(), "logistic", np.random.default_rng(0), clip=1.0, engine=engine).fit(
        X, y, noise_multiplier=1e-12, steps=1, lr=0.5, theta0=theta0, lam=4.0,
        projection=BallProjection(10.0), normalizer=8.0,
    )
    expected = theta0 - 0.5 * (clipped.sum(axis=0) / 8.0 + 4.0 / 8.0 * theta0)
    np.testing.assert_allclose(release.value, expected, atol=1e-6)  # opacus's clip factor C/(‖g‖ + 1e-6)


def test_normalizer_huge_budget_reaches_the_regularised_probit_glm_optimum(rng):
    """(1/N)[Σℓ + (λ/2)‖θ‖²] has the minimiser of Σ(b(z_i) − y_i z_i) + (λ/2)‖θ‖², found by BFGS here."""
    X, y = _logistic_data(rng, 200, 3, norm=1.5)
    lam, normalizer = 5.0, 1000.0

    def objective(theta):
        return np.sum(_probit_glm_loss(X @ theta, y)) + lam / 2 * theta @ theta

    reference = minimize(objective, np.zeros(3), method="BFGS", options={"gtol": 1e-10}).x
    smoothness = np.linalg.eigvalsh(X.T @ X)[-1] / np.sqrt(2 * np.pi) + lam  # b'' = φ ≤ 1/√(2π)
    release = DPSGD(_account(), "probit", rng, clip=1.0, engine="vectorised").fit(
        X, y, cost=ZCDP(1e12), steps=300, lr=normalizer / smoothness, lam=lam,
        projection=BallProjection(10.0), normalizer=normalizer,
    )
    np.testing.assert_allclose(release.value, reference, atol=1e-5)


def test_normalizer_rejects_bad_values_and_minibatches(rng):
    account = _account(1.0)
    optimizer = DPSGD(account, "logistic", rng, clip=1.0)
    kwargs = dict(cost=ZCDP(0.1), steps=3, lr=1.0, projection=BallProjection(1.0))
    X, y = np.zeros((20, 2)), np.zeros(20)
    for value, error in [(0.5, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
                         (True, TypeError), ("10", TypeError)]:
        with pytest.raises(error, match="normalizer"):
            optimizer.fit(X, y, normalizer=value, **kwargs)
    with pytest.raises(ValueError, match="batch_size"):
        optimizer.fit(X, y, normalizer=20.0, batch_size=5, **kwargs)
    with pytest.raises(ValueError, match="X must have shape"):  # n = 0 only with a public normaliser
        optimizer.fit(X[:0], y[:0], **kwargs)
    assert account.spent.rho == 0


def test_planning_needs_no_torch_and_the_loss_names_are_the_losses():
    """A fresh interpreter: importing DPSGD, constructing it and planning a charge load neither torch nor opacus;
    the names DPSGD accepts are exactly the keys of the torch losses it resolves them to."""
    script = (
        "import sys, numpy as np\n"
        "from accounting import Ledger, ZCDP\n"
        "from mechanisms.optim import DPSGD\n"
        "acc = Ledger(ZCDP(1)).split({'o': 1}, currency={'o': 'zcdp'})['o']\n"
        "plan = DPSGD(acc, 'probit', np.random.default_rng(0), clip=1.0).plan(10, steps=4, noise_multiplier=2.0)\n"
        "print(plan.cost.rho, 'torch' in sys.modules, 'opacus' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)})
    assert out.stdout.split() == ["2", "False", "False"]  # ρ = E·(2C)²/(2σ²) = 4·4/8
    assert sorted(LOSSES) == sorted(LOSS_NAMES)


def test_a_torch_engine_without_torch_names_the_extra_and_numpy_needs_none(rng, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("torch", "opacus") else real(name, *a))
    for engine in ("opacus", "vectorised"):
        with pytest.raises(ImportError, match=r'dpglm\[opacus\]'):
            DPSGD(_account(), "logistic", rng, clip=1.0, engine=engine)
    DPSGD(_account(), "logistic", rng, clip=1.0, engine="numpy")
