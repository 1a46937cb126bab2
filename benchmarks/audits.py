"""Audit throughput: mechanism runs per second (vectorised, through the real mechanisms), and bound cost.

Run: ``python -m benchmarks.audits [--runs N]``. For each audit it times
``Audit.sample`` on both neighbours (N runs each, after one warm-up call that
pays for imports and calibration), and the certification of one result
(Clopper–Pearson and Gaussian-DP bounds, threshold search over 400 candidates),
and the policy runs per second of the bandit first-switch game (in process and
over two worker processes, whose start-up is timed separately).
CPU time is reported beside wall time: the machine is shared.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from audits.bounds import (
    epsilon_lower_bound,
    gdp_epsilon,
    gdp_mu_lower_bound,
    one_run_epsilon_lower_bound,
)


def _builders(runs: int) -> list[tuple[str, object, int]]:
    from audits.dpsgd import DPSGDAudit
    from audits.geometric import GeometricBatchAudit
    from audits.noise import GaussianAudit, LaplaceAudit
    from audits.shuffle import ShuffleBitSumAudit
    from audits.tree import TreeAudit

    return [
        ("gaussian", GaussianAudit(1.0), runs),
        ("laplace", LaplaceAudit(1.0), runs),
        ("tree T=128 (L=8)", TreeAudit(1.0, horizon=128), runs),
        ("tree T=1024 (L=11)", TreeAudit(1.0, horizon=1024), runs // 10),
        ("geometric (16 samples, 5 batches)", GeometricBatchAudit(1.0, samples=16), runs // 10),
        ("shuffle n=1000 (message list)", ShuffleBitSumAudit(1.0, n_users=1000), runs // 5),
        ("dpsgd 10 steps (opacus)", DPSGDAudit(1.0, steps=10, engine="opacus"), runs),
        ("dpsgd 10 steps (vectorised)", DPSGDAudit(1.0, steps=10, engine="vectorised"), runs),
    ]


def _bandit_table(runs: int) -> None:
    """Policy runs per second of the bandit first-switch game: in process, then 2 worker processes.

    The first parallel call pays for starting the workers (each imports dpglm, torch and
    opacus); it is timed on its own, the steady state on a second call.
    """
    from audits.bandit_switch import BanditSwitchAudit

    print()
    print(f"{'bandit first-switch game (policy runs)':<42} {'runs/side':>10} {'wall s':>8} {'runs/s (wall)':>14}")
    from audits.engine import engine_session

    with engine_session("local", 2):  # one pool of 2 workers for the whole table, stopped at the end
        for epsilon in (1.0, 4.0):
            audit = BanditSwitchAudit(epsilon)
            setups = [("in process", 1), ("2 workers", 2)]
            if epsilon == 1.0:  # the worker pool is started once, then reused
                setups.insert(1, ("2 workers, first call", 2))
            for label, jobs in setups:
                rng = np.random.default_rng(3)
                wall = time.perf_counter()
                if jobs == 1:
                    with engine_session("local", 1):  # the innermost session serves the chunks
                        audit.sample(0, runs, rng)
                        audit.sample(1, runs, rng)
                else:
                    audit.sample(0, runs, rng)
                    audit.sample(1, runs, rng)
                wall = time.perf_counter() - wall
                name = f"eps={epsilon:g} T={audit.horizon}, {label}"
                print(f"{name:<42} {runs:>10} {wall:>8.2f} {2 * runs / wall:>14,.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000, help="runs per neighbour for the fast audits")
    args = parser.parse_args()
    print(f"{'audit':<36} {'runs/side':>10} {'wall s':>8} {'cpu s':>8} {'runs/s (wall)':>14}")
    for name, audit, runs in _builders(args.runs):
        audit.sample(0, 100, np.random.default_rng(0))  # warm-up: imports, first-call costs
        rng = np.random.default_rng(1)
        wall, cpu = time.perf_counter(), time.process_time()
        audit.sample(0, runs, rng)
        audit.sample(1, runs, rng)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"{name:<36} {runs:>10} {wall:>8.2f} {cpu:>8.2f} {2 * runs / wall:>14,.0f}")

    _bandit_table(max(20, args.runs // 2500))

    from audits.noise import GaussianAudit

    audit = GaussianAudit(1.0)
    rng = np.random.default_rng(2)
    null, alternative = audit.sample(0, 20_000, rng), audit.sample(1, 20_000, rng)
    timings = [
        ("threshold search (400 candidates, GDP)", lambda: audit.choose_threshold(null, alternative, 1e-5, 0.95)),
        ("Clopper-Pearson epsilon bound", lambda: epsilon_lower_bound(1200, 100_000, 45_000, 100_000, delta=1e-5)),
        ("Gaussian-DP mu bound + epsilon", lambda: gdp_epsilon(gdp_mu_lower_bound(40_000, 100_000, 40_000,
                                                                                   100_000), 1e-5)),
        ("one-run bound (m=1000, r=600)", lambda: one_run_epsilon_lower_bound(1000, 600, 550, delta=1e-5)),
    ]
    print()
    print(f"{'certification step':<42} {'ms':>8}")
    for label, step in timings:
        start = time.perf_counter()
        step()
        print(f"{label:<42} {1000 * (time.perf_counter() - start):>8.1f}")


if __name__ == "__main__":
    main()
