"""Shuffle-DP batched bandit (paper Alg. 1): seconds per T = 20000 run, and calibrated vs paper noise.

Run ``python -m benchmarks.shuffle_bandit``. Prints two small tables:

1. Seconds (wall and CPU) of one run, probit, d = 5, K = 20, S = 3, T = 20000: B-GLinCB and
   ShuffleDP-GLM at ε = 4 (cold: first run in the process, with the accountant's
   calibrations; warm: the same run again, calibrations cached), and B-GLinCB at T = 5000
   with the vectorised per-batch designs vs one design per round (``run_policy``).
2. Per-entry noise sd of the released ``V`` (entries bounded by 1) at the covariance half
   (ε/2, δ/2) for the batch-1 sizes of the experiment: the exact shuffle accountant's
   calibrated noise bits vs the paper's constant-based count
   ``b = 24e4 g² ln²(4d²/δ)/(ε² n)`` (App. T as recalled in docs/references.md), and their ratio.
"""

from __future__ import annotations

import math
import time

import numpy as np

from dpglm.envs import StochasticContextEnv
from dpglm.policies import run_policy_record
from dpglm.policies.batched import BGLinCB, ShuffleDPGLMBandit, run_batched_policy
from mechanisms.shuffle_accountant import (
    calibrate_noise_bits,
    default_levels,
    paper_noise_bits,
)

FAMILY, D, K, S, DELTA = "probit", 5, 20, 3.0, 0.02


def timed(make_policy, horizon: int, runner=run_batched_policy) -> tuple[float, float, float]:
    env = StochasticContextEnv(FAMILY, D, K, S, horizon, np.random.default_rng(0))
    policy = make_policy(horizon)
    wall, cpu = time.perf_counter(), time.process_time()
    record = runner(policy, env)
    return time.perf_counter() - wall, time.process_time() - cpu, float(record.regret[-1])


def speed_table() -> None:
    def bglincb(T):
        return BGLinCB(FAMILY, D, T, S, np.random.default_rng(1))

    def private(T):
        return ShuffleDPGLMBandit(FAMILY, D, T, S, np.random.default_rng(1), epsilon=4.0, delta=DELTA)

    import mechanisms.optim.shuffle_pgd  # noqa: F401  (imports torch via mechanisms.optim: not timed)

    rows = [
        ("B-GLinCB, T=20000 (vectorised designs)", *timed(bglincb, 20000)),
        ("ShuffleDP-GLM eps=4, T=20000, cold", *timed(private, 20000)),
        ("ShuffleDP-GLM eps=4, T=20000, warm", *timed(private, 20000)),
        ("B-GLinCB, T=5000 (vectorised designs)", *timed(bglincb, 5000)),
        ("B-GLinCB, T=5000 (one design per round)", *timed(bglincb, 5000, runner=run_policy_record)),
    ]
    print(f"{'run (probit, d=5, K=20, S=3)':44s} {'wall s':>8s} {'CPU s':>8s} {'regret':>8s}")
    for name, wall, cpu, regret in rows:
        print(f"{name:44s} {wall:8.2f} {cpu:8.2f} {regret:8.1f}")


def noise_table() -> None:
    print(f"\n{'d':>2s} {'n':>5s} {'eps/2':>6s} {'g':>4s} {'b ours':>8s} {'b paper':>10s} {'sd ours':>8s} "
          f"{'sd paper':>9s} {'paper/ours sd':>14s}")
    for d in (3, 5):
        coordinates = d * (d + 1) // 2
        for n in (293, 737):  # the capped warm-up B₁ at T = 5000 and T = 20000
            for eps in (2.0, 4.0, 8.0):
                half_eps, half_delta = eps / 2, DELTA / 2
                g = default_levels(n, d)
                ours = calibrate_noise_bits(n, half_eps, half_delta, g, coordinates)
                paper = paper_noise_bits(n, half_eps, half_delta, d, g)
                sd_ours = math.sqrt(n * (1 + ours) / 4) / g
                sd_paper = math.sqrt(n * (1 + paper) / 4) / g
                print(f"{d:2d} {n:5d} {half_eps:6.1f} {g:4d} {ours:8d} {paper:10.3g} {sd_ours:8.2f} "
                      f"{sd_paper:9.1f} {sd_paper / sd_ours:14.0f}")
    # Cross-check with benchmarks/shuffle.py's point (n = 1e4, δ = 1e-5, a d = 5 matrix, ε = 1).
    n, g = 10_000, default_levels(10_000, 5)
    ours, paper = calibrate_noise_bits(n, 1.0, 1e-5, g, 15), paper_noise_bits(n, 1.0, 1e-5, 5, g)
    print(f"cross-check n=1e4, delta=1e-5, d=5 matrix, eps=1: b ours {ours}, b paper {paper:.3g}, "
          f"paper/ours bits {paper / ours:.3g}, sd ratio {math.sqrt((1 + paper) / (1 + ours)):.0f}")


if __name__ == "__main__":
    speed_table()
    noise_table()
