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
        assert ledger.guarantee().cost == PureDP(1.0)
    with pytest.raises(ValueError, match="epsilon"):
        DPSE((0.9, 0.5), -1.0, 0.1)



def test_cumulative_count_releases_the_fresh_sum_over_the_cumulative_count(monkeypatch):
    """mean="cumulative-count" (authors' public code) releases (R_e/n_e)·S_e, n_e = Σ_{j≤e} R_j, at sensitivity 1.

    Same seed, so both variants draw the same Binomial sums while their active sets
    agree (early epochs at ε = 1e-3: at most the 0.5 arm is gone); the released
    statistics must then differ by exactly R_e/n_e, with n_e summed here by hand.
    """
    import dpglm.bai.successive_elimination as se

    seen: dict[str, list] = {}
    original = se.LaplaceMechanism.release

    def spy(self, x, **kw):
        seen.setdefault(kw["note"], []).append((kw["partition"], np.array(x, dtype=float)))
        return original(self, x, **kw)

    monkeypatch.setattr(se.LaplaceMechanism, "release", spy)
    mu = (0.95, 0.9, 0.9, 0.9, 0.5)
    for mean in DPSE.MEANS:
        # Seed 4: under the float-safe (discrete Laplace) noise stream, seed 3's cumulative run
        # drops a second arm by epoch 3, so the active sets (this test's premise) differ.
        DPSE(mu, 1e-3, 0.01, mean=mean).run(1, np.random.default_rng(4))
    fresh, cum = seen["DP-SE epoch sums (fresh)"], seen["DP-SE epoch sums (cumulative-count)"]
    alg = DPSE(mu, 1e-3, 0.01)
    n_e = 0
    for e in (1, 2, 3):
        (pf, xf), (pc, xc) = fresh[e - 1], cum[e - 1]
        assert pf == pc == f"epoch={e}" and xf.size == xc.size >= 4  # the same active set (0.5 may go after e = 1)
        r_e = int(alg.epoch_length(e, xf.size))
        n_e += r_e
        np.testing.assert_allclose(xc, xf * r_e / n_e, rtol=1e-12)
        assert np.all(xc <= r_e) and np.all(xf <= r_e)  # one reward moves a coordinate by <= R_e/n_e <= 1


def test_cumulative_count_variant_costs_epsilon_and_rejects_unknown_means():
    res = DPSE((0.9, 0.5, 0.4), 1.0, 0.05, mean="cumulative-count").run(10, np.random.default_rng(2))
    assert res.stopped.all() and res.errors == 0
    for ledger in res.ledgers:
        assert ledger.guarantee().cost == PureDP(1.0)
    with pytest.raises(ValueError, match="mean"):
        DPSE((0.9, 0.5), 1.0, 0.1, mean="cumulative")
