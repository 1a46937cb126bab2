"""Outputs on two neighbouring inputs lie on one common support, checked exactly on the grid, per mechanism.

Every float-safe output is y = fl(g·n + g·Z) with n = rint(x/g) and Z integer
discrete noise whose support is all of ℤ (``mechanisms.lattice``). y is possible
on input x' iff y − g·n' is a noise value, i.e. a multiple of the noise lattice
(g, or g/2 off the diagonal of symmetrised matrices), and g·n' + (y − g·n')
reproduces y in floating point. Both are checked exactly on the outputs drawn
on x (and symmetrically on x'). The control shows the same kind of check fails
for numpy's float Laplace.
"""

from __future__ import annotations

import numpy as np
import pytest

from accounting import ZCDP, Ledger, PureDP
from mechanisms import BinaryTreeMechanism, GaussianMechanism, LaplaceMechanism, SquareRootFactorizationMechanism
from mechanisms.geometric import GeometricBatchMean
from mechanisms.lattice import GaussianLattice, round_to_grid
from mechanisms.optim.dpsgd_loops import StepNoise

RUNS = 300


def _huge(currency: str):
    """An account no test here can exhaust (every release still charges first)."""
    return Ledger({"zcdp": ZCDP(10**12), "pure": PureDP(10**12)}[currency]).root


def _possible(outputs: np.ndarray, other_input: np.ndarray, grid: float, lattice: np.ndarray) -> np.ndarray:
    """Per output: is it an output of the mechanism on ``other_input`` (exact, on the grid)?

    ``lattice`` holds, per entry, the spacing of the noise values (g or g/2).
    """
    rounded = round_to_grid(other_input, grid)
    noise = outputs - rounded  # exact: both are multiples of g/2 far below 2^53 of them
    on_lattice = np.floor(noise / lattice) == noise / lattice
    reproduces = rounded + noise == outputs
    axes = tuple(range(1, outputs.ndim))
    return np.all(on_lattice & reproduces, axis=axes) if axes else on_lattice & reproduces


def _assert_common_support(out0, out1, x0, x1, grid, lattice):
    out0, out1 = np.asarray(out0), np.asarray(out1)
    assert _possible(out0, x1, grid, lattice).all(), "an output on x0 is impossible on x1"
    assert _possible(out1, x0, grid, lattice).all(), "an output on x1 is impossible on x0"
    assert _possible(out0, x0, grid, lattice).all() and _possible(out1, x1, grid, lattice).all()


def test_control_float_laplace_fails_the_check():
    """numpy's Laplace: every output in [−1, 1] on input 1 is fl(1 + L), a multiple of 2⁻⁵³; on input 0
    27% of all outputs are in [−1, 1] and not such a multiple (a lower bound on the impossible outputs)."""
    y = np.random.default_rng(0).laplace(0.0, 1.0, 10_000)
    inner = y[np.abs(y) <= 1]
    impossible_on_one = np.floor(inner * 2.0**53) != inner * 2.0**53
    assert impossible_on_one.sum() / y.size > 0.2


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_additive_mechanisms_common_support(kind):
    rng = np.random.default_rng(1)
    if kind == "laplace":
        mech = LaplaceMechanism(_huge("pure"), 1.0, rng, cost=PureDP(1))
        from mechanisms.lattice import LaplaceLattice
        grid = LaplaceLattice(mech.cost.eps, mech.scale, 1.0, 1).grid
    else:
        mech = GaussianMechanism(_huge("zcdp"), 1.0, rng, cost=ZCDP(0.5))
        grid = GaussianLattice(mech.sigma, 1.0, 1).grid
    out0 = np.array([mech.release(0.0).value for _ in range(RUNS)])
    out1 = np.array([mech.release(1.0).value for _ in range(RUNS)])
    _assert_common_support(out0, out1, np.zeros(1), np.ones(1), grid, np.full(1, grid))


@pytest.mark.parametrize("mechanism_class", [BinaryTreeMechanism, SquareRootFactorizationMechanism])
@pytest.mark.parametrize("shape", [(2,), (2, 2)])
def test_continual_release_common_support(mechanism_class, shape):
    rng = np.random.default_rng(2)
    x0 = np.zeros(shape)
    x1 = np.full(shape, 0.25) if len(shape) == 2 else np.array([0.5, 0.0])
    psd = len(shape) == 2
    outputs = {0: [], 1: []}
    grid = None
    for _ in range(RUNS // 3):
        for which, x in ((0, x0), (1, x1)):
            mech = mechanism_class(_huge("zcdp"), 3, shape, 1.0, rng, cost=ZCDP(0.5), psd=psd)
            outputs[which].append(mech.append(x).value)
            grid = mech._nodes.lattice.grid
    lattice = np.full(shape, grid)
    if psd:
        lattice = np.where(np.eye(shape[0], dtype=bool), grid, grid / 2)
    _assert_common_support(np.array(outputs[0]), np.array(outputs[1]), x0, x1, grid, lattice)


def test_geometric_batch_mean_common_support():
    rng = np.random.default_rng(3)
    accounts = [_huge("pure") for _ in range(RUNS)]
    out = {}
    for which, reward in ((0, 0.0), (1, 1.0)):
        mech = GeometricBatchMean(accounts, 1, 1.0, rng)
        released = mech.observe(np.ones((RUNS, 1), dtype=np.int64), np.full((RUNS, 1), reward))
        out[which] = np.array([r.value for _, _, r in released])
    grid = mech._lattice.grid
    _assert_common_support(out[0], out[1], np.zeros(1), np.ones(1), grid, np.full(1, grid))


def test_dpsgd_noisy_sum_common_support():
    """The one place DP-SGD's data meets its noise: the noisy clipped sum of a step (2C = 2 apart)."""
    import torch

    rng = np.random.default_rng(4)
    lattice = GaussianLattice(3.0, 2.0, 2)
    rows = torch.from_numpy(lattice.scale(lattice.integers(rng, 2 * RUNS), (RUNS, 2)))
    noise = StepNoise(lattice.grid, rows)
    x0, x1 = np.array([0.3, -0.7]), np.array([0.3 + 2.0, -0.7])
    out0 = np.array([noise.release(torch.from_numpy(x0), i).numpy() for i in range(RUNS)])
    out1 = np.array([noise.release(torch.from_numpy(x1), i).numpy() for i in range(RUNS)])
    _assert_common_support(out0, out1, x0, x1, lattice.grid, np.full(2, lattice.grid))
