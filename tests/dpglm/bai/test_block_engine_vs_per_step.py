"""Slow check: the block engine's stopping times match a per-step DP-TT written here.

The reference pulls one arm per round with the exact TCI argmin (C*_ε with the
true counts + log N_a), exact β-tracking, a reward drawn per pull, and the same
estimator and GLR stopping rule. Two-sample KS test on the stopping times.
"""

import numpy as np
import pytest
from scipy import stats

from accounting import Ledger, PureDP
from dpglm.bai.divergences import transport_cost
from dpglm.bai.thresholds import HeuristicThreshold
from dpglm.bai.top_two import DPTopTwo
from mechanisms.geometric import GeometricBatchMean


def reference_dp_tt(mu, eps, delta, beta, rng):
    """One DP-TT run, one pull at a time (paper Alg. 1 as in BAI.md)."""
    K = len(mu)
    mech = GeometricBatchMean(Ledger(PureDP(eps)).root, K, eps, rng)
    th = HeuristicThreshold(K, delta)
    n = np.zeros(K, dtype=np.int64)
    batch_n, batch_s = np.zeros(K, dtype=np.int64), np.zeros(K)
    noisy = np.zeros(K)
    n_lead, l_lead = np.zeros(K, dtype=np.int64), np.zeros(K, dtype=np.int64)

    def pull(a):
        n[a] += 1
        batch_n[a] += 1
        batch_s[a] += rng.random() < mu[a]
        if n[a] == mech.next_refresh[0, a]:
            c = np.zeros(K, dtype=np.int64)
            s = np.zeros(K)
            c[a], s[a] = batch_n[a], batch_s[a]
            for _, arm, rel in mech.observe(c, s):
                noisy[arm] = rel.value
            batch_n[a], batch_s[a] = 0, 0.0
            return True
        return False

    for a in range(K):
        pull(a)
    t = K
    refreshed = True
    while True:
        m = np.clip(noisy / mech.phase_counts[0], 0, 1)
        if refreshed:
            top = np.flatnonzero(m == m.max())
            lead = int(rng.choice(top))
            nt = mech.phase_counts[0].astype(float)
            c = th(mech.batches[0], nt)
            z = transport_cost(m[lead], m, nt[lead], nt, eps)
            z[lead] = np.inf
            if np.all(z > c + c[lead]):
                return t, lead
        l_lead[lead] += 1
        if n_lead[lead] <= beta * l_lead[lead]:
            arm = lead
            n_lead[lead] += 1
        else:
            keys = transport_cost(m[lead], m, n[lead], n, eps) + np.log(n)
            keys[lead] = np.inf
            arm = int(np.argmin(keys))
        refreshed = pull(arm)
        t += 1


@pytest.mark.slow
def test_block_engine_matches_per_step_reference():
    mu, eps, delta = (0.7, 0.5, 0.4), 1.0, 0.05
    rng = np.random.default_rng(0)
    ref = np.array([reference_dp_tt(mu, eps, delta, 0.5, rng)[0] for _ in range(300)])
    block = DPTopTwo(mu, eps, delta, threshold="heuristic").run(300, np.random.default_rng(1)).stopping_times
    assert stats.ks_2samp(ref, block).pvalue > 0.01
    assert np.mean(block) == pytest.approx(np.mean(ref), rel=0.15)
