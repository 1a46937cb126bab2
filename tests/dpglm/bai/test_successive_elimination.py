"""DP-SE: epoch lengths by hand, elimination outcome, ledger cost ε."""

import numpy as np
import pytest

from accounting import PureDP
from dpglm.bai.successive_elimination import DPSE


def test_epoch_length_by_hand():
    alg = DPSE((0.9, 0.5), 0.5, 0.01)
    # e = 1, |S| = 2: max{32·log(8·2/0.01)/0.25, 8·log(4·2/0.01)/(0.5·0.5)} = max(944.29, 213.9)
    a = 32 * np.log(1600) / 0.25
    assert alg.epoch_length(1, 2) == int(np.ceil(a)) + 1
    # tiny ε: the Laplace term dominates
    alg = DPSE((0.9, 0.5), 1e-3, 0.01)
    b = 8 * np.log(4 * 5 * 9 / 0.01) / (1e-3 * 0.125)
    assert alg.epoch_length(3, 5) == int(np.ceil(b)) + 1


def test_run_identifies_the_best_arm_and_costs_epsilon():
    alg = DPSE((0.9, 0.5, 0.4), 1.0, 0.05)
    res = alg.run(30, np.random.default_rng(2))
    assert res.stopped.all() and res.errors == 0
    # the first epoch pulls all three arms R_1 times
    assert np.all(res.stopping_times >= 3 * alg.epoch_length(1, 3))
    for ledger in res.ledgers:
        assert ledger.guarantee() == PureDP(1.0)
    with pytest.raises(ValueError, match="epsilon"):
        DPSE((0.9, 0.5), -1.0, 0.1)
