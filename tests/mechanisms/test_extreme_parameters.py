"""Huge costs end in BudgetExceeded (never OverflowError); η is validated; tiny η costs no memory."""

from __future__ import annotations

import time

import numpy as np
import pytest

from accounting import ZCDP, BudgetExceeded, Ledger, PureDP
from mechanisms import BinaryTreeMechanism, GaussianMechanism, LaplaceMechanism, SquareRootFactorizationMechanism
from mechanisms.geometric import GeometricBatchMean, RefreshPoints, refresh_points
from mechanisms.lattice import GaussianLattice


@pytest.mark.parametrize("build", [
    lambda rng: GaussianMechanism(Ledger(ZCDP(1)).root, 1.0, rng, sigma=1e-300).release(0.0),
    lambda rng: GaussianMechanism(Ledger(ZCDP(10**12)).root, 1.0, rng, sigma=1e-320).release(0.0),
    lambda rng: LaplaceMechanism(Ledger(PureDP(1)).root, 1.0, rng, scale=1e-300).release(0.0),
    lambda rng: BinaryTreeMechanism(Ledger(ZCDP(1)).root, 4, (2,), 1.0, rng, sigma=1e-300),
    lambda rng: SquareRootFactorizationMechanism(Ledger(ZCDP(1)).root, 4, (2,), 1.0, rng, sigma=1e-300),
    lambda rng: GeometricBatchMean(Ledger(PureDP(1)).root, 2, 1e300, rng).observe(np.ones(2, dtype=int), np.ones(2)),
])
def test_huge_costs_are_refused_by_the_budget(build):
    with pytest.raises(BudgetExceeded):
        build(np.random.default_rng(0))


def test_a_granted_tiny_sigma_still_releases_on_a_normal_float_grid():
    lattice = GaussianLattice(1e-300, 1e-300, 4)
    assert lattice.grid == 2.0**-1000 and lattice.sigma2 >= 1
    out = lattice.add(np.random.default_rng(1), np.array([0.0, 1e-300, 1.0]))
    assert np.all(np.floor(out / lattice.grid) == out / lattice.grid)


@pytest.mark.parametrize("eta", [0.0, -1.0, float("nan"), float("inf"), 1e-300, 1e-17])
def test_bad_eta_is_refused(eta):
    with pytest.raises(ValueError, match="eta"):
        GeometricBatchMean(Ledger(PureDP(1)).root, 2, 1.0, np.random.default_rng(0), eta=eta)
    with pytest.raises(ValueError, match="eta"):
        refresh_points(eta)


def test_tiny_eta_builds_nothing_up_front():
    start = time.process_time()
    mech = GeometricBatchMean(Ledger(PureDP(1)).root, 1, 1.0, np.random.default_rng(0), eta=1e-6)
    for _ in range(5):  # the first points are 1, 2, 3, ... (each integer until (1+η)^k grows by > 1)
        mech.observe(np.ones(1, dtype=np.int64), np.ones(1))
    assert mech.next_refresh[0, 0] == 6 and time.process_time() - start < 5.0
    import mpmath

    with mpmath.workdps(60):  # ⌈(1+η)^j⌉ for the least j with (1+η)^j > 10^7, by logarithms
        base = 1 + mpmath.mpf("1e-6")
        j = int(mpmath.floor(mpmath.log(10**7) / mpmath.log(base))) + 1
        expected = int(mpmath.ceil(base**j))
    assert RefreshPoints(1e-6).after(10**7) == expected
    with pytest.raises(ValueError, match="10\\^6 refresh points"):
        refresh_points(1e-6)


def test_refresh_points_match_the_dense_enumeration():
    from decimal import ROUND_CEILING, Decimal, localcontext

    for eta in (1.0, 0.3, 0.01):
        dense, base = [], Decimal(repr(eta)) + 1
        with localcontext() as context:
            context.prec = 60
            power = Decimal(1)
            while (point := int(power.to_integral_value(rounding=ROUND_CEILING))) <= 10**6:
                if not dense or point != dense[-1]:
                    dense.append(point)
                power *= base
        assert refresh_points(eta, limit=10**6).tolist() == dense
