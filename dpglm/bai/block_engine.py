"""Closed-form blocks of the Top Two sampling rule between two refreshes (a simulation device).

Between two refreshes of the estimator nothing the leader or the stopping rule
reads changes, and no reward is read. A block of steps can then be planned at
once: the leader pulls follow from β-tracking in closed form
(:func:`tracking_pulls`), the challenger pulls from merging the challenger keys
linearised in N_a at the block start (:func:`merged_ranks`,
:func:`challenger_pulls`), and the block ends exactly when some arm reaches
its next refresh point, or after the step budget. The rewards are then drawn
as one Binomial sum per arm, equal in distribution to pulling one by one. The
module docstring of :mod:`dpglm.bai.top_two` states what is exact and what is
approximated; correctness (δ) and privacy (ε) do not depend on the sampling rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Block", "challenger_pulls", "credit_pulls", "exact_block", "first_true", "force_exploration",
           "merged_ranks", "private_block", "tracking_pulls"]


def tracking_pulls(t: np.ndarray, n_lead: np.ndarray, l_lead: np.ndarray, beta: float) -> np.ndarray:
    """Leader pulls in the next ``t`` rounds of β-tracking (paper Alg. 1, line 7).

    Rule per round: L_B ← L_B + 1; pull B iff N^B_B ≤ β L_B. It keeps
    N^B_B = ⌊βL_B⌋ + 1 once L_B ≥ 1 (induction), so the pulls in t rounds
    are ⌊β(L_B + t)⌋ + 1 − N^B_B, clipped to [0, t].
    """
    t = np.asarray(t, dtype=np.int64)
    pulls = np.floor(beta * (l_lead + t) + 1e-9).astype(np.int64) + 1 - n_lead
    return np.clip(pulls, 0, t)


def credit_pulls(t: np.ndarray, n_lead: np.ndarray, credit: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Leader pulls in the next ``t`` rounds of tracking with a varying leader share (IDS).

    Rule per round: S_B ← S_B + β; pull B iff N^B_B ≤ S_B, S_B = ``credit`` the sum of
    the shares β ∈ [0, 1] of the rounds B led (K-sequence tracking, You et al. 2023).
    As for :func:`tracking_pulls`, N^B_B = ⌊S_B⌋ + 1 after B's first round (β ≤ 1 keeps
    the induction), so with β constant over the ``t`` rounds the pulls are
    ⌊S_B + βt⌋ + 1 − N^B_B, clipped to [0, t]; S_B = βL_B gives :func:`tracking_pulls`.
    """
    t = np.asarray(t, dtype=np.int64)
    pulls = np.floor(credit + beta * t + 1e-9).astype(np.int64) + 1 - n_lead
    return np.clip(pulls, 0, t)


def _leader_pulls(n_lead: np.ndarray, l_lead: np.ndarray, beta: float | np.ndarray,
                  credit: np.ndarray | None) -> Callable[[np.ndarray, bool], np.ndarray]:
    """tt ↦ the leader's pulls in tt rounds, per row (``column``: tt has shape (R, K)).

    ``credit`` None: fixed-β tracking (:func:`tracking_pulls`); else the IDS β-sum of
    each row's leader with the row's share ``beta`` (:func:`credit_pulls`).
    """
    if credit is None:
        return lambda tt, column: (tracking_pulls(tt, n_lead[:, None], l_lead[:, None], float(beta)) if column
                                   else tracking_pulls(tt, n_lead, l_lead, float(beta)))
    share = np.broadcast_to(np.asarray(beta, dtype=float), n_lead.shape)
    return lambda tt, column: (credit_pulls(tt, n_lead[:, None], credit[:, None], share[:, None]) if column
                               else credit_pulls(tt, n_lead, credit, share))


def first_true(target: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], hi: np.ndarray) -> np.ndarray:
    """Smallest integer t in [1, hi] with fn(t) ≥ target (fn non-decreasing); hi if none (bisection)."""
    lo = np.ones_like(target)
    hi = hi.copy()
    for _ in range(64):
        if np.all(lo >= hi):
            break
        mid = (lo + hi) // 2
        ok = fn(mid) >= target
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid + 1)
    return hi


def merged_ranks(v: np.ndarray, s: np.ndarray, j: np.ndarray) -> np.ndarray:
    """1-based rank of element j[:, a] of every arm a in the merge of the sequences v_c + i·s_c.

    Ties in value go to the smaller arm index, so the order is strict and total.
    ``v``, ``s``, ``j`` have shape (R, K); arms with v = +inf are not in the merge.
    """
    e = (v + j * s)[:, :, None]  # [r, a, 1]
    vc, sc = v[:, None, :], s[:, None, :]  # [r, 1, c]
    with np.errstate(invalid="ignore", over="ignore"):
        ratio = (e - vc) / sc
    k = v.shape[1]
    before = np.arange(k)[None, :] < np.arange(k)[:, None]  # [a, c]: c < a
    g = np.where(np.isfinite(ratio), np.maximum(np.floor(ratio) - 1, 0), 0)
    # recount near the boundary with the same float formula as e (v + i·s), so that
    # equal elements compare equal
    cnt = g.copy()
    alive = np.isfinite(vc) & np.isfinite(ratio)
    for d in range(3):
        val = vc + (g + d) * sc
        alive &= np.where(before, val <= e, val < e)
        cnt += alive
    cnt[:, np.arange(k), np.arange(k)] = 0
    # an arm whose key barely grows (slope ~ 0) precedes everything: cap the rank so
    # that it stays an exact, castable integer meaning "not within any block"
    return np.minimum(1 + j + cnt.sum(axis=2), 2.0**62)


def challenger_pulls(keys: np.ndarray, slopes: np.ndarray, steps: np.ndarray, leader: np.ndarray) -> np.ndarray:
    """Challenger pulls of every arm in ``steps`` (R, 1) challenger steps: #{j : rank(a, j) ≤ steps}.

    Found by bisection on j ∈ [0, steps] per arm; the leader gets none.
    """
    rows = np.arange(keys.shape[0])
    lo = np.zeros(keys.shape, dtype=np.int64)
    hi = np.broadcast_to(steps, lo.shape).copy()
    hi[rows, leader] = 0
    for _ in range(64):
        if np.all(lo >= hi):
            break
        mid = (lo + hi + 1) // 2
        ok = merged_ranks(keys, slopes, (mid - 1).astype(float)) <= steps
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid - 1)
    return lo


@dataclass
class Block:
    """A planned block per run: its length, the leader's pulls in it, the pulls per arm (leader included),
    and the leader's share β of each of its rounds (the fixed β, or the row's IDS share)."""

    length: np.ndarray
    leader_pulls: np.ndarray
    pulls: np.ndarray
    beta: float | np.ndarray


def exact_block(keys: np.ndarray, leader: np.ndarray, n_lead: np.ndarray, l_lead: np.ndarray,
                beta: float | np.ndarray, credit: np.ndarray | None = None) -> Block:
    """One step: every pull refreshes an exact estimator, so the plain argmin challenger is used.

    ``credit``: None for fixed-β tracking, else the leaders' IDS β-sums (:func:`credit_pulls`).
    """
    rows = np.arange(keys.shape[0])
    length = np.ones(rows.size, dtype=np.int64)
    leader_pulls = _leader_pulls(n_lead, l_lead, beta, credit)(length, False)
    pulls = np.zeros(keys.shape, dtype=np.int64)
    pulls[rows, np.argmin(keys, axis=1)] = 1 - leader_pulls
    pulls[rows, leader] += leader_pulls
    return Block(length, leader_pulls, pulls, beta)


def private_block(keys: np.ndarray, slopes: np.ndarray, remaining: np.ndarray, leader: np.ndarray,
                  budget: np.ndarray, n_lead: np.ndarray, l_lead: np.ndarray, beta: float | np.ndarray,
                  credit: np.ndarray | None = None) -> Block:
    """The block up to the first refresh of any arm (or ``budget`` steps), in closed form.

    ``remaining[r, a]`` ≥ 1 pulls until arm a's next refresh; the leader's refresh
    step follows from β-tracking, each challenger's from its rank in the merge of
    the linearised keys. ``credit``: None for fixed-β tracking, else the leaders'
    IDS β-sums, with ``beta`` the rows' shares, constant within the block (:func:`credit_pulls`).
    """
    rows = np.arange(keys.shape[0])
    leader_pulls_in = _leader_pulls(n_lead, l_lead, beta, credit)

    def lead_steps(tt: np.ndarray) -> np.ndarray:
        return leader_pulls_in(tt, False)

    def challenger_steps(tt: np.ndarray) -> np.ndarray:
        return tt - leader_pulls_in(tt, True)

    length = np.minimum(first_true(remaining[rows, leader], lead_steps, budget), budget)
    refresh_index = (remaining - 1).astype(float)
    refresh_index[rows, leader] = 0.0
    rank = merged_ranks(keys, slopes, refresh_index).astype(np.int64)  # challenger step of each arm's refresh
    refresh_step = first_true(rank, challenger_steps, np.broadcast_to(budget[:, None], rank.shape).copy())
    refresh_step[rows, leader] = budget
    length = np.minimum(length, refresh_step.min(axis=1))
    leader_pulls = lead_steps(length)
    pulls = challenger_pulls(keys, slopes, (length - leader_pulls)[:, None], leader)
    pulls[rows, leader] += leader_pulls
    return Block(length, leader_pulls, pulls, beta)


def force_exploration(block: Block, n: np.ndarray, remaining: np.ndarray, t: np.ndarray, budget: np.ndarray,
                      rule: str) -> Block:
    """Replace the block by forced pulls of the least pulled arm while N_a < f(t) (checked at block starts).

    ``rule`` ``"sqrt"``: f(t) = √t − K/2 (Garivier & Kaufmann 2016); ``"log-linear"``:
    f(t) = t/(K(1 + log t)). The forced pulls stop at that arm's refresh or at the
    deficit, so consecutive forced pulls are exactly the per-step rule's.
    """
    rows = np.arange(n.shape[0])
    n_arms = n.shape[1]
    low = np.argmin(n, axis=1)
    tt = t.astype(float)
    floor = np.sqrt(tt) - n_arms / 2 if rule == "sqrt" else tt / (n_arms * (1 + np.log(tt)))
    deficit = np.ceil(floor).astype(np.int64) - n[rows, low]
    forced = deficit > 0
    forced_len = np.minimum(np.minimum(deficit, remaining[rows, low]), budget)
    pulls = np.where(forced[:, None], 0, block.pulls)
    pulls[rows[forced], low[forced]] = forced_len[forced]
    return Block(np.where(forced, forced_len, block.length), np.where(forced, 0, block.leader_pulls), pulls,
                 block.beta)
