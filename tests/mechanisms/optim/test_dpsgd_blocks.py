"""DP-SGD on rows in blocks (``DPSGD.fit_blocks``): the same θ as on their concatenation, no copy of the rows.

A full-batch step sums the clipped gradients a block of ``BLOCK_ROWS`` rows at a time
(docs/design.md, memory flat in T). The references here are ``DPSGD.fit`` on the
concatenated rows, a per-row loop written in the test, and tracemalloc.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from scipy.special import ndtr

from accounting import ZCDP, ApproxDP, Ledger
from mechanisms.optim import DPSGD, BallProjection
from mechanisms.optim import dpsgd_steps as steps
from mechanisms.optim.poisson_dpsgd import PoissonDPSGD


def _account(rho: float = 1e30):
    return Ledger(ZCDP(rho)).split({"optimizer": 1}, currency={"optimizer": "zcdp"})["optimizer"]


def _rows(n: int, d: int, seed: int = 0, big_rows: int = 3):
    """Rows in the unit ball, a few of norm 3 (their gradients clip at C = 1), responses in {0, 1}."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1)[:, None]
    X[:big_rows] *= 3.0
    return X, (rng.random(n) < 0.5).astype(float)


def _fit(engine: str, rows, blocks: bool, seed: int = 5, **extra):
    optimizer = DPSGD(_account(), "probit", np.random.default_rng(seed), clip=1.0, engine=engine)
    options = dict(steps=4, lr=0.5, projection=BallProjection(2.0), cost=ZCDP(0.5), lam=1.0, **extra)
    X, y = rows
    if blocks:
        xs, ys = steps.split_rows(X, y)
        return optimizer.fit_blocks(list(xs), list(ys), **options).value
    return optimizer.fit(X, y, **options).value


@pytest.mark.parametrize("normalizer", [None, 90.0])
def test_blocks_give_the_floats_of_their_concatenation(monkeypatch, normalizer):
    monkeypatch.setattr(steps, "BLOCK_ROWS", 7)
    rows = _rows(25, 3)  # blocks of 7, 7, 7 and 4 rows; three rows clip
    assert len(steps.split_rows(*rows)[0]) == 4
    np.testing.assert_array_equal(_fit("numpy", rows, True, normalizer=normalizer),
                                  _fit("numpy", rows, False, normalizer=normalizer))


def test_block_sums_change_only_rounding_against_a_per_row_reference(monkeypatch):
    """Four noisy full-batch steps written out row by row in the test, on the same noise, agree to 1e-12."""
    monkeypatch.setattr(steps, "BLOCK_ROWS", 7)
    X, y = _rows(25, 3)
    blocked = _fit("numpy", (X, y), True)
    # the reference: the same generator's noise (drawn first, after the charge), then a loop over rows
    rng = np.random.default_rng(5)
    optimizer = DPSGD(_account(), "probit", np.random.default_rng(0), clip=1.0)
    plan = optimizer.plan(25, steps=4, cost=ZCDP(0.5))
    noise = steps.draw_step_noise(rng, plan.sigma, 2.0, 4, 3)
    theta = np.zeros(3)
    for step in range(4):
        total = np.zeros(3)
        for x, r in zip(X, y, strict=True):
            g = (ndtr(x @ theta) - r) * x
            total += g * min(1.0, 1.0 / (np.linalg.norm(g) + 1e-6))
        gradient = noise.release(total, step) / 25 + (1.0 / 25) * theta
        theta = theta - 0.5 * gradient
        theta *= min(1.0, 2.0 / np.linalg.norm(theta))
    np.testing.assert_allclose(blocked, theta, rtol=0, atol=1e-12)


def test_torch_engine_takes_blocks_as_their_concatenation():
    rows = _rows(40, 3)
    np.testing.assert_array_equal(_fit("vectorised", rows, True), _fit("vectorised", rows, False))


def test_a_refit_on_blocks_holds_no_copy_of_the_rows(monkeypatch):
    """tracemalloc: fit_blocks' peak is a small part of the rows; fit (its private copy) exceeds them."""
    monkeypatch.setattr(steps, "BLOCK_ROWS", 1000)
    rows = _rows(20_000, 10, big_rows=0)
    rows_bytes = rows[0].nbytes + rows[1].nbytes
    peaks = {}
    for blocks in (True, False):
        _fit("numpy", rows, blocks, normalizer=2e4)  # warm: imports and caches are not the refit's memory
        tracemalloc.start()
        _fit("numpy", rows, blocks, normalizer=2e4)
        peaks[blocks] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[False] > rows_bytes  # the check can fail: a copy of the rows shows
    assert peaks[True] < 0.3 * rows_bytes  # row norms (8 B a row) and one block's temporaries


def test_fit_blocks_refuses_bad_blocks_by_name():
    optimizer = DPSGD(_account(), "probit", np.random.default_rng(0), clip=1.0)
    with pytest.raises(ValueError, match="xs must be row blocks of one width"):
        optimizer.fit_blocks([np.zeros((2, 3)), np.zeros((2, 4))], [np.zeros(2), np.zeros(2)], steps=1, lr=0.1,
                             projection=BallProjection(1.0), cost=ZCDP(0.1))
    with pytest.raises(ValueError, match=r"^ys\[1\] must have shape \(2,\) to match xs\[1\], got \(3,\)$"):
        optimizer.fit_blocks([np.zeros((2, 3)), np.zeros((2, 3))], [np.zeros(2), np.zeros(3)], steps=1, lr=0.1,
                             projection=BallProjection(1.0), cost=ZCDP(0.1))
    with pytest.raises(TypeError, match="xs and ys must be lists or tuples"):
        optimizer.fit_blocks(np.zeros((2, 3)), [np.zeros(2)], steps=1, lr=0.1, projection=BallProjection(1.0),
                             cost=ZCDP(0.1))
    ledger = Ledger(ApproxDP(4, 1e-5), relation="add_remove")
    poisson = PoissonDPSGD(ledger.split({"p": 1})["p"], "probit", np.random.default_rng(0), clip=1.0)
    with pytest.raises(TypeError, match="use fit"):
        poisson.fit_blocks([np.zeros((2, 3))], [np.zeros(2)])


def test_noise_in_chunks_is_the_chunks_drawn_one_after_another(monkeypatch):
    """A table of more than NOISE_CHUNK coordinates: each chunk one sampler call, in order; one call below it."""
    from mechanisms.lattice import GaussianLattice

    monkeypatch.setattr(steps, "NOISE_CHUNK", 7)
    rng, reference_rng = np.random.default_rng(3), np.random.default_rng(3)
    noise = steps.draw_step_noise(rng, 2.0, 2.0, 6, 4)  # 24 coordinates: chunks of 7, 7, 7, 3
    lattice = GaussianLattice(2.0, 2.0, 4)
    units = np.concatenate([lattice.integers(reference_rng, size) for size in (7, 7, 7, 3)])
    np.testing.assert_array_equal(noise.rows, units.reshape(6, 4) * lattice.grid)
    assert rng.random() == reference_rng.random()  # the same draws were consumed
    small = steps.draw_step_noise(np.random.default_rng(4), 2.0, 2.0, 1, 4)  # 4 ≤ 7: one call
    one_call = lattice.integers(np.random.default_rng(4), 4).reshape(1, 4) * lattice.grid
    np.testing.assert_array_equal(small.rows, one_call)


def test_a_noise_table_in_chunks_holds_about_eight_bytes_a_coordinate(monkeypatch):
    monkeypatch.setattr(steps, "NOISE_CHUNK", 10_000)
    steps.draw_step_noise(np.random.default_rng(0), 2.0, 2.0, 10, 4)
    tracemalloc.start()
    steps.draw_step_noise(np.random.default_rng(0), 2.0, 2.0, 50_000, 4)  # 200,000 coordinates
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * 200_000 + 200 * 10_000  # the table and one chunk's temporaries (one call: about 165 B each)
    monkeypatch.setattr(steps, "NOISE_CHUNK", 200_000)
    tracemalloc.start()
    steps.draw_step_noise(np.random.default_rng(0), 2.0, 2.0, 50_000, 4)
    assert tracemalloc.get_traced_memory()[1] > 8 * 200_000 + 200 * 10_000  # the bound above can fail
    tracemalloc.stop()


def test_a_run_whose_noise_cannot_fit_is_refused_before_its_charge_naming_steps():
    account = _account(1e6)
    optimizer = DPSGD(account, "probit", np.random.default_rng(0), clip=1.0)
    X, y = _rows(10, 3)
    with pytest.raises(ValueError, match=r"^steps=10000000000000 needs .* for the noise of its steps"):
        optimizer.fit(X, y, steps=10**13, lr=0.1, projection=BallProjection(1.0), noise_multiplier=1.0)
    assert account.spent.rho == 0
