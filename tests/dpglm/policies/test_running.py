"""What a run keeps between rounds: refit rows in blocks, fits on them, memory per round (issue 26)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import dpglm.glm_newton as glm_newton
from dpglm.envs import StochasticContextEnv
from dpglm.glm import LOGISTIC, PROBIT, fit_mle, fit_mle_ball
from dpglm.policies import RSGLinUCB, run_policy_record
from dpglm.policies.running import Rows

BLOCK = 37  # a small block size, so that a few hundred rows span many blocks


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(glm_newton, "_GRAM_CHUNK", BLOCK)


def _fill(rows: Rows, X: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
    for x, r in zip(X, y, strict=True):
        if rng.random() < 0.2:  # a staged row that is never committed is overwritten
            rows.stage(rng.normal(size=x.shape))
        rows.stage(x)
        rows.commit(r)


def test_rows_read_back_what_was_appended_across_blocks(small_blocks, rng):
    d, n = 4, 500
    X, y = rng.normal(size=(n, d)), rng.random(n)
    rows = Rows(d, capacity=4)
    _fill(rows, X[:100], y[:100], rng)
    early = rows.blocks()
    _fill(rows, X[100:], y[100:], rng)
    blocks = rows.blocks()
    assert len(rows) == blocks.n == n and blocks.d == d
    assert [x.shape[0] for x in blocks.xs] == [BLOCK] * (n // BLOCK) + [n % BLOCK]
    got_x, got_y = blocks.arrays()
    assert np.array_equal(got_x, X) and np.array_equal(got_y, y)
    early_x, early_y = early.arrays()  # views taken before later appends still hold their rows
    assert np.array_equal(early_x, X[:100]) and np.array_equal(early_y, y[:100])
    with pytest.raises(ValueError, match="read-only"):
        blocks.xs[0][0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        blocks.ys[-1][0] = 1.0


def test_rows_hold_one_block_contiguous_as_views(rng):
    rows = Rows(3)
    _fill(rows, rng.normal(size=(300, 3)), rng.random(300), rng)
    blocks = rows.blocks()
    assert len(blocks.xs) == 1 and blocks.arrays()[0] is blocks.xs[0]


def test_rows_never_copy_a_full_block(monkeypatch, rng):
    # Growth beyond the first block allocates one new block and copies nothing, so the
    # peak is the rows held plus one block (a doubling buffer would peak at 3× the rows
    # it held when it last grew: old and new buffer side by side).
    block = 1000
    monkeypatch.setattr(glm_newton, "_GRAM_CHUNK", block)
    d, n = 4, 20 * block
    X, y = rng.normal(size=(n, d)), rng.random(n)
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        rows = Rows(d, capacity=4)
        for x, r in zip(X, y, strict=True):
            rows.stage(x)
            rows.commit(r)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert rows.nbytes == 8 * (d + 1) * n  # 20 full blocks
    assert peak <= 8 * (d + 1) * (n + block) + 4096 + 2 * 21 * 256  # + the Rows object, lists, array headers


@pytest.mark.parametrize("family", [PROBIT, LOGISTIC], ids=lambda f: f.name)
def test_a_fit_on_row_blocks_is_the_fit_on_their_concatenation_bit_for_bit(family, small_blocks, rng):
    # The solvers sum a block at a time; the contiguous rows are cut into the same blocks,
    # so every sum runs in the same order and the answers agree to the last bit.
    d, n = 5, 400
    X = rng.normal(size=(n, d)) / 2
    y = (rng.random(n) < family.mu(X @ np.array([3.0, -2.0, 1.0, 0.5, 0.0]))).astype(float)
    rows = Rows(d)
    _fill(rows, X, y, rng)
    blocks = rows.blocks()
    assert len(blocks.xs) > 1
    assert np.array_equal(fit_mle(family, blocks, None, lam=0.3), fit_mle(family, X, y, lam=0.3))
    ball = fit_mle(family, blocks, None, lam=0.3, radius=1.0)
    assert np.array_equal(ball, fit_mle(family, X, y, lam=0.3, radius=1.0))
    theta, nu = fit_mle_ball(family, blocks, None, 0.3, 1.0, np.zeros(d))
    whole = fit_mle_ball(family, X, y, 0.3, 1.0, np.zeros(d))
    assert np.array_equal(theta, whole[0]) and nu == whole[1]
    warm = fit_mle_ball(family, blocks, None, 0.3, 1.0, theta, nu)  # the KKT Newton path, from (θ, ν)
    assert np.array_equal(warm[0], fit_mle_ball(family, X, y, 0.3, 1.0, theta, nu)[0])
    # Independent check: the blocks' answer is the constrained minimiser (KKT, ‖θ‖ = 1, ν > 0).
    grad = X.T @ (family.mu(X @ warm[0]) - y) + 0.3 * warm[0]
    assert warm[1] > 0 and abs(np.linalg.norm(warm[0]) - 1.0) <= 1e-9
    assert np.abs(grad + warm[1] * warm[0]).max() < 1e-6


def _run_growth(d: int, horizon: int) -> int:
    """Traced bytes a whole RS-GLinUCB run (``run_policy_record``) peaks at beyond its setup."""
    tracemalloc.start()
    try:
        env = StochasticContextEnv("probit", d, 20, 2.5, horizon, np.random.default_rng(0))
        policy = RSGLinUCB("probit", d, horizon, 2.5)
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        run_policy_record(policy, env)
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


def test_a_run_grows_at_most_16_d_plus_1_bytes_a_round(monkeypatch):
    # Memory flat in T (issue 26): beyond buffers of a size fixed by the setup (the env's
    # block of contexts, the solvers' per-block temporaries), which two horizons share, a
    # run keeps its refit rows (8·(d + 1) bytes a round) and the regret record. The block
    # size is made small so that the slack of a partly filled block is small at these T.
    monkeypatch.setattr(glm_newton, "_GRAM_CHUNK", 128)
    d, short, long = 3, 2000, 6000
    per_round = (_run_growth(d, long) - _run_growth(d, short)) / (long - short)
    assert per_round <= 16 * (d + 1)
