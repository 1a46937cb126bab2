"""Steinke's one-run bound beside both f-DP bounds (Mahloujifar et al. 2025) on the same canary counts.

Run ``python examples/one_run_bounds.py``: for m = 10³ … 10⁶ canaries and ε = 1, 2, 4, 8 (δ = 1e-5)
it runs :class:`audits.OneRunGaussianAudit` once (seed 0) and prints its (m, r, v) with the three
readings, each at 95 %: Steinke et al. and f-DP against the (ε, δ) curve (both assumption-free), and
f-DP against the Gaussian curves (assumes a Gaussian tradeoff). docs/audits.md has the table.
"""

import time

from audits.bounds import (
    one_run_epsilon_lower_bound,
    one_run_fdp_epsilon_lower_bound,
    one_run_gdp_epsilon_lower_bound,
)
from audits.one_run import OneRunGaussianAudit

DELTA = 1e-5


def row(canaries, epsilon, seed=0):
    report = OneRunGaussianAudit(epsilon, DELTA, canaries=canaries).run(seed=seed)
    m, r, v = report.canaries, report.guesses, report.correct
    return {"m": m, "epsilon": epsilon, "r": r, "v": v,
            "steinke": one_run_epsilon_lower_bound(m, r, v, delta=DELTA),
            "fdp": one_run_fdp_epsilon_lower_bound(m, r, v, delta=DELTA),
            "gdp": one_run_gdp_epsilon_lower_bound(m, r, v, delta=DELTA)}


def main(sizes=(10**3, 10**4, 10**5, 10**6), epsilons=(1.0, 2.0, 4.0, 8.0)):
    return [row(m, eps) for m in sizes for eps in epsilons]


if __name__ == "__main__":
    start = time.perf_counter()
    print("| m | claimed ε | r | v | Steinke | f-DP (ε, δ) curve | f-DP Gaussian (assumes Gaussian) |")
    print("|---|---|---|---|---|---|---|")
    for line in main():
        print(f"| {line['m']:.0e} | {line['epsilon']:g} | {line['r']} | {line['v']} | {line['steinke']:.3f} | "
              f"{line['fdp']:.3f} | {line['gdp']:.3f} |", flush=True)
    print(f"{time.perf_counter() - start:.0f} s")
