"""DP-TT with information-directed selection (beta="ids"): the share against a brute-force
minimisation, its Gaussian limit, the β-sum tracking against the per-round rule, the
constant-share path against fixed-β DP-TT, δ-correctness and reproducibility."""

import math

import numpy as np
import pytest
from scipy import stats

from dpglm.bai.adap_tt import AdaPTT
from dpglm.bai.block_engine import credit_pulls
from dpglm.bai.divergences import ids_leader_share
from dpglm.bai.top_two import DPTopTwo, EBTopTwo


def _kl(p, q):
    p = np.clip(p, 1e-300, 1 - 1e-16)
    return p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))


def _refine(u, i):
    """A grid 100 times finer over the two cells either side of index ``i`` of the grid ``u`` (a row per i)."""
    lo, hi = u[np.maximum(i - 1, 0)], u[np.minimum(i + 1, u.size - 1)]
    return lo[..., None] + (hi - lo)[..., None] * np.linspace(0.0, 1.0, 201)


def _d_eps(mu, x, eps):
    """d_ε(μ, x) = min over z between μ and x of ε|z − μ| + kl(z, x), on a grid (one row per x).

    The cost is convex in z, so its minimiser lies in the two grid cells beside the grid's
    minimum: 201 points, then 201 over those cells (a spacing of 1/20,000 of the way).
    """
    if math.isinf(eps):  # no move of the mean for free: only z = μ
        return _kl(np.full_like(x, mu), x)

    def cost(u):  # u: fractions of the way from μ to x, one row per x
        z = mu + (x[:, None] - mu) * u
        return eps * np.abs(z - mu) + _kl(z, x[:, None])

    u = np.linspace(0.0, 1.0, 201)
    i = np.argmin(cost(np.broadcast_to(u, (x.size, u.size))), axis=1)
    return np.min(cost(_refine(u, i)), axis=1)


def reference_share(m1, m2, w1, w2, eps):
    """Brute force: x* = argmin over a fine grid of w₁d_ε(m₁, x) + w₂d_ε(m₂, x); β = w₁d₁/(w₁d₁ + w₂d₂) at x*.

    The objective is convex in x (a partial minimum of jointly convex costs): 399 interior
    points of [m₂, m₁], then 199 interior points of the two cells beside the best one (a
    spacing of (m₁ − m₂)/40,000; the minimiser can sit next to an end at small ε).
    """
    def objective(x):
        return w1 * _d_eps(m1, x, eps) + w2 * _d_eps(m2, x, eps)

    x = np.linspace(m2, m1, 401)
    x = _refine(x, np.array(1 + int(np.argmin(objective(x[1:-1])))))[1:-1]
    best = x[int(np.argmin(objective(x))):][:1]
    d1, d2 = _d_eps(m1, best, eps)[0], _d_eps(m2, best, eps)[0]
    return w1 * d1 / (w1 * d1 + w2 * d2)


@pytest.mark.parametrize("m1, m2, w1, w2, eps", [
    (0.75, 0.53125, 100.0, 130.0, 1e-3),  # small ε: the leader with fewer counts gets almost all
    (0.75, 0.53125, 4096.0, 1024.0, 1e-3),  # small ε: the leader with more counts gets little
    (0.75, 0.7, 512.0, 2048.0, 4.64e-3),
    (0.75, 0.53125, 1e4, 1e4, 0.0215),
    (0.75, 0.53125, 300.0, 200.0, 0.3),
    (0.6, 0.4, 10.0, 40.0, 1.0),
    (0.9, 0.2, 5.0, 7.0, 0.1),
    (0.7, 0.5, 20.0, 60.0, math.inf),
])
def test_share_matches_brute_force_minimisation(m1, m2, w1, w2, eps):
    got = float(ids_leader_share(m1, m2, w1, w2, eps))
    assert got == pytest.approx(reference_share(m1, m2, w1, w2, eps), abs=3e-3)


@pytest.mark.parametrize("eps", [math.inf, 50.0])
@pytest.mark.parametrize("w1, w2", [(3.0, 7.0), (50.0, 2.0), (8.0, 8.0)])
def test_share_tends_to_the_gaussian_one_for_close_means(eps, w1, w2):
    """Close means, kl branch: kl ≈ Gaussian with one variance, so β → N_C/(N_B + N_C) (You et al. 2023)."""
    got = float(ids_leader_share(0.5 + 1e-4, 0.5 - 1e-4, w1, w2, eps))
    assert got == pytest.approx(w2 / (w1 + w2), abs=1e-3)


def test_share_is_one_half_without_a_gap_and_checks_input():
    assert float(ids_leader_share(0.4, 0.4, 3.0, 9.0, 0.1)) == 0.5
    with pytest.raises(ValueError, match="w_leader"):
        ids_leader_share(0.6, 0.4, 0.0, 1.0, 0.1)
    with pytest.raises(ValueError, match="m_challenger"):
        ids_leader_share(0.6, 1.4, 1.0, 1.0, 0.1)


def test_credit_tracking_matches_the_per_round_rule():
    """Blocks of rounds with a share constant per block: S ← S + β, pull iff N ≤ S, one round at a time."""
    rng = np.random.default_rng(4)
    for _ in range(40):
        n_own, credit = 0, 0.0
        for _ in range(30):
            beta, t = float(rng.uniform()), int(rng.integers(1, 20))
            nn, s, pulls = n_own, credit, 0
            for _ in range(t):
                s += beta
                if nn <= s:
                    nn += 1
                    pulls += 1
            got = credit_pulls(np.array([t]), np.array([n_own]), np.array([credit]), np.array([beta]))[0]
            assert got == pulls
            n_own, credit = n_own + pulls, credit + beta * t


class _ConstantShare(DPTopTwo):
    """The IDS path (β-sums, per-row shares) fed a constant share instead of the IDS one."""

    share = 0.5

    def _ids_beta(self, est, runs, rows, keys):
        return np.full(rows.size, self.share)


@pytest.mark.parametrize("share", [0.5, 0.3])
@pytest.mark.parametrize("counts", ["phase", "true"])
def test_constant_share_reproduces_fixed_beta_dp_tt(share, counts):
    mu = (0.7, 0.55, 0.5, 0.3)
    ids = _ConstantShare(mu, 0.5, 0.05, beta="ids", challenger_counts=counts)
    ids.share = share
    session = ids.start(8, np.random.default_rng(7)).advance()
    fixed = DPTopTwo(mu, 0.5, 0.05, beta=share, challenger_counts=counts).start(8, np.random.default_rng(7)).advance()
    a, b = session.result(), fixed.result()
    assert np.array_equal(a.stopping_times, b.stopping_times)
    assert np.array_equal(a.recommendations, b.recommendations)
    assert np.array_equal(session.runs.pulls, fixed.runs.pulls)
    assert np.array_equal(session.runs.leader_pulls, fixed.runs.leader_pulls)
    assert np.allclose(session.runs.beta_credit, share * session.runs.leader_rounds)


def test_constant_share_reproduces_fixed_beta_eb_tci():
    class Constant(EBTopTwo):
        def _ids_beta(self, est, runs, rows, keys):
            return np.full(rows.size, 0.5)

    a = Constant((0.8, 0.3, 0.2), 0.1, beta="ids").run(5, np.random.default_rng(2))
    b = EBTopTwo((0.8, 0.3, 0.2), 0.1).run(5, np.random.default_rng(2))
    assert np.array_equal(a.stopping_times, b.stopping_times)


def test_ids_shares_follow_the_counts_at_small_epsilon():
    """At ε = 1e-3 on μ4 the leader's share is far from 1/2 in some blocks: IDS does act."""
    alg = DPTopTwo((0.75, 0.53125, 0.375, 0.28125, 0.25), 1e-3, 0.01, beta="ids")
    session = alg.start(4, np.random.default_rng(0)).advance(blocks=400)
    runs = session.runs
    led = runs.leader_rounds > 0
    share = runs.beta_credit[led] / runs.leader_rounds[led]
    assert np.all((share >= 0) & (share <= 1))
    assert np.max(np.abs(share - 0.5)) > 0.05


def test_ids_error_rate_at_most_delta_and_reproducible():
    alg = DPTopTwo((0.6, 0.5, 0.45), 2.0, 0.2, beta="ids")
    runs = 150
    res = alg.run(runs, np.random.default_rng(5), max_steps=10**7)
    assert res.stopped.all()
    assert res.errors <= stats.binom(runs, alg.delta).ppf(0.999)
    again = DPTopTwo((0.6, 0.5, 0.45), 2.0, 0.2, beta="ids").run(runs, np.random.default_rng(5), max_steps=10**7)
    assert np.array_equal(res.stopping_times, again.stopping_times)
    assert np.array_equal(res.recommendations, again.recommendations)


def test_bad_beta_raises():
    with pytest.raises(ValueError, match="beta"):
        DPTopTwo((0.6, 0.5), 1.0, 0.1, beta="idss")
    with pytest.raises(ValueError, match="beta"):
        DPTopTwo((0.6, 0.5), 1.0, 0.1, beta=1.5)
    with pytest.raises(ValueError, match="beta"):
        AdaPTT((0.6, 0.5), 1.0, 0.1, beta="ids")
