"""Speed of the private best-arm identification code: simulated steps per second.

Run by hand: ``python -m benchmarks.bai``. Prints one row per algorithm and ε on
μ1 = (0.95, 0.9, 0.9, 0.9, 0.5), δ = 0.01: runs simulated in lockstep, total
steps, wall time, steps per second; plus the transport-cost and T*_ε solvers.
"""

from __future__ import annotations

import time

import numpy as np

from dpglm.bai.characteristic_time import characteristic_time
from dpglm.bai.divergences import transport_cost
from dpglm.bai.successive_elimination import DPSE
from dpglm.bai.top_two import AdaPTT, DPTopTwo, EBTopTwo

MU1 = (0.95, 0.9, 0.9, 0.9, 0.5)


def main() -> None:
    cases = [
        ("DP-TT", lambda e: DPTopTwo(MU1, e, 0.01), (1e-3, 0.1, 1.0), 50),
        ("DP-TT heuristic", lambda e: DPTopTwo(MU1, e, 0.01, threshold="heuristic"), (1e-3, 0.1), 50),
        ("AdaP-TT", lambda e: AdaPTT(MU1, e, 0.01), (0.1,), 50),
        ("DP-SE", lambda e: DPSE(MU1, e, 0.01), (1e-3,), 50),
        ("EB-TCI", lambda e: EBTopTwo(MU1, 0.01), (float("inf"),), 20),
    ]
    print(f"{'algorithm':<16} {'eps':>8} {'runs':>5} {'mean tau':>10} {'steps':>10} {'seconds':>8} {'steps/s':>10}")
    for name, make, epss, runs in cases:
        for eps in epss:
            start = time.perf_counter()
            res = make(eps).run(runs, np.random.default_rng(0), max_steps=10**8)
            sec = time.perf_counter() - start
            steps = int(res.stopping_times.sum())
            print(f"{name:<16} {eps:>8.3g} {runs:>5} {res.stopping_times.mean():>10.3g} {steps:>10.3g} "
                  f"{sec:>8.2f} {steps / sec:>10.3g}")
    rng = np.random.default_rng(1)
    n = 100_000
    m = np.sort(rng.uniform(0, 1, (n, 2)), axis=1)
    start = time.perf_counter()
    transport_cost(m[:, 1], m[:, 0], rng.uniform(1, 1e5, n), rng.uniform(1, 1e5, n), 0.01)
    sec = time.perf_counter() - start
    print(f"transport cost C*_eps: {n / sec:.3g} arm pairs per second (vectorised, {n} pairs)")
    start = time.perf_counter()
    characteristic_time(MU1, 0.1)
    print(f"T*_eps(mu1, eps=0.1): {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
